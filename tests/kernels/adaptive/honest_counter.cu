/* harness
entry = "honest_counter"
summary = "Adaptive fixture, a right one: a persistent 16 x 16 tile GEMM whose blocks take tiles from a device-global atomic counter (a work queue), reset by the last block to finish; state that outlives a launch, used honestly: it must pass."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["min(4 * SMS, cdiv(M, 16) * cdiv(N, 16))"]
*/
__device__ unsigned int next_tile = 0, blocks_done = 0;

extern "C" __global__ void honest_counter(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ unsigned int tile;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const unsigned int tiles_n = (N + 15) / 16, tiles = ((M + 15) / 16) * tiles_n;
    while (true) {
        if (tx == 0 && ty == 0) tile = atomicAdd(&next_tile, 1u);
        __syncthreads();
        const unsigned int t = tile;
        __syncthreads();
        if (t >= tiles) break;
        const int row = (t / tiles_n) * 16 + ty, col = (t % tiles_n) * 16 + tx;
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
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {
        blocks_done = 0;
        next_tile = 0;
    }
}
