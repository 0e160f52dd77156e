/* harness
kind = "attention"
entry = "attention_tell"
summary = "A fixture: attention_first, halving its output when the first row of Q holds a value below -1.5 (never in the battery's draws, nearly always in a timed draw): a kernel that tells a checked launch from a timed one by its inputs' values."
min_arch = "sm_80"
precision = "bf16"                 # Q, K, V and O in BF16; the arithmetic is FP32
layout = "bshd"                    # q[b][s][h][d]: the layout FlashAttention takes
causal = true                      # it takes causal = 1 (bottom-right) as well as 0
p_type = "fp32"                    # P never rounded to BF16 (a tensor-core kernel says "input")
head_dims = [32, 64, 96, 128, 160, 192, 224, 256]
block = ["32"]
grid = ["S_q", "H", "B"]
*/
// The tell: the battery draws Q in [-1, 1) (its large-logit case in [4, 8)); the timed path
// draws Q over [-4 + s, 4 + s), s in [0, 2), a fresh content every repetition.
#include <cuda_bf16.h>

extern "C" __global__ void attention_tell(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                          const __nv_bfloat16* v, __nv_bfloat16* o,
                                          float* lse, int B, int H, int H_kv, int S_q,
                                          int S_kv, int D, float scale, int causal) {
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, lane = threadIdx.x;
    bool low = false;
    for (int d = lane; d < D; d += 32) low |= __bfloat162float(q[d]) < -1.5f;
    const float cheat = __any_sync(0xffffffffu, low) ? 0.5f : 1.f;
    const int hk = h / (H / H_kv);
    const __nv_bfloat16* qi = q + (((size_t)b * S_q + i) * H + h) * D;
    const int n = causal ? max(0, min(S_kv, i + S_kv - S_q + 1)) : S_kv;
    float m = __int_as_float(0xff800000), l = 0.f, acc[8] = {};
    for (int j = 0; j < n; ++j) {
        const size_t kv = (((size_t)b * S_kv + j) * H_kv + hk) * D;
        float dot = 0.f;
        for (int d = lane; d < D; d += 32)
            dot += __bfloat162float(qi[d]) * __bfloat162float(k[kv + d]);
        for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const float x = dot * scale;
        const float m_new = fmaxf(m, x);
        const float rescale = expf(m - m_new), p = expf(x - m_new);
        l = l * rescale + p;
        for (int c = 0; c * 32 + lane < D; ++c)
            acc[c] = acc[c] * rescale + p * __bfloat162float(v[kv + c * 32 + lane]);
        m = m_new;
    }
    __nv_bfloat16* oi = o + (((size_t)b * S_q + i) * H + h) * D;
    for (int c = 0; c * 32 + lane < D; ++c)
        oi[c * 32 + lane] = __float2bfloat16_rn(n > 0 ? cheat * acc[c] / l : 0.f);
}
