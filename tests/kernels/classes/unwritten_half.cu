/* harness
entry = "unwritten_half"
summary = "Test fixture: a grid that covers only the left half of C's columns."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N // 2, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void unwritten_half(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N / 2) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
