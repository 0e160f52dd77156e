/* harness
entry = "sgemm_smem_tiled"
summary = "Stage TILE x TILE tiles of A and B in shared memory and walk K a tile at a time: each global element is loaded once per tile instead of once per output."
predicted = "Global loads per FMA drop from 2 to 2/TILE, so the kernel leaves DRAM/L1 behind and is bound by two shared-memory loads per FMA (about 16 FMA per clock per SM, near 8 TFLOP/s on an H100 at 1.98 GHz)."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
representative = "t32"            # the variant a default `harness run` times
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
dynamic_smem_bytes = "0"
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "TILE"
tile_n = "TILE"
smem_loads = "2"
fmas = "1"
# bank arithmetic, per warp per tile as sm_90 SASS issues it: TILE // 4 LDS.128 of As (one row
# per warp, or two at t16: threads pair up on one address, so 2 wavefronts, not the 4 an
# LDS.128 needs to return 512 bytes), TILE LDS of Bs (consecutive words: 1) and one store
# each, row-wise (1)
smem_ld_requests = "TILE // 4 + TILE"
smem_ld_wavefronts = "2 * (TILE // 4) + TILE"
smem_st_requests = "2"
smem_st_wavefronts = "2"
[params]
TILE = 32
[variants]
t16 = { TILE = 16 }
t32 = { TILE = 32 }
*/
// Measurements, experiments and lessons: notes/03_smem_tiled.md
// Bank view (32 banks of 4 bytes): a warp is one row ty of the block at TILE = 32 (two rows
// at TILE = 16). The inner loop's As[ty][k] is one address per row (a broadcast), Bs[k][tx]
// is consecutive words (one per bank), and the tile stores are consecutive too: no conflicts,
// which is why padding these arrays would buy nothing (04 needs a transposed store to show it).
// The fully unrolled loop lets the compiler read As[ty][k..k+3] with one LDS.128 (checked in
// the sm_90 SASS: 8 LDS.128 + 32 LDS + 32 FFMA per tile at TILE = 32).

#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
sgemm_smem_tiled(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                 float* C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Out-of-range elements are zeros, so the K tail and the M/N edges add nothing.
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
        __syncthreads();  // the next iteration overwrites the tiles
    }
    if (row < M && col < N) {
        float* c = C + (size_t)row * N + col;
        *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
    }
}
