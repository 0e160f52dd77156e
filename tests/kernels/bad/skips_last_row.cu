/* harness
entry = "skips_last_row"
summary = "Test fixture: a GEMM that never writes the last row of C (the NaN poison must show it)."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void skips_last_row(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M - 1 || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = alpha * acc;
}
