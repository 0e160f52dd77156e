/* harness
kind = "buffers"
entry = "sum_unwritten"
summary = "Wrong-kernel fixture (issue 35): the honest deterministic 128-block last-block-done sum, except that the last block stores the result only when N is a multiple of 256. Expected finding: unwritten at every size that is not a multiple of 256 (out keeps the poison sentinel); right, bit for bit the same on every launch, where N % 256 == 0."
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
// A fixed grid of BLOCKS blocks, each summing a grid-stride slice of x (every element, tail
// included); the last block to finish (a counter it resets, whatever N is) sums the partials
// in a fixed order. Only the store of the result is guarded.

#define THREADS 256
#define BLOCKS 128

__device__ float partials[BLOCKS];
__device__ unsigned int blocks_done = 0;

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

extern "C" __global__ void __launch_bounds__(THREADS) sum_unwritten(const float* x, float* out,
                                                                    int N) {
    float acc = 0.0f;
    const size_t stride = (size_t)gridDim.x * THREADS;
    for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < (size_t)N; i += stride)
        acc += x[i];
    acc = block_sum(acc);

    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = acc;
        __threadfence();  // the partial is visible before the count says so
        last = atomicAdd(&blocks_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    float v = 0.0f;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += THREADS) v += __ldcg(&partials[b]);
    v = block_sum(v);
    if (threadIdx.x == 0) {
        if (N % THREADS == 0) out[0] = v;  // the defect: no store when N has a partial tile
        blocks_done = 0;                   // ready for the next launch
    }
}
