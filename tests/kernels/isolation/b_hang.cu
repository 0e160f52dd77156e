/* harness
entry = "hang"
summary = "Test fixture: spins forever (A holds values in [-1, 1], never 2)."
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
*/
extern "C" __global__ void hang(int M, int N, int K, float alpha, const float* A,
                                const float* B, float beta, float* C) {
    while (*(volatile const float*)A < 2.0f) {
    }
    C[threadIdx.x] = 0.0f;
}
