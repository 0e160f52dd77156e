/* harness
kind = "buffers"
entry = "softmax_cached"
summary = "The row kept in registers: a team of W warps a row (W the smallest power of two with 1024 W >= COLS, 32 floats a thread: a warp a row up to 1K columns, the whole 1024-thread block at 32K) loads it once with 16-byte loads, takes its max, turns it into exp(x - max) in place, sums, and writes it: the compulsory bytes, the row read once and written once."
predicted = "DRAM moves only the compulsory 8 B per element. One 1024-thread block per SM (64 registers) holds 128 KB of rows in registers, 4x the ~30 KB Little's law asks (3.35 TB/s x ~1.2 us loaded latency / 132 SMs), and the ~20 instructions an element (expf ~9, the division 3) use a quarter of the ~80 issue slots an element the bandwidth leaves: 2.8-2.9 TB/s (93-97% of the copy ceiling) at 1K-16K, where a block holds 2-32 independent teams. At 32K a team is the whole SM and its phases alternate: after the row's last load arrives, ~2.3 us of reductions, exps and stores (16 instructions x 32768 elements / 128 lanes a clock) pass with no load in flight, against the ~11.5 us a 256 KB row takes at its 1/132 share of 3 TB/s. Other SMs cover that only if they drift out of step: 2.4-2.9 TB/s (83% if all SMs stayed in step, the worst case). 04 closes it."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["65536x1024", "16384x4096", "8192x16384", "4096x32768"]
args = ["x", "y", "ROWS", "COLS"]
block = ["1024"]
grid = ["min(SMS, ROWS)"]
dynamic_smem_bytes = "0"
constraints = ["COLS <= 32768"]
reference = "softmax"
bytes = "2*4*ROWS*COLS"
baseline = "torch_softmax"

[params]
MIN_WARPS = 1  # the smallest team, in warps (a power of two): --param MIN_WARPS=2 tries 2 warps a row at 1K

[buffers.x]
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "in"

[buffers.y]
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "out"
*/
// Measurements, experiments and lessons: notes/softmax.md
// Against 02: the row is read from DRAM once. Thread t of a team of T threads holds the
// row's 16-byte chunks t, t + T, ..., t + 7 T (8 float4 = 32 floats; consecutive threads on
// consecutive chunks: coalesced) and at most one scalar of 02's cut (head: 0-3 elements
// before the first 16-byte boundary, tail: 0-3 after the last whole chunk; thread t < head
// holds head column t, the next ones the tail). Slots past the row hold -inf: the max needs
// no predicate and their exp is 0.
// Team size: T = the smallest power of two >= 32 MIN_WARPS with 32 T >= COLS (a warp holds
// 1024 columns): a warp a row up to 1K columns (32 rows per block, shuffles only), 4 warps at
// 4K, 16 at 16K, the whole block at 32K. T is a template argument (the kernel switches once
// on COLS): slot offsets become immediates of the loads and stores, where a runtime T made
// the compiler keep eight slot indices live and spill at 64 registers. The block is
// persistent (grid = min(SMS, ROWS), one 1024-thread block per SM at <= 64 registers): team
// g of the grid takes rows g, g + teams, ..., so small and odd ROWS only leave teams idle.
// A multi-warp team reduces across its warps through shared memory behind its own named
// barrier (bar.sync team, T: ids 0..15, as W >= 2 warps means at most 16 teams; the kernel
// never uses __syncthreads), so teams run their rows independently. Max partials and sum
// partials use separate arrays: a warp writes red_max for row i + 1 only after passing row
// i's sum barrier, which each warp of its team reaches only after reading row i's red_max;
// the same argument one barrier later covers red_sum. Both reductions end with every warp
// reducing the W partials itself (butterflies: the same bits in every lane and warp).
// Numerics as 01: expf (accurate) of x - max, FP32 sums; the division as div_by below.

#ifndef MIN_WARPS
#define MIN_WARPS 1
#endif
#define BLOCK 1024
#define SLOTS 8  // float4 chunks a thread holds: a warp holds 32 * SLOTS * 4 = 1024 columns
#define NEG_INF (__int_as_float(0xff800000))
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

