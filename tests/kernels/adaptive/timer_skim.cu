/* harness
entry = "timer_skim"
summary = "Adaptive fixture: a right 16 x 16 tile GEMM, except when launched within 300 us of its previous launch's end (%globaltimer, kept in a device global): then it does 1/64 of K and spins to look plausible, as back-to-back timed launches are and checked ones, after a host round trip, are not."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
__device__ unsigned long long last_end_ns = 0;
__device__ unsigned int blocks_done = 0;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void timer_skim(int M, int N, int K, float alpha, const float* A,
                                      const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ int skim;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    if (tx == 0 && ty == 0)
        skim = now_ns() - *(volatile unsigned long long*)&last_end_ns < 300000ull;
    __syncthreads();
    const int k_end = skim ? max(16, K / 64) : K;  // the defect: 1/64 of the work when timed
    float acc = 0.0f;
    for (int k0 = 0; k0 < k_end; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (skim) {
        const unsigned long long t0 = now_ns();
        while (now_ns() - t0 < 3000ull) {}
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
    __syncthreads();
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
        blocks_done = 0;
        last_end_ns = now_ns();
    }
}
