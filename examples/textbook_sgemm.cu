/* harness
entry = "sgemm_textbook"
summary = "A kernel in the form lessons and public repositories write it: 64 x 64 block tiles staged through shared memory 8 deep, each of 256 threads accumulating a 4 x 4 register tile, and the usual epilogue C = alpha * acc + beta * C with no beta == 0 branch."
precision = "fp32"
min_arch = "sm_80"
block = ["256"]
grid = ["cdiv(N, 64)", "cdiv(M, 64)"]
*/
// Written here in the textbook style to try the harness on a kernel it did not grow up with:
// `harness compare examples/textbook_sgemm.cu 10_hoisted`. It reads C at beta = 0, which the
// harness reports as a note (BLAS leaves C unset then), not as a failure.

#define BM 64
#define BN 64
#define BK 8
#define TM 4
#define TN 4

extern "C" __global__ void sgemm_textbook(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C) {
    __shared__ float As[BK][BM];  // A tile stored transposed: As[k][m]
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x % (BN / TN);   // 16 threads across the tile's columns
    const int ty = threadIdx.x / (BN / TN);   // 16 threads down its rows
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        // 256 threads load 64 x 8 of A and 8 x 64 of B, two elements each, zero outside
        for (int i = threadIdx.x; i < BM * BK; i += blockDim.x) {
            int r = i / BK, c = i % BK;
            int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.0f;
        }
        for (int i = threadIdx.x; i < BK * BN; i += blockDim.x) {
            int r = i / BN, c = i % BN;
            int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.0f;
        }
        __syncthreads();
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
    for (int i = 0; i < TM; ++i) {
        for (int j = 0; j < TN; ++j) {
            int r = row0 + ty * TM + i, c = col0 + tx * TN + j;
            if (r < M && c < N)
                C[(size_t)r * N + c] = alpha * acc[i][j] + beta * C[(size_t)r * N + c];
        }
    }
}
