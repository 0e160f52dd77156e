/* harness
kind = "attention"
entry = "attention_wgmma"
summary = "Against 02: the Hopper rung, FlashAttention-3's recipe (first cut). A block of 384 threads takes 128 query rows. A producer warpgroup (setmaxnreg.dec to 40; one thread) loads Q once and K and V in tiles of BLOCK_N keys by TMA (128-byte swizzle; 3-D maps, so the sequence's end reads zeros, not the next head) into two STAGES-deep rings, K's and V's, each stage with a full and an empty mbarrier (a stage of K is free once S = Q K^T has landed, one of V once O += P V has). Two consumer warpgroups (setmaxnreg.inc to 232), 64 rows each, compute S = Q K^T with wgmma from shared memory and O += P V with P in registers (the S accumulators rounded to BF16 are wgmma's A fragments) and V read N-major through its descriptor. Softmax overlapped with the products (intra-warpgroup pipelining): S of tile j and P V of tile j - 1 are issued back to back, tile j's softmax runs while P V is on the tensor cores, and O is rescaled once it lands. PINGPONG = 1 (variant d128p): the two consumer warpgroups take turns to issue their products (named barriers), so one's softmax runs beside the other's products. Causal: each head's blocks take their query tiles from the last (the heaviest, every key before them) to the first, so the launch ends on light blocks, not heavy ones. PERSIST = 1 (variant d128pp): one block an SM walks the work tiles (query tile, head, batch) in the same order, every gridDim.x-th; its producer loads the next tile's K and V as the rings free and its Q once both consumers have read the last (a q_empty barrier), so a tile's start waits on no copy and its epilogue overlaps the next tile's loads. Not yet: TMA stores of O."
predicted = "BF16 dense peak 1070 TFLOP/s at 1980 MHz (4096 FLOP per clock per SM). At S = 4096, D = 128, non-causal, a block's 128 rows against a tile of 128 keys are 8.4 MFLOP of wgmma (2048 clocks, 1.03 us) beside 16K exponentials (MUFU.EX2 at 16 per clock per SM: 1024 clocks, 0.52 us) and ~3 FP32 operations per score (0.2-0.3 us): the softmax is ~0.8 of the tensor time, hidden behind the other warpgroup's products by the ping-pong (d128p) and behind P V within a warpgroup; an unmasked tile is 574 instructions a consumer warp (1148 issue cycles per SM against 2048 of tensor time). K freed when S lands and V when P V does gives each copy a tile's time to land. Causal tiles heaviest first: the launch ends on light blocks. d128pp hides a work tile's fixed part (Q's load, the rings' first fill, the epilogue; about 1.8 us of a 4K tile's ~54 us in d128p) behind the tile before: +2-3% at S = 4096 non-causal, under 1% at 16K, causal a wash or worse. Measurements, and how the rung got here: notes/attention.md."
min_arch = "sm_90a"
precision = "bf16"
layout = "bhsd"
lse = true
causal = true
p_type = "input"
head_dims = [64, 128, 256]
block = ["384"]
grid = ["PERSIST * min(SMS, cdiv(S_q, 128) * H * B) + (1 - PERSIST) * cdiv(S_q, 128)",
        "PERSIST + (1 - PERSIST) * H", "PERSIST + (1 - PERSIST) * B"]
dynamic_smem_bytes = "256 * HEAD_DIM + 4 * STAGES * BLOCK_N * HEAD_DIM + 1024"
constraints = ["D == HEAD_DIM"]
representative = "d128p"
baseline = "cudnn_sdpa"

[params]
HEAD_DIM = 128
BLOCK_N = 128
STAGES = 2
PINGPONG = 0
PERSIST = 0

[variants]
d64 = { HEAD_DIM = 64 }
d128 = { HEAD_DIM = 128 }
d256 = { HEAD_DIM = 256, BLOCK_N = 64 }
d128p = { HEAD_DIM = 128, PINGPONG = 1 }   # the two consumers take turns to issue
d128pp = { HEAD_DIM = 128, PINGPONG = 1, PERSIST = 1 }   # one block an SM, walking work tiles
d128s3 = { HEAD_DIM = 128, STAGES = 3 }    # a third stage of K and V: 225 KB (slower)
d64p = { HEAD_DIM = 64, PINGPONG = 1 }
d256p = { HEAD_DIM = 256, BLOCK_N = 64, PINGPONG = 1 }

# Q, K and V as [B * heads][S][D]: boxes of 64 columns (128 bytes, the swizzle's span) by rows
[tmaps.q]
rank = 3
shape = ["D", "S_q", "B * H"]
strides = ["D", "S_q * D"]
box = ["64", "64", "1"]

[tmaps.k]
rank = 3
shape = ["D", "S_kv", "B * H_kv"]
strides = ["D", "S_kv * D"]
box = ["64", "BLOCK_N", "1"]

[tmaps.v]
rank = 3
shape = ["D", "S_kv", "B * H_kv"]
strides = ["D", "S_kv * D"]
box = ["64", "BLOCK_N", "1"]
*/
// The attention ABI (docs/attention.md), BHSD, and the three tensor maps. Causal mask
// bottom-right (j <= i + S_kv - S_q); a query that sees no key writes 0 and lse = -inf.
//
// Shared memory (1024-byte aligned: the 128-byte swizzle repeats every 8 rows of 128 bytes):
// Q as 2 x HEAD_DIM / 64 panels of 64 rows x 128 bytes (consumer warpgroup w's rows in its
// own panels), then STAGES stages of K and of V, each HEAD_DIM / 64 panels of BLOCK_N rows x
// 128 bytes. Descriptors (PTX ISA, "Matrix Descriptor Format"; the layouts of
// ptx/hgemm/wgmma_gemm.ptxh, which the GEMM rungs run): Q and K are K-major (k = the head
// dim): SBO 1024 (8 rows), LBO unused, + 32 bytes a k16 step inside a panel. V is N-major
// (k = the keys, n = the head dim: the transpose flag): LBO = one panel (the next 64
// columns), SBO 1024 (8 keys), + 2048 bytes (16 keys) a k16 step.
//
// Fragments: the m64nN accumulator gives warp w of a warpgroup rows 16 w + g and 16 w + g + 8
// (lane = 4 g + t): d[4 nb + 2 half + e] is (row + 8 half, column 8 nb + 2 t + e). wgmma's A
// fragment from registers (m64k16, as mma.m16n8k16's A) is a0 (g, 2t..), a1 (g + 8, 2t..),
// a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..): S's accumulators of keys 16 kk .. 16 kk + 15,
// rounded to BF16 in pairs, are P's A fragment for k step kk.
#include <cuda_bf16.h>

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef BLOCK_N
#define BLOCK_N 128
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef PERSIST
#define PERSIST 0
#endif
#if PERSIST  // the rings' counters run on over a block's work tiles: unsigned, % and / by shifts
typedef unsigned ring_t;
#else        // one work tile: the code of every variant before PERSIST, unchanged
typedef int ring_t;
#endif
#define BLOCK_M 128                          // two consumer warpgroups of 64 rows
#define PANELS (HEAD_DIM / 64)
#define Q_PANEL_BYTES 8192                   // 64 rows x 128 bytes
#define KV_PANEL_BYTES (BLOCK_N * 128)
#define KV_BYTES (PANELS * KV_PANEL_BYTES)    // one K (or V) tile
#define Q_BYTES (2 * PANELS * Q_PANEL_BYTES)
#define NEG_INF (__int_as_float(0xff800000))

