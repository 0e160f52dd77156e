/* harness
kind = "buffers"
entry = "sum_atomic_undeclared"
summary = "Wrong-kernel fixture (issue 35): each of up to 1024 blocks sums its grid-stride slice of x in a fixed order and atomicAdds the partial into out (init = zero): within the sum's bound at every size and launch, but the partials arrive in another order at every launch and the spec does not declare nondeterministic = true. Expected finding: nondeterministic (undeclared): two launches on the same inputs differ in their last bits, each within the bound (possible from three blocks, N > 512; all but certain at 65537 and up, 257 blocks or more)."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20"]
args = ["x", "out", "N"]
block = ["256"]
grid = ["min(cdiv(N, 256), 1024)"]
reference = "sum"
bytes = "4*N + 4"
baseline = "none"
# the defect: no nondeterministic = true, though the atomics' order changes from launch to launch

[buffers.x]
dtype = "f32"
shape = ["N"]
role = "in"

[buffers.out]
dtype = "f32"
shape = ["1"]
role = "out"
init = "zero"  # the target of the atomics: zeroed before every launch
*/

#define THREADS 256

// The block's sum in thread 0 (warps by shuffles, then warp 0 over the warps' sums).
__device__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) sum_atomic_undeclared(const float* x,
                                                                            float* out, int N) {
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < (size_t)N; i += stride)
        acc += x[i];
    acc = block_sum(acc);
    // the blocks' partials reach out in the order they finish: FP32 addition is not
    // associative, so the last bits of out change from launch to launch
    if (threadIdx.x == 0) atomicAdd(out, acc);
}
