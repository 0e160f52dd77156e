/* harness
entry = "drops_last_k"
summary = "Test fixture: a GEMM whose K loop stops one short (a tail bug the check must catch)."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void drops_last_k(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K - 1; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = alpha * acc;
}
