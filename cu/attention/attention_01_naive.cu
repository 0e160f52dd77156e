/* harness
kind = "attention"
entry = "attention_naive"
summary = "The readable reference implementation: one block per query row, three passes over the keys (logits and their max into shared memory; exp and their sum; the output as a weighted sum of V rows), everything in FP32, P never rounded."
predicted = "Far from any ceiling: each block reads its K and V heads whole from L2 (S_kv * D * 4 bytes per row), K by rows one thread each (uncoalesced), so ~1-3 TFLOP/s at S = 4096, D = 128 on an H100, 0.3-1% of cuDNN. The error is FP32's only (p_type = fp32): well under the bound, the output rounding dominating."
min_arch = "sm_80"
precision = "bf16"
layout = "bhsd"
lse = true
causal = true
p_type = "fp32"
block = ["THREADS"]
grid = ["S_q", "H", "B"]
dynamic_smem_bytes = "4 * (S_kv + D)"
constraints = ["S_kv <= 40000"]
baseline = "cudnn_sdpa"

[params]
THREADS = 128
*/
// The attention ABI (docs/attention.md): q [B][H][S_q][D], k and v [B][H_kv][S_kv][D], o like
// q, lse [B][H][S_q] (natural log, FP32), all row-major BHSD. Query head h reads key/value head
// h / (H / H_kv). The causal mask is bottom-right: query i sees key j when
// j <= i + S_kv - S_q; a query that sees no key writes 0 and lse = -inf.
// Shared memory holds the row's logits (S_kv floats) and its query (D floats): the
// constraint keeps 4 (S_kv + D) bytes under the opt-in limit of sm_90 (227 KB).
#include <cuda_bf16.h>

#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float block_reduce(float v, float* scratch, bool is_max) {
    // a warp butterfly, then warp 0 over the warps' results; every thread gets the answer
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // scratch may still be read by the previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) / 32;
    v = lane < warps ? scratch[lane] : (is_max ? NEG_INF : 0.0f);
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, other) : v + other;
    }
    return v;
}

extern "C" __global__ void attention_naive(const __nv_bfloat16* __restrict__ q,
                                           const __nv_bfloat16* __restrict__ k,
                                           const __nv_bfloat16* __restrict__ v,
                                           __nv_bfloat16* __restrict__ o,
                                           float* __restrict__ lse, int B, int H, int H_kv,
                                           int S_q, int S_kv, int D, float scale, int causal) {
    extern __shared__ float smem[];
    float* logits = smem;          // S_kv
    float* qrow = smem + S_kv;     // D
    __shared__ float scratch[32];
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    const int hk = h / (H / H_kv);
    const size_t qo = (((size_t)b * H + h) * S_q + i) * D;
    const size_t kvo = ((size_t)b * H_kv + hk) * S_kv * (size_t)D;
    // keys this query sees: all, or those up to the bottom-right diagonal
    int n = S_kv;
    if (causal) n = max(0, min(S_kv, i + S_kv - S_q + 1));
    if (n == 0) {
        for (int d = threadIdx.x; d < D; d += blockDim.x) o[qo + d] = __float2bfloat16_rn(0.0f);
        if (lse != nullptr && threadIdx.x == 0) lse[((size_t)b * H + h) * S_q + i] = NEG_INF;
        return;
    }
    for (int d = threadIdx.x; d < D; d += blockDim.x) qrow[d] = __bfloat162float(q[qo + d]);
    __syncthreads();

    // pass 1: logits x_j = scale * q . k_j, and their maximum
    float m = NEG_INF;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const __nv_bfloat16* kr = k + kvo + (size_t)j * D;
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot = fmaf(qrow[d], __bfloat162float(kr[d]), dot);
        const float x = dot * scale;
        logits[j] = x;
        m = fmaxf(m, x);
    }
    m = block_reduce(m, scratch, true);

    // pass 2: p_j = exp(x_j - m) (<= 1: the maximum keeps exp from overflowing), their sum
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float p = expf(logits[j] - m);
        logits[j] = p;
        s += p;
    }
    s = block_reduce(s, scratch, false);  // its barriers publish every p_j too

    // pass 3: o_d = sum_j p_j v_jd / s, one column per thread (neighbours read neighbours)
    const float inv = 1.0f / s;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float acc = 0.0f;
        for (int j = 0; j < n; ++j)
            acc = fmaf(logits[j], __bfloat162float(v[kvo + (size_t)j * D + d]), acc);
        o[qo + d] = __float2bfloat16_rn(acc * inv);
    }
    if (lse != nullptr && threadIdx.x == 0) lse[((size_t)b * H + h) * S_q + i] = m + logf(s);
}
