/* harness
entry = "demo::tiled_sgemm<BM, BN, BK>"
summary = "A shared-memory tiled FP32 GEMM as nvcc users write one: a kernel template whose parameters BM, BN and BK are the spec's [params] (they arrive as template arguments, not as macros), with its host launcher, a host check built on std::vector and their #includes in the same file, unedited: the harness leaves the host code out for NVRTC."
precision = "fp32"
min_arch = "sm_80"
block = ["BN", "BM"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
representative = "b16"
[params]
BM = 16
BN = 16
BK = 32
[variants]
b16 = { BM = 16, BN = 16, BK = 32 }
b32 = { BM = 32, BN = 32, BK = 16 }
[budget]
max_spill_bytes = 0
*/
// Each block computes a BM x BN tile of C, one element per thread (blockDim = BN x BM),
// stepping through K in BK-wide slabs of A and B staged in shared memory.
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

namespace demo {

template <int BM, int BN, int BK>
__global__ void
tiled_sgemm(int M, int N, int K, float alpha, const float* A, const float* B, float beta,
            float* C) {
    __shared__ float As[BM][BK + 1];  // +1: a column of As is read without bank conflicts
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BN + tx;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += BM * BN) {
            const int r = i / BK, c = i % BK;
            As[r][c] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += BM * BN) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    const int row = row0 + ty, col = col0 + tx;
    if (row < M && col < N) {
        float* c = C + (size_t)row * N + col;
        *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;  // beta = 0: C is not read
    }
}

// ---- host code, as an nvcc build of this file uses it (NVRTC never sees it) ----

template <int BM, int BN, int BK>
__host__ cudaError_t launch_tiled_sgemm(int M, int N, int K, float alpha, const float* A,
                                        const float* B, float beta, float* C,
                                        cudaStream_t stream = 0) {
    const dim3 block(BN, BM), grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    tiled_sgemm<BM, BN, BK><<<grid, block, 0, stream>>>(M, N, K, alpha, A, B, beta, C);
    return cudaGetLastError();
}

std::vector<double> reference_sgemm(int M, int N, int K, const std::vector<float>& A,
                                    const std::vector<float>& B) {
    std::vector<double> C((size_t)M * N, 0.0);
    for (int i = 0; i < M; ++i)
        for (int k = 0; k < K; ++k)
            for (int j = 0; j < N; ++j) C[(size_t)i * N + j] += (double)A[(size_t)i * K + k] * B[(size_t)k * N + j];
    return C;
}

// Runs the 16 x 16 x 32 kernel once at M x N x K and compares with the reference on the host.
bool check_tiled_sgemm(int M, int N, int K) {
    std::vector<float> A((size_t)M * K), B((size_t)K * N), C((size_t)M * N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = (float)((i * 7919) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = (float)((i * 104729) % 17) / 17.0f - 0.5f;
    float *dA, *dB, *dC;
    cudaMalloc(&dA, A.size() * sizeof(float));
    cudaMalloc(&dB, B.size() * sizeof(float));
    cudaMalloc(&dC, C.size() * sizeof(float));
    cudaMemcpy(dA, A.data(), A.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), B.size() * sizeof(float), cudaMemcpyHostToDevice);
    launch_tiled_sgemm<16, 16, 32>(M, N, K, 1.0f, dA, dB, 0.0f, dC);
    cudaMemcpy(C.data(), dC, C.size() * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    const std::vector<double> want = reference_sgemm(M, N, K, A, B);
    double worst = 0.0;
    for (size_t i = 0; i < C.size(); ++i) {
        const double error = C[i] > want[i] ? C[i] - want[i] : want[i] - C[i];
        worst = error > worst ? error : worst;
    }
    std::printf("tiled_sgemm %dx%dx%d: largest error %g\n", M, N, K, worst);
    return worst < 1e-3 * K;
}

}  // namespace demo

using demo::check_tiled_sgemm;
