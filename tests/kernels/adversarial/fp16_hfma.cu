/* harness
entry = "fp16_hfma"
summary = "Adversarial fixture: FP16 inputs, FP32 C, but the dot product is accumulated in FP16 (one __hfma per k, the sum rounded to FP16 at every step); only alpha * acc + beta * C is formed in FP32."
precision = "fp16"
c_type = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_fp16.h>

extern "C" __global__ void fp16_hfma(int M, int N, int K, float alpha, const __half* A,
                                     const __half* B, float beta, float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    __half acc = __float2half(0.0f);
    for (int k = 0; k < K; ++k)
        acc = __hfma(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);  // the defect
    const size_t i = (size_t)row * N + col;
    const float out = alpha * __half2float(acc);
    C[i] = beta == 0.0f ? out : out + beta * C[i];
}
