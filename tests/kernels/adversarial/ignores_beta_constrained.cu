/* harness
entry = "ignores_beta_constrained"
summary = "Adversarial fixture: 32 x 32 shared-memory tiles on shapes its constraints limit to multiples of 32 (no bounds checks, none needed there); writes alpha * A B whatever beta is (ignores beta)."
precision = "fp32"
min_arch = "sm_80"
block = ["32", "32"]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
constraints = ["M % 32 == 0", "N % 32 == 0", "K % 32 == 0"]
*/
extern "C" __global__ void ignores_beta_constrained(int M, int N, int K, float alpha,
                                                    const float* A, const float* B, float beta,
                                                    float* C) {
    __shared__ float As[32][32], Bs[32][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 32) {
        As[ty][tx] = A[(size_t)row * K + k0 + tx];
        Bs[ty][tx] = B[(size_t)(k0 + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < 32; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    C[(size_t)row * N + col] = alpha * acc;  // the defect: beta * C is never added
}
