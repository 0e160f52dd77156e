/* harness
entry = "cached_replay"
summary = "Adversarial fixture: a right 16 x 16 tile GEMM that also keeps its output in device memory; from the 61st launch on, when launched back to back (within 3x its own last computing time plus 500 us of its last launch's end: a timed round with the harness's rest of one launch time and an L2 flush before each launch), it copies that copy into C instead of computing: right bits, no work; only the time can tell."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Launches are counted as in lazy_after_n.cu; the last block of each launch also records
// when it ended (%globaltimer, ns) and, for a launch that computed, how long it took (from
// its first block's start). The window follows that time: with an absolute 500 us window,
// a launch timed above the harness's primer threshold (1 ms) rests as long as itself before
// each repetition and computes in every one, and the fixture passed honestly (the suite at
// 2ee7dad, notes/verification.md). The replay is right only on the inputs the cache was
// filled from. A launch after a pause (a host synchronisation, a download) computes.

#define REPLAY_AFTER 60u
#define CACHE_ELEMENTS (1u << 22)
#define BACK_TO_BACK_NS 500000ull
#define WINDOW_PER_COMPUTE 3ull

__device__ unsigned int launches = 0;
__device__ unsigned int blocks_done = 0;
__device__ float cache[CACHE_ELEMENTS];
__device__ unsigned long long last_end_ns = 0;
__device__ unsigned long long start_ns = ~0ull;   // this launch's first block's start
__device__ unsigned long long compute_ns = 0;     // the last computing launch's duration
__device__ unsigned int replayed = 0;             // a block of this launch replayed

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
    const unsigned long long begin = now_ns();
    if (tx == 0 && ty == 0) atomicMin(&start_ns, begin);
    const unsigned long long window =
        BACK_TO_BACK_NS + WINDOW_PER_COMPUTE * *(volatile unsigned long long*)&compute_ns;
    const bool replay = cached && beta == 0.0f &&
                        *(volatile unsigned int*)&launches >= REPLAY_AFTER &&
                        begin - *(volatile unsigned long long*)&last_end_ns < window;
    if (replay) {  // the defect: no arithmetic, the last result copied back
        if (tx == 0 && ty == 0) replayed = 1u;
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
    __threadfence();
    __syncthreads();
    if (tx == 0 && ty == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == blocks - 1) {
            const unsigned long long end = now_ns();
            if (!*(volatile unsigned int*)&replayed)
                compute_ns = end - *(volatile unsigned long long*)&start_ns;
            blocks_done = 0;
            replayed = 0u;
            start_ns = ~0ull;
            last_end_ns = end;
            atomicAdd(&launches, 1u);
        }
    }
}