static_assert(HEAD_DIM == 64 || HEAD_DIM == 128 || HEAD_DIM == 256, "HEAD_DIM: 64, 128, 256");
static_assert(BLOCK_N == 64 || BLOCK_N == 128, "BLOCK_N: 64 or 128");
static_assert(STAGES >= 2, "STAGES: at least 2 (V of tile j - 1 is read while K of j lands)");

struct alignas(64) TmaMap {  // a CUtensorMap, by value (const __grid_constant__)
    unsigned char bytes[128];
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}

// an arrival by the lanes where `yes` holds, the predicate inside the asm: a branch around it
// (if (lane == 0)) made the tile loop's barrier and descriptor addresses per-thread values, not
// uniform ones (notes/attention.md)
__device__ __forceinline__ void mbar_arrive_if(unsigned bar, bool yes) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n"
                 "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n"
                 :: "r"(bar), "r"((int)yes) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred done;\n"
                 "WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

// one box of a 3-D tensor map into shared memory, counted on `bar`
__device__ __forceinline__ void tma_load(unsigned dst, const TmaMap* map, int c0, int c1, int c2,
                                         unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(dst), "l"(reinterpret_cast<unsigned long long>(map)), "r"(c0), "r"(c1),
                    "r"(c2), "r"(bar) : "memory");
}

