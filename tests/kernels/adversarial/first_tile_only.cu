/* harness
entry = "first_tile_only"
summary = "Adversarial fixture: a persistent kernel (min(SMS, tiles) blocks of 256 threads over 16 x 16 tiles of C) that computes only its first tile, blockIdx.x, instead of looping t += gridDim.x: right only while the tiles fit in one wave (tiles <= SMS), tiles past gridDim.x unwritten."
precision = "fp32"
min_arch = "sm_80"
block = ["256"]
grid = ["min(SMS, cdiv(M, 16) * cdiv(N, 16))"]
*/
extern "C" __global__ void first_tile_only(int M, int N, int K, float alpha, const float* A,
                                           const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    const int tiles_n = (N + 15) / 16;
    const int tiles = ((M + 15) / 16) * tiles_n;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    // the defect: should be for (int t = blockIdx.x; t < tiles; t += gridDim.x)
    const int t = blockIdx.x;
    if (t >= tiles) return;
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
