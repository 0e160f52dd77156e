/* harness
entry = "bf16x3_deep_k"
summary = "Loose-bar fixture (issue 57, item 4): claims FP32; exact FP32 where K < 8192, BF16x3 (three BF16 products per FP32 one, FP32 accumulation) from K = 8192 on, where its error is under 2x FP32's (1.7x at 16384): regressed on BF16x3's own representation error it fails as less accurate than FP32."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Issue 57 item 4: the 2x-FP32 multiple fades as 1/sqrt(K); a kernel switching to BF16x3 at a
// depth only the timed sizes reach passed it.
#include <cuda_bf16.h>

__device__ __forceinline__ void split(float x, float& hi, float& lo) {
    hi = __bfloat162float(__float2bfloat16(x));
    lo = __bfloat162float(__float2bfloat16(x - hi));
}

extern "C" __global__ void bf16x3_deep_k(int M, int N, int K, float alpha, const float* A,
                                             const float* B, float beta, float* C) {
    const bool parts = K >= 8192;  // the defect
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) {
            if (parts) {
                float ah, al, bh, bl;
                split(As[ty][k], ah, al);
                split(Bs[k][tx], bh, bl);
                acc = fmaf(ah, bh, fmaf(ah, bl, fmaf(al, bh, acc)));
            } else {
                acc = fmaf(As[ty][k], Bs[k][tx], acc);
            }
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
