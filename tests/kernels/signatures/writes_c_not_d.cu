/* harness
entry = "writes_c_not_d"
summary = "Test fixture: declares a separate output D but writes its result into C (the input), so D keeps what was there before the launch: the checks must call it unwritten."
precision = "fp32"
min_arch = "sm_80"
signature = ["M", "N", "K", "alpha", "A", "B", "beta", "C", "D"]
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
extern "C" __global__ void writes_c_not_d(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C, float* D) {
    const int col = blockIdx.x * 16 + threadIdx.x, row = blockIdx.y * 16 + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(long)row * K + k], B[(long)k * N + col], acc);
    float* c = C + (long)row * N + col;
    *c = alpha * acc + (beta != 0.0f ? beta * *c : 0.0f);
}
