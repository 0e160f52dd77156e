/* harness
entry = "heavy_primer"
summary = "Off-the-clock fixture: a right 16 x 16 tile GEMM whose launches that find C not poisoned (its untimed primer: C is poisoned after it, before the timed launch) spin 500 us more in one block: work done off the clock, which the batch's books find in the gap before its timed repetitions."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
#define POISON 0x7F7F4B1Du  // numerics.SENTINEL["fp32"]: what C holds before a timed launch

extern "C" __global__ void heavy_primer(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    if (blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0
        && __float_as_uint(C[0]) != POISON) {  // the defect: extra work where it is untimed
        unsigned long long t0, t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 500000ull);
    }
    __shared__ float As[16][16], Bs[16][16];
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
