/* harness
entry = "state_keeper"
summary = "Adversarial fixture: remembers the C pointer of its last launch in a __device__ variable and returns at once, writing nothing, when launched again with the same C; a right 16 x 16 shared-memory tile GEMM on the first launch with a given C."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// The pointer is recorded once per launch, at the end, by the last block to finish, so every
// block of a launch compares against the same pointer (the previous launch's C).

__device__ unsigned long long last_c = 0;    // C of the previous launch
__device__ unsigned int blocks_done = 0;     // blocks finished in the current launch

extern "C" __global__ void state_keeper(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C) {
    if (*(volatile unsigned long long*)&last_c == (unsigned long long)C) return;  // the defect
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
    __syncthreads();  // every thread of this block has compared the pointer
    if (tx == 0 && ty == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y;
        if (atomicAdd(&blocks_done, 1u) == blocks - 1) {  // the launch's last block
            blocks_done = 0;
            atomicExch(&last_c, (unsigned long long)C);
        }
    }
}
