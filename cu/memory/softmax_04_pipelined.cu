/* harness
kind = "buffers"
entry = "softmax_pipelined"
summary = "03_cached with the team's next row in flight while it works on this one: each thread cp.asyncs its 32 floats of the next row into its own 128 bytes of shared memory (no barrier: a thread reads back only its own copies), so an SM always has a row of loads outstanding, the registers holding the current row and shared memory the next."
predicted = "The same compulsory bytes as 03_cached; it removes 03's stretch with no load in flight (a team's reductions, exps and stores between its last load of row i and its first of row i + 1: ~2.3 us of an ~11.5 us row at 32K, where the team is the whole SM), since row i + 1 is already in flight then. 2.8-2.9 TB/s (93-97% of the copy ceiling) at every row length: equal to 03 at 1K-16K, where 03 already keeps DRAM busy, and up to +15% at 32K if 03 falls short there. New costs, off the DRAM path: the copy back from shared memory (LDS.128, 128 KB an SM a row round at 128 B a clock, ~0.6 us) and ~7 instructions a cp.async of address arithmetic."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["65536x1024", "16384x4096", "8192x16384", "4096x32768"]
args = ["x", "y", "ROWS", "COLS"]
block = ["1024"]
grid = ["min(SMS, ROWS)"]
dynamic_smem_bytes = "131072"
constraints = ["COLS <= 32768"]
reference = "softmax"
bytes = "2*4*ROWS*COLS"
baseline = "torch_softmax"

[params]
MIN_WARPS = 1  # the smallest team, in warps (a power of two)

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
// 03_cached (read its header first) plus a one-row prefetch. Per team and row:
//   wait for my cp.asyncs -> LDS.128 my slots of row i into registers -> my local max (it
//   reads every slot, so the copies back have landed) -> cp.async my slots of row i + teams
//   into the same shared memory, and load my head/tail scalar of it into a register -> the
//   rest of row i as in 03 (team max, exp, team sum, stores).
// The staging area is private: thread tid's slot k is the float4 at stage[k * 1024 + tid]
// (consecutive threads on consecutive 16 bytes: conflict-free), 8 slots x 1024 threads x 16 B
// = 128 KiB of dynamic shared memory (the opt-in above 48 KiB), 1 block per SM as in 03.
// A thread's cp.asyncs are visible to it after its cp.async.wait_all: no barrier. The next
// copies overwrite the slots just read (write after read, one thread). They come after the
// local max in program order, and take it as an (unused) asm operand so the compiler cannot
// hoist them above it; in the sm_90 SASS they follow the max's FMNMX chain, which waits for
// every LDS's data. Were they ever scheduled right after the LDS, the read would still come
// first: an LDS issued before an LDGSTS is served in order, and the LDGSTS writes shared
// memory only when its global read returns, hundreds of cycles later.
// Slots past the row are not copied and read as -inf, as in 03.

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

// 1/s for s >= 1: the hardware approximation and one Newton step (see 03_cached).
__device__ __forceinline__ float reciprocal(float s) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
    return fmaf(r, fmaf(-s, r, 1.0f), r);
}

// e / s, correctly rounded barring underflow (Markstein; see 03_cached).
__device__ __forceinline__ float div_by(float e, float s, float inv) {
    const float q = e * inv;
    return fmaf(fmaf(-s, q, e), inv, q);
}

__device__ __forceinline__ void store16(float* p, float4 v) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};"
                 : : "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
}

// 16 bytes global -> shared, L1 bypassed, from src + GOFF bytes to dst + SOFF. The offsets
// are immediates: with addresses computed per slot in C++, an address pair a slot plus the
// current row's 32 values spilled at 64 registers at the copies (ptxas still splits the
// larger offsets, but recomputes those addresses instead of holding them). `after` is not
// used by the copy: it keeps the compiler from moving the copy above that value's computation.
template <int SOFF, int GOFF>
__device__ __forceinline__ void copy16(unsigned dst, const float4* src, float after) {
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

// A row's cut (03_cached): head scalars, nbody float4 chunks, tail scalars; thread t's scalar.
struct Cut {
    int head, nbody, nscalar, scol;
};

__device__ __forceinline__ Cut cut_of(const float* xr, int COLS, int t) {
    const unsigned misalign = (unsigned)reinterpret_cast<unsigned long long>(xr) & 15u;
    Cut c;
    c.head = min((int)(((16u - misalign) & 15u) >> 2), COLS);
    c.nbody = (COLS - c.head) >> 2;
    const int tail0 = c.head + 4 * c.nbody;
    c.nscalar = c.head + (COLS - tail0);  // 0..6
    c.scol = t < c.head ? t : tail0 + (t - c.head);
    return c;
}

// Start the copies of thread t's slots of the row at xr into its staging area; return its
// head/tail scalar (a plain load, consumed one row later).
template <int T>
__device__ __forceinline__ float prefetch(const float* xr, int COLS, int t, unsigned stage,
                                          float after) {
    const Cut c = cut_of(xr, COLS, t);
    const float4* src = reinterpret_cast<const float4*>(xr + c.head) + t;
    const int left = c.nbody - t;  // slot k is in the row when k T < left
    if (0 * T < left) copy16<0 * BLOCK * 16, 0 * T * 16>(stage, src, after);
    if (1 * T < left) copy16<1 * BLOCK * 16, 1 * T * 16>(stage, src, after);
    if (2 * T < left) copy16<2 * BLOCK * 16, 2 * T * 16>(stage, src, after);
    if (3 * T < left) copy16<3 * BLOCK * 16, 3 * T * 16>(stage, src, after);
    if (4 * T < left) copy16<4 * BLOCK * 16, 4 * T * 16>(stage, src, after);
    if (5 * T < left) copy16<5 * BLOCK * 16, 5 * T * 16>(stage, src, after);
    if (6 * T < left) copy16<6 * BLOCK * 16, 6 * T * 16>(stage, src, after);
    if (7 * T < left) copy16<7 * BLOCK * 16, 7 * T * 16>(stage, src, after);
    static_assert(SLOTS == 8, "one copy16 line a slot");
    copies_commit();
    return t < c.nscalar ? xr[c.scol] : NEG_INF;
}

template <int LOG_T>
__device__ __forceinline__ void pipelined_rows(const float* __restrict__ x,
                                               float* __restrict__ y, int ROWS, int COLS,
                                               float* red_max, float* red_sum,
                                               const float4* stage) {
    constexpr int T = 1 << LOG_T;    // threads a row
    constexpr int W = T / 32;        // warps a row
    constexpr int TEAMS = BLOCK / T; // rows a block holds at once
    const int team = threadIdx.x >> LOG_T;
    const int t = threadIdx.x & (T - 1);
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const bool y_vec = ((reinterpret_cast<unsigned long long>(x) ^
                         reinterpret_cast<unsigned long long>(y)) & 15u) == 0;
    const float4* mine = stage + threadIdx.x;  // slot k: mine[k * BLOCK]
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
        float4 v[SLOTS];
#pragma unroll
        for (int k = 0; k < SLOTS; ++k)
            v[k] = t + k * T < nbody ? mine[k * BLOCK]
                                       : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        float sv = sv_next;
        float m = sv;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k)
            m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));

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
        const Cut c = cut_of(x + offset, COLS, t);
        float* yr = y + offset;
        const float inv = reciprocal(s);
        if (t < c.nscalar) yr[c.scol] = div_by(sv, s, inv);
        float* yb = yr + c.head + 4 * t;
#pragma unroll
        for (int k = 0; k < SLOTS; ++k) {
            if (t + k * T < c.nbody) {
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
softmax_pipelined(const float* __restrict__ x, float* __restrict__ y, int ROWS, int COLS) {
    __shared__ float red_max[BLOCK / 32];
    __shared__ float red_sum[BLOCK / 32];
    extern __shared__ float4 stage[];  // SLOTS * BLOCK float4: 128 KiB
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
