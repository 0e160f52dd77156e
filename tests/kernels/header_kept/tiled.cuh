// Test fixture: a kernel kept in a header beside its host code, as public Hopper kernels are
// (the harness builds it from header_kept.cu without editing this file).
#pragma once
#include <cassert>
#include <vector>

#include <cuda.h>
#include <cuda_runtime.h>

namespace HK {

template <int TILE>
__global__ void tiledGemm(int M, int N, int K, float alpha, const float* A, const float* B,
                          float beta, float* C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    float sum = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[threadIdx.y][threadIdx.x] =
            (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] =
            (col < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) sum += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = alpha * sum + beta * C[row * N + col];
}

__host__ static inline CUtensorMap make_map(float* data, int rows, int cols) {
    CUtensorMap map;
    cuuint64_t shape[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t stride[1] = {sizeof(float) * cols};
    cuuint32_t box[2] = {32, 32};
    cuuint32_t step[2] = {1, 1};
    CUresult result = cuTensorMapEncodeTiled(
        &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, data, shape, stride, box, step,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    assert(result == CUDA_SUCCESS);
    return map;
}

void run_tiled(int M, int N, int K, const std::vector<float>& a, const std::vector<float>& b) {
    float *A, *B, *C;
    cudaMalloc(&A, a.size() * sizeof(float));
    cudaMalloc(&B, b.size() * sizeof(float));
    cudaMalloc(&C, size_t(M) * N * sizeof(float));
    cudaMemcpy(A, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(B, b.data(), b.size() * sizeof(float), cudaMemcpyHostToDevice);
    tiledGemm<32><<<dim3((N + 31) / 32, (M + 31) / 32), dim3(32, 32)>>>(M, N, K, 1.0f, A, B,
                                                                        0.0f, C);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
}

}  // namespace HK
