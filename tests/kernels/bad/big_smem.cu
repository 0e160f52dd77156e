/* harness
entry = "big_smem"
summary = "Test fixture: asks for 240 KB of dynamic shared memory per block (sm_90 allows 227)."
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
dynamic_smem_bytes = "240 * 1024"
*/
extern "C" __global__ void big_smem(int M, int N, int K, float alpha, const float* A,
                                    const float* B, float beta, float* C) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = A[threadIdx.x];
    __syncthreads();
    C[threadIdx.x] = buf[31 - threadIdx.x];
}
