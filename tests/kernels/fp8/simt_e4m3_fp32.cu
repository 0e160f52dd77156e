/* harness
entry = "simt_e4m3_fp32"
summary = "FP8 test fixture (e4m3 x e4m3, tensor scales, FP32 C): variant right is the right answer (exact decode, FP32 accumulation in k order, scales once at the end, FP32 store; more accurate than the tensor core, so it passes); fp16_accumulator adds the products in FP16, which an FP32 C shows from K = 64 on (the harness must name it: less accurate than the tensor core's FP8 accumulation)."
precision = "fp8"
layout_b = "col"
c_type = "fp32"
min_arch = "sm_80"
signature = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
representative = "right"
[params]
ACC_FP16 = 0                                # 1: the sum kept in __half (the defect)
[variants]
right = { }                                 # the right answer
fp16_accumulator = { ACC_FP16 = 1 }         # finding: less accurate than the tensor core's FP8 accumulation
[fp8]
a = "e4m3"
b = "e4m3"
scales = "tensor"
*/
// C = (*scale_a) * (*scale_b) * A B^T: A is M x K e4m3 codes (row-major), B is N x K e4m3 codes
// (row-major, K-major: layout_b = "col"), C is M x N FP32 (row-major), written, never read.
// 16 x 16 tiles of decoded values staged through shared memory, one element of C per thread,
// bounds checked on every load and store (any M, N, K >= 1). An FP32 C keeps the accumulator's
// error that a BF16 C rounds away: simt_e4m3:fp16_accumulator's error norm stays inside the
// check's bound at every K (single outputs past their own bound give it away, by chance at
// shallow K), this file's fails the check from K = 64 (tests/test_fp8_fixtures.py emulates both
// against harness/bench/fp8_check.py).

#include <cstdint>
#include <cuda_fp16.h>

#include "fp8_decode.cuh"

extern "C" __global__ void simt_e4m3_fp32(int M, int N, int K, const unsigned char* A,
                                          const unsigned char* B, float* C,
                                          const float* scale_a, const float* scale_b) {
    __shared__ float As[16][17];  // As[m][k]
    __shared__ float Bs[16][17];  // Bs[n][k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const int brow = blockIdx.x * 16 + ty;  // the row of B (a column of C) this thread loads
#if ACC_FP16
    __half acc = __float2half(0.0f);  // the defect: an 11-bit significand, each add rounded
#else
    float acc = 0.0f;
#endif
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int k = k0 + tx;
        As[ty][tx] = row < M && k < K ? fp8_e4m3_to_float(A[(int64_t)row * K + k]) : 0.0f;
        Bs[ty][tx] = brow < N && k < K ? fp8_e4m3_to_float(B[(int64_t)brow * K + k]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < 16; ++kk) {
#if ACC_FP16
            // e4m3 values are exact in FP16 and so is their product's 8-bit significand;
            // the sum is rounded to FP16 at every step
            acc = __hfma(__float2half(As[ty][kk]), __float2half(Bs[tx][kk]), acc);
#else
            acc = fmaf(As[ty][kk], Bs[tx][kk], acc);  // the product is exact in FP32
#endif
        }
        __syncthreads();
    }
    if (row < M && col < N) {
#if ACC_FP16
        const float sum = __half2float(acc);
#else
        const float sum = acc;
#endif
        C[(int64_t)row * N + col] = *scale_a * *scale_b * sum;
    }
}
