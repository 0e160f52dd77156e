/* harness
entry = "simt_e4m3_e5m2"
summary = "FP8 test fixture, the right answer for e4m3 A x e5m2 B (tensor scales, BF16 C): exact decode of each format, FP32 accumulation in k order, scales once at the end, BF16 RNE store; more accurate than the tensor core, so it passes (the e5m2 path's passing twin of b_e5m2_read_as_e4m3)."
precision = "fp8"
layout_b = "col"
c_type = "bf16"
min_arch = "sm_80"
signature = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
[variants]
right = { }                                 # one variant: the key simt_e4m3_e5m2:right, as the other files' right answers
[fp8]
a = "e4m3"
b = "e5m2"
scales = "tensor"
*/
// C = (*scale_a) * (*scale_b) * A B^T: A is M x K e4m3 codes (row-major), B is N x K e5m2 codes
// (row-major, K-major: layout_b = "col"), C is M x N BF16 (row-major), written, never read.
// 16 x 16 tiles of decoded values staged through shared memory, one element of C per thread,
// bounds checked on every load and store (any M, N, K >= 1).

#include <cstdint>
#include <cuda_bf16.h>

#include "fp8_decode.cuh"

extern "C" __global__ void simt_e4m3_e5m2(int M, int N, int K, const unsigned char* A,
                                          const unsigned char* B, __nv_bfloat16* C,
                                          const float* scale_a, const float* scale_b) {
    __shared__ float As[16][17];  // As[m][k]
    __shared__ float Bs[16][17];  // Bs[n][k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const int brow = blockIdx.x * 16 + ty;  // the row of B (a column of C) this thread loads
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int k = k0 + tx;
        As[ty][tx] = row < M && k < K ? fp8_e4m3_to_float(A[(int64_t)row * K + k]) : 0.0f;
        Bs[ty][tx] = brow < N && k < K ? fp8_e5m2_to_float(B[(int64_t)brow * K + k]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < 16; ++kk) acc = fmaf(As[ty][kk], Bs[tx][kk], acc);  // exact product
        __syncthreads();
    }
    if (row < M && col < N)
        C[(int64_t)row * N + col] = __float2bfloat16_rn(*scale_a * *scale_b * acc);
}
