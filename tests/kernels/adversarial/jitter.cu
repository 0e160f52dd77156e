/* harness
entry = "jitter"
summary = "Adversarial fixture: a 16 x 16 shared-memory tile GEMM with no atomics that multiplies each output by 1 + 2^-23 (one FP32 ulp) when a bit of clock64() is set, so identical runs differ in their last bits while staying within tolerance; it does not declare itself nondeterministic."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Adding a fixed 1e-7 would vanish in rounding for outputs above 2 (half an ulp there is
// 1.2e-7); scaling by 1 + 2^-23 moves any nonzero output by about one ulp.

extern "C" __global__ void jitter(int M, int N, int K, float alpha, const float* A,
                                  const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if ((clock64() >> 4) & 1) acc *= 1.00000012f;  // the defect: 1 + 2^-23 on a timing bit
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
