/* harness
entry = "sgemm_vectorized"
summary = "As 06, but tiles come in with 128-bit global loads (float4), A is stored transposed in shared memory (As[k][m]) so a thread's TM values of A at one k are contiguous, and both operands are read from shared memory as LDS.128."
predicted = "Four times fewer global load instructions and TM / 4 + TN / 4 = 4 LDS.128 per k instead of 8 + 8 scalar loads: shared-memory instruction issue stops competing with the 64 FFMAs; expect ~1.3x 06."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["(BM // TM) * (BN // TN)"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "0"
constraints = ["K % 4 == 0", "N % 4 == 0", "(BM * BK // 4) % ((BM // TM) * (BN // TN)) == 0", "(BK * BN // 4) % ((BM // TM) * (BN // TN)) == 0"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "TM // 4 + TN // 4"
fmas = "TM * TN"
# bank arithmetic, per warp per tile (LDS.128 as in 06): TM // 4 LDS.128 of As per k (each
# half-warp one address: 2 wavefronts) and TN // 4 of Bs (as 06: 8); per thread per tile
# BM * BK // 4 // THREADS float4s of A stored transposed as 4 STS, rows LDA_S = 132 words
# apart, which puts the warp's two halves 16 banks apart (1 wavefront), and
# BK * BN // 4 // THREADS STS.128 of B, 512 consecutive bytes: 4 wavefronts, conflict-free
smem_ld_requests = "(TM + TN) * BK // 4"
smem_ld_wavefronts = "(2 * (TM // 4) + 8 * (TN // 4)) * BK"
smem_st_requests = "(BM + BN // 4) * BK // ((BM // TM) * (BN // TN))"
smem_st_wavefronts = "(BM + BN) * BK // ((BM // TM) * (BN // TN))"
[params]
BM = 128
BN = 128
BK = 8
TM = 8
TN = 8
PADA = 4
MINB = 2
*/
// Measurements, experiments and lessons: notes/07_vectorized.md
// After siboehm's kernel 6. The float4 loads need 16-byte aligned rows, hence K % 4 == 0
// (A rows) and N % 4 == 0 (B and C rows): then a float4 is either wholly inside the matrix or
// wholly outside, and zero-filling whole float4s handles every edge. As is padded by PADA
// words per row: the transposed store of a warp's float4s (rows r = 0..15, k = 0/4 at
// BK = 8) would otherwise put rows with equal r in one bank.

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
#ifndef PADA
#define PADA 4
#endif
#ifndef MINB
#define MINB 2
#endif
#define THREADS ((BM / TM) * (BN / TN))
#define LDA_S (BM + PADA)

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
sgemm_vectorized(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
                 float* C) {
    static_assert(TM % 4 == 0 && TN % 4 == 0 && PADA % 4 == 0, "float4 register tiles");
    static_assert((BM * BK / 4) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole loads");
    __shared__ __align__(16) float As[BK * LDA_S];
    __shared__ __align__(16) float Bs[BK * BN];
    const int tid = threadIdx.x;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tr = tid / (BN / TN), tc = tid % (BN / TN);
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
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(a + i) =
                    *reinterpret_cast<const float4*>(As + k * LDA_S + tr * TM + i);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(b + j) =
                    *reinterpret_cast<const float4*>(Bs + k * BN + tc * TN + j);
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
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = bn + tc * TN + j;
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
