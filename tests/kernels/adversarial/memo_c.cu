/* harness
entry = "memo_c"
summary = "Adversarial fixture: at beta = 0, skips a 16 x 16 tile of C when the tile's first element already holds a finite value of magnitude below 1e30 ('C already holds a result'), leaving the old C there; otherwise (and always at beta != 0) a right 16 x 16 shared-memory tile GEMM."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// The harness fills C with a sentinel near 3.4e38 (or NaN) before its checked launches, so
// those always compute; a launch on a C left over from an earlier launch does no work.

extern "C" __global__ void memo_c(int M, int N, int K, float alpha, const float* A,
                                  const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ int skip;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 16;
    const int row = row0 + ty, col = col0 + tx;
    if (tx == 0 && ty == 0) {
        // the tile's first element is inside C for every block of the grid
        const float first = C[(size_t)row0 * N + col0];
        skip = beta == 0.0f && fabsf(first) < 1e30f;  // false for NaN and Inf
    }
    __syncthreads();
    if (skip) return;  // the defect: "already computed"
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