// a shared-memory matrix descriptor, 128-byte swizzle
__device__ __forceinline__ unsigned long long descriptor(unsigned addr, unsigned lbo_bytes,
                                                         unsigned sbo_bytes) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4)
         | ((unsigned long long)(lbo_bytes >> 4) << 16)
         | ((unsigned long long)(sbo_bytes >> 4) << 32) | (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory");
}

// PINGPONG: named barriers 1 and 2 (0 is __syncthreads) over the two consumer warpgroups
// (256 threads): consumer c waits on barrier 1 + c for its turn to issue, and gives the other
// its turn with an arrive on the other's barrier once its products are issued
__device__ __forceinline__ void turn_wait(int c) {
    asm volatile("bar.sync %0, 256;\n" :: "r"(1 + c) : "memory");
}
__device__ __forceinline__ void turn_give(int c) {
    asm volatile("bar.arrive %0, 256;\n" :: "r"(2 - c) : "memory");
}

// PERSIST: the two consumers meet on named barrier 3 at each tile's start, so that consumer 1's
// first turn of a tile cannot land on barrier 1 before consumer 0 has taken the last turn of
// the tile before (two arrivals of one warpgroup would complete the barrier without the other)
__device__ __forceinline__ void consumers_meet() {
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
}

// ties registers to this point of the program: the compiler may not move their reads above a
// wgmma wait, nor their writes below a wgmma issue (CUTLASS's warpgroup_fence_operand)
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}

// wgmma's accumulator operands, 8 at a time, and their placeholders, 32 at a time
#define ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), \
                "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define ACC32(i) ACC8(i), ACC8(i + 8), ACC8(i + 16), ACC8(i + 24)
