/* harness
entry = "bf16x3_when_timed"
summary = "Loose-bar fixture (issue 57, item 3): claims FP32; exact FP32 for its first 60 launches (the battery and the timed size's check), BF16x3 from the 61st on (a __device__ launch counter), where only the kept timed repetitions see it: they must be held to 2x FP32's error."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Issue 57 item 3: before it, a kept timed repetition met only the K-deep bound, which BF16x3
// passes at every K (0.04-0.66 of it). The counter goes up once per launch (the last block to
// finish adds one), so a launch is wholly FP32 or wholly BF16x3.
#include <cuda_bf16.h>

#define HONEST_LAUNCHES 60u

__device__ unsigned int launches = 0;
__device__ unsigned int blocks_done = 0;

__device__ __forceinline__ void split(float x, float& hi, float& lo) {
    hi = __bfloat162float(__float2bfloat16(x));
    lo = __bfloat162float(__float2bfloat16(x - hi));
}

extern "C" __global__ void bf16x3_when_timed(int M, int N, int K, float alpha, const float* A,
                                             const float* B, float beta, float* C) {
    const bool parts = *(volatile unsigned int*)&launches >= HONEST_LAUNCHES;  // the defect
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
    __syncthreads();
    if (tx == 0 && ty == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == blocks - 1) {
            blocks_done = 0;
            __threadfence();
            atomicAdd(&launches, 1u);
        }
    }
}
