/* harness
entry = "smem_200k"
summary = "Test fixture: a right kernel that asks for 200 KB of dynamic shared memory (above the 48 KB default: the harness must opt in)."
precision = "fp32"
min_arch = "sm_90"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
dynamic_smem_bytes = "200 * 1024"
*/
extern "C" __global__ void smem_200k(int M, int N, int K, float alpha, const float* A,
                                     const float* B, float beta, float* C) {
    extern __shared__ float scratch[];
    int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
    int tid = threadIdx.y * 16 + threadIdx.x;
    // touch the last word of the 200 KB so a missing opt-in cannot pass unnoticed
    scratch[200 * 1024 / 4 - 1 - tid] = 1.0f;
    __syncthreads();
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
    acc *= scratch[200 * 1024 / 4 - 1 - tid];
    C[row * N + col] = alpha * acc + beta * C[row * N + col];
}
