/* harness
entry = "fp16_as_tf32"
summary = "Adaptive fixture: claims TF32 but converts each input to FP16 before an FP32 multiply and FP32 accumulation: exact on TF32 values in [-1, 1) (FP16 has TF32's ten mantissa bits), wrong where exponents pass FP16's range."
precision = "tf32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_fp16.h>
extern "C" __global__ void fp16_as_tf32(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        // the defect: FP16, not TF32
        As[ty][tx] = (row < M && k0 + tx < K)
                         ? __half2float(__float2half(A[(size_t)row * K + k0 + tx])) : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N)
                         ? __half2float(__float2half(B[(size_t)(k0 + ty) * N + col])) : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
