"""Issue 57, item 5: an FP8 GEMM's sums checked against the tensor core's, not the kernel's
word. Simulated kernels (the window of formats.window_step over their own promotion runs, an
FP16 register, FP32 sums on the CUDA cores) on the check's draws: the share of HW_SAMPLE x
HW_SAMPLE sampled outputs that differ from the declared model (fp8/check.accumulation), and
the verdict. tests/test_fp8_check.py uses the same kernels.

    python3 experiments/fp8_hardware_match.py
"""

from __future__ import annotations

import math
import sys

import numpy as np

from harness.kinds.gemm.fp8.accumulation import magnitude_of, mismatch, model_output
from harness.kinds.gemm.fp8.check import Fp8Gemm, block_scales, judge
from harness.kinds.gemm.fp8.formats import FORMATS, tensor_core_dot
from harness.kinds.gemm.numerics import stored, to_float64


def kernel_output(g: Fp8Gemm, places: int = 13, run: int | None = None, splits: int = 1,
                  fp16_register: bool = False) -> np.ndarray:
    """What a kernel that sums ``g`` its own way stores: the window of ``places`` binary places
    (or an FP16 register rounding to nearest, ``fp16_register``) over runs of ``run`` k (its
    promotion; default the declared one), K split into ``splits`` parts of whole 128-k tiles
    added in order in FP32 (split-K)."""
    av, bv = g.values()
    k = av.shape[1]
    run = min(run or g.promote or k, 128 if g.blocked else k)
    per = math.ceil(math.ceil(k / 128) / splits) * 128
    total = None
    for lo in range(0, k, per):
        acc = np.zeros((av.shape[0], bv.shape[1]), dtype=np.float32)
        for start in range(lo, min(k, lo + per), run):
            stop = min(k, lo + per, start + run)
            if fp16_register:  # each k32 step's exact sum added into FP16, rounded
                part = np.zeros(acc.shape, dtype=np.float16)
                for s in range(start, stop, 32):
                    e = min(stop, s + 32)
                    part = (part.astype(np.float64) + av[:, s:e] @ bv[s:e]).astype(np.float16)
            else:
                part = tensor_core_dot(av[:, start:stop], bv[start:stop], places=places)
            scale = block_scales(g, start, stop) if g.blocked else np.asarray(1.0)
            acc = (acc + part.astype(np.float64) * scale).astype(np.float32)
        total = acc if total is None else (total.astype(np.float64) + acc).astype(np.float32)
    if not g.blocked:
        total = (total.astype(np.float64) * float(g.scale_a) * float(g.scale_b)
                 ).astype(np.float32)
    return to_float64(stored(total, g.out), g.out)


def fp32_sums(g: Fp8Gemm) -> np.ndarray:
    """A kernel on the CUDA cores: the exact products added in FP32, in k order."""
    av, bv = g.values()
    k = av.shape[1]
    total = np.zeros((av.shape[0], bv.shape[1]), dtype=np.float32)
    block = 128 if g.blocked else k
    for lo in range(0, k, block):
        acc = np.zeros_like(total)
        for kk in range(lo, min(k, lo + block)):
            acc = (acc.astype(np.float64) + np.outer(av[:, kk], bv[kk])).astype(np.float32)
        scale = block_scales(g, lo, min(k, lo + block)) if g.blocked else np.asarray(1.0)
        total = (total + acc.astype(np.float64) * scale).astype(np.float32)
    if not g.blocked:
        total = (total.astype(np.float64) * float(g.scale_a) * float(g.scale_b)
                 ).astype(np.float32)
    return to_float64(stored(total, g.out), g.out)


def gemm(k: int, seed: int, blocked: bool, out: str, m: int = 32, n: int = 32) -> Fp8Gemm:
    """The check's draws: e4m3 over exponents -3..3, either sign; scales powers of two (per
    tensor) or per block; 128 declared where the scales are per tensor."""
    rng = np.random.default_rng([seed, k])
    f = FORMATS["e4m3"]
    a, b = f.draw(rng, (m, k), 3), f.draw(rng, (k, n), 3)
    if blocked:
        return Fp8Gemm(a, b, "e4m3", "e4m3", 2.0 ** rng.integers(-6, 4, (m, k // 128)),
                       2.0 ** rng.integers(-6, 4, (k // 128, 1)), out, 128)
    return Fp8Gemm(a, b, "e4m3", "e4m3", 2.0 ** -5, 2.0 ** 3, out, 128)


def main() -> int:
    print("K     scales out   kernel            differ  verdict")
    for k in (256, 1024, 4096):
        for blocked in (False, True):
            for out in ("bf16", "fp32"):
                g = gemm(k, 1, blocked, out)
                kernels = {"k order": kernel_output(g), "split-K 2": kernel_output(g, splits=2),
                           "FP32 sums": fp32_sums(g), "12-bit window": kernel_output(g, 11),
                           "13-bit window": kernel_output(g, 12),
                           "FP16 register": kernel_output(g, run=64, fp16_register=True)}
                if not blocked:
                    kernels["never promotes"] = kernel_output(g, run=k)
                declared = model_output(g)
                for name, got in kernels.items():
                    share = mismatch(got, declared, magnitude_of(g))
                    verdict = judge(g, got, seed=1)
                    print(f"{k:<5} {'block' if blocked else 'tensor':<6} {out:<5} {name:<17} "
                          f"{share:6.1%}  {verdict.finding}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
