/* harness
entry = "driver_headers"
summary = "Test fixture: a kernel that includes <cuda.h>, <cudaTypedefs.h>, <cuda/barrier> and <cuda/ptx> as fast.cu-style kernels do, for CUtensorMap, the PFN typedefs, cuda::barrier and cuda::ptx; compiled by NVRTC with -default-device."
precision = "fp32"
min_arch = "sm_90"
block = ["32"]
grid = ["1"]
*/
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda/barrier>
#include <cuda/ptx>

static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
static_assert(alignof(CUtensorMap) >= 64, "CUtensorMap is 64-byte aligned (128 in CUDA 13)");
static_assert(sizeof(PFN_cuTensorMapEncodeTiled_v12000) == sizeof(void*), "cudaTypedefs.h");

__device__ float twice(float x) { return 2.0f * x; }

extern "C" __global__ void driver_headers(int M, int N, int K, float alpha, const float* A,
                                          const float* B, float beta, float* C) {
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    __syncthreads();
    bar.arrive_and_wait();
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    if (blockIdx.x == 0 && threadIdx.x == 0 && M > 0 && N > 0) C[0] = twice(alpha);
}
