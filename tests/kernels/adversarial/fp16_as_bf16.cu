/* harness
entry = "fp16_as_bf16"
summary = "Adversarial fixture: FP16 inputs, each converted to BF16 (__float2bfloat16(__half2float(x)): 3 mantissa bits lost) before an FP32 multiply and FP32 accumulation."
precision = "fp16"
c_type = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float via_bf16(__half x) {
    return __bfloat162float(__float2bfloat16(__half2float(x)));  // the defect
}

extern "C" __global__ void fp16_as_bf16(int M, int N, int K, float alpha, const __half* A,
                                        const __half* B, float beta, float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc = fmaf(via_bf16(A[(size_t)row * K + k]), via_bf16(B[(size_t)k * N + col]), acc);
    const size_t i = (size_t)row * N + col;
    C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
}
