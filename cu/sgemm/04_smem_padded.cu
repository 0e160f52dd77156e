/* harness
entry = "sgemm_smem_padded"
summary = "Store the A tile transposed in shared memory (AsT[k][m], the layout later rungs read with wide loads), which makes the tile store a 32-way bank conflict, and pad its rows by PAD words ([TILE][TILE + PAD]) to remove it; variants nopad and pad measure the difference."
predicted = "nopad: each warp's transposed store hits one bank, 32 wavefronts instead of 1, so a tile costs about 97 shared wavefronts per warp (32 + 1 stores, 64 scalar loads) against 66 with pad; if shared memory is the limit pad is up to ~1.45x faster than nopad, less where latency dominates; both a little behind 03:t32, whose As reads merge into LDS.128."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
representative = "pad"            # the variant a default `harness run` times
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
dynamic_smem_bytes = "0"
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "TILE"
tile_n = "TILE"
smem_loads = "2"
fmas = "1"
# bank arithmetic, per warp per tile: 2 TILE scalar LDS (AsT[k][ty] a broadcast, Bs[k][tx]
# consecutive: one wavefront each); the AsT store steps TILE + PAD words across the warp, so
# it hits gcd(TILE + PAD, 32) times one bank (32 without padding, 1 with PAD = 1); Bs's is 1
smem_ld_requests = "2 * TILE"
smem_ld_wavefronts = "2 * TILE"
smem_st_requests = "2"
smem_st_wavefronts = "gcd(TILE + PAD, 32) + 1"
[params]
TILE = 32
PAD = 1
[variants]
nopad = { PAD = 0 }
pad = { PAD = 1 }
*/
// Measurements, experiments and lessons: notes/04_smem_padded.md
// Why the padding matters here and not in 03: 03 reads As[ty][k] (broadcast) and Bs[k][tx]
// (consecutive) and stores both tiles row-wise, all conflict-free, so [TILE][TILE+1] there
// would change nothing. Here thread (tx, ty) stores A[row][k0 + tx] to AsT[tx][ty]: across a
// warp (fixed ty, tx = 0..31) the word addresses are tx * (TILE + PAD) + ty. With PAD = 0 and
// TILE = 32 they are all congruent mod 32: one bank, 32 wavefronts. With PAD = 1 they are
// tx * 33 + ty, bank (tx + ty) mod 32, all 32 different: one wavefront. The inner-loop reads
// AsT[k][ty] are one address per warp (a broadcast) either way, so only the store changes.
// Bs keeps 03's unpadded layout on purpose: its accesses are already conflict-free.
// Compare nopad with pad, not 04 with 03: AsT[k][ty] steps a whole row per k, so the compiler
// cannot merge four k into one LDS.128 as it does in 03 (sm_90 SASS: 64 scalar LDS per tile
// here against 8 LDS.128 + 32 LDS there).

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