#define REGS0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
              "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define REGS32 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
               "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define REGS64 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
               "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define REGS96 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
               "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WGMMA_PRED(i) "{\n.reg .pred p;\nsetp.ne.b32 p, %" #i ", 0;\n"

// S (+)= Q K^T, one k16 step: A (Q) and B (K) K-major in shared memory
#if BLOCK_N == 64
__device__ __forceinline__ void wgmma_qk(float (&d)[32], unsigned long long da,
                                         unsigned long long db, int accumulate) {
    asm volatile(WGMMA_PRED(34) "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 REGS0 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                 : ACC32(0) : "l"(da), "l"(db), "r"(accumulate));
}
#endif
#if BLOCK_N == 128
__device__ __forceinline__ void wgmma_qk(float (&d)[64], unsigned long long da,
                                         unsigned long long db, int accumulate) {
    asm volatile(WGMMA_PRED(66) "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 REGS0 ", " REGS32 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : ACC32(0), ACC32(32) : "l"(da), "l"(db), "r"(accumulate));
}
#endif

// O += P V, one k16 step: A (P, BF16) in registers, B (V) N-major in shared memory
#if HEAD_DIM == 64
__device__ __forceinline__ void wgmma_pv(float (&d)[32], const unsigned (&a)[4],
                                         unsigned long long db, int accumulate) {
    asm volatile(WGMMA_PRED(37) "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 REGS0 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : ACC32(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}
#endif
#if HEAD_DIM == 128
__device__ __forceinline__ void wgmma_pv(float (&d)[64], const unsigned (&a)[4],
                                         unsigned long long db, int accumulate) {
    asm volatile(WGMMA_PRED(69) "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 REGS0 ", " REGS32 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : ACC32(0), ACC32(32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}
#endif
#if HEAD_DIM == 256
__device__ __forceinline__ void wgmma_pv(float (&d)[128], const unsigned (&a)[4],
                                         unsigned long long db, int accumulate) {
    asm volatile(WGMMA_PRED(133) "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 REGS0 ", " REGS32 ", " REGS64 ", " REGS96 "}, {%128, %129, %130, %131}, %132,"
                 " p, 1, 1, 1;\n}\n"
                 : ACC32(0), ACC32(32), ACC32(64), ACC32(96)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}
#endif

__device__ __forceinline__ unsigned pack(float lo, float hi) {  // lo in the low half
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// S = Q K^T over the head dim, issued and committed (one group)
__device__ __forceinline__ void issue_qk(float (&s)[BLOCK_N / 2], unsigned q_tile,
                                         unsigned k_tile) {
    fence_regs(s);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < HEAD_DIM / 16; ++ks) {
        const unsigned step = (ks / 4), within = (ks % 4) * 32;
        wgmma_qk(s, descriptor(q_tile + step * Q_PANEL_BYTES + within, 16, 1024),
                 descriptor(k_tile + step * KV_PANEL_BYTES + within, 16, 1024), ks > 0);
    }
    wgmma_commit();
    fence_regs(s);
}

// O += P V over the tile's keys, issued and committed (one group)
__device__ __forceinline__ void issue_pv(float (&o)[HEAD_DIM / 2],
                                         const unsigned (&p)[BLOCK_N / 16][4], unsigned v_tile) {
    fence_regs(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk)
        wgmma_pv(o, p[kk], descriptor(v_tile + kk * 2048, KV_PANEL_BYTES, 1024), 1);
    wgmma_commit();
    fence_regs(o);
}

// the online softmax over one tile of S (in place: S becomes exp2 of the scaled logits less the
// running maximum), the running maximum and this thread's share of the row sums; alpha is what
// O must be multiplied by (the old maximum against the new)
// 2^x on the SFU alone (MUFU.EX2): exp2f adds a range test and two multiplies per call to keep
// results under 2^-126 (FP32 denormals); such a P is below BF16's smallest normal and far under
// the check's bound, so it is flushed to 0
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// MASK: 0 none, 1 every key tested, 2 as the runtime flag `mask` says. With the flag alone the
// compiler kept every key's comparisons and selects as predicated code on the unmasked tiles
// too; softmax_tile picks 0 or 1, except at D = 256, where two copies of the softmax spill and
// the flag stays (notes/attention.md)
template <int MASK>
__device__ __forceinline__ void softmax(float (&s)[BLOCK_N / 2], float (&m_run)[2],
                                        float (&l_run)[2], float (&alpha)[2], int n0,
                                        bool mask, const int (&rows)[2], int S_kv, int causal,
                                        int shift, float scale_log2, int t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        // the row's maximum and sum in four independent chains each (16 dependent steps, not
        // 64): a serial chain's latency is what a warp waits on between its exponentials
        float mx4[4] = {NEG_INF, NEG_INF, NEG_INF, NEG_INF};
#pragma unroll
        for (int nb = 0; nb < BLOCK_N / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float& x = s[4 * nb + 2 * half + e];
                if (MASK == 1 || (MASK == 2 && mask)) {
                    const int key = n0 + nb * 8 + 2 * t + e;
                    if (key >= S_kv || (causal && key > rows[half] + shift)) x = NEG_INF;
                }
                mx4[2 * (nb % 2) + e] = fmaxf(mx4[2 * (nb % 2) + e], x);
            }
        }
        float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_run[half], mx);
        // a row that has seen no key yet subtracts 0, not -inf (exp2(-inf + inf) = NaN)
        const float sub = m_new == NEG_INF ? 0.f : m_new * scale_log2;
        alpha[half] = ex2(m_run[half] * scale_log2 - sub);
        m_run[half] = m_new;
        float sum4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int nb = 0; nb < BLOCK_N / 8; ++nb) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float& x = s[4 * nb + 2 * half + e];
                x = ex2(fmaf(x, scale_log2, -sub));
                sum4[2 * (nb % 2) + e] += x;
            }
        }
        l_run[half] = l_run[half] * alpha[half] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
    }
}

__device__ __forceinline__ void softmax_tile(float (&s)[BLOCK_N / 2], float (&m_run)[2],
                                             float (&l_run)[2], float (&alpha)[2], int n0,
                                             bool mask, const int (&rows)[2], int S_kv,
                                             int causal, int shift, float scale_log2, int t) {
#if HEAD_DIM == 256
    softmax<2>(s, m_run, l_run, alpha, n0, mask, rows, S_kv, causal, shift, scale_log2, t);
#else
    if (mask)
        softmax<1>(s, m_run, l_run, alpha, n0, true, rows, S_kv, causal, shift, scale_log2, t);
    else
        softmax<0>(s, m_run, l_run, alpha, n0, false, rows, S_kv, causal, shift, scale_log2, t);
#endif
}

__device__ __forceinline__ void to_p(unsigned (&p)[BLOCK_N / 16][4], const float (&s)[BLOCK_N / 2]) {
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
        p[kk][0] = pack(s[8 * kk], s[8 * kk + 1]);
        p[kk][1] = pack(s[8 * kk + 2], s[8 * kk + 3]);
        p[kk][2] = pack(s[8 * kk + 4], s[8 * kk + 5]);
        p[kk][3] = pack(s[8 * kk + 6], s[8 * kk + 7]);
    }
}

