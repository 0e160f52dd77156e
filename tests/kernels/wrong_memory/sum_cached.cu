/* harness
kind = "buffers"
entry = "sum_cached"
summary = "Wrong-kernel fixture (issue 35): a right, deterministic 128-block sum on its first launch after the module loads, which also keeps its result in a __device__ variable; every later launch writes the kept value into out without reading x. Expected finding: replays an earlier result (right, bit for bit, on the inputs of its first launch, repeats included; wrong on every fresh draw, whose mean differs)."
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
// The sum itself is the honest one of this folder: a fixed grid of BLOCKS blocks, each summing
// a grid-stride slice of x, the last block to finish (a counter it resets) summing the
// partials in a fixed order. The last block of the first launch also stores the result in
// `kept` and then sets `have_kept`; every block of that launch has already passed the check at
// the top (a block counts itself done only after it), so the first launch computes whole.

#define THREADS 256
#define BLOCKS 128

__device__ float partials[BLOCKS];
__device__ unsigned int blocks_done = 0;
__device__ float kept;                  // the result of the first launch
__device__ unsigned int have_kept = 0;  // set once, never cleared

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

extern "C" __global__ void __launch_bounds__(THREADS) sum_cached(const float* x, float* out,
                                                                 int N) {
    if (*(volatile unsigned int*)&have_kept) {  // the defect: the kept result, x never read
        if (blockIdx.x == 0 && threadIdx.x == 0) out[0] = *(volatile float*)&kept;
        return;
    }
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
        out[0] = v;
        blocks_done = 0;  // ready for the next launch
        kept = v;
        __threadfence();  // kept is visible before the flag that says it is there
        have_kept = 1u;
    }
}
