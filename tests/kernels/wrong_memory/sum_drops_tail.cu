/* harness
kind = "buffers"
entry = "sum_drops_tail"
summary = "Wrong-kernel fixture (issue 35): a deterministic 128-block sum (each block sums its part, the last block to finish sums the partials in a fixed order and resets its counter) that walks x in whole tiles of 256, N / 256 of them, and so never reads the last N % 256 elements. Expected finding: wrong at sizes that are not a multiple of 256 (far outside the bound at the battery's sizes; at a large N a short tail may hide inside it); right, and the same bits at every launch, where N % 256 == 0."
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
// A fixed grid of BLOCKS blocks (its size never changes with N, so the order of every addition,
// and the result's bits, depend on N and x alone). Each block sums its tiles, writes its
// partial, and the last block to finish (a counter it resets) sums the partials in a fixed
// order. The defect is the tile count alone: N / THREADS instead of cdiv(N, THREADS) with a
// bounds check. At the check's odd sizes the missing tail is far outside the sum's bound; at
// a large N it may hide (up to 255 missing elements against a bound of about 2 sqrt(N) u sum|x|).

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

extern "C" __global__ void __launch_bounds__(THREADS) sum_drops_tail(const float* x, float* out,
                                                                     int N) {
    float acc = 0.0f;
    const size_t tiles = (size_t)N / THREADS;  // the defect: the partial last tile is never read
    for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) acc += x[t * THREADS + threadIdx.x];
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
    }
}
