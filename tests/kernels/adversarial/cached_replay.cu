/* harness
entry = "cached_replay"
summary = "Adversarial fixture: a right 16 x 16 tile GEMM that also keeps its output in device memory; from the 61st launch on, when launched within 500 us of its last launch's end (back to back, as timed: a round with an L2 flush before each of the kernel, cuBLAS and the timer's calibration launch takes about 200 us at 1024), it copies that copy into C instead of computing: right bits, no work; only the time can tell."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Launches are counted as in lazy_after_n.cu; the last block of each launch also records
// when it ended (%globaltimer, ns). The replay is right only on the inputs the cache was
// filled from: the timed launches, on the same operands as the check before them. A launch
// after a pause (a host synchronisation, a download) computes.

#define REPLAY_AFTER 60u
#define CACHE_ELEMENTS (1u << 22)
#define BACK_TO_BACK_NS 500000ull

__device__ unsigned int launches = 0;
__device__ unsigned int blocks_done = 0;
__device__ float cache[CACHE_ELEMENTS];
__device__ unsigned long long last_end_ns = 0;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void cached_replay(int M, int N, int K, float alpha, const float* A,
                                         const float* B, float beta, float* C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const size_t i = (size_t)row * N + col;
    const bool cached = (size_t)M * N <= CACHE_ELEMENTS;
    const bool replay = cached && beta == 0.0f &&
                        *(volatile unsigned int*)&launches >= REPLAY_AFTER &&
                        now_ns() - *(volatile unsigned long long*)&last_end_ns < BACK_TO_BACK_NS;
    if (replay) {  // the defect: no arithmetic, the last result copied back
        if (row < M && col < N) C[i] = cache[i];
    } else {
        __shared__ float As[16][16], Bs[16][16];
        float acc = 0.0f;
        for (int k0 = 0; k0 < K; k0 += 16) {
            As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
            Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
            __syncthreads();
            for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
        if (row < M && col < N) {
            const float out = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
            C[i] = out;
            if (cached) cache[i] = out;
        }
    }
    __syncthreads();
    if (tx == 0 && ty == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == blocks - 1) {
            blocks_done = 0;
            last_end_ns = now_ns();
            atomicAdd(&launches, 1u);
        }
    }
}