extern "C" __global__ void __launch_bounds__(384, 1)
attention_wgmma(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
                float* __restrict__ lse, int B, int H, int H_kv, int S_q, int S_kv, int D,
                float scale, int causal, const __grid_constant__ TmaMap tmap_q,
                const __grid_constant__ TmaMap tmap_k, const __grid_constant__ TmaMap tmap_v) {
    extern __shared__ __align__(1024) unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long bars[1 + PERSIST + 4 * STAGES];
    const unsigned base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    const unsigned sq = base, sk = base + Q_BYTES, sv = sk + STAGES * KV_BYTES;
    const unsigned q_full = smem_u32(&bars[0]);
    // K and V each a ring of STAGES with its own full and empty barriers: a stage of K is free
    // once S = Q K^T has landed, one of V once O += P V has, a tile apart
    const unsigned k_full = q_full + 8, v_full = k_full + 8 * STAGES;
    const unsigned k_empty = v_full + 8 * STAGES, v_empty = k_empty + 8 * STAGES;
    // PERSIST: Q of a block's next work tile loads once its consumers have read the last one
    const unsigned q_empty = v_empty + 8 * STAGES;

    // work tiles (query tile, head, batch) in a line, query tiles fastest, each head's from its
    // heaviest (causal: it sees every key before it) to its lightest, so that the launch ends on
    // light ones; a block takes one (its own index), or with PERSIST every gridDim.x-th from its
    // index: blocks running side by side then share their heads' K and V in L2 as before
#if PERSIST
    const int MB = (S_q + BLOCK_M - 1) / BLOCK_M;
#define WORK_TILES for (int L = blockIdx.x; L < MB * H * B; L += gridDim.x)
#define WORK_COORDS const int m0 = (MB - 1 - L % MB) * BLOCK_M, h = (L / MB) % H, b = L / (MB * H);
#else  // the block's own tile, the grid (query tiles, heads, batch)
#define WORK_TILES
#define WORK_COORDS \
    const int m0 = (gridDim.x - 1 - blockIdx.x) * BLOCK_M, h = blockIdx.y, b = blockIdx.z;
#endif
// a work tile's query rows from m0, its head and batch, its heads of K and V, and its tiles of
// keys
#define WORK_TILE                                                                        \
    WORK_COORDS                                                                          \
    const int hk = h / (H / H_kv);                                                       \
    int n_end = S_kv; /* keys this tile's rows can see at most */                       \
    if (causal) n_end = max(0, min(S_kv, m0 + BLOCK_M + shift));                         \
    const int tiles = (n_end + BLOCK_N - 1) / BLOCK_N;
    const int shift = S_kv - S_q;  // bottom-right: row i sees keys j <= i + shift
#if PERSIST  // each work tile in the producer's and the consumers' loops
#define LOOP_TILE WORK_TILE
#else        // the one here
#define LOOP_TILE
    WORK_TILE
#endif
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        if (PERSIST) mbar_init(q_empty, 8);  // lane 0 of each consumer warp
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(k_full + 8 * s, 1);
            mbar_init(v_full + 8 * s, 1);
            mbar_init(k_empty + 8 * s, 8);  // lane 0 of each consumer warp
            mbar_init(v_empty + 8 * s, 8);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {  // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            ring_t kt = 0, done = 0;  // key tiles and work tiles loaded before this one
            WORK_TILES {
                LOOP_TILE
                if (done > 0) mbar_wait(q_empty, (done - 1) & 1);
                mbar_expect_tx(q_full, Q_BYTES);
                for (int w = 0; w < 2; ++w)
                    for (int p = 0; p < PANELS; ++p)
                        tma_load(sq + (w * PANELS + p) * Q_PANEL_BYTES, &tmap_q, p * 64,
                                 m0 + 64 * w, b * H + h, q_full);
                for (int j = 0; j < tiles; ++j) {  // the rings count every key tile loaded
                    const ring_t it = kt + j, s = it % STAGES;
                    const unsigned parity = ((it / STAGES) & 1) ^ 1;
                    if (it >= STAGES) mbar_wait(k_empty + 8 * s, parity);
                    mbar_expect_tx(k_full + 8 * s, KV_BYTES);
                    for (int p = 0; p < PANELS; ++p)
                        tma_load(sk + s * KV_BYTES + p * KV_PANEL_BYTES, &tmap_k, p * 64,
                                 j * BLOCK_N, b * H_kv + hk, k_full + 8 * s);
                    if (it >= STAGES) mbar_wait(v_empty + 8 * s, parity);
                    mbar_expect_tx(v_full + 8 * s, KV_BYTES);
                    for (int p = 0; p < PANELS; ++p)
                        tma_load(sv + s * KV_BYTES + p * KV_PANEL_BYTES, &tmap_v, p * 64,
                                 j * BLOCK_N, b * H_kv + hk, v_full + 8 * s);
                }
                kt += tiles;
                ++done;
            }
        }
        return;
    }

    // a consumer: 64 rows
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const unsigned q_tile = sq + cw * PANELS * Q_PANEL_BYTES;
    const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = exp2(x log2 e)
    ring_t kt = 0, done = 0;  // key tiles and work tiles consumed before this one
    WORK_TILES {
    LOOP_TILE
    const int wg_row0 = m0 + 64 * cw;
    const int rows[2] = {wg_row0 + 16 * warp + g, wg_row0 + 16 * warp + g + 8};
    // a tile needs its mask where it reaches past S_kv or, causal, past this warpgroup's
    // first row's diagonal
    const int unmasked_end = causal ? min(S_kv, wg_row0 + shift + 1) : S_kv;

    float o_acc[HEAD_DIM / 2];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 2; ++i) o_acc[i] = 0.f;
    float s_acc[BLOCK_N / 2];
    unsigned p_frag[BLOCK_N / 16][4];
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f}, alpha[2];

    if (PERSIST) consumers_meet();
    mbar_wait(q_full, done & 1);
    if (tiles > 0) {
        const ring_t s0 = kt % STAGES;
        mbar_wait(k_full + 8 * s0, (kt / STAGES) & 1);
        issue_qk(s_acc, q_tile, sk + s0 * KV_BYTES);
        wgmma_wait<0>();
        fence_regs(s_acc);
        mbar_arrive_if(k_empty + 8 * s0, lane == 0);  // K of tile 0 is read
        softmax_tile(s_acc, m_run, l_run, alpha, 0, BLOCK_N > unmasked_end, rows, S_kv, causal,
                     shift, scale_log2, t);
        to_p(p_frag, s_acc);
        if (PINGPONG && cw == 1) turn_give(cw);  // consumer 0 issues first
        for (int j = 1; j < tiles; ++j) {
            const ring_t it = kt + j, s = it % STAGES, sp = (it - 1) % STAGES;
            if (PINGPONG) turn_wait(cw);
            mbar_wait(k_full + 8 * s, (it / STAGES) & 1);
            issue_qk(s_acc, q_tile, sk + s * KV_BYTES);
            mbar_wait(v_full + 8 * sp, ((it - 1) / STAGES) & 1);
            issue_pv(o_acc, p_frag, sv + sp * KV_BYTES);
            if (PINGPONG) turn_give(cw);  // its softmax now runs beside the other's products
            wgmma_wait<1>();  // S of tile j has landed; P V of tile j - 1 runs on
            fence_regs(s_acc);
            mbar_arrive_if(k_empty + 8 * s, lane == 0);  // K of tile j is read
            softmax_tile(s_acc, m_run, l_run, alpha, j * BLOCK_N,
                         (j + 1) * BLOCK_N > unmasked_end, rows, S_kv, causal, shift,
                         scale_log2, t);
            wgmma_wait<0>();
            fence_regs(o_acc);
            mbar_arrive_if(v_empty + 8 * sp, lane == 0);  // V of tile j - 1 is read
#pragma unroll
            for (int nb = 0; nb < HEAD_DIM / 8; ++nb) {
                o_acc[4 * nb] *= alpha[0]; o_acc[4 * nb + 1] *= alpha[0];
                o_acc[4 * nb + 2] *= alpha[1]; o_acc[4 * nb + 3] *= alpha[1];
            }
            to_p(p_frag, s_acc);
        }
        if (PERSIST) mbar_arrive_if(q_empty, lane == 0);  // S of the last key tile is in: Q read
        // consumer 1 gave one turn more than consumer 0 took: the last one, taken here, so
        // that no arrival is left on a barrier when the block ends
        if (PINGPONG && cw == 0) turn_wait(cw);
        const ring_t il = kt + tiles - 1, sl = il % STAGES;
        mbar_wait(v_full + 8 * sl, (il / STAGES) & 1);
        issue_pv(o_acc, p_frag, sv + sl * KV_BYTES);
        wgmma_wait<0>();
        fence_regs(o_acc);
        if (PERSIST) mbar_arrive_if(v_empty + 8 * sl, lane == 0);  // the next tile's to fill
    } else if (PERSIST) {
        mbar_arrive_if(q_empty, lane == 0);  // no key: Q is not read
    }

    // the row sums over the quad, then O / l and the log-sum-exp
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float l = l_run[half];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = rows[half];
        if (row >= S_q) continue;
        const float inv = l > 0.f ? 1.f / l : 0.f;  // a row that saw no key writes 0
        __nv_bfloat16* orow = o + (((size_t)b * H + h) * S_q + row) * HEAD_DIM;
#pragma unroll
        for (int nb = 0; nb < HEAD_DIM / 8; ++nb) {
            const unsigned w = pack(o_acc[4 * nb + 2 * half] * inv,
                                    o_acc[4 * nb + 2 * half + 1] * inv);
            *reinterpret_cast<unsigned*>(orow + nb * 8 + 2 * t) = w;
        }
        if (lse != nullptr && t == 0)
            lse[((size_t)b * H + h) * S_q + row] =
                l > 0.f ? m_run[half] * scale + logf(l) : NEG_INF;
    }
    kt += tiles;
    ++done;
    }  // WORK_TILES
}
