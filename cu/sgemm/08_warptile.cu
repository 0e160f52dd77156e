/* harness
entry = "sgemm_warptile"
summary = "Block tile split into WM x WN warp tiles; inside a warp, lanes form an 8 x 4 grid and each lane owns (WM / 32) x (WN / 16) blocks of 4 x 4 outputs spaced 32 rows and 16 columns apart, so a warp's LDS.128 of A covers 8 consecutive float4s and of B 4, with no bank conflicts and 8x / 4x broadcast."
predicted = "Same FFMA : LDS.128 ratio as 07 (64 : 4 at 8 x 8 per thread), but each warp now reads a compact 64 x 32 patch (fewer distinct shared lines per request, broadcasts instead of conflicts) and C stores are float4; expect 07 plus 10-20%, 35-40 TFLOP/s."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["(BM // WM) * (BN // WN) * 32"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "0"
constraints = ["K % 4 == 0", "N % 4 == 0", "BM % WM == 0", "BN % WN == 0", "WM % 32 == 0", "WN % 16 == 0", "(BM * BK // 4) % ((BM // WM) * (BN // WN) * 32) == 0", "(BK * BN // 4) % ((BM // WM) * (BN // WN) * 32) == 0"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "WM // 32 + WN // 16"
fmas = "(WM // 8) * (WN // 4)"
# bank arithmetic, per warp per tile (LDS.128 as in 06): WM // 32 LDS.128 of As per k, four
# lanes on each address (pairs: 2 wavefronts), and WN // 16 of Bs, neighbouring lanes on
# different addresses (4), all conflict-free; stores as 07 (4 STS of 1 wavefront per float4
# of A, one STS.128 of 4 per float4 of B)
smem_ld_requests = "(WM // 32 + WN // 16) * BK"
smem_ld_wavefronts = "(2 * (WM // 32) + 4 * (WN // 16)) * BK"
smem_st_requests = "(BM + BN // 4) * BK // ((BM // WM) * (BN // WN) * 32)"
smem_st_wavefronts = "(BM + BN) * BK // ((BM // WM) * (BN // WN) * 32)"
[params]
BM = 128
BN = 128
BK = 8
WM = 64
WN = 32
PADA = 4
MINB = 2
*/
// Measurements, experiments and lessons: notes/08_warptile.md
// After siboehm's kernel 10, with the classic SGEMM lane layout. Lane l of a warp is (lm, ln) =
// (l / 4, l % 4); it owns rows wm * WM + i * 32 + lm * 4 + r (i < WM / 32, r < 4) and columns
// wn * WN + j * 16 + ln * 4 + c (j < WN / 16, c < 4): per k it loads WM / 32 float4s of A and
// WN / 16 of B, all of them 16-byte aligned, and does a (WM / 8) x (WN / 4) outer product.
// Global loads and the transposed, padded As store are as in 07.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 32
#endif
#ifndef PADA
#define PADA 4
#endif
#ifndef MINB
#define MINB 2
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define TM (WM / 8)
#define TN (WN / 4)
#define LDA_S (BM + PADA)

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
sgemm_warptile(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
               float* C) {
    static_assert(WM % 32 == 0 && WN % 16 == 0 && PADA % 4 == 0, "4 x 4 lane blocks");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole loads");
    __shared__ __align__(16) float As[BK * LDA_S];
    __shared__ __align__(16) float Bs[BK * BN];
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int wm = warp / (BN / WN), wn = warp % (BN / WN);
    const int lm = lane / 4, ln = lane % 4;
    const int a_off = wm * WM + lm * 4;  // first A row of this lane within the block tile
    const int b_off = wn * WN + ln * 4;  // first B column
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int i = tid; i < BM * BK / 4; i += THREADS) {
            const int r = i / (BK / 4), c = (i % (BK / 4)) * 4;
            const float4 v = (bm + r < M && k0 + c < K)
                ? *reinterpret_cast<const float4*>(A + (size_t)(bm + r) * K + k0 + c) : zero;
            As[(c + 0) * LDA_S + r] = v.x;
            As[(c + 1) * LDA_S + r] = v.y;
            As[(c + 2) * LDA_S + r] = v.z;
            As[(c + 3) * LDA_S + r] = v.w;
        }
#pragma unroll
        for (int i = tid; i < BK * BN / 4; i += THREADS) {
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(Bs + r * BN + c) = (k0 + r < K && bn + c < N)
                ? *reinterpret_cast<const float4*>(B + (size_t)(k0 + r) * N + bn + c) : zero;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM / 4; ++i)
                *reinterpret_cast<float4*>(a + 4 * i) =
                    *reinterpret_cast<const float4*>(As + k * LDA_S + a_off + i * 32);
#pragma unroll
            for (int j = 0; j < TN / 4; ++j)
                *reinterpret_cast<float4*>(b + 4 * j) =
                    *reinterpret_cast<const float4*>(Bs + k * BN + b_off + j * 16);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + a_off + (i / 4) * 32 + i % 4;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = bn + b_off + (j / 4) * 16;
            if (col >= N) continue;
            float4* c = reinterpret_cast<float4*>(C + (size_t)row * N + col);
            float4 out = make_float4(alpha * acc[i][j], alpha * acc[i][j + 1],
                                     alpha * acc[i][j + 2], alpha * acc[i][j + 3]);
            if (beta != 0.0f) {
                const float4 old = *c;
                out.x = fmaf(beta, old.x, out.x);
                out.y = fmaf(beta, old.y, out.y);
                out.z = fmaf(beta, old.z, out.z);
                out.w = fmaf(beta, old.w, out.w);
            }
            *c = out;
        }
    }
}
