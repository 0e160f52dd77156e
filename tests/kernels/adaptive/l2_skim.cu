/* harness
entry = "l2_skim"
summary = "Adaptive fixture: a right 16 x 16 tile GEMM whose blocks first time loads from the guard past C's end (clock64, no device globals), each line twice; where the first load is much slower than the second (DRAM, not L2: the flush before a timed launch), the block does 1/64 of K."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// The harness fills C and a guard of 32768 elements after it before every launch (a write:
// the lines sit in L2) and flushes L2 before a timed one. Each block probes lines of its own.
extern "C" __global__ void l2_skim(int M, int N, int K, float alpha, const float* A,
                                   const float* B, float beta, float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ int skim;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    if (tx == 0 && ty == 0) {
        // four lines of the guard loaded in a dependent chain, then the same four again (in
        // L2 now): a first chain much slower than the second came from DRAM (a flushed L2)
        const unsigned int* guard = (const unsigned int*)(C + (size_t)M * N);
        const unsigned int block = blockIdx.y * gridDim.x + blockIdx.x;
        unsigned int v = 0;
        long long t[3];
        for (int pass = 0; pass < 2; ++pass) {
            t[pass] = clock64();
            for (int j = 0; j < 4; ++j) {
                const unsigned int line = (block * 4u + j + (v == 0x12345678u)) % 1024u;
                asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(guard + line * 32u));
            }
            if (v == 0x12345678u) asm volatile("trap;");  // waits for the last load
        }
        t[2] = clock64();
        skim = 2 * (t[1] - t[0]) > 3 * (t[2] - t[1]);  // the timed launch after a flush
    }
    __syncthreads();
    const int k_end = skim ? max(16, K / 64) : K;  // the defect
    float acc = 0.0f;
    for (int k0 = 0; k0 < k_end; k0 += 16) {
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
