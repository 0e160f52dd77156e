/* harness
entry = "bf16_headers"
summary = "Test fixture: a BF16-input GEMM that includes cuda_bf16.h, cuda_fp16.h and cstdint, which NVRTC finds only on the include path the harness gives it."
precision = "bf16"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

static_assert(sizeof(std::uint16_t) == sizeof(__nv_bfloat16), "bf16 is 16 bits");
static_assert(sizeof(int64_t) == 8 && sizeof(__half) == 2, "cstdint and cuda_fp16.h types");

extern "C" __global__ void bf16_headers(int M, int N, int K, float alpha, const __nv_bfloat16* A,
                                        const __nv_bfloat16* B, float beta, float* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(__bfloat162float(A[(int64_t)row * K + k]),
                   __bfloat162float(B[(int64_t)k * N + col]), acc);
    }
    float* c = C + (int64_t)row * N + col;
    *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
}
