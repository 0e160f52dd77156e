/* harness
entry = "broken"
summary = "Test fixture: does not compile (a missing expression on line 10)."
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
*/
extern "C" __global__ void broken(int M, int N, int K, float alpha, const float* A,
                                  const float* B, float beta, float* C) { int x = ; }
