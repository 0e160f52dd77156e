/* harness
entry = "no_bounds"
summary = "Test fixture: 32 x 32 tiles with no bounds checks: right on multiples of 32, writes past C on other shapes."
precision = "fp32"
min_arch = "sm_80"
block = ["32", "32"]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
*/
extern "C" __global__ void no_bounds(int M, int N, int K, float alpha, const float* A,
                                     const float* B, float beta, float* C) {
    __shared__ float As[32][32], Bs[32][32];
    int row = blockIdx.y * 32 + threadIdx.y, col = blockIdx.x * 32 + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < K; t += 32) {
        As[threadIdx.y][threadIdx.x] = A[row * K + t + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * N + col];
        __syncthreads();
        for (int k = 0; k < 32; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
