"""How far an FP8 GEMM that accumulates all of K in the tensor core lands from the exact
product, by the model of wgmma's accumulation that reproduces the H100's probe outputs
(harness/kinds/gemm/fp8/formats.py; notes/fp8_accumulation.md), against FP32 accumulation of
the same
products and against a tensor core with an FP16-wide window (11 bits: what a kernel that
accumulates in FP16 would keep). No GPU: python3 experiments/fp8_bound.py."""

from __future__ import annotations

import numpy as np

from harness.kinds.gemm.fp8.check import Fp8Gemm, judge, model_output
from harness.kinds.gemm.fp8.formats import FORMATS, tensor_core_dot

M = N = 32


def main() -> None:
    print(f"{'format':6} {'K':>5} {'spread':>6}  rel. error norm: {'window 14':>10} "
          f"{'fp32':>10} {'window 11':>10}  window14 / fp32")
    for name in ("e4m3", "e5m2"):
        fmt = FORMATS[name]
        for k in (512, 2048, 8192):
            for spread in (0, 4):
                rng = np.random.default_rng(k + spread)
                a = fmt.decode(fmt.draw(rng, (M, k), spread))
                b = fmt.decode(fmt.draw(rng, (k, N), spread))
                exact = a @ b
                norm = np.linalg.norm(exact)
                window = np.linalg.norm(tensor_core_dot(a, b) - exact) / norm
                narrow = np.linalg.norm(tensor_core_dot(a, b, places=10) - exact) / norm
                fp32 = np.zeros((M, N), dtype=np.float32)
                for s in range(k):  # one FMA per k, in order
                    fp32 = fp32 + (a[:, s:s + 1] * b[s:s + 1, :]).astype(np.float32)
                fp32_err = np.linalg.norm(fp32 - exact) / norm
                ratio = f"{window / fp32_err:8.0f}x" if fp32_err else "  (fp32 exact)"
                print(f"{name:6} {k:5d} {spread:6d}  {'':17}{window:10.2e} {fp32_err:10.2e} "
                      f"{narrow:10.2e}  {ratio}")


def margins() -> None:
    """The FP8 check (kinds/gemm/fp8/check.py) on simulated kernels: the window's model and a window
    of FP16's width, 24 x 256 outputs of e4m3, spread 3, seed 11, per-tensor and block scales
    (the draws of tests/test_fp8_check.py)."""
    print("K blocked out | right: norm/bound | fp16-width window: norm/bound, finding")
    for k in (128, 1024, 4096, 8192):
        for blocked in (False, True):
            for out in ("bf16", "fp32"):
                rng = np.random.default_rng(11)
                fmt = FORMATS["e4m3"]
                a, b = fmt.draw(rng, (24, k), 3), fmt.draw(rng, (k, 256), 3)
                if blocked:
                    g = Fp8Gemm(a, b, "e4m3", "e4m3", 2.0 ** rng.integers(-6, 4, (24, k // 128)),
                                2.0 ** rng.integers(-6, 4, (k // 128, 2)), out, 128)
                else:
                    g = Fp8Gemm(a, b, "e4m3", "e4m3", 2.0 ** -5, 12.0, out)
                right, narrow = judge(g, model_output(g)), judge(g, model_output(g, places=10))
                print(k, blocked, out, f"| {right.error_norm / right.norm_bound:.3f}",
                      f"| {narrow.error_norm / narrow.norm_bound:.2f} {narrow.finding}")


if __name__ == "__main__":
    main()
    margins()
