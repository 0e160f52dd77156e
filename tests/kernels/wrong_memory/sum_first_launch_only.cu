/* harness
kind = "buffers"
entry = "sum_first_launch_only"
summary = "Wrong-kernel fixture (issue 35): a 128-block last-block-done sum whose __device__ counter of finished blocks is never reset. The first launch after the module loads counts 0..127, its last block sees 127 and writes the sum (right); every later launch counts on from 128, no block sees 127, and out keeps the poison. Expected finding: keeps state between launches (launch 1 right, launches 2 and 3 on the same inputs unwritten and alike); then unwritten at every later check."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20"]
args = ["x", "out", "N"]
block = ["256"]
grid = ["128"]
reference = "sum"
bytes = "4*N + 4"
baseline = "none"

[buffers.x]
dtype = "f32"
shape = ["N"]
role = "in"

[buffers.out]
dtype = "f32"
shape = ["1"]
role = "out"
*/
// The grid is fixed (BLOCKS blocks at every N): a later launch never has more blocks than the
// counter has already passed, so no later launch finds a "last" block by accident (with a grid
// that grows with N, a larger launch would, and its early "last" block would sum partials not
// yet written: a race on top of the planted defect). Each block sums a grid-stride slice of x,
// writes its partial, and counts itself done; the block that counts gridDim.x - 1 sums the
// partials in a fixed order. Deterministic; right on the first launch at any N.

#define THREADS 256
#define BLOCKS 128

__device__ float partials[BLOCKS];
__device__ unsigned int blocks_done = 0;  // the defect: never set back to 0

// The block's sum in thread 0 (warps by shuffles, then warp 0 over the warps' sums): the same
// order of additions at every launch.
__device__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    __syncthreads();  // an earlier call's reads of warp_sums are done
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    }
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) sum_first_launch_only(const float* x,
                                                                            float* out, int N) {
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < (size_t)N; i += stride)
        acc += x[i];
    acc = block_sum(acc);

    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = acc;
        __threadfence();  // the partial is visible before the count says so
        last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;  // true in the first launch only
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float v = 0.0f;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += THREADS) v += __ldcg(&partials[b]);
    v = block_sum(v);
    if (threadIdx.x == 0) out[0] = v;  // (the honest kernel also sets blocks_done = 0 here)
}
