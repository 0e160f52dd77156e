/* harness
entry = "fp16_round16"
summary = "Adversarial fixture: FP16 inputs, FP32 accumulator, but the accumulator is rounded to FP16 (__float2half and back) after every 16 k steps."
precision = "fp16"
c_type = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_fp16.h>

extern "C" __global__ void fp16_round16(int M, int N, int K, float alpha, const __half* A,
                                        const __half* B, float beta, float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(__half2float(A[(size_t)row * K + k]), __half2float(B[(size_t)k * N + col]),
                   acc);
        if ((k + 1) % 16 == 0) acc = __half2float(__float2half(acc));  // the defect
    }
    const size_t i = (size_t)row * N + col;
    C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
}
