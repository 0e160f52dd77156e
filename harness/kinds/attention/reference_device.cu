// The device reference for attention (harness/kinds/attention/device_reference.py): chosen
// query rows in FP64, keys streamed through shared memory in tiles of 128 so that nothing is
// S_kv long (S_kv = 16K and past fit), two passes: the row's maximum and normaliser, then the
// output and the magnitudes the error bound needs (numerics.py), all as reference.py computes
// them on the host. One block of 128 threads per chosen row (b, h, i); inputs BF16 or FP16
// (IS_FP16), BHSD or BSHD (IS_BSHD).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define THREADS 128
#define KEYS 128
#define MAX_D 256
#define U32 5.9604644775390625e-8  // 2^-24
#define NEG_INF_D (__longlong_as_double(0xfff0000000000000ULL))

#if IS_FP16
typedef __half elem;
__device__ __forceinline__ double load(const elem* p) { return (double)__half2float(*p); }
#else
typedef __nv_bfloat16 elem;
__device__ __forceinline__ double load(const elem* p) { return (double)__bfloat162float(*p); }
#endif

__device__ __forceinline__ size_t at(int b, int h, int s, int heads, int seq, int D) {
#if IS_BSHD
    return (((size_t)b * seq + s) * heads + h) * D;
#else
    return (((size_t)b * heads + h) * seq + s) * D;
#endif
}

__device__ double reduce(double v, double* scratch, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        double other = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmax(v, other) : v + other;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
    __syncthreads();
    v = scratch[0];
    for (int w = 1; w < THREADS / 32; ++w) v = is_max ? fmax(v, scratch[w]) : v + scratch[w];
    return v;
}

// rows: n_rows triples (b, h, i). out: per row D values of o, abs_pv, spread_pv, then lse,
// m, spread_p (3 * D + 3 doubles per row).
extern "C" __global__ void __launch_bounds__(THREADS)
attention_reference(const elem* q, const elem* k, const elem* v, const int* rows, int n_rows,
                    double* out, int H, int H_kv, int S_q, int S_kv, int D, double scale,
                    int causal, double u_p) {
    __shared__ double qrow[MAX_D];
    __shared__ double p[KEYS], r2[KEYS];  // probability (unnormalised) and its rho^2
    __shared__ double scratch[THREADS / 32];
    const int row = blockIdx.x;
    if (row >= n_rows) return;
    const int b = rows[3 * row], h = rows[3 * row + 1], i = rows[3 * row + 2];
    const int hk = h / (H / H_kv);
    double* res = out + (size_t)row * (3 * D + 3);
    const int n = causal ? max(0, min(S_kv, i + S_kv - S_q + 1)) : S_kv;
    for (int d = threadIdx.x; d < D; d += THREADS) qrow[d] = load(q + at(b, h, i, H, S_q, D) + d);
    __syncthreads();

    // pass 1: the maximum, then the normaliser against it
    double m = NEG_INF_D;
    for (int j = threadIdx.x; j < n; j += THREADS) {
        const elem* kr = k + at(b, hk, j, H_kv, S_kv, D);
        double dot = 0.0;
        for (int d = 0; d < D; ++d) dot += qrow[d] * load(kr + d);
        m = fmax(m, scale * dot);
    }
    m = reduce(m, scratch, true);
    double l = 0.0;
    for (int j = threadIdx.x; j < n; j += THREADS) {
        const elem* kr = k + at(b, hk, j, H_kv, S_kv, D);
        double dot = 0.0;
        for (int d = 0; d < D; ++d) dot += qrow[d] * load(kr + d);
        l += exp(scale * dot - m);
    }
    l = reduce(l, scratch, false);

    // pass 2: a tile of probabilities in shared memory, then each column's sums
    double o[MAX_D / THREADS], a[MAX_D / THREADS], s2[MAX_D / THREADS];
    for (int c = 0; c < MAX_D / THREADS; ++c) o[c] = a[c] = s2[c] = 0.0;
    double sp2 = 0.0;
    for (int j0 = 0; j0 < n; j0 += KEYS) {
        __syncthreads();
        const int j = j0 + threadIdx.x;
        if (threadIdx.x < KEYS) {
            double pj = 0.0, rho = 0.0;
            if (j < n) {
                const elem* kr = k + at(b, hk, j, H_kv, S_kv, D);
                double dot = 0.0, qk2 = 0.0;
                for (int d = 0; d < D; ++d) {
                    const double kd = load(kr + d);
                    dot += qrow[d] * kd;
                    qk2 += qrow[d] * qrow[d] * kd * kd;
                }
                const double x = scale * dot;
                pj = exp(x - m) / l;
                rho = u_p + 2 * U32 * (fabs(x) + fabs(m)) + U32 * D * fabs(scale) * sqrt(qk2);
            }
            p[threadIdx.x] = pj;
            r2[threadIdx.x] = pj * pj * rho * rho;
            sp2 += pj * pj * rho * rho;
        }
        __syncthreads();
        const int last = min(KEYS, n - j0);
        for (int c = 0; c < MAX_D / THREADS; ++c) {
            const int d = threadIdx.x + c * THREADS;
            if (d >= D) break;
            for (int jj = 0; jj < last; ++jj) {
                const double vd = load(v + at(b, hk, j0 + jj, H_kv, S_kv, D) + d);
                o[c] += p[jj] * vd;
                a[c] += p[jj] * fabs(vd);
                s2[c] += r2[jj] * vd * vd;
            }
        }
    }
    sp2 = reduce(sp2, scratch, false);
    for (int c = 0; c < MAX_D / THREADS; ++c) {
        const int d = threadIdx.x + c * THREADS;
        if (d >= D) break;
        res[d] = o[c];
        res[D + d] = a[c];
        res[2 * D + d] = sqrt(s2[c]);
    }
    if (threadIdx.x == 0) {
        res[3 * D] = n ? m + log(l) : NEG_INF_D;
        res[3 * D + 1] = m;
        res[3 * D + 2] = sqrt(sp2);
    }
}
