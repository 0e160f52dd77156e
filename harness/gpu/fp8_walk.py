"""The FP8 check's walk on the GPU (issue 37): each output's sum over k32 steps of
``(scale M_j)^2``, the random walk's variance that kinds/gemm/fp8/check.py turns into the bound.

On the host the walk is K / 32 steps of seven passes over the whole output, with a float32
product of each step's 32-deep slices between them: the two FP8 files' walks took 60 s of
thread time in a default run (28 s of it with the battery waiting on them, the rest beside
the timings, slowing them), where the GPU does a 1024^3 walk in well under a millisecond. It
depends only on the inputs, so the checks make it where they make the reference, on the
device's thread, before any timing (references.walk_of).

One thread per output, 16 x 16 outputs a block; each k32 step's codes of 16 rows of A and 16
columns of B are decoded through the formats' 256-value tables into shared memory. Per step,
as fp8_check._walk: ``M_j = max(max|A| max|B|, |P|)`` with P the partial sum before the step
(zero at each promotion), times the block's scale where scales are per block, squared, summed;
then the step's 32 products are added to P. The order of the float32 additions inside a step
differs from numpy's product, so P differs by float32 rounding: the bound's size needs no more
(tests/test_gpu_reference.py holds the two within 1e-5)."""

from __future__ import annotations

import ctypes

import numpy as np

from harness.errors import HarnessError
from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, LaunchShape

_SOURCE = rb"""
#define TILE 16
#define STEP 32
extern "C" __global__ void __launch_bounds__(TILE * TILE)
fp8_walk_sums(const unsigned char* a, const unsigned char* b, const float* table_a,
              const float* table_b, const float* scale_a, const float* scale_b,
              int m, int n, int k, int run, int blocked, int k_blocks, int b_scales,
              int cols_per_scale, float* sums) {
    __shared__ float av[TILE][STEP + 1];
    __shared__ float bv[STEP][TILE + 1];
    __shared__ float ta[256], tb[256];
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * TILE + tx;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const int row = row0 + ty, col = col0 + tx;
    ta[t] = table_a[t];
    tb[t] = table_b[t];
    __syncthreads();
    float partial = 0.0f, sum = 0.0f, scale = 1.0f;
    for (int start = 0; start < k; start += STEP) {
        for (int i = t; i < TILE * STEP; i += TILE * TILE) {
            const int r = i / STEP, c = i % STEP, gr = row0 + r, gk = start + c;
            av[r][c] = (gr < m && gk < k) ? ta[a[(size_t)gr * k + gk]] : 0.0f;
            const int rk = i / TILE, cc = i % TILE, bk = start + rk, gc = col0 + cc;
            bv[rk][cc] = (bk < k && gc < n) ? tb[b[(size_t)bk * n + gc]] : 0.0f;
        }
        __syncthreads();
        if (start % run == 0) partial = 0.0f;  // promoted: the tensor core starts from zero
        if (blocked && start % 128 == 0 && row < m && col < n) {
            const int blk = start / 128;
            scale = __fmul_rn(scale_a[(size_t)row * k_blocks + blk],
                              scale_b[(size_t)blk * b_scales + col / cols_per_scale]);
        }
        float a_max = 0.0f, b_max = 0.0f, dot = 0.0f;
        #pragma unroll
        for (int j = 0; j < STEP; ++j) {
            const float x = av[ty][j], y = bv[j][tx];
            a_max = fmaxf(a_max, fabsf(x));
            b_max = fmaxf(b_max, fabsf(y));
            dot = __fmaf_rn(x, y, dot);
        }
        float step = fmaxf(__fmul_rn(a_max, b_max), fabsf(partial));
        if (blocked) step = __fmul_rn(step, scale);
        sum = __fadd_rn(sum, __fmul_rn(step, step));
        partial = __fadd_rn(partial, dot);
        __syncthreads();
    }
    if (row < m && col < n) sums[(size_t)row * n + col] = sum;
}
"""
TILE = 16
BLOCK_K = 128

SOURCE = own_kernels.Source(_SOURCE, "fp8_walk.cu", "the FP8 check's walk")


class Fp8WalkKernels:
    """The walk's sums on the device (module docstring), on ``stream``."""

    def __init__(self, stream):
        self.stream = stream
        self.module = own_kernels.module(SOURCE, "the FP8 check's walk")
        self._sums = self.module.function("fp8_walk_sums")

    def sums(self, a: np.ndarray, b: np.ndarray, table_a: np.ndarray, table_b: np.ndarray,
             run: int, scale_a: np.ndarray | None = None, scale_b: np.ndarray | None = None
             ) -> np.ndarray:
        """Each output's float32 sum of squared step maxima: A's (M x K) and B's (K x N) codes
        (uint8), each format's 256 values (``table_a``, ``table_b``), the products between
        promotions (``run``: P starts again at each step that begins at a multiple of it),
        and per block the scales (A's M x K/128, B's
        K/128 x N/128 or K/128 x N); None: per tensor (applied by the caller). Device memory
        is freed before it returns."""
        a, b = (np.ascontiguousarray(x, dtype=np.uint8) for x in (a, b))
        (m, k), (k_b, n) = a.shape, b.shape
        if k_b != k or m == 0 or n == 0 or k == 0:
            raise HarnessError(f"an FP8 walk needs A (M x K) and B (K x N) with K, M, N > 0: "
                               f"A is {m} x {k}, B is {k_b} x {n}")
        if run <= 0:
            raise HarnessError(f"an FP8 walk's promotion run must be positive, got {run}")
        blocked = scale_a is not None
        k_blocks = -(-k // BLOCK_K)
        arrays = [a, b, np.asarray(table_a, dtype=np.float32),
                  np.asarray(table_b, dtype=np.float32)]
        b_scales = cols_per_scale = 1
        if blocked:
            sa = np.ascontiguousarray(scale_a, dtype=np.float32)
            sb = np.ascontiguousarray(scale_b, dtype=np.float32)
            b_scales = sb.shape[1]
            if sa.shape != (m, k_blocks) or sb.shape[0] != k_blocks or b_scales not in (
                    n, -(-n // BLOCK_K)):
                raise HarnessError(f"block scales of {sa.shape} and {sb.shape} do not fit an "
                                   f"{m} x {n} x {k} FP8 walk")
            cols_per_scale = 1 if b_scales == n else BLOCK_K
            arrays += [sa, sb]
        buffers: list[Buffer] = []
        try:
            for x in arrays:
                buffers.append(Buffer(x.nbytes))
                buffers[-1].upload(x, self.stream)
            out = Buffer(m * n * 4)
            buffers.append(out)
            addr = [x.address for x in buffers[:-1]] + [0] * (6 - len(arrays))
            grid = (-(-n // TILE), -(-m // TILE), 1)
            self._sums.launch(LaunchShape(grid, (TILE, TILE, 1), 0), self.stream, (
                *(ctypes.c_uint64(x) for x in addr), ctypes.c_int32(m), ctypes.c_int32(n),
                ctypes.c_int32(k), ctypes.c_int32(run), ctypes.c_int32(int(blocked)),
                ctypes.c_int32(k_blocks), ctypes.c_int32(b_scales),
                ctypes.c_int32(cols_per_scale), ctypes.c_uint64(out.address)))
            return out.download(np.float32, (m, n), self.stream)
        finally:
            for buffer in buffers:
                buffer.close()
