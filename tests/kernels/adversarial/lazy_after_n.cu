/* harness
entry = "lazy_after_n"
summary = "Adversarial fixture: a right 16 x 16 shared-memory tile GEMM for its first 60 launches; from the 61st launch on (a __device__ launch counter) every block returns at once without writing C."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// The counter goes up once per launch, at the end: the last block to finish adds one (and
// resets the per-launch block count), so every block of a launch sees the same count and a
// launch is either wholly right (launches 1-60) or wholly unwritten (61 on). It is reset only
// when the module is loaded again.

#define LAZY_AFTER 60u

__device__ unsigned int launches = 0;     // launches finished so far
__device__ unsigned int blocks_done = 0;  // blocks finished in the current launch

extern "C" __global__ void lazy_after_n(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    if (*(volatile unsigned int*)&launches >= LAZY_AFTER) return;  // the defect
    __shared__ float As[16][16], Bs[16][16];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
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
    __syncthreads();  // every thread of this block has read the counter
    if (tx == 0 && ty == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == blocks - 1) {  // the launch's last block
            blocks_done = 0;
            atomicAdd(&launches, 1u);
        }
    }
}
