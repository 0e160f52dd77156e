/* harness
kind = "buffers"
entry = "softmax_cached_bf16"
summary = "03_cached for BF16 rows (FP32 arithmetic): a thread holds 4 16-byte chunks (32 elements, widened to FP32 as they are used), a team of W warps a row as in 03_cached, exp2 of (x - max) log2(e) on the SFU, one read and one write of the row."
predicted = "As 03_cached in bytes per second (the same 512 MiB moved per size, twice the elements): 4 B per element, 3.2 elements per clock per SM at 3 TB/s, ~13 instructions an element (two widenings, max, subtract, multiply, ex2, sum, multiply, half a pack) against the ~40 slots the issue rate leaves; 64 KB of rows in flight per SM, 2x Little's ~30 KB: 2.7-2.9 TB/s (90-97%) at 1K-4K. At 16K-32K the gap of 03 matters twice as much, since a BF16 row takes half the DRAM time for the same arithmetic: ~1.6 us with no load in flight per ~5.8 us row at 32K, 78% if all SMs stayed in step: 2.3-2.8 TB/s there. 04_pipelined_bf16 closes it."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["131072x1024", "32768x4096", "16384x16384", "8192x32768"]
args = ["x", "y", "ROWS", "COLS"]
block = ["1024"]
grid = ["min(SMS, ROWS)"]
dynamic_smem_bytes = "0"
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
// 03_cached (read its header first) with BF16 in and out. What changes:
// - A 16-byte chunk is 8 elements, so a thread holds SLOTS = 4 chunks (32 elements): a warp
//   holds 1024 columns and the team sizes are 03_cached's. The cut: head = 0-7 elements
//   before the first 16-byte boundary, tail = 0-7 after the last whole chunk (at most 14
//   scalars, threads t < 14 of a team of >= 32).
// - The raw chunks stay packed (16 registers) until the exp pass widens them (a BF16 is the
//   top half of an FP32: a shift or a mask) into 32 FP32 exps.
// - exp(x - m) = ex2.approx.ftz((x - m) log2(e)). Against the bound: (x - m) and the product
//   round with at most u_f32 each and log2(e)'s FP32 value is off by 0.22 u_f32, so the
//   argument's error costs at most 2.2 |x - m| u_f32, ex2.approx ~2 ulp; where the result is
//   a normal float (|x - m| < 87) that is < 1.2e-5 relative, under the 2^-16 (1.5e-5) that
//   the bound's u_out = 2^-8 leaves beyond a BF16 rounding in the worst case (a value just
//   above a power of two, at a rounding midpoint). The flush to zero of a subnormal result
//   is within the bound's smallest-normal term. An FP32 output could not afford this (its
//   bound leaves 1.2 |x - m| u_f32): 03_cached uses the accurate expf.
// - y = RN_bf16(e * inv), inv = 1/s refined by one Newton step: the FP32 product's rounding
//   is noise beside the BF16 one.

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

// Barrier `id` for `threads` threads (a multiple of 32): one team's warps only.
__device__ __forceinline__ void team_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

template <int LOG_T>
__device__ __forceinline__ void cached_rows(const __nv_bfloat16* __restrict__ x,
                                            __nv_bfloat16* __restrict__ y, int ROWS, int COLS,
                                            float* red_max, float* red_sum) {
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

    for (int row = blockIdx.x * TEAMS + team; row < ROWS; row += gridDim.x * TEAMS) {
        const size_t offset = (size_t)row * (size_t)COLS;
        const __nv_bfloat16* xr = x + offset;
        __nv_bfloat16* yr = y + offset;
        const unsigned misalign = (unsigned)reinterpret_cast<unsigned long long>(xr) & 15u;
        const int head = min((int)(((16u - misalign) & 15u) >> 1), COLS);
        const int nbody = (COLS - head) >> 3;
        const int tail0 = head + 8 * nbody;
        const int nscalar = head + (COLS - tail0);  // head and tail: 0..14 elements
        const int scol = t < head ? t : tail0 + (t - head);
        const uint4* xb = reinterpret_cast<const uint4*>(xr + head) + t;

        // One read of the row: every load issued before any is used.
        uint4 raw[SLOTS];
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) raw[k] = t + k * T < nbody ? xb[k * T] : empty;
        float sv = t < nscalar ? __bfloat162float(xr[scol]) : NEG_INF;

        float m = sv;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) m = fmaxf(m, max8(raw[k]));
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
        const float inv = reciprocal(s);
        if (t < nscalar) yr[scol] = __float2bfloat16_rn(sv * inv);
        __nv_bfloat16* yb = yr + head + 8 * t;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            if (t + k * T < nbody) {
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
softmax_cached_bf16(const __nv_bfloat16* __restrict__ x, __nv_bfloat16* __restrict__ y,
                    int ROWS, int COLS) {
    __shared__ float red_max[BLOCK / 32];
    __shared__ float red_sum[BLOCK / 32];
    int warps = MIN_WARPS;  // a power of two: the team, in warps
    while (warps * 1024 < COLS) warps *= 2;
    switch (warps) {  // the same for the whole grid
        case 1: cached_rows<5>(x, y, ROWS, COLS, red_max, red_sum); break;
        case 2: cached_rows<6>(x, y, ROWS, COLS, red_max, red_sum); break;
        case 4: cached_rows<7>(x, y, ROWS, COLS, red_max, red_sum); break;
        case 8: cached_rows<8>(x, y, ROWS, COLS, red_max, red_sum); break;
        case 16: cached_rows<9>(x, y, ROWS, COLS, red_max, red_sum); break;
        case 32: cached_rows<10>(x, y, ROWS, COLS, red_max, red_sum); break;
        default: break;  // COLS > 32768: refused by the spec's constraint
    }
}
