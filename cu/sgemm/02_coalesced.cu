/* harness
entry = "sgemm_coalesced"
summary = "Same work as the naive kernel, but consecutive threads of a warp take consecutive columns: B loads and C stores coalesce into full 128-byte lines and the A load is one broadcast."
predicted = "A warp's global requests drop from 32 lines to 1 per load of B and 1 broadcast for A, so several times the naive kernel; still two global loads per FMA, so L1-bandwidth bound far below cuBLAS."
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
// Measurements, experiments and lessons: notes/02_coalesced.md
// Only the thread-to-output mapping changes against 01_naive: x now walks columns.

extern "C" __global__ void sgemm_coalesced(int M, int N, int K, float alpha, const float* A,
                                           const float* B, float beta, float* C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    float* c = C + (size_t)row * N + col;
    *c = beta == 0.0f ? alpha * acc : fmaf(alpha, acc, beta * *c);
}
