/* harness
entry = "sgemm_naive"
summary = "One thread per output; consecutive threads of a warp take consecutive rows of C, so each warp's loads of A stride by K and its stores of C stride by N (uncoalesced)."
predicted = "Every FMA reads A and B from global memory, and a warp's 32 A loads touch 32 different 128-byte lines: L1/L2-transaction bound, a few percent of cuBLAS."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["32", "32"]
grid = ["cdiv(M, 32)", "cdiv(N, 32)"]
dynamic_smem_bytes = "0"
*/
// The first rung: the textbook kernel. threadIdx.x walks rows on purpose, the layout a first
// attempt usually gets, so the next rung can show what coalescing alone is worth.
// measured: see reports/h100/ (not yet measured when written).

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A,
                                       const float* B, float beta, float* C) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    float* c = C + (size_t)row * N + col;
    // beta == 0 must not read C: it may hold NaN (0 * NaN is NaN), as BLAS specifies.
    *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
}
