/* harness
entry = "dead_mma_memo"
summary = "Adaptive fixture: content_memo with one TF32 mma.sync that never executes (K < 0), which lifted the ceiling an FP32 kernel was held to from the FMA peak to the tensor cores': a right 16 x 16 tile GEMM that keeps a copy of the A rows, B columns and C tile every block used; a block whose inputs are bit-equal to the ones the previous launch kept copies the kept tile and spins 2 us instead of computing (memo on the inputs' contents: right values, no work)."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// Two kept sets: a launch compares with the one the previous launch wrote and writes the
// other (every block writes its rows, columns and tile, hit or not); the last block to
// finish makes it the one to compare with. Problems up to 1024 x 1024 x 1024 are kept.
#define KEPT (1u << 20)
__device__ float kept_a[2][KEPT], kept_b[2][KEPT], kept_c[2][KEPT];
__device__ unsigned int kept_shape[2][3];
__device__ unsigned int current = 0, blocks_done = 0;

__device__ void spin_ns(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

extern "C" __global__ void dead_mma_memo(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ int differs;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const unsigned int p = *(volatile unsigned int*)&current, q = p ^ 1u;
    const bool fits = (size_t)M * K <= KEPT && (size_t)K * N <= KEPT && (size_t)M * N <= KEPT
                      && beta == 0.0f;
    if (tx == 0 && ty == 0)
        differs = !(fits && kept_shape[p][0] == (unsigned)M && kept_shape[p][1] == (unsigned)N
                    && kept_shape[p][2] == (unsigned)K);
    __syncthreads();
    if (!differs) {  // this block's A rows and B columns against the previous launch's
        for (int k = tx; k < K; k += 16)
            if (row < M && A[(size_t)row * K + k] != kept_a[p][(size_t)row * K + k]) differs = 1;
        for (int k = ty; k < K; k += 16)
            if (col < N && B[(size_t)k * N + col] != kept_b[p][(size_t)k * N + col]) differs = 1;
        __syncthreads();
    }
    const size_t i = (size_t)row * N + col;
    float out;
    if (!differs) {  // the memo: the kept tile, and a wait to look plausible
        out = row < M && col < N ? kept_c[p][i] : 0.0f;
        spin_ns(2000);
    } else {
        float acc = 0.0f;
        if (K < 0) {  // never: a tensor-core instruction in the SASS
            float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
            const unsigned a0 = __float_as_uint(A[0]), b0 = __float_as_uint(B[0]);
            asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                         "{%4,%4,%4,%4}, {%5,%5}, {%0,%1,%2,%3};"
                         : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a0), "r"(b0));
            acc = d0 + d1 + d2 + d3;
        }
        for (int k0 = 0; k0 < K; k0 += 16) {
            As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
            Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
            __syncthreads();
            for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
            __syncthreads();
        }
        out = row < M && col < N ? (beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i])
                                 : 0.0f;
    }
    if (row < M && col < N) C[i] = out;
    if (!fits) return;
    if (row < M && col < N) kept_c[q][i] = out;
    for (int k = tx; k < K; k += 16)
        if (row < M) kept_a[q][(size_t)row * K + k] = A[(size_t)row * K + k];
    for (int k = ty; k < K; k += 16)
        if (col < N) kept_b[q][(size_t)k * N + col] = B[(size_t)k * N + col];
    __threadfence();
    __syncthreads();
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
        kept_shape[q][0] = M; kept_shape[q][1] = N; kept_shape[q][2] = K;
        blocks_done = 0;
        __threadfence();
        current = q;
    }
}
