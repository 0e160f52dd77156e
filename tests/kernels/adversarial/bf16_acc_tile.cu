/* harness
entry = "bf16_acc_tile"
summary = "Adversarial fixture: BF16 inputs, FP32 sums within each 64-deep k chunk, but the running total across chunks is kept in a BF16 register (rounded to BF16 after every chunk)."
precision = "bf16"
c_type = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cuda_bf16.h>

extern "C" __global__ void bf16_acc_tile(int M, int N, int K, float alpha,
                                         const __nv_bfloat16* A, const __nv_bfloat16* B,
                                         float beta, float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    __nv_bfloat16 total = __float2bfloat16(0.0f);  // the defect: a BF16 running total
    for (int k0 = 0; k0 < K; k0 += 64) {
        const int k1 = min(K, k0 + 64);
        float part = 0.0f;
        for (int k = k0; k < k1; ++k)
            part = fmaf(__bfloat162float(A[(size_t)row * K + k]),
                        __bfloat162float(B[(size_t)k * N + col]), part);
        total = __float2bfloat16(__bfloat162float(total) + part);
    }
    const size_t i = (size_t)row * N + col;
    const float acc = __bfloat162float(total);
    C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
}
