"""The check's error-norm bound before and after issue 20 item 4, as a markdown table.

    python3 experiments/tolerance_table.py [--m 64] [--n 64] [--seed 0]

Before: a relative bound per input precision, max(base * max(1, sqrt(K / 1024)), c_rounding)
with base 2e-6 (fp32), 2e-3 (tf32), 5e-3 (bf16, fp16) and c_rounding 2^-8 (bf16 C), 2^-10
(fp16 C). After: numerics.Tolerance, from the claimed arithmetic (FP32 accumulation of the
stored inputs, plus a 16-bit C's rounding), on random uniform [-1, 1] operands of the shape
given; the bound depends on K and the error scale, hardly on M and N. CPU only.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from harness.kinds.gemm import numerics

OLD_BASE = {"fp32": 2e-6, "tf32": 2e-3, "bf16": 5e-3, "fp16": 5e-3}
OLD_C_ROUNDING = {"fp32": 0.0, "bf16": 2.0**-8, "fp16": 2.0**-10}
DEPTHS = (1024, 4096, 8192)


def old_bound(precision: str, k: int, c_type: str) -> float:
    """The relative norm bound Tolerance.for_gemm gave before issue 20 item 4."""
    return max(OLD_BASE[precision] * max(1.0, math.sqrt(k / 1024)), OLD_C_ROUNDING[c_type])


def new_bound(precision: str, k: int, c_type: str, m: int, n: int, seed: int) -> float:
    """numerics.Tolerance's relative norm bound on fresh operands of that shape."""
    rng = np.random.default_rng(seed)
    _, a64 = numerics.random_operand(rng, (m, k), precision)
    _, b64 = numerics.random_operand(rng, (k, n), precision)
    ref = numerics.reference(a64, b64, 1.0, 0.0, None)
    scale = numerics.error_scale(a64, b64, 1.0, 0.0, None)
    return numerics.Tolerance.for_gemm(precision, k, ref, scale, c_type).norm_rel


def table(m: int, n: int, seed: int) -> str:
    lines = ["| precision | C | K | old bound | new bound | old / new |",
             "|---|---|---:|---:|---:|---:|"]
    for precision in numerics.PRECISIONS:
        for c_type in numerics.C_TYPES:
            for k in DEPTHS:
                old = old_bound(precision, k, c_type)
                new = new_bound(precision, k, c_type, m, n, seed)
                lines.append(f"| {precision} | {c_type} | {k} | {old:.2e} | {new:.2e} | "
                             f"{old / new:.3g} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(table(args.m, args.n, args.seed))


if __name__ == "__main__":
    main()
