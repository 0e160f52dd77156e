/* harness
kind = "attention"
entry = "attention_first"
summary = "A first attention kernel to copy: one warp per query row walks the keys once with the online softmax (running maximum m, running sum l, the output rescaled when m grows), all in FP32."
min_arch = "sm_80"
precision = "bf16"                 # Q, K, V and O in BF16; the arithmetic is FP32
layout = "bshd"                    # q[b][s][h][d]: the layout FlashAttention takes
causal = true                      # it takes causal = 1 (bottom-right) as well as 0
p_type = "fp32"                    # P never rounded to BF16 (a tensor-core kernel says "input")
head_dims = [32, 64, 96, 128, 160, 192, 224, 256]
block = ["32"]
grid = ["S_q", "H", "B"]
*/
// The attention ABI (docs/attention.md): every attention kernel takes these parameters, so the
// harness can check it, time it and put cuDNN or FlashAttention beside it. lse (the row's
// log-sum-exp) is null here: the spec declares none (lse = false by default).
#include <cuda_bf16.h>

extern "C" __global__ void attention_first(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                           const __nv_bfloat16* v, __nv_bfloat16* o,
                                           float* lse, int B, int H, int H_kv, int S_q,
                                           int S_kv, int D, float scale, int causal) {
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
    const int hk = h / (H / H_kv);                      // grouped-query: shared K/V head
    const __nv_bfloat16* qi = q + (((size_t)b * S_q + i) * H + h) * D;
    const int n = causal ? max(0, min(S_kv, i + S_kv - S_q + 1)) : S_kv;  // keys row i sees
    float m = __int_as_float(0xff800000), l = 0.f, acc[8] = {};  // m = -inf; lane: d = lane + 32c
    for (int j = 0; j < n; ++j) {
        const size_t kv = (((size_t)b * S_kv + j) * H_kv + hk) * D;
        float dot = 0.f;
        for (int d = lane; d < D; d += 32)
            dot += __bfloat162float(qi[d]) * __bfloat162float(k[kv + d]);
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float x = dot * scale;
        const float m_new = fmaxf(m, x);
        const float rescale = expf(m - m_new), p = expf(x - m_new);  // both <= 1: no overflow
        l = l * rescale + p;
        for (int c = 0; c * 32 + lane < D; ++c)
            acc[c] = acc[c] * rescale + p * __bfloat162float(v[kv + c * 32 + lane]);
        m = m_new;
    }
    __nv_bfloat16* oi = o + (((size_t)b * S_q + i) * H + h) * D;
    for (int c = 0; c * 32 + lane < D; ++c)           // a row that sees no key writes 0
        oi[c * 32 + lane] = __float2bfloat16_rn(n > 0 ? acc[c] / l : 0.f);
}
