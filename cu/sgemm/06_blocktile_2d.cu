/* harness
entry = "sgemm_blocktile_2d"
summary = "Each thread computes a TM x TN register tile (an outer product per k): TM + TN shared loads feed TM * TN FMAs, and a BM x BN = 128 x 128 block tile halves global traffic again."
predicted = "Shared loads per FMA fall from ~1.1 to (TM + TN) / (TM * TN) = 0.25; the kernel turns FMA-issue and latency bound instead of shared-memory bound; expect ~2x 05, 25-30 TFLOP/s, half of cuBLAS."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["(BM // TM) * (BN // TN)"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "0"
constraints = ["(BM * BK) % ((BM // TM) * (BN // TN)) == 0", "(BK * BN) % ((BM // TM) * (BN // TN)) == 0"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "TM + TN"
fmas = "TM * TN"
# bank arithmetic, per warp per tile (a warp is two thread rows of 16). An LDS.128 returns 16
# bytes to each of 32 threads, 512 bytes at 128 per wavefront: 4 wavefronts at the least, 2
# where threads pair up on one address (T and T^1 or T^2), more where the 8 threads a
# wavefront serves hit a bank twice. TM * BK // 4 LDS.128 of As: each half-warp reads one
# address, 2 wavefronts; TN * BK // 4 of Bs: 16 threads TN = 8 words apart, so each quarter-
# warp's 8 addresses fall two to a bank: 2 x 4 = 8; the tile stores write consecutive words: 1
smem_ld_requests = "(TM + TN) * BK // 4"
smem_ld_wavefronts = "(2 * TM + 8 * TN) * BK // 4"
smem_st_requests = "(BM + BN) * BK // ((BM // TM) * (BN // TN))"
smem_st_wavefronts = "(BM + BN) * BK // ((BM // TM) * (BN // TN))"
[params]
BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
MINB = 1
*/
// Measurements, experiments and lessons: notes/06_blocktile_2d.md
// After siboehm's kernel 5. Thread (tr, tc) owns rows tr * TM .. + TM - 1 and columns
// tc * TN .. + TN - 1 of the block tile; per k it loads TM values of A and TN of B into
// registers and does their outer product. Each thread loads BM * BK / threads elements of each
// tile per step (4 at the defaults), in a strided loop.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef MINB
#define MINB 1
#endif
#define THREADS ((BM / TM) * (BN / TN))

// MINB: blocks per SM asked of ptxas (__launch_bounds__), which caps registers at
// 65536 / (THREADS * MINB). At MINB = 2 (128 registers) sm_80/86/89 spill; sm_90 does not.
extern "C" __global__ void __launch_bounds__(THREADS, MINB)
sgemm_blocktile_2d(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                   float* C) {
    static_assert((BM * BK) % THREADS == 0 && (BK * BN) % THREADS == 0, "whole tile loads");
    __shared__ float As[BM * BK];
    __shared__ float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK; i += THREADS) {
            const int r = i / BK, c = i % BK;
            As[i] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c] : 0.0f;
        }
#pragma unroll
        for (int i = tid; i < BK * BN; i += THREADS) {
            const int r = i / BN, c = i % BN;
            Bs[i] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[(tr * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k * BN + tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + tr * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + tc * TN + j;
            if (row < M && col < N) {
                float* c = C + (size_t)row * N + col;
                *c = beta == 0.0f ? alpha * acc[i][j] : fmaf(alpha, acc[i][j], beta * *c);
            }
        }
    }
}
