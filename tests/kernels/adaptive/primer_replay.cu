/* harness
entry = "primer_replay"
summary = "Adaptive fixture: a right 16 x 16 tile GEMM that keeps its output in a device global and, when launched within 300 us of its previous launch's end (%globaltimer), copies that back instead of computing: right on the same inputs, as back-to-back launches of one set were; no work."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#define CACHE_ELEMENTS (1u << 22)
__device__ float cache[CACHE_ELEMENTS];
__device__ unsigned long long last_end_ns = 0;
__device__ unsigned int blocks_done = 0;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void primer_replay(int M, int N, int K, float alpha, const float* A,
                                         const float* B, float beta, float* C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const size_t i = (size_t)row * N + col;
    const bool cached = (size_t)M * N <= CACHE_ELEMENTS && beta == 0.0f;
    __shared__ int replay;  // one decision per block
    if (tx == 0 && ty == 0)
        replay = cached && now_ns() - *(volatile unsigned long long*)&last_end_ns < 300000ull;
    __syncthreads();
    if (replay) {  // the defect: the last result copied back
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
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
        blocks_done = 0;
        last_end_ns = now_ns();
    }
}
