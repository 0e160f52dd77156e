/* harness
entry = "sgemm_smem_padded"
summary = "Store the A tile transposed in shared memory (the layout later rungs read with wide loads) and pad each row by PAD words: [TILE][TILE+PAD]."
predicted = "Without padding the transposed store puts a warp's 32 words in one bank (a 32-way conflict, once per tile per thread); PAD = 1 spreads them over all 32 banks, so pad beats nopad by the cost of 31 extra store wavefronts per tile, a few percent to tens of percent."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
dynamic_smem_bytes = "0"
[params]
TILE = 32
PAD = 1
[variants]
nopad = { PAD = 0 }
pad = { PAD = 1 }
*/
// Why the padding matters here and not in 03: 03 reads As[ty][k] (broadcast) and Bs[k][tx]
// (consecutive), both conflict-free. Here thread (tx, ty) stores A[row][k0 + tx] to
// AsT[tx][ty]: across a warp (fixed ty, tx = 0..31) the word addresses are tx * (TILE + PAD)
// + ty. With PAD = 0 and TILE = 32 they are all congruent mod 32, one bank, 32 wavefronts;
// with PAD = 1 they are tx * 33 + ty, 32 different banks, one wavefront. The reads
// AsT[k][ty] stay broadcasts either way. The two variants measure the conflict's cost.
// measured: not yet measured.

#ifndef TILE
#define TILE 32
#endif
#ifndef PAD
#define PAD 1
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_smem_padded(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                  float* C) {
    __shared__ float AsT[TILE][TILE + PAD];  // AsT[k][m]: A tile, transposed
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        AsT[tx][ty] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc = fmaf(AsT[k][ty], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) {
        float* c = C + (size_t)row * N + col;
        *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
    }
}
