/* harness
entry = "simt_e4m3_block"
summary = "FP8 test fixture (e4m3 x e4m3, block scales: 1 x 128 of A, 128 x 128 of B, promote 128, BF16 C): variant right is the right answer (exact decode, FP32 accumulation in k order inside each 128-deep k block, each block's partial sum times its two scales added into an FP32 total, BF16 RNE store once at the end; more accurate than the tensor core, so it passes); first_block_scales applies k block 0's scales to every k block (the harness must name it: wrong values); transposed_scale_a reads scale_a as [M][KB] (scale_a[m * KB + kb]), not [KB][M] (the harness must name it: wrong values); no_promotion sums all of K before any scale and multiplies the sum by the last k block's scales (the harness must name it: wrong values)."
precision = "fp8"
layout_b = "col"
c_type = "bf16"
min_arch = "sm_80"
signature = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
representative = "right"
[params]
FIRST_BLOCK_SCALES = 0                      # 1: k block 0's scales for every block (the defect)
SCALE_A_MK = 0                              # 1: scale_a read as [M][KB] (the defect)
PROMOTE = 1                                 # 0: one sum over all of K, the last block's scales (the defect)
[variants]
right = { }                                 # the right answer
first_block_scales = { FIRST_BLOCK_SCALES = 1 }  # finding: wrong values
transposed_scale_a = { SCALE_A_MK = 1 }     # finding: wrong values
no_promotion = { PROMOTE = 0 }              # finding: wrong values
[fp8]
a = "e4m3"
b = "e4m3"
scales = "block"
promote = 128
*/
// C[m][n] = sum over k blocks kb of scale_a[kb][m] * scale_b[kb][n / 128] * (sum over k in
// [128 kb, min(K, 128 kb + 128)) of A[m][k] B[n][k]): A is M x K e4m3 codes (row-major), B is
// N x K e4m3 codes (row-major, K-major: layout_b = "col"), C is M x N BF16 (row-major), written,
// never read. KB = ceil(K / 128), NB = ceil(N / 128); scale_a is FP32 [KB][M] (k-block major:
// scale_a[kb * M + m]), scale_b FP32 [KB][NB] (scale_b[kb * NB + n / 128]).
// 16 x 16 tiles of decoded values staged through shared memory, one element of C per thread,
// bounds checked on every load and store (any M, N, K >= 1). A 128-deep k block is 8 tiles:
// its partial sum ends with the tile that ends at a multiple of 128 or at K.

#include <cstdint>
#include <cuda_bf16.h>

#include "fp8_decode.cuh"

// The scale of k block kb's products for C[row][col] (row < M, col < N, kb < KB).
__device__ __forceinline__ float block_scale(const float* scale_a, const float* scale_b, int M,
                                             int KB, int NB, int row, int col, int kb) {
#if FIRST_BLOCK_SCALES
    kb = 0;  // the defect: every block gets block 0's scales
#endif
#if SCALE_A_MK
    const float sa = scale_a[(int64_t)row * KB + kb];  // the defect: [M][KB], not [KB][M]
#else
    const float sa = scale_a[(int64_t)kb * M + row];
#endif
    return sa * scale_b[(int64_t)kb * NB + col / 128];
}

extern "C" __global__ void simt_e4m3_block(int M, int N, int K, const unsigned char* A,
                                           const unsigned char* B, __nv_bfloat16* C,
                                           const float* scale_a, const float* scale_b) {
    __shared__ float As[16][17];  // As[m][k]
    __shared__ float Bs[16][17];  // Bs[n][k]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const int brow = blockIdx.x * 16 + ty;  // the row of B (a column of C) this thread loads
    const int KB = (K + 127) / 128, NB = (N + 127) / 128;
    const bool owns = row < M && col < N;   // this thread stores an element of C
    float acc = 0.0f;    // the k block's partial sum (no_promotion: all of K's)
    float total = 0.0f;  // the promoted sum: each block's partial sum times its scales
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int k = k0 + tx;
        As[ty][tx] = row < M && k < K ? fp8_e4m3_to_float(A[(int64_t)row * K + k]) : 0.0f;
        Bs[ty][tx] = brow < N && k < K ? fp8_e4m3_to_float(B[(int64_t)brow * K + k]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < 16; ++kk)
            acc = fmaf(As[ty][kk], Bs[tx][kk], acc);  // the product is exact in FP32
        __syncthreads();
#if PROMOTE
        if ((k0 + 16) % 128 == 0 || k0 + 16 >= K) {  // the tile ends k block k0 / 128
            if (owns)
                total = fmaf(block_scale(scale_a, scale_b, M, KB, NB, row, col, k0 / 128), acc,
                             total);
            acc = 0.0f;
        }
#endif
    }
#if !PROMOTE
    // the defect: one sum over all of K, scaled once, by the last k block's scales
    if (owns) total = block_scale(scale_a, scale_b, M, KB, NB, row, col, KB - 1) * acc;
#endif
    if (owns) C[(int64_t)row * N + col] = __float2bfloat16_rn(total);
}
