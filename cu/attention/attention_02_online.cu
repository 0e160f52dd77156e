/* harness
kind = "attention"
entry = "attention_online"
summary = "Against 01: FlashAttention-2's tiled online softmax. A block takes 64 query rows (a warp 16) and walks the keys in tiles of 64: S = Q K^T and O += P V on tensor cores (mma.sync m16n8k16 BF16, FP32 accumulate) fed by ldmatrix from XOR-swizzled shared memory, the next K and V tiles loaded by cp.async while this one is computed (double buffering), the running maximum rescaling O and the row sum; P is rounded to BF16 once, in registers (the S accumulators become the A fragments). K and V are read once per 64 query rows instead of once per row."
predicted = "mma.sync's ceiling on an H100 is ~650 TFLOP/s (65% of the BF16 peak; wgmma needs sm_90a); this kernel issues its exp2 between the two products with no overlap (FA2's schedule), and at D = 128 the exponentials alone take half the tensor cores' time (napkin), so ~250-350 TFLOP/s at S = 4096, D = 128 non-causal: 40-55% of cuDNN's ~600. On an A100 ~150-190 (FA2's own 2023 figures for this schedule). Causal: the tiles past the diagonal are skipped, the same rate per unmasked pair within 10% at S >= 2048."
min_arch = "sm_80"
precision = "bf16"
layout = "bhsd"
lse = true
causal = true
p_type = "input"
head_dims = [64, 128, 256]
block = ["128"]
grid = ["cdiv(S_q, 64)", "H", "B"]
dynamic_smem_bytes = "640 * HEAD_DIM"
constraints = ["D == HEAD_DIM"]
representative = "d128"
baseline = "cudnn_sdpa"

[params]
HEAD_DIM = 128
MIN_BLOCKS = 0

[variants]
d64 = { HEAD_DIM = 64, MIN_BLOCKS = 1 }
d128 = { HEAD_DIM = 128 }
d256 = { HEAD_DIM = 256 }
*/
// The attention ABI (docs/attention.md), BHSD. Causal mask bottom-right (j <= i + S_kv - S_q);
// a query that sees no key writes 0 and lse = -inf.
//
// Fragments (PTX ISA, mma.m16n8k16 with .bf16): lane = 4 * group + t. A 16x16 (rows x k):
// a0 (group, 2t..2t+1), a1 (group+8, ...), a2 (group, 2t+8..), a3 (group+8, 2t+8..). B 16x8
// (k x n), "col": b0 (k 2t..2t+1, n group), b1 (k 2t+8.., n group). C 16x8: c0 c1 (group,
// 2t..2t+1), c2 c3 (group+8, ...). So the S accumulators of two neighbouring 8-key blocks are
// exactly the A fragment of P for those 16 keys: P never leaves registers.
// Shared memory, per 64 x HEAD_DIM BF16 tile: row r's 16-byte chunk c is stored at chunk
// c ^ (r % 8), so the 8 rows an ldmatrix phase reads fall in 8 different bank groups.
#include <cuda_bf16.h>

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#define BLOCK_M 64
#define BLOCK_N 64
#define WARPS 4
#define CHUNKS (HEAD_DIM / 8)  // 16-byte chunks per row
#define TILE (BLOCK_M * HEAD_DIM)
#define NEG_INF (__int_as_float(0xff800000))

// MIN_BLOCKS (0: none; d64: 1): without a floor, ptxas 13.0 squeezes d64 into 128 registers
// for 4 blocks an SM and spills 12 bytes; a floor of 1 block keeps 135-158 (3 blocks), no spill.
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0
#endif
#if MIN_BLOCKS > 0
#define BOUNDS __launch_bounds__(WARPS * 32, MIN_BLOCKS)
#else
#define BOUNDS __launch_bounds__(WARPS * 32)
#endif

