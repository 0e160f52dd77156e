/* harness
kind = "buffers"
entry = "softmax_pipelined_bf16"
summary = "04_pipelined for BF16 rows (FP32 arithmetic): 03_cached_bf16's registers (4 16-byte chunks, 32 elements a thread) with the team's next row cp.async'd into the thread's own 64 bytes of shared memory while it finishes this one."
predicted = "As 04_pipelined in bytes per second: equal to 03_cached_bf16 at 1K-4K, and at 16K-32K up to +25% over it, where 03_cached_bf16's stretch with no load in flight is ~1.6 us of each ~5.8 us row (the prefetch hides it: the SM's ~2 us of arithmetic and copy-back per row fit well inside the row's DRAM time). 2.7-2.9 TB/s (90-97% of the copy ceiling) at every row length."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["131072x1024", "32768x4096", "16384x16384", "8192x32768"]
args = ["x", "y", "ROWS", "COLS"]
block = ["1024"]
grid = ["min(SMS, ROWS)"]
dynamic_smem_bytes = "65536"
constraints = ["COLS <= 32768"]
reference = "softmax"
bytes = "2*2*ROWS*COLS"
baseline = "torch_softmax"

[params]
MIN_WARPS = 1  # the smallest team, in warps (a power of two)

[buffers.x]
dtype = "bf16"
shape = ["ROWS", "COLS"]
role = "in"

[buffers.y]
dtype = "bf16"
shape = ["ROWS", "COLS"]
role = "out"
*/
// Measurements, experiments and lessons: notes/softmax.md
// 04_pipelined's prefetch (its header: the private staging area, no barrier, why the copies
// cannot overwrite a slot before it is read) on 03_cached_bf16's BF16 rows (its header: the
// cut with 0-7 head and tail elements, widening, ex2.approx and why it fits the bound).
// Staging: 4 slots x 1024 threads x 16 B = 64 KiB of dynamic shared memory (the opt-in above
// 48 KiB). The raw chunks go to registers packed (16 registers), widened by the exp pass.

#include <cuda_bf16.h>

#ifndef MIN_WARPS
#define MIN_WARPS 1
#endif
#define BLOCK 1024
#define SLOTS 4  // 16-byte chunks (8 BF16) a thread holds: a warp holds 32 * SLOTS * 8 = 1024 columns
#define NEG_INF (__int_as_float(0xff800000))
#define LOG2E 1.4426950408889634f
static_assert(MIN_WARPS >= 1 && MIN_WARPS <= 32 && (MIN_WARPS & (MIN_WARPS - 1)) == 0,
              "MIN_WARPS must be a power of two from 1 to 32");

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// 1/s for s >= 1: the hardware approximation and one Newton step.
__device__ __forceinline__ float reciprocal(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return fmaf(r, fmaf(-s, r, 1.0f), r);
}

// exp(d) for d <= 0 (or -inf: 0)
__device__ __forceinline__ float exp_neg(float d) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * LOG2E));
    return r;
}

