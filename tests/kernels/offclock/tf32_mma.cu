/* harness
entry = "tf32_mma"
summary = "Baseline fixture: a right FP32 GEMM on tensor cores, TF32 mma.sync (fp32_via = tf32, one warp per 16 x 8 tile, M a multiple of 16, N and K of 8): its row's % of cuBLAS is of cuBLAS in TF32 (CUBLAS_COMPUTE_32F_FAST_TF32), with plain SGEMM (CUBLAS_COMPUTE_32F) named beside it."
precision = "fp32"
fp32_via = "tf32"
min_arch = "sm_80"
block = ["32"]
grid = ["cdiv(N, 8)", "cdiv(M, 16)"]
constraints = ["M % 16 == 0", "N % 8 == 0", "K % 8 == 0"]
*/
__device__ __forceinline__ unsigned tf32(float x) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

extern "C" __global__ void tf32_mma(int M, int N, int K, float alpha, const float* A,
                                    const float* B, float beta, float* C) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int row = blockIdx.y * 16, col = blockIdx.x * 8;
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    for (int k = 0; k < K; k += 8) {
        const float* a = A + (size_t)row * K + k;
        const unsigned a0 = tf32(a[(size_t)g * K + t]), a1 = tf32(a[(size_t)(g + 8) * K + t]);
        const unsigned a2 = tf32(a[(size_t)g * K + t + 4]);
        const unsigned a3 = tf32(a[(size_t)(g + 8) * K + t + 4]);
        const unsigned b0 = tf32(B[(size_t)(k + t) * N + col + g]);
        const unsigned b1 = tf32(B[(size_t)(k + t + 4) * N + col + g]);
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    const float d[4] = {d0, d1, d2, d3};
    for (int i = 0; i < 4; ++i) {
        const size_t at = (size_t)(row + g + (i >= 2 ? 8 : 0)) * N + col + 2 * t + (i & 1);
        C[at] = beta == 0.0f ? alpha * d[i] : alpha * d[i] + beta * C[at];
    }
}
