/* harness
entry = "lessons::tiled_sgemm<TILE, float>"
summary = "Test fixture: a shared-memory tiled SGEMM written as a C++ template in a namespace and named by its instantiation, as library kernels are; [params] fill its template arguments and NVRTC lowers the name to the mangled symbol the module is asked for."
precision = "fp32"
min_arch = "sm_80"
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
representative = "t16"
[params]
TILE = 16
[variants]
t16 = { TILE = 16 }
t32 = { TILE = 32 }
*/
namespace lessons {

template <int T, typename Real>
__global__ void tiled_sgemm(int M, int N, int K, Real alpha, const Real* A, const Real* B,
                            Real beta, Real* C) {
    __shared__ Real As[T][T], Bs[T][T + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    Real acc = 0;
    for (int k0 = 0; k0 < K; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(long)row * K + k0 + tx] : Real(0);
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(long)(k0 + ty) * N + col] : Real(0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) {
        Real* c = C + (long)row * N + col;
        *c = alpha * acc + (beta != Real(0) ? beta * *c : Real(0));
    }
}

}  // namespace lessons