__device__ __forceinline__ float bf16_lo(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float max8(uint4 c) {
    return fmaxf(fmaxf(fmaxf(bf16_lo(c.x), bf16_hi(c.x)), fmaxf(bf16_lo(c.y), bf16_hi(c.y))),
                 fmaxf(fmaxf(bf16_lo(c.z), bf16_hi(c.z)), fmaxf(bf16_lo(c.w), bf16_hi(c.w))));
}

__device__ __forceinline__ unsigned pack2(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
    return *reinterpret_cast<const unsigned*>(&h);
}

// A 16-byte store, written out (see 03_cached's store16).
__device__ __forceinline__ void store16(__nv_bfloat16* p, uint4 v) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 : : "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// 16 bytes global -> shared, L1 bypassed, from src + GOFF bytes to dst + SOFF. The offsets
// are immediates: with addresses computed per slot in C++, an address pair a slot plus the
// current row's 32 values spilled at 64 registers at the copies (ptxas still splits the
// larger offsets, but recomputes those addresses instead of holding them). `after` is not
// used by the copy: it keeps the compiler from moving the copy above that value's computation.
template <int SOFF, int GOFF>
__device__ __forceinline__ void copy16(unsigned dst, const uint4* src, float after) {
    asm volatile("cp.async.cg.shared.global [%0+%3], [%1+%4], 16;"
                 : : "r"(dst), "l"(src), "f"(after), "n"(SOFF), "n"(GOFF) : "memory");
}

__device__ __forceinline__ void copies_commit() {
    asm volatile("cp.async.commit_group;" : : : "memory");
}

__device__ __forceinline__ void copies_wait() {
    asm volatile("cp.async.wait_all;" : : : "memory");
}

// Barrier `id` for `threads` threads (a multiple of 32): one team's warps only.
__device__ __forceinline__ void team_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

// A row's cut (03_cached_bf16): head scalars, nbody 16-byte chunks, tail scalars; thread t's
// scalar.
struct Cut {
    int head, nbody, nscalar, scol;
};

__device__ __forceinline__ Cut cut_of(const __nv_bfloat16* xr, int COLS, int t) {
    const unsigned misalign = (unsigned)reinterpret_cast<unsigned long long>(xr) & 15u;
    Cut c;
    c.head = min((int)(((16u - misalign) & 15u) >> 1), COLS);
    c.nbody = (COLS - c.head) >> 3;
    const int tail0 = c.head + 8 * c.nbody;
    c.nscalar = c.head + (COLS - tail0);  // 0..14
    c.scol = t < c.head ? t : tail0 + (t - c.head);
    return c;
}

// Start the copies of thread t's slots of the row at xr into its staging area; return its
// head/tail scalar (a plain load, consumed one row later).
template <int T>
__device__ __forceinline__ float prefetch(const __nv_bfloat16* xr, int COLS, int t,
                                          unsigned stage, float after) {
    const Cut c = cut_of(xr, COLS, t);
    const uint4* src = reinterpret_cast<const uint4*>(xr + c.head) + t;
    const int left = c.nbody - t;  // slot k is in the row when k T < left
    if (0 * T < left) copy16<0 * BLOCK * 16, 0 * T * 16>(stage, src, after);
    if (1 * T < left) copy16<1 * BLOCK * 16, 1 * T * 16>(stage, src, after);
    if (2 * T < left) copy16<2 * BLOCK * 16, 2 * T * 16>(stage, src, after);
    if (3 * T < left) copy16<3 * BLOCK * 16, 3 * T * 16>(stage, src, after);
    static_assert(SLOTS == 4, "one copy16 line a slot");
    copies_commit();
    return t < c.nscalar ? __bfloat162float(xr[c.scol]) : NEG_INF;
}

template <int LOG_T>
__device__ __forceinline__ void pipelined_rows(const __nv_bfloat16* __restrict__ x,
                                               __nv_bfloat16* __restrict__ y, int ROWS,
                                               int COLS, float* red_max, float* red_sum,
                                               const uint4* stage) {
    constexpr int T = 1 << LOG_T;    // threads a row
    constexpr int W = T / 32;        // warps a row
    constexpr int TEAMS = BLOCK / T; // rows a block holds at once
    const int team = threadIdx.x >> LOG_T;
    const int t = threadIdx.x & (T - 1);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const bool y_vec = ((reinterpret_cast<unsigned long long>(x) ^
                         reinterpret_cast<unsigned long long>(y)) & 15u) == 0;
    const uint4 empty = make_uint4(0xff80ff80u, 0xff80ff80u, 0xff80ff80u, 0xff80ff80u);  // -inf
    const uint4* mine = stage + threadIdx.x;  // slot k: mine[k * BLOCK]
    const unsigned mine_s = (unsigned)__cvta_generic_to_shared(mine);
    const int stride = gridDim.x * TEAMS;

    int row = blockIdx.x * TEAMS + team;
    float sv_next = row < ROWS ? prefetch<T>(x + (size_t)row * (size_t)COLS, COLS, t, mine_s,
                                             0.0f)
                               : NEG_INF;
    for (; row < ROWS; row += stride) {
        const size_t offset = (size_t)row * (size_t)COLS;
        const int nbody = cut_of(x + offset, COLS, t).nbody;  // the rest of the cut at the stores

        // Row i from my staging area into registers.
        copies_wait();
        uint4 raw[SLOTS];
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) raw[k] = t + k * T < nbody ? mine[k * BLOCK] : empty;
        float sv = sv_next;
        float m = sv;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) m = fmaxf(m, max8(raw[k]));

        // Row i + teams on its way while row i is finished.
        const int next = row + stride;
        sv_next = next < ROWS ? prefetch<T>(x + (size_t)next * (size_t)COLS, COLS, t, mine_s, m)
                              : NEG_INF;

        m = warp_max(m);
        if (W > 1) {
            if (lane == 0) red_max[warp] = m;
            team_barrier(team, T);
            m = warp_max(lane < W ? red_max[team * W + lane] : NEG_INF);
        }
        // widen and exp (empty slots: -inf -> 0); four partial sums for ILP
        sv = exp_neg(sv - m);
        float e[SLOTS][8];
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            const unsigned w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                e[k][2 * i] = exp_neg(bf16_lo(w[i]) - m);
                e[k][2 * i + 1] = exp_neg(bf16_hi(w[i]) - m);
            }
            acc.x += e[k][0] + e[k][1];
            acc.y += e[k][2] + e[k][3];
            acc.z += e[k][4] + e[k][5];
            acc.w += e[k][6] + e[k][7];
        }
        float s = ((acc.x + acc.y) + (acc.z + acc.w)) + sv;
        s = warp_sum(s);
        if (W > 1) {
            if (lane == 0) red_sum[warp] = s;
            team_barrier(team, T);
            s = warp_sum(lane < W ? red_sum[team * W + lane] : 0.0f);
        }

        // One write of the row.
        const Cut c = cut_of(x + offset, COLS, t);
        __nv_bfloat16* yr = y + offset;
        const float inv = reciprocal(s);
        if (t < c.nscalar) yr[c.scol] = __float2bfloat16_rn(sv * inv);
        __nv_bfloat16* yb = yr + c.head + 8 * t;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            if (t + k * T < c.nbody) {
                __nv_bfloat16* yc = yb + 8 * k * T;
                if (y_vec) {
                    store16(yc, make_uint4(pack2(e[k][0] * inv, e[k][1] * inv),
                                           pack2(e[k][2] * inv, e[k][3] * inv),
                                           pack2(e[k][4] * inv, e[k][5] * inv),
                                           pack2(e[k][6] * inv, e[k][7] * inv)));
                } else {
#pragma unroll
                    for (int i = 0; i < 8; ++i) yc[i] = __float2bfloat16_rn(e[k][i] * inv);
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK, 1)
softmax_pipelined_bf16(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                       int ROWS, int COLS) {
    __shared__ float red_max[BLOCK / 32];
    __shared__ float red_sum[BLOCK / 32];
    extern __shared__ uint4 stage[];  // SLOTS * BLOCK chunks: 64 KiB
    int warps = MIN_WARPS;  // a power of two: the team, in warps
    while (warps * 1024 < COLS) warps *= 2;
    switch (warps) {  // the same for the whole grid
        case 1: pipelined_rows<5>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        case 2: pipelined_rows<6>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        case 4: pipelined_rows<7>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        case 8: pipelined_rows<8>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        case 16: pipelined_rows<9>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        case 32: pipelined_rows<10>(x, y, ROWS, COLS, red_max, red_sum, stage); break;
        default: break;  // COLS > 32768: refused by the spec's constraint
    }
}
