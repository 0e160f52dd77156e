/* harness
entry = "gemm_abt_bf16"
summary = "The signature most tensor-core lessons use: (A, B, C, M, N, K), no alpha or beta, B stored N x K (C = A B^T) and a BF16 C; 16 x 16 tiles staged through shared memory, FP32 accumulation, one element of C per thread."
precision = "bf16"
c_type = "bf16"
min_arch = "sm_80"
signature = ["A", "B", "C", "M", "N", "K"]
layout_b = "col"
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
[params]
TILE = 16
*/
// A declared signature (issue 22): no alpha or beta, so the harness launches it at alpha = 1 and
// beta = 0 only (C is written, never read); B is N x K row-major, i.e. layout_b = "col".

#include <cstdint>
#include <cuda_bf16.h>

extern "C" __global__ void gemm_abt_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B,
                                         __nv_bfloat16* C, int M, int N, int K) {
    __shared__ float As[TILE][TILE + 1];  // As[m][k]
    __shared__ float Bs[TILE][TILE + 1];  // Bs[n][k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    const int brow = blockIdx.x * TILE + ty;  // the row of B (a column of C) this thread loads
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int k = k0 + tx;  // consecutive threads read consecutive k of one row
        As[ty][tx] = row < M && k < K ? __bfloat162float(A[(int64_t)row * K + k]) : 0.0f;
        Bs[ty][tx] = brow < N && k < K ? __bfloat162float(B[(int64_t)brow * K + k]) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc = fmaf(As[ty][kk], Bs[tx][kk], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[(int64_t)row * N + col] = __float2bfloat16(acc);
}
