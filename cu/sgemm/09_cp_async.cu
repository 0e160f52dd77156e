/* harness
entry = "sgemm_cp_async"
summary = "08's warp tiling fed by a STAGES-deep cp.async pipeline: tiles k + 1 .. k + STAGES - 1 are in flight from global to shared memory (no registers, no waiting) while tile k is computed; one barrier per tile instead of two."
predicted = "08 waits for each tile's global loads behind a barrier with 2 blocks per SM to hide them; with 2-3 stages the load latency hides behind the FFMAs and one barrier goes: expect 08 plus 10-25%, 40-45 TFLOP/s (80-90% of cuBLAS) at the defaults before tuning."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
representative = "s4"            # the variant a default `harness run` times
block = ["(BM // WM) * (BN // WN) * 32"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "STAGES * BK * (BM + PADA + BN) * 4"
constraints = ["K % 4 == 0", "N % 4 == 0", "BM % WM == 0", "BN % WN == 0", "WM % 32 == 0", "WN % 16 == 0", "STAGES >= 2", "(BM * BK) % ((BM // WM) * (BN // WN) * 32) == 0", "(BK * BN // 4) % ((BM // WM) * (BN // WN) * 32) == 0"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "WM // 32 + WN // 16"
fmas = "(WM // 8) * (WN // 4)"
# bank arithmetic, per warp per tile: loads as 08 (As 2 wavefronts, Bs 4, conflict-free); the
# tiles arrive by cp.async (LDGSTS), so there are no shared stores
smem_ld_requests = "(WM // 32 + WN // 16) * BK"
smem_ld_wavefronts = "(2 * (WM // 32) + 4 * (WN // 16)) * BK"
[params]
BM = 128
BN = 128
BK = 8
WM = 64
WN = 32
PADA = 4
STAGES = 3
MINB = 2
[tune]
BM = [128, 256]
BN = [128, 256]
BK = [8, 16]
WM = [32, 64]
WN = [32, 64]
STAGES = [2, 3, 4]
MINB = [1, 2]
[variants]
s2 = { STAGES = 2 }
s3 = { STAGES = 3 }
s4 = { STAGES = 4 }

[tuned.sm_90]
BM = 128
BN = 256
BK = 16
WM = 64
WN = 32
STAGES = 4
MINB = 1
*/
// Measurements, experiments and lessons: notes/09_cp_async.md
// cp.async is written as inline PTX (no libcu++ headers needed): B rows go in 16-byte
// cp.async.cg copies; A goes in 4-byte cp.async.ca copies because it is transposed on the way
// (As[k][m]), which a 16-byte copy cannot do. Out-of-range elements use the src-size operand
// of 0, which zero-fills the destination. Group accounting: one commit per tile slot, empty
// groups included, so "wait until at most STAGES - 2 groups are pending" always means "tile t
// has landed" for this thread; the barrier after it makes every thread's copies visible and
// also guarantees that the stage about to be refilled was finished by everyone.

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
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MINB
#define MINB 2
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define TM (WM / 8)
#define TN (WN / 4)
#define LDA_S (BM + PADA)
#define A_STAGE (BK * LDA_S)
#define B_STAGE (BK * BN)

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(d), "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(d), "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

__device__ __forceinline__ void cp_async_wait_pending() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
sgemm_cp_async(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
               float* C) {
    static_assert(WM % 32 == 0 && WN % 16 == 0 && PADA % 4 == 0 && STAGES >= 2, "layout");
    static_assert((BM * BK) % THREADS == 0 && (BK * BN / 4) % THREADS == 0, "whole loads");
    extern __shared__ __align__(16) float smem[];
    float* As = smem;                      // [STAGES][BK][LDA_S]
    float* Bs = smem + STAGES * A_STAGE;   // [STAGES][BK][BN]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int wm = warp / (BN / WN), wn = warp % (BN / WN);
    const int a_off = wm * WM + (lane / 4) * 4;
    const int b_off = wn * WN + (lane % 4) * 4;
    const int tiles = (K + BK - 1) / BK;

    auto load_tile = [&](int tile, int stage) {
        const int k0 = tile * BK;
        float* as = As + stage * A_STAGE;
        float* bs = Bs + stage * B_STAGE;
#pragma unroll
        for (int i = tid; i < BM * BK; i += THREADS) {
            // consecutive threads take consecutive k of one row: 32-byte global segments,
            // and stores that step by LDA_S words (banks spread by the padding)
            const int r = i / BK, c = i % BK;
            const bool ok = bm + r < M && k0 + c < K;
            cp_async4(as + c * LDA_S + r, ok ? A + (size_t)(bm + r) * K + k0 + c : A, ok);
        }
#pragma unroll
        for (int i = tid; i < BK * BN / 4; i += THREADS) {
            const int r = i / (BN / 4), c = (i % (BN / 4)) * 4;
            const bool ok = k0 + r < K && bn + c < N;
            cp_async16(bs + r * BN + c, ok ? B + (size_t)(k0 + r) * N + bn + c : B, ok);
        }
    };

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles) load_tile(s, s);
        cp_async_commit();
    }
    float acc[TM][TN] = {};
    float a[TM], b[TN];
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait_pending();
        __syncthreads();
        const int next = t + STAGES - 1;
        if (next < tiles) load_tile(next, next % STAGES);
        cp_async_commit();
        const float* as = As + (t % STAGES) * A_STAGE;
        const float* bs = Bs + (t % STAGES) * B_STAGE;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM / 4; ++i)
                *reinterpret_cast<float4*>(a + 4 * i) =
                    *reinterpret_cast<const float4*>(as + k * LDA_S + a_off + i * 32);
#pragma unroll
            for (int j = 0; j < TN / 4; ++j)
                *reinterpret_cast<float4*>(b + 4 * j) =
                    *reinterpret_cast<const float4*>(bs + k * BN + b_off + j * 16);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
    }
    asm volatile("cp.async.wait_all;\n");
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
