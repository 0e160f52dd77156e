/* harness
entry = "first_kernel"
summary = "The README's first kernel: one thread per element of C, 16 x 16 threads a block, the dot product read straight from global memory."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void first_kernel(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    const int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    const size_t i = (size_t)row * N + col;
    C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
}