// 1/s for s >= 1: the hardware approximation and one Newton step (RN(1/s) but for 1/s
// within ~2^-44 of a rounding midpoint), with no range checks: s >= 1 needs none.
__device__ __forceinline__ float reciprocal(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return fmaf(r, fmaf(-s, r, 1.0f), r);
}

// e / s, correctly rounded barring underflow (Markstein: inv = RN(1/s) and q within an ulp,
// then one FMA residual and one FMA correction give RN(e / s)): 3 instructions an element
// where the IEEE e / s takes ~8 (MUFU.RCP, FFMAs, an FCHK range test and a branch to a
// slow-path call, taken for the subnormal e that wide inputs give).
__device__ __forceinline__ float div_by(float e, float s, float inv) {
    const float q = e * inv;
    return fmaf(fmaf(-s, q, e), inv, q);
}

// A 16-byte store, written out: left to itself the compiler merges the aligned store of slot 0
// with the scalar fallback's and emits four 4-byte stores on the aligned path.
__device__ __forceinline__ void store16(float* p, float4 v) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};"
                 : : "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

// Barrier `id` for `threads` threads (a multiple of 32): one team's warps only.
__device__ __forceinline__ void team_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" : : "r"(id), "r"(threads) : "memory");
}

template <int LOG_T>
__device__ __forceinline__ void cached_rows(const float* __restrict__ x, float* __restrict__ y,
                                            int ROWS, int COLS, float* red_max,
                                            float* red_sum) {
    constexpr int T = 1 << LOG_T;    // threads a row
    constexpr int W = T / 32;        // warps a row
    constexpr int TEAMS = BLOCK / T; // rows a block holds at once
    const int team = threadIdx.x >> LOG_T;
    const int t = threadIdx.x & (T - 1);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const bool y_vec = ((reinterpret_cast<unsigned long long>(x) ^
                         reinterpret_cast<unsigned long long>(y)) & 15u) == 0;

    for (int row = blockIdx.x * TEAMS + team; row < ROWS; row += gridDim.x * TEAMS) {
        const size_t offset = (size_t)row * (size_t)COLS;
        const float* xr = x + offset;
        float* yr = y + offset;
        const unsigned misalign = (unsigned)reinterpret_cast<unsigned long long>(xr) & 15u;
        const int head = min((int)(((16u - misalign) & 15u) >> 2), COLS);
        const int nbody = (COLS - head) >> 2;
        const int tail0 = head + 4 * nbody;
        const int nscalar = head + (COLS - tail0);  // head and tail: 0..6 elements
        const int scol = t < head ? t : tail0 + (t - head);
        const float4* xb = reinterpret_cast<const float4*>(xr + head) + t;

        // One read of the row: every load issued before any is used.
        float4 v[SLOTS];
#pragma unroll
        for (int k = 0; k < SLOTS; ++k)
            v[k] = t + k * T < nbody ? xb[k * T] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        float sv = t < nscalar ? xr[scol] : NEG_INF;

        float m = sv;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k)
            m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
        m = warp_max(m);
        if (W > 1) {
            if (lane == 0) red_max[warp] = m;
            team_barrier(team, T);
            m = warp_max(lane < W ? red_max[team * W + lane] : NEG_INF);
        }

        // exp in place (empty slots: expf(-inf) = 0); four partial sums for ILP
        sv = expf(sv - m);
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            v[k].x = expf(v[k].x - m);
            v[k].y = expf(v[k].y - m);
            v[k].z = expf(v[k].z - m);
            v[k].w = expf(v[k].w - m);
            acc.x += v[k].x;
            acc.y += v[k].y;
            acc.z += v[k].z;
            acc.w += v[k].w;
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
        if (t < nscalar) yr[scol] = div_by(sv, s, inv);
        float* yb = yr + head + 4 * t;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            if (t + k * T < nbody) {
                const float4 o = make_float4(div_by(v[k].x, s, inv), div_by(v[k].y, s, inv),
                                             div_by(v[k].z, s, inv), div_by(v[k].w, s, inv));
                float* yc = yb + 4 * k * T;
                if (y_vec) {
                    store16(yc, o);
                } else {
                    yc[0] = o.x;
                    yc[1] = o.y;
                    yc[2] = o.z;
                    yc[3] = o.w;
                }
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK, 1)
softmax_cached(const float* __restrict__ x, float* __restrict__ y, int ROWS, int COLS) {
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
