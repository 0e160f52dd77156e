/* harness
entry = "slow_alone"
summary = "Off-the-clock fixture: a right 16 x 16 tile GEMM that spins 500 us more in one block when its last launch ended over 1 ms before (a launch timed alone, where its rest is measured, follows a whole round and the gate; a timed launch follows its primer by its draws and the L2 flush, about 0.6 ms on an H100): its rests lengthened by launches it tells apart, which the timer's books find."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
__device__ unsigned long long last_end_ns = 0;
__device__ unsigned int blocks_done = 0;

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void slow_alone(int M, int N, int K, float alpha, const float* A,
                                      const float* B, float beta, float* C) {
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    if (blockIdx.x == 0 && blockIdx.y == 0 && tx == 0 && ty == 0) {
        const unsigned long long t0 = now_ns();
        if (t0 - *(volatile unsigned long long*)&last_end_ns > 1000000ull)  // the defect
            while (now_ns() - t0 < 500000ull) {}
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
    __syncthreads();
    if (tx == 0 && ty == 0 && atomicAdd(&blocks_done, 1u) == gridDim.x * gridDim.y - 1) {
        blocks_done = 0;
        last_end_ns = now_ns();
    }
}
