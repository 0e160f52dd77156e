/* harness
entry = "wgmma_cluster_bf16"
summary = "A fast.cu-style Hopper GEMM in its own signature: BF16 A (M x K) and B stored N x K (C = A B^T), both K-major and loaded by TMA into 128-byte-swizzled stages through tensor maps passed as __grid_constant__ parameters, wgmma.m64n128k16 from shared-memory descriptors with FP32 accumulators, persistent clusters of two blocks stacked in M that walk a Hilbert-curve tile schedule the host writes into a workspace, and share their B tile by TMA multicast (variant nomc: each block loads its own B; the cluster barriers stay)."
predicted = "A 128 x 128 tile reads 1.5x the shared-memory bytes per FLOP of 15-19's 128 x 256 (notes/15_wgmma_tma.md: 15's m128n128 ran 78.9% of cuBLAS), each consumer warpgroup drains its wgmma group every k tile before releasing the stage (the other warpgroup's wgmmas keep the tensor cores busy meanwhile), and C is stored from registers with the tensor cores idle: ~70-80% of cuBLAS (FP32 C) at 4096; multicast of B within 2% of nomc (18 found no gain from it)."
precision = "bf16"
c_type = "fp32"
layout_b = "col"
min_arch = "sm_90a"
representative = "mc"
signature = ["M", "N", "K", "tmap_A", "tmap_B", "C", { name = "workspace", bytes = "4 * cdiv(M, CLUSTER * BM) * cdiv(N, BN)", fill = "host" }, { host = "tiles", type = "i32" }]
block = ["128 * CW + 32"]
grid = ["CLUSTER * min(cdiv(M, CLUSTER * BM) * cdiv(N, BN), SMS // CLUSTER)"]
dynamic_smem_bytes = "1024 + STAGES * (BM + BN) * BK * 2 + 16 * STAGES"
constraints = ["K % 8 == 0", "BK == 64", "BN == 128", "BM == 64 * CW", "CW >= 1", "CW <= 2", "STAGES >= 2", "CLUSTER >= 1", "CLUSTER <= 4", "BN % (8 * CLUSTER) == 0", "MC >= 0", "MC <= 1"]
[tmaps.A]   # A (M x K row-major): boxes of BK x BM, rows of 128 bytes
rank = 2
shape = ["K", "M"]
strides = ["K"]
box = ["BK", "BM"]
swizzle = "128B"
[tmaps.B]   # B stored N x K: a block's share of the BN rows (BN / CLUSTER with multicast)
rank = 2
shape = ["K", "N"]
strides = ["K"]
box = ["BK", "BN // (1 + MC * (CLUSTER - 1))"]
swizzle = "128B"
[params]
BM = 128
BN = 128
BK = 64
CW = 2
STAGES = 4
CLUSTER = 2
MC = 1
[variants]
mc = { }
nomc = { MC = 0 }
*/
// Issue 22's third example: the kernel shape of pranjalssh/fast.cu's matmul kernels (its own
// signature, its own tensor maps, clusters, a host-built tile schedule), written here.
//
// Block: CW consumer warpgroups (64 rows of the BM x BN tile each, one wgmma.m64n128k16 per k16
// step, 64 FP32 accumulators per thread) and one producer warp whose lane 0 issues the TMA copies
// into a STAGES-deep ring; per stage a full mbarrier (the producer's arrival + the stage's bytes)
// and an empty one (lane 0 of every consumer warp, of every block of the cluster with MC 1).
// Clusters of CLUSTER blocks stacked in M: schedule entry u (read from the workspace) names a unit
// of CLUSTER x 1 tiles, entry = unit row * cdiv(N, BN) + unit column; cluster c takes entries
// c, c + clusters, ..., so every block of a cluster walks the same units and the same k tiles.
// MC 1: block r copies rows r * BN / CLUSTER .. of the unit's B tile and multicasts them into
// every block of the cluster; each block copies its own A. A block whose tile lies wholly past M
// (tile rows not a multiple of CLUSTER) copies no A, still copies and receives B, stores nothing.
// Cluster barriers after the mbarriers are initialised (peers arrive on them and multicast into
// them) and before exit (no block leaves while a peer may still arrive on its barriers).
//
// Shared-memory matrix descriptors (PTX ISA, "Matrix Descriptor Format"): A and B are both
// K-major with a 128-byte swizzle, 8-row core groups of 128-byte rows: start address >> 4 in bits
// 0-13 (the address masked to 18 bits first: in a cluster a block's shared::cta addresses carry
// its rank above them, notes/18_wgmma_cluster.md), LBO 1 (unused by swizzled K-major layouts),
// SBO 1024 >> 4 in bits 32-45, swizzle mode 1 (128 B) in bits 62-63; a k16 step moves the start
// address 32 bytes along the swizzled row. No transpose flag: B is K-major.
//
// CUtensorMap is declared here: <cuda.h> does not compile under NVRTC (it includes <stdlib.h>,
// which NVRTC does not have). The layout is the driver's: 128 bytes, 64-byte aligned.

