/* harness
kind = "buffers"
entry = "sum_tuned"
summary = "Rung 05 (deterministic, one launch, a ticket for the last block) with its shape as parameters for harness tune: THREADS per block, UNROLL float4 loads in flight per thread, BPS blocks per SM, WAVES of such blocks (1: one resident wave, as 05), and CHUNKED: 0 walks the float4s grid-stride as 05 does, 1 gives each block its own contiguous run of tiles (THREADS x UNROLL float4s), as CUB's even-share mapping does."
predicted = "05's 2.99 TB/s at 2^28 at the default point (the same code); a contiguous run per block keeps each block on its own DRAM pages where 05's grid-stride trips touch 4 pages 4 MB apart per warp: worth up to the last 1-2% to CUB (3.03 TB/s at 2^28), or nothing if the DRAM scheduler already merges them."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24", "1<<28", "1<<30"]
args = ["x", "out", "partials", "counter", "N:i64"]
block = ["THREADS"]
grid = ["min(cdiv(N, THREADS * 8), min(SMS * BPS * WAVES, 8192))"]
dynamic_smem_bytes = "0"
constraints = ["THREADS * BPS <= 2048"]
reference = "sum"
bytes = "4*N + 4"
flops = "N"
baseline = "cub_sum"

[params]
THREADS = 256
UNROLL = 4
BPS = 8
WAVES = 1
CHUNKED = 0

[tune]
THREADS = [256]
UNROLL = [4, 8]
BPS = [2, 4]
WAVES = [1, 4]
CHUNKED = [0, 1]

[buffers.x]
dtype = "f32"
shape = ["N"]
role = "in"

[buffers.out]
dtype = "f32"
shape = ["1"]
role = "out"

[buffers.partials]
dtype = "f32"
shape = ["8192"]
role = "scratch"

[buffers.counter]
dtype = "u32"
shape = ["1"]
role = "scratch"
init = "zero"

[tuned.sm_90]
THREADS = 256
UNROLL = 8
BPS = 4
WAVES = 4
CHUNKED = 1
*/
// Measurements, napkin and lessons: notes/sum.md ("Rung 07: the shape, tuned")
// Rung 7: rung 5 with its shape opened to harness tune. The grid, every thread's share of x,
// every reduction order and the last block's order over the partials depend on N and the
// parameters alone, so each point is deterministic, as 05 is.
//   CHUNKED 0: float4 i of thread g = blockIdx.x * THREADS + threadIdx.x is g, g + G, ...
//     (G threads in the grid), UNROLL of them loaded before any is added.
//   CHUNKED 1: the float4s are cut into tiles of THREADS x UNROLL; block b takes tiles
//     [b * per, (b + 1) * per), per = cdiv(tiles, gridDim.x), and reads each tile as UNROLL
//     coalesced rows of THREADS float4s (512 B per warp load, as in 0).
// The grid never exceeds 8192 blocks, the length of partials (an H100 at BPS 8: 1056). With
// WAVES > 1 the blocks outnumber what the SMs hold at once: a block that ends early makes room
// for the next, where one wave waits on its slowest block.
// Napkin: as 05; at UNROLL 8 a thread holds 32 live floats of loads, so BPS x THREADS = 2048
// threads per SM (32 registers each) cannot hold them without spilling: tune skips such points.

#ifndef THREADS
#define THREADS 256
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef BPS
#define BPS 8
#endif
#ifndef WAVES
#define WAVES 1
#endif
#ifndef CHUNKED
#define CHUNKED 0
#endif
#define WARPS (THREADS / 32)

static_assert(THREADS % 32 == 0 && THREADS <= 1024, "THREADS: whole warps, at most 1024");
static_assert(UNROLL >= 1 && UNROLL <= 16, "UNROLL: 1 to 16 loads in flight");

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;  // lane 0 holds the warp's sum
}

// The block's sum, valid in thread 0; one barrier. Callers put a barrier between two calls.
__device__ __forceinline__ float block_sum(float v)
{
    __shared__ float warp_sums[WARPS];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < WARPS ? warp_sums[lane] : 0.0f;
        v = warp_sum(v);
    }
    return v;
}

__device__ __forceinline__ float hsum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// Adds float4s first, first + stride, ... (UNROLL of them per trip, all loaded before any is
// added) while the trip's last one is below end, then the rest one at a time, into acc.
__device__ __forceinline__ void stream(const float4* __restrict__ x4, long long first,
                                       long long end, long long stride, float (&acc)[UNROLL])
{
    long long i = first;
    for (; i + (UNROLL - 1) * stride < end; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            v[u] = __ldg(x4 + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            acc[u] += hsum(v[u]);
    }
    for (; i < end; i += stride)
        acc[0] += hsum(__ldg(x4 + i));
}

extern "C" __global__ void __launch_bounds__(THREADS, BPS)
sum_tuned(const float* __restrict__ x, float* __restrict__ out, float* __restrict__ partials,
          unsigned int* __restrict__ counter, long long N)
{
    __shared__ bool is_last;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = N >> 2;                                   // whole float4s
    const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
        acc[u] = 0.0f;
#if CHUNKED
    const long long tile = (long long)THREADS * UNROLL;
    const long long per = ((n4 + tile - 1) / tile + gridDim.x - 1) / gridDim.x;  // tiles/block
    const long long begin = (long long)blockIdx.x * per * tile;
    const long long end = begin + per * tile < n4 ? begin + per * tile : n4;
    stream(x4, begin + threadIdx.x, end, THREADS, acc);
#else
    stream(x4, g, n4, (long long)gridDim.x * THREADS, acc);
#endif
    if (g < (N & 3))                                               // the N % 4 tail
        acc[0] += __ldg(x + 4 * n4 + g);
    float mine = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
        mine += acc[u];
    const float block = block_sum(mine);

    if (threadIdx.x == 0) {                                        // rung 05's ticket
        partials[blockIdx.x] = block;
        __threadfence();                                           // release: partial, then ticket
        const unsigned ticket = atomicInc(counter, gridDim.x - 1); // wraps to 0 for the next launch
        is_last = ticket == gridDim.x - 1;
        if (is_last)
            __threadfence();                                       // acquire: ticket, then partials
    }
    __syncthreads();                                               // also: warp_sums free again
    if (!is_last)
        return;
    float s = 0.0f;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += THREADS)    // fixed order
        s += __ldcg(partials + b);
    s = block_sum(s);
    if (threadIdx.x == 0)
        *out = s;
}
