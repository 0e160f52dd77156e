/* harness
entry = "fault"
summary = "Test fixture: writes far outside any allocation (CUDA_ERROR_ILLEGAL_ADDRESS)."
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
*/
extern "C" __global__ void fault(int M, int N, int K, float alpha, const float* A,
                                 const float* B, float beta, float* C) {
    C[threadIdx.x + (1ll << 40)] = 1.0f;
}
