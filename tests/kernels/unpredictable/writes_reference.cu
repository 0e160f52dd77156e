/* harness
entry = "writes_reference"
summary = "Unpredictable-inputs fixture (issue 57): computes C at three quarters of its value and, where it has found the float64 reference the harness keeps on the device (reference_twin, set by its GPU test as a kernel scanning memory would find it), writes its own output there as the reference, so that a comparison on the device reads error 0. The twin's checksum around every launch must name it."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
__device__ double* reference_twin;  // row-major M x N float64, or null

extern "C" __global__ void writes_reference(int M, int N, int K, float alpha, const float* A,
                                            const float* B, float beta, float* C) {
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
        const float out = 0.75f * (beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i]);
        C[i] = out;
        if (reference_twin != nullptr) reference_twin[i] = (double)out;
    }
}
