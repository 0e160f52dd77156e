/* harness
entry = "counts_launches"
summary = "Unpredictable-inputs fixture (issue 57): counts its launches per shape in device globals; at square shapes of a multiple of 512 (where runs time, never a battery shape) it is a quarter of each k tile short on launches 3 to 8, right on the first two (the timed size's check, before its positions were secret) and from the 9th on (the timed repetitions past the warm-up). With the checked launches at secret positions among the first 8 it must fail at the size's check."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#define WRONG_FROM 2u
#define WRONG_UNTIL 8u
__device__ unsigned int launches[64], blocks_done[64];

extern "C" __global__ void counts_launches(int M, int N, int K, float alpha, const float* A,
                                           const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const unsigned int slot = ((unsigned)M * 73856093u ^ (unsigned)N * 19349663u
                               ^ (unsigned)K * 83492791u) & 63u;
    const unsigned int seen = *(volatile unsigned int*)&launches[slot];  // this launch's index
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        const bool timed_shape = M == N && N == K && M % 512 == 0;
        const int depth = timed_shape && seen >= WRONG_FROM && seen < WRONG_UNTIL ? 12 : 16;
        for (int k = 0; k < depth; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
    __syncthreads();
    __threadfence();
    const unsigned int blocks = gridDim.x * gridDim.y;
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done[slot], 1u) == blocks - 1) {
        blocks_done[slot] = 0;
        atomicAdd(&launches[slot], 1u);  // the next launch at this shape reads one more
    }
}
