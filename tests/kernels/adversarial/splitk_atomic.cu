/* harness
entry = "splitk_atomic"
summary = "Adversarial fixture (right, declared nondeterministic): each block computes 8 x 32 outputs with its 4 warps splitting k between them (warp w takes k = w, w + 4, ...) and adding their partial sums with atomicAdd into shared memory, so the order of the 4 additions, and the last bits of C, change from run to run."
precision = "fp32"
min_arch = "sm_80"
nondeterministic = true
block = ["32", "4"]
grid = ["cdiv(N, 32)", "cdiv(M, 8)"]
*/
#define ROWS 8

extern "C" __global__ void splitk_atomic(int M, int N, int K, float alpha, const float* A,
                                         const float* B, float beta, float* C) {
    __shared__ float sums[ROWS][32];
    const int tx = threadIdx.x, warp = threadIdx.y;
    const int row0 = blockIdx.y * ROWS, col = blockIdx.x * 32 + tx;
    for (int i = warp * 32 + tx; i < ROWS * 32; i += 4 * 32) sums[i / 32][i % 32] = 0.0f;
    __syncthreads();
    if (col < N) {
        for (int r = 0; r < ROWS; ++r) {
            const int row = row0 + r;
            if (row >= M) break;
            float part = 0.0f;
            for (int k = warp; k < K; k += 4)
                part = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], part);
            atomicAdd(&sums[r][tx], part);  // 4 warps, in whatever order they arrive
        }
    }
    __syncthreads();
    for (int i = warp * 32 + tx; i < ROWS * 32; i += 4 * 32) {
        const int row = row0 + i / 32, c = blockIdx.x * 32 + i % 32;
        if (row < M && c < N) {
            const size_t j = (size_t)row * N + c;
            const float acc = sums[i / 32][i % 32];
            C[j] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[j];
        }
    }
}
