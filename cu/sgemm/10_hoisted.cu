/* harness
entry = "sgemm_hoisted"
summary = "09 with the copy bookkeeping hoisted out of the K loop: each thread's global source pointers, shared destinations and row checks are computed once, pointers advance by a constant per tile, and only a ragged last tile checks K."
predicted = "The SASS of tuned 09 has 1563 instructions per 16-step tile for 1024 FFMA (65% FFMA): issue-bound near 0.65 x 67 = 44 TFLOP/s. Hoisting should cut the ~540 others to ~150 (87% FFMA): 40 -> ~46 TFLOP/s, about 90% of cuBLAS."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["(BM // WM) * (BN // WN) * 32"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "STAGES * BK * (BM + PADA + BN) * 4"
constraints = ["K % 4 == 0", "N % 4 == 0", "BM % WM == 0", "BN % WN == 0", "WM % 32 == 0", "WN % 16 == 0", "STAGES >= 2", "(BM * BK) % ((BM // WM) * (BN // WN) * 32) == 0", "(BK * BN // 4) % ((BM // WM) * (BN // WN) * 32) == 0", "((BM // WM) * (BN // WN) * 32) % BK == 0", "((BM // WM) * (BN // WN) * 32) % (BN // 4) == 0"]
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "BM"
tile_n = "BN"
smem_loads = "WM // 32 + WN // 16"
fmas = "(WM // 8) * (WN // 4)"
# bank arithmetic, per warp per tile: loads as 08 (As 2 wavefronts, Bs 4, conflict-free);
# cp.async, no shared stores
smem_ld_requests = "(WM // 32 + WN // 16) * BK"
smem_ld_wavefronts = "(2 * (WM // 32) + 4 * (WN // 16)) * BK"
[params]
BM = 128
BN = 256
BK = 16
WM = 64
WN = 32
PADA = 4
STAGES = 4
MINB = 1
[tune]
BM = [128, 256]
BN = [128, 256]
BK = [16, 32]
WM = [32, 64]
WN = [32, 64]
STAGES = [3, 4]

[tuned.sm_90]
BM = 128
BN = 256
BK = 32
WM = 64
WN = 64
STAGES = 4
*/
// Measurements, experiments and lessons: notes/10_hoisted.md
// Read from the SASS of 09 (`harness sass 09_cp_async:s4 --listing`): per tile the copy code
// recomputed i / BK, i % BK, row and column checks and 64-bit addresses for every cp.async,
// with branches around each. With THREADS a multiple of BK and of BN / 4, a thread's copies
// keep one k column (A) and one n column (B) and step through rows by a constant, so one
// base pointer per operand and compile-time offsets do it. Rows past M are redirected to a
// zero-size copy once, up front; K is checked only when the last tile is ragged.

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 16
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
#define STAGES 4
#endif
#ifndef MINB
#define MINB 1
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define TM (WM / 8)
#define TN (WN / 4)
#define LDA_S (BM + PADA)
#define A_STAGE (BK * LDA_S)
#define B_STAGE (BK * BN)

// An invalid copy reads nothing (src-size 0) but still gets an in-bounds address (`safe`).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid,
                                          const float* safe) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n"
                 :: "r"(d), "l"(valid ? src : safe), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid,
                                           const float* safe) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(d), "l"(valid ? src : safe), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

__device__ __forceinline__ void cp_async_wait_pending() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
}

extern "C" __global__ void __launch_bounds__(THREADS, MINB)
sgemm_hoisted(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
               float* C) {
    static_assert(WM % 32 == 0 && WN % 16 == 0 && PADA % 4 == 0 && STAGES >= 2, "layout");
    static_assert(THREADS % BK == 0 && THREADS % (BN / 4) == 0, "fixed copy columns");
    static_assert(BM * BK / THREADS <= 32, "row mask");
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

    // A copies: thread t copies k column t % BK of rows t / BK + j * A_STEP (j < A_COPIES)
    constexpr int A_COPIES = BM * BK / THREADS, A_STEP = THREADS / BK;
    // B copies: float4 column (t % (BN / 4)) * 4 of rows t / (BN / 4) + j * B_STEP
    constexpr int B_COPIES = BK * BN / 4 / THREADS, B_STEP = THREADS / (BN / 4);
    const int a_k = tid % BK, a_row = tid / BK;
    const int b_col = (tid % (BN / 4)) * 4, b_row = tid / (BN / 4);
    const float* a_src = A + (size_t)(bm + a_row) * K + a_k;
    const float* b_src = B + (size_t)b_row * N + bn + b_col;
    const size_t a_step_elems = (size_t)A_STEP * K;
    const size_t b_step_elems = (size_t)B_STEP * N;
    unsigned a_rows_ok = 0;  // bit j: row bm + a_row + j * A_STEP is inside A
#pragma unroll
    for (int j = 0; j < A_COPIES; ++j) a_rows_ok |= (bm + a_row + j * A_STEP < M) << j;
    const bool b_col_ok = bn + b_col < N;
    const int a_dst = a_k * LDA_S + a_row;   // + j * A_STEP per copy, + stage offset
    const int b_dst = b_row * BN + b_col;    // + j * B_STEP * BN per copy

    auto load_tile = [&](int tile, int stage) {
        const int k0 = tile * BK;
        float* as = As + stage * A_STAGE + a_dst;
        float* bs = Bs + stage * B_STAGE + b_dst;
        const float* a = a_src + k0;
        const float* b = b_src + (size_t)k0 * N;
        if (k0 + BK <= K) {  // a whole tile: only row / column checks, computed once
#pragma unroll
            for (int j = 0; j < A_COPIES; ++j)
                cp_async4(as + j * A_STEP, a + j * a_step_elems, (a_rows_ok >> j) & 1, A);
#pragma unroll
            for (int j = 0; j < B_COPIES; ++j)
                cp_async16(bs + j * B_STEP * BN, b + j * b_step_elems, b_col_ok, B);
        } else {             // the ragged last tile also checks K
#pragma unroll
            for (int j = 0; j < A_COPIES; ++j)
                cp_async4(as + j * A_STEP, a + j * a_step_elems,
                          ((a_rows_ok >> j) & 1) && k0 + a_k < K, A);
#pragma unroll
            for (int j = 0; j < B_COPIES; ++j)
                cp_async16(bs + j * B_STEP * BN, b + j * b_step_elems,
                           b_col_ok && k0 + b_row + j * B_STEP < K, B);
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
