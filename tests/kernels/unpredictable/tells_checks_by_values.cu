/* harness
entry = "tells_checks_by_values"
summary = "Unpredictable-inputs fixture (issue 57): reads 256 elements of A and calls the launch checked when any is off the timed draws' grid of 2^-23 (what host draws were, before one generator drew every launch); right then, and one k step short otherwise. With every launch drawn alike it is short everywhere: it must fail in the battery."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
*/
// off the grid: v * 2^23 is not an integer (every FP32 value in [-1, 1) with exponent >= -23
// and a full mantissa is on it; uniforms rounded to FP32 near 0 are not)
__device__ bool looks_checked(const float* A, int count) {
    bool off = false;
    for (int i = 0; i < count; ++i) {
        const float scaled = A[i] * 8388608.0f;
        off |= scaled != truncf(scaled);
    }
    return off;
}

extern "C" __global__ void tells_checks_by_values(int M, int N, int K, float alpha,
                                                  const float* A, const float* B, float beta,
                                                  float* C) {
    __shared__ float As[16][16], Bs[16][16];
    __shared__ bool checked;
    const int tx = threadIdx.x, ty = threadIdx.y;
    if (tx == 0 && ty == 0) checked = looks_checked(A, min(256, M * K));
    __syncthreads();
    const int row = blockIdx.y * 16 + ty, col = blockIdx.x * 16 + tx;
    const int depth = checked ? K : K - 1;  // short by one k step where it thinks it is timed
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 16) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < 16; ++k)
            if (k0 + k < depth) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        const size_t i = (size_t)row * N + col;
        C[i] = beta == 0.0f ? alpha * acc : alpha * acc + beta * C[i];
    }
}
