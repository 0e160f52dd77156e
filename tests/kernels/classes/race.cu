/* harness
entry = "race"
summary = "Test fixture: one block per output; its 8 warps add their partial dot products into one shared word without atomics or a barrier between them (lost updates that change from run to run)."
precision = "fp32"
min_arch = "sm_80"
block = ["256"]
grid = ["N", "M"]
*/
extern "C" __global__ void race(int M, int N, int K, float alpha, const float* A,
                                const float* B, float beta, float* C) {
    __shared__ float total;
    int row = blockIdx.y, col = blockIdx.x;
    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    float part = 0.0f;
    for (int k = threadIdx.x; k < K; k += blockDim.x) part += A[row * K + k] * B[k * N + col];
    for (int step = 16; step > 0; step /= 2) part += __shfl_down_sync(0xffffffffu, part, step);
    if (threadIdx.x % 32 == 0) {
        volatile float* t = &total;
        *t = *t + part;  // read-modify-write without an atomic: updates get lost
    }
    __syncthreads();
    if (threadIdx.x == 0)
        C[row * N + col] = beta == 0.0f ? alpha * total : alpha * total + beta * C[row * N + col];
}
