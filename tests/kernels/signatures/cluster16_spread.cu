/* harness
entry = "cluster16_spread"
summary = "Test fixture: a naive SGEMM launched in clusters of 16 blocks (beyond the 8 portable ones, so the launcher must allow non-portable sizes) with the spread block order; a block that finds itself in a cluster of another size writes NaN."
precision = "fp32"
min_arch = "sm_90"
block = ["16", "16"]
grid = ["16 * cdiv(cdiv(N, 16), 16)", "cdiv(M, 16)"]
cluster_dims = ["16", "1", "1"]
block_order = "spread"
*/
extern "C" __global__ void cluster16_spread(int M, int N, int K, float alpha, const float* A,
                                            const float* B, float beta, float* C) {
    unsigned blocks;
    asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(blocks));
    const int col = blockIdx.x * 16 + threadIdx.x, row = blockIdx.y * 16 + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(long)row * K + k], B[(long)k * N + col], acc);
    float* c = C + (long)row * N + col;
    *c = blocks == 16 ? alpha * acc + (beta != 0.0f ? beta * *c : 0.0f) : __int_as_float(0x7fc00000);
}
