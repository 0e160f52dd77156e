/* harness
entry = "gemm_d_fp16"
summary = "cuBLASLt's form: D = alpha * A B + beta * C with a separate output D (C is read, never written), 64-bit sizes, FP16 inputs and FP32 C and D; 32 x 32 tiles staged through shared memory, FP32 accumulation, 2 x 2 outputs per thread."
precision = "fp16"
c_type = "fp32"
min_arch = "sm_80"
signature = [{ name = "M", type = "i64" }, { name = "N", type = "i64" },
             { name = "K", type = "i64" }, "alpha", "A", "B", "beta", "C", "D"]
block = ["TILE // 2", "TILE // 2"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
[params]
TILE = 32
*/
// A declared signature with a separate output (issue 22): the harness allocates D beside C,
// poisons both, checks D against alpha A B + beta C and leaves C as the kernel's input. A
// kernel that wrote C instead would leave D holding the sentinel ("unwritten").

#include <cstdint>
#include <cuda_fp16.h>

extern "C" __global__ void gemm_d_fp16(int64_t M, int64_t N, int64_t K, float alpha,
                                       const __half* A, const __half* B, float beta,
                                       const float* C, float* D) {
    __shared__ float As[TILE][TILE + 1];  // As[m][k]
    __shared__ float Bs[TILE][TILE + 1];  // Bs[k][n]
    // each thread: rows ty and ty + TILE / 2, columns tx and tx + TILE / 2
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t row0 = blockIdx.y * (int64_t)TILE, col0 = blockIdx.x * (int64_t)TILE;
    float acc[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
    for (int64_t k0 = 0; k0 < K; k0 += TILE) {
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) {
                const int r = ty + i * (TILE / 2), c = tx + j * (TILE / 2);
                const int64_t am = row0 + r, ak = k0 + c, bk = k0 + r, bn = col0 + c;
                As[r][c] = am < M && ak < K ? __half2float(A[am * K + ak]) : 0.0f;
                Bs[r][c] = bk < K && bn < N ? __half2float(B[bk * N + bn]) : 0.0f;
            }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk)
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 2; ++j)
                    acc[i][j] = fmaf(As[ty + i * (TILE / 2)][kk], Bs[kk][tx + j * (TILE / 2)],
                                     acc[i][j]);
        __syncthreads();
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            const int64_t m = row0 + ty + i * (TILE / 2), n = col0 + tx + j * (TILE / 2);
            if (m < M && n < N) {
                const float c = beta != 0.0f ? C[m * N + n] : 0.0f;
                D[m * N + n] = alpha * acc[i][j] + beta * c;
            }
        }
}
