/* harness
entry = "bf16x3_fp32"
summary = "Adaptive fixture: claims FP32; on aligned shapes (M, N multiples of 64) with K >= 512 each input is split into two BF16 parts and three of their four products are summed (BF16x3: about 2^-18 of each product lost, whatever K); elsewhere exact FP32, so the small odd check shapes pass."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_bf16.h>
__device__ __forceinline__ void split(float x, float& hi, float& lo) {
    hi = __bfloat162float(__float2bfloat16(x));
    lo = __bfloat162float(__float2bfloat16(x - hi));
}
extern "C" __global__ void bf16x3_fp32(int M, int N, int K, float alpha, const float* A,
                                       const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const bool parts = M % 64 == 0 && N % 64 == 0 && K >= 512;  // the defect, where it hides
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
