/* harness
entry = "future_arch"
summary = "Test fixture: declares min_arch sm_100, which an H100 (sm_90) lacks."
precision = "fp32"
min_arch = "sm_100"
block = ["32"]
grid = ["1"]
*/
extern "C" __global__ void future_arch(int M, int N, int K, float alpha, const float* A,
                                       const float* B, float beta, float* C) {
    C[threadIdx.x] = A[threadIdx.x];
}
