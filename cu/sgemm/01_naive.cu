/* harness
entry = "sgemm_naive"
summary = "One thread per output; consecutive threads of a warp take consecutive rows of C, so a warp's A loads stride by K (32 rows, 32 cache lines per load), its B load is one broadcast, and its C stores stride by N (uncoalesced)."
predicted = "Every FMA reads A and B from global memory and each warp-wide A load touches 32 different 128-byte lines (L1 reuse across consecutive k only partly hides it): L1/L2-transaction bound, around 1-2% of cuBLAS."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
block = ["32", "32"]
grid = ["cdiv(N, 32)", "cdiv(M, 32)"]
dynamic_smem_bytes = "0"
[model]  # napkin: C tile per block; shared-load instructions and FMAs per thread per k
tile_m = "1"
tile_n = "1"
smem_loads = "0"
fmas = "1"
*/
// Measurements, experiments and lessons: notes/01_naive.md
// The first rung: the textbook kernel (siboehm's kernel 1). threadIdx.x walks rows on purpose,
// the layout a first attempt usually gets, so the next rung can show what coalescing alone is
// worth. Blocks tile C as in every other rung (blockIdx.x over columns, blockIdx.y over rows);
// only inside the 32 x 32 block is x turned to rows, so 01 -> 02 changes nothing but which
// output each lane of a warp owns. Lane x of a warp holds row 32 by + x and the warp shares one
// column: A[row][k] is 32 addresses K floats apart, B[k][col] is the same address for the whole
// warp, and the C stores are N floats apart.

extern "C" __global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A,
                                       const float* B, float beta, float* C) {
    const int row = blockIdx.y * 32 + threadIdx.x;  // x walks rows: the uncoalesced choice
    const int col = blockIdx.x * 32 + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    float* c = C + (size_t)row * N + col;
    // beta == 0 must not read C: it may hold NaN (0 * NaN is NaN), as BLAS specifies.
    *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
}
