/* harness
entry = "sgemm_blocktile_1d"
summary = "Each thread computes a column of TM outputs from a BM x BK tile of A and a BK x BN tile of B in shared memory: one Bs value loaded into a register serves TM FMAs."
predicted = "Shared loads per FMA drop from about 1.25 (03: 40 per 32) to (TM + 1) / TM = 1.125 B-and-A loads per FMA with As reads as LDS.128 pairs, and global traffic halves against TILE = 32 (BM = BN = 64); expect ~1.6x 03:t32, near 14 TFLOP/s."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["BM * BN // TM"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "0"
constraints = ["BM * BK == BM * BN // TM", "BN * BK == BM * BN // TM"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "TM + 1"
fmas = "TM"
# bank arithmetic, per warp per tile (one thread row per warp): BK LDS of Bs (consecutive: 1
# wavefront), TM * BK // 4 LDS.128 of As (a broadcast: threads pair up on one address, 2
# wavefronts), two stores of consecutive words (1)
smem_ld_requests = "BK + TM * BK // 4"
smem_ld_wavefronts = "BK + 2 * (TM * BK // 4)"
smem_st_requests = "2"
smem_st_wavefronts = "2"
[params]
BM = 64
BN = 64
BK = 8
TM = 8
*/
// Measurements, experiments and lessons: notes/05_blocktile_1d.md
// After siboehm's kernel 4. Thread t owns column t % BN and rows (t / BN) * TM .. + TM - 1 of
// the block tile. Per k it loads one Bs value and TM As values; the As values of a thread are
// consecutive rows at one k, As[(r0 + i) * BK + k], which ptxas cannot merge (stride BK), but
// the whole warp reads the same As words (one row group per warp): broadcasts.
// The tile loads are one element per thread for A and for B, hence the constraints.

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#define THREADS (BM * BN / TM)

extern "C" __global__ void __launch_bounds__(THREADS)
sgemm_blocktile_1d(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                   float* C) {
    static_assert(BM * BK == THREADS && BN * BK == THREADS, "one A and one B element per thread");
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tcol = tid % BN, trow = tid / BN;
    const int a_r = tid / BK, a_c = tid % BK;
    const int b_r = tid / BN, b_c = tid % BN;
    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        As[a_r * BK + a_c] = (bm + a_r < M && k0 + a_c < K)
                                 ? A[(size_t)(bm + a_r) * K + k0 + a_c] : 0.0f;
        Bs[b_r * BN + b_c] = (k0 + b_r < K && bn + b_c < N)
                                 ? B[(size_t)(k0 + b_r) * N + bn + b_c] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + tcol];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[(trow * TM + i) * BK + k], b, acc[i]);
        }
        __syncthreads();
    }
    const int col = bn + tcol;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + trow * TM + i;
        if (row < M && col < N) {
            float* c = C + (size_t)row * N + col;
            *c = beta == 0.0f ? alpha * acc[i] : fmaf(alpha, acc[i], beta * *c);
        }
    }
}