#include <cstdint>

struct alignas(64) CUtensorMap_st {
    unsigned long long opaque[16];
};
typedef CUtensorMap_st CUtensorMap;

namespace {

// enumerators, not constexpr variables: NVRTC emits those as (unused) device globals
enum : int {
    kWarpgroup = 128,
    kThreads = kWarpgroup * CW + 32,
    kBRows = BN / (1 + MC * (CLUSTER - 1)),  // B rows this block copies per k tile
    kAcc = BN / 2,                           // accumulators per thread of an m64nBN wgmma
};
enum : uint32_t {
    kABytes = BM * BK * 2,
    kBBytes = BN * BK * 2,
    kStageBytes = kABytes + kBBytes,
    kEmptyCount = 4 * CW * (MC ? CLUSTER : 1),
};

static_assert(BK == 64, "BK must be 64: one 128-byte swizzle row of bf16 per tile row");
static_assert(BN == 128, "the wgmma below is m64n128k16");
static_assert(BM == 64 * CW, "each consumer warpgroup owns 64 rows of the tile");
static_assert(kBRows % 8 == 0, "a block's B rows must fill whole 1024-byte swizzle atoms");

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_id() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_count() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
    return r;
}

// Every thread of every block of the cluster; release / acquire orders the mbarrier
// initialisation (and, at exit, every remote arrival) across the cluster.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

// Wait until the phase of parity `parity` has completed (a fresh barrier counts its phase of
// parity 1 as completed, so a producer's first pass through the ring does not wait).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

// The same with cluster scope: the empty barriers also count the peer blocks' consumers.
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n\t.reg .pred p;\n\t"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
            "selp.u32 %0, 1, 0, p;\n\t}"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

__device__ __forceinline__ void mbar_arrive_local(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Arrive on the barrier at the same offset in block `rank` of the cluster (itself included).
// The default semantics (release at CTA scope), as CUTLASS's ClusterBarrier and 18 use: the
// stage was read by wgmma, complete at wait_group, and .release.cluster would put a
// MEMBAR.ALL.GPU before every arrival (waiting for the previous tile's C stores).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
    asm volatile(
        "{\n\t.reg .b32 remote;\n\t"
        "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(bar),
        "r"(rank)
        : "memory");
}

// A 2-D box at (x = k, y = row) of the map into this block's shared memory.
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, int x, int y,
                                         uint32_t bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar)
        : "memory");
}

// The same box into the same offset of every block in `mask`, completing bytes on each block's
// barrier at the offset of `bar`.
__device__ __forceinline__ void tma_load_multicast(uint32_t dst, const CUtensorMap* map, int x,
                                                   int y, uint32_t bar, uint16_t mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(bar), "h"(mask)
        : "memory");
}

// K-major operand, 128-byte swizzle: LBO 1 (unused), SBO 1024 bytes, mode 1 in bits 62-63.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) |
           (1ull << 62);
}

__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_wait_all() {
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Keeps the compiler from moving accumulator reads or writes across a wgmma fence or wait.
__device__ __forceinline__ void fence_acc(float (&d)[kAcc]) {
#pragma unroll
    for (int i = 0; i < kAcc; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D (64 x 128, FP32) += A (64 x 16, from da) * B^T (16 x 128 from the 128 x 16 K-major tile at db).
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[kAcc], uint64_t da, uint64_t db) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %66, 0;\n\t"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "%64, %65, p, 1, 1, 0, 0;\n\t}"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
          "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]),
          "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),
          "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
          "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]),
          "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),
          "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]),
          "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
          "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

}  // namespace

