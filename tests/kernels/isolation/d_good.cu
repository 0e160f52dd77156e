/* harness
entry = "good"
summary = "Test fixture: a correct one-thread-per-output GEMM, run after the broken ones."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void good(int M, int N, int K, float alpha, const float* A,
                                const float* B, float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[row * N + col];
}
