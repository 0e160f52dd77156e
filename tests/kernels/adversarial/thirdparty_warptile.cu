/* harness
entry = "sgemm_thirdparty_warptile"
summary = "Adversarial fixture (right): a kernel in the form public repositories write it: 128 x 128 block tiles, 16 deep, 256 threads each computing 8 x 8 outputs from registers, float4 loads and stores, no bounds checks (its constraints allow only multiples of the tiles), and C = alpha * acc + beta * C with no beta == 0 branch (reads C at beta = 0)."
precision = "fp32"
min_arch = "sm_80"
block = ["256"]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
constraints = ["M % 128 == 0", "N % 128 == 0", "K % 16 == 0"]
*/
#define BM 128
#define BN 128
#define BK 16
#define TM 8
#define TN 8

extern "C" __global__ void __launch_bounds__(256)
sgemm_thirdparty_warptile(int M, int N, int K, float alpha, const float* A, const float* B,
                          float beta, float* C) {
    __shared__ __align__(16) float As[BK][BM];  // A tile transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);  // 16 x 16 threads
    A += (size_t)blockIdx.y * BM * K;
    B += (size_t)blockIdx.x * BN;
    C += (size_t)blockIdx.y * BM * N + (size_t)blockIdx.x * BN;

    float acc[TM][TN] = {};
    float rm[TM], rn[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
        // A: 128 rows x 16 columns = 512 float4, two per thread, stored transposed
#pragma unroll
        for (int l = 0; l < 2; ++l) {
            const int idx = tid + l * 256;
            const int r = idx / (BK / 4), c = (idx % (BK / 4)) * 4;
            const float4 v = *reinterpret_cast<const float4*>(&A[(size_t)r * K + c]);
            As[c + 0][r] = v.x;
            As[c + 1][r] = v.y;
            As[c + 2][r] = v.z;
            As[c + 3][r] = v.w;
        }
        // B: 16 rows x 128 columns = 512 float4, two per thread
#pragma unroll
        for (int l = 0; l < 2; ++l) {
            const int idx = tid + l * 256;
            const int r = idx / (BN / 4), c = (idx % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(&Bs[r][c]) =
                *reinterpret_cast<const float4*>(&B[(size_t)r * N + c]);
        }
        __syncthreads();
        A += BK;
        B += (size_t)BK * N;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; i += 4)
                *reinterpret_cast<float4*>(&rm[i]) =
                    *reinterpret_cast<const float4*>(&As[k][trow * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4)
                *reinterpret_cast<float4*>(&rn[j]) =
                    *reinterpret_cast<const float4*>(&Bs[k][tcol * TN + j]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += rm[i] * rn[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            float4* p = reinterpret_cast<float4*>(&C[(size_t)(trow * TM + i) * N + tcol * TN + j]);
            float4 c = *p;
            c.x = alpha * acc[i][j + 0] + beta * c.x;
            c.y = alpha * acc[i][j + 1] + beta * c.y;
            c.z = alpha * acc[i][j + 2] + beta * c.z;
            c.w = alpha * acc[i][j + 3] + beta * c.w;
            *p = c;
        }
    }
}
