/* harness
entry = "reads_c"
summary = "Test fixture: the textbook epilogue C = alpha * acc + beta * C with no beta == 0 branch; right, but reads C at beta = 0."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void reads_c(int M, int N, int K, float alpha, const float* A,
                                   const float* B, float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
}