static_assert(HEAD_DIM % 16 == 0 && HEAD_DIM >= 64, "HEAD_DIM: a multiple of 16, >= 64");

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ int swz(int row, int col) {  // element offset of (row, col)
    return row * HEAD_DIM + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// One 64 x HEAD_DIM tile from rows [row0, row0 + 64) of a [rows][HEAD_DIM] matrix; rows at or
// past `rows` are filled with zeros (cp.async with source size 0 reads nothing).
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* src,
                                          int row0, int rows) {
    for (int idx = threadIdx.x; idx < BLOCK_M * CHUNKS; idx += WARPS * 32) {
        const int r = idx / CHUNKS, c = idx % CHUNKS;
        const bool valid = row0 + r < rows;
        const __nv_bfloat16* g = valid ? src + (size_t)(row0 + r) * HEAD_DIM + c * 8 : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::
                     "r"(smem_addr(tile + swz(r, c * 8))), "l"(g), "r"(valid ? 16 : 0));
    }
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void wait_groups() {
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                    unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack(float lo, float hi) {  // lo in the low half
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

extern "C" __global__ void BOUNDS
attention_online(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                 const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
                 float* __restrict__ lse, int B, int H, int H_kv, int S_q, int S_kv, int D,
                 float scale, int causal) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __nv_bfloat16* sq = reinterpret_cast<__nv_bfloat16*>(smem_raw);
    __nv_bfloat16* sk = sq + TILE;        // two buffers
    __nv_bfloat16* sv = sk + 2 * TILE;    // two buffers
    const int m0 = blockIdx.x * BLOCK_M, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (H / H_kv);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = lane / 4, t = lane % 4;
    const __nv_bfloat16* qb = q + ((size_t)b * H + h) * S_q * HEAD_DIM;
    const __nv_bfloat16* kb = k + ((size_t)b * H_kv + hk) * S_kv * HEAD_DIM;
    const __nv_bfloat16* vb = v + ((size_t)b * H_kv + hk) * S_kv * HEAD_DIM;
    const int shift = S_kv - S_q;  // bottom-right: row i sees keys j <= i + shift
    // keys this block's rows can see at most: past them every tile is masked whole
    int n_end = S_kv;
    if (causal) n_end = max(0, min(S_kv, m0 + BLOCK_M + shift));
    const int tiles = (n_end + BLOCK_N - 1) / BLOCK_N;
    const float scale_log2 = scale * 1.4426950408889634f;  // exp(x) = exp2(x log2 e)

    float acc[HEAD_DIM / 8][4];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    float m_run[2] = {NEG_INF, NEG_INF}, l_run[2] = {0.f, 0.f};
    const int row_of[2] = {m0 + warp * 16 + group, m0 + warp * 16 + group + 8};

    load_tile(sq, qb, m0, S_q);
    if (tiles > 0) {
        load_tile(sk, kb, 0, S_kv);
        load_tile(sv, vb, 0, S_kv);
    }
    commit();

    for (int tile = 0; tile < tiles; ++tile) {
        const int buf = tile & 1, n0 = tile * BLOCK_N;
        if (tile + 1 < tiles) {  // the next tile streams in while this one is computed
            load_tile(sk + (buf ^ 1) * TILE, kb, n0 + BLOCK_N, S_kv);
            load_tile(sv + (buf ^ 1) * TILE, vb, n0 + BLOCK_N, S_kv);
        }
        commit();
        wait_groups<1>();
        __syncthreads();
        const __nv_bfloat16* kt = sk + buf * TILE;
        const __nv_bfloat16* vt = sv + buf * TILE;

        // S = Q K^T for this warp's 16 rows and the tile's 64 keys
        float s[BLOCK_N / 8][4];
#pragma unroll
        for (int i = 0; i < BLOCK_N / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < HEAD_DIM / 16; ++kc) {
            unsigned a[4];
            ldsm_x4(a, sq + swz(warp * 16 + lane % 16, kc * 16 + (lane / 16) * 8));
#pragma unroll
            for (int nb = 0; nb < BLOCK_N / 16; ++nb) {
                unsigned r[4];
                ldsm_x4(r, kt + swz(nb * 16 + lane % 8 + (lane / 16) * 8,
                                    kc * 16 + ((lane / 8) % 2) * 8));
                mma(s[2 * nb], a, r[0], r[1]);
                mma(s[2 * nb + 1], a, r[2], r[3]);
            }
        }

        // mask keys past S_kv and past the diagonal; the online softmax over this tile
        float alpha[2];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            float mx = NEG_INF;
#pragma unroll
            for (int nb = 0; nb < BLOCK_N / 8; ++nb) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = n0 + nb * 8 + 2 * t + e;
                    float& x = s[nb][2 * half + e];
                    if (key >= S_kv || (causal && key > row_of[half] + shift)) x = NEG_INF;
                    mx = fmaxf(mx, x);
                }
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_run[half], mx);
            // a row that has seen no key yet subtracts 0, not -inf (exp2(-inf + inf) = NaN)
            const float sub = m_new == NEG_INF ? 0.f : m_new * scale_log2;
            alpha[half] = exp2f(m_run[half] * scale_log2 - sub);
            m_run[half] = m_new;
            float sum = 0.f;
#pragma unroll
            for (int nb = 0; nb < BLOCK_N / 8; ++nb) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    float& x = s[nb][2 * half + e];
                    x = exp2f(fmaf(x, scale_log2, -sub));
                    sum += x;
                }
            }
            l_run[half] = l_run[half] * alpha[half] + sum;  // this thread's share of the row
        }
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 8; ++i) {
            acc[i][0] *= alpha[0]; acc[i][1] *= alpha[0];
            acc[i][2] *= alpha[1]; acc[i][3] *= alpha[1];
        }

        // O += P V: P rounded to BF16 in registers, V through ldmatrix.trans
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            const unsigned a[4] = {pack(s[2 * kk][0], s[2 * kk][1]),
                                   pack(s[2 * kk][2], s[2 * kk][3]),
                                   pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int db = 0; db < HEAD_DIM / 16; ++db) {
                unsigned r[4];
                ldsm_x4_trans(r, vt + swz(kk * 16 + lane % 8 + ((lane / 8) % 2) * 8,
                                          db * 16 + (lane / 16) * 8));
                mma(acc[2 * db], a, r[0], r[1]);
                mma(acc[2 * db + 1], a, r[2], r[3]);
            }
        }
        __syncthreads();  // every warp is done with this buffer before it is refilled
    }
    wait_groups<0>();

    // the row sums over the quad, then O / l and the log-sum-exp
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        float l = l_run[half];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = row_of[half];
        if (row >= S_q) continue;
        const float inv = l > 0.f ? 1.f / l : 0.f;  // a row that saw no key writes 0
        __nv_bfloat16* orow = o + (((size_t)b * H + h) * S_q + row) * HEAD_DIM;
#pragma unroll
        for (int nb = 0; nb < HEAD_DIM / 8; ++nb) {
            const unsigned w = pack(acc[nb][2 * half] * inv, acc[nb][2 * half + 1] * inv);
            *reinterpret_cast<unsigned*>(orow + nb * 8 + 2 * t) = w;
        }
        if (lse != nullptr && t == 0)
            lse[((size_t)b * H + h) * S_q + row] =
                l > 0.f ? m_run[half] * scale + logf(l) : NEG_INF;
    }
}
