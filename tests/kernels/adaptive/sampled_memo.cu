/* harness
entry = "sampled_memo"
summary = "Adaptive fixture: a right 16 x 16 tile GEMM that keeps its output and 1,024 sampled elements each of A and B; when the samples (and the shape) equal the kept ones it copies the kept output instead of computing: right on repeated inputs, no work."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Every block decides from the same samples against the ones the previous launch kept; the
// last block to finish keeps this launch's samples.
#define SAMPLES 1024
#define CACHE_ELEMENTS (1u << 22)
__device__ float cache[CACHE_ELEMENTS];
__device__ float kept_a[SAMPLES], kept_b[SAMPLES];
__device__ unsigned int kept_shape[3], blocks_done = 0;

__device__ size_t sample(unsigned int j, size_t count) {
    unsigned int x = j * 2654435761u + 12345u;
    x ^= x >> 15; x *= 2246822519u; x ^= x >> 13;
    return (size_t)x % count;
}

extern "C" __global__ void sampled_memo(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ int differs;
    const int tx = threadIdx.x, ty = threadIdx.y, t = ty * 16 + tx;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const size_t i = (size_t)row * N + col;
    const bool cached = (size_t)M * N <= CACHE_ELEMENTS && beta == 0.0f;
    if (t == 0)
        differs = !(cached && kept_shape[0] == (unsigned)M && kept_shape[1] == (unsigned)N
                    && kept_shape[2] == (unsigned)K);
    __syncthreads();
    for (int j = t; j < SAMPLES && !differs; j += 256) {
        if (A[sample(j, (size_t)M * K)] != kept_a[j] || B[sample(j + SAMPLES, (size_t)K * N)]
            != kept_b[j])
            differs = 1;
    }
    __syncthreads();
    if (!differs) {  // the defect: the kept output copied back
        if (row < M && col < N) C[i] = cache[i];
    } else {
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
    if (t == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
        blocks_done = 0;
        if (cached) {
            for (int j = 0; j < SAMPLES; ++j) {
                kept_a[j] = A[sample(j, (size_t)M * K)];
                kept_b[j] = B[sample(j + SAMPLES, (size_t)K * N)];
            }
            kept_shape[0] = M; kept_shape[1] = N; kept_shape[2] = K;
        } else {
            kept_shape[0] = 0;
        }
    }
}