extern "C" __global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(kThreads, 1)
wgmma_cluster_bf16(int M, int N, int K, const __grid_constant__ CUtensorMap tmap_A,
                   const __grid_constant__ CUtensorMap tmap_B, float* C, const int* schedule,
                   int tiles) {
    extern __shared__ uint8_t smem_raw[];
    // TMA's 128-byte swizzle and the wgmma descriptors assume 1024-byte-aligned stages
    const uint32_t base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const uint32_t full = base + STAGES * kStageBytes;  // STAGES mbarriers, then STAGES empty
    const uint32_t empty = full + 8 * STAGES;

    const int tid = threadIdx.x;
    const uint32_t rank = cluster_rank();
    const int tiles_n = (N + BN - 1) / BN;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full + 8 * s, 1);
            mbar_init(empty + 8 * s, kEmptyCount);
        }
        // visible to the copy engine and to the peer blocks that arrive and multicast here
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync();

    if (tid >= kWarpgroup * CW) {
        // producer warp: lane 0 issues every copy
        if (tid == kWarpgroup * CW) {
            int stage = 0;
            uint32_t phase = 0;
            for (int u = cluster_id(); u < tiles; u += cluster_count()) {
                const int unit = schedule[u];
                const int m0 = ((unit / tiles_n) * CLUSTER + rank) * BM;
                const int n0 = (unit % tiles_n) * BN;
                const bool has_a = m0 < M;  // a tile wholly past M needs no A
                for (int kt = 0; kt < ktiles; ++kt) {
                    const uint32_t fb = full + 8 * stage;
                    if (MC)
                        mbar_wait_cluster(empty + 8 * stage, phase ^ 1);
                    else
                        mbar_wait(empty + 8 * stage, phase ^ 1);
                    // the whole B tile arrives here either way (with MC, partly from peers)
                    mbar_arrive_expect_tx(fb, (has_a ? kABytes : 0) + kBBytes);
                    const uint32_t sa = base + stage * kStageBytes;
                    if (has_a) tma_load(sa, &tmap_A, kt * BK, m0, fb);
                    if (MC) {
                        tma_load_multicast(sa + kABytes + rank * kBRows * 128, &tmap_B, kt * BK,
                                           n0 + rank * kBRows, fb, (1u << CLUSTER) - 1);
                    } else {
                        tma_load(sa + kABytes, &tmap_B, kt * BK, n0, fb);
                    }
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
        }
        __syncwarp();
    } else {
        const int wg = tid / kWarpgroup;       // consumer warpgroup: rows 64 wg .. of the tile
        const int warp = (tid / 32) % 4;       // warp of the warpgroup: rows 16 warp ..
        const int lane = tid % 32;
        const uint32_t a_slab = wg * 64 * 128;  // this warpgroup's 64 A rows in a stage
        int stage = 0;
        uint32_t phase = 0;
        float acc[kAcc];
        for (int u = cluster_id(); u < tiles; u += cluster_count()) {
            const int unit = schedule[u];
            const int m0 = ((unit / tiles_n) * CLUSTER + rank) * BM;
            const int n0 = (unit % tiles_n) * BN;
#pragma unroll
            for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
            for (int kt = 0; kt < ktiles; ++kt) {
                mbar_wait(full + 8 * stage, phase);
                const uint32_t sa = base + stage * kStageBytes;
                const uint64_t da = smem_desc(sa + a_slab);
                const uint64_t db = smem_desc(sa + kABytes);
                wgmma_fence();  // the accumulators were written by other instructions
                fence_acc(acc);
#pragma unroll
                for (int ks = 0; ks < BK / 16; ++ks) {
                    // + 32 bytes (2 descriptor units) per k16 step along the swizzled rows
                    wgmma_m64n128k16(acc, da + 2 * ks, db + 2 * ks);
                }
                wgmma_commit();
                wgmma_wait_all();
                fence_acc(acc);
                // the stage has been read: release it to the producer of every block that
                // writes into it (with MC, every block of the cluster multicasts into it)
                if (lane == 0) {
                    if (MC) {
#pragma unroll
                        for (int r = 0; r < CLUSTER; ++r) mbar_arrive_cluster(empty + 8 * stage, r);
                    } else {
                        mbar_arrive_local(empty + 8 * stage);
                    }
                }
                if (++stage == STAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            // thread (warp w, lane 4 g + q) holds acc[4 i + 2 h + v] = C[16 w + g + 8 h][8 i + 2 q + v]
            // of its warpgroup's 64 x 128 slab (PTX ISA, wgmma .m64nNk16 accumulator fragments)
            const int row0 = m0 + wg * 64 + warp * 16 + lane / 4;
            const int col0 = n0 + 2 * (lane % 4);
            const bool pairs = (N % 2) == 0;  // 8-byte aligned float2 stores
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + 8 * h;
                if (row >= M) continue;
                float* crow = C + static_cast<size_t>(row) * N;
#pragma unroll
                for (int i = 0; i < kAcc / 4; ++i) {
                    const int col = col0 + 8 * i;
                    const float x = acc[4 * i + 2 * h], y = acc[4 * i + 2 * h + 1];
                    if (pairs && col + 1 < N) {
                        *reinterpret_cast<float2*>(crow + col) = make_float2(x, y);
                    } else {
                        if (col < N) crow[col] = x;
                        if (col + 1 < N) crow[col + 1] = y;
                    }
                }
            }
        }
    }
    // no block leaves while a peer may still arrive on its barriers or multicast into it
    cluster_sync();
}
