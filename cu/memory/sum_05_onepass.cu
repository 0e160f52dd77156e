/* harness
kind = "buffers"
entry = "sum_onepass"
summary = "As 04 (float4, 4 loads in flight, one wave of <= 1056 blocks), but deterministic in one launch: each block writes its sum to partials[block], and the last block to take a ticket (threadfence + atomicInc) adds the partials in a fixed order and writes out."
predicted = "As 04 at 2^28 and 2^30 (~2.9-3.05 TB/s, 87-91% of DRAM peak): the extra work is one 4 KB read of the partials by one block (~1-2 us of latency, <0.2% of 1.3 ms at 2^30), and one kernel where CUB launches two, so it should match or pass CUB at 2^20 too (~1-1.5 TB/s there, launch-bound)."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24", "1<<28", "1<<30"]
args = ["x", "out", "partials", "counter", "N:i64"]
block = ["256"]
grid = ["min(cdiv(N, 2048), 1056)"]
dynamic_smem_bytes = "0"
reference = "sum"
bytes = "4*N + 4"
flops = "N"
baseline = "cub_sum"

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
shape = ["1056"]
role = "scratch"

[buffers.counter]
dtype = "u32"
shape = ["1"]
role = "scratch"
init = "zero"
*/
// Measurements, napkin and lessons: notes/sum.md
// Rung 5: rung 4's streaming loop with no atomics on the data, so the bits are the same on
// every launch. The grid is a function of N alone (min(cdiv(N, 2048), 1056) <= 1056, the
// length of partials) and so is every thread's share of x, every block's reduction order and
// the last block's order over the partials: one N, one result, whichever block ends last.
//   1. Each thread sums its float4s (4 loads in flight, 4 accumulators) and the N % 4 tail,
//      the block reduces with shuffles, thread 0 stores partials[blockIdx.x].
//   2. Thread 0: __threadfence() (the store is visible GPU-wide before the ticket: with the
//      relaxed atomic after it, a release pattern), then ticket = atomicInc(counter, G - 1).
//      atomicInc wraps: the G-th ticket (value G - 1) stores 0 back, so the counter is 0
//      again after every launch, even without the harness's init = "zero".
//   3. The block that drew G - 1 is the last: all G partials are written. Thread 0 fences
//      again (acquire), a barrier passes the news to the block, and its 256 threads read the
//      partials with ld.global.cg (from L2: no stale L1 line can answer), thread t adding
//      partials[t], partials[t + 256], ... in that order; a shuffle reduction; thread 0 writes
//      out, which is poisoned before the launch and written exactly once, by that block.
// Napkin: rung 4's ~2.9-3.05 TB/s at 2^28 and up; the tail costs one extra block-reduction
// round trip (~1-2 us) at the end of the last block only.

#define THREADS 256
#define WARPS (THREADS / 32)
#define UNROLL 4

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;  // lane 0 holds the warp's sum
}

// The block's sum, valid in thread 0; one barrier. warp_sums is reused by the next call, which
// is safe only after another barrier (warp 0 must have read it): callers put one between.
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

extern "C" __global__ void __launch_bounds__(THREADS, 8)
sum_onepass(const float* __restrict__ x, float* __restrict__ out, float* __restrict__ partials,
            unsigned int* __restrict__ counter, long long N)
{
    __shared__ bool is_last;
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = N >> 2;                                   // whole float4s
    const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
    const long long G = (long long)gridDim.x * THREADS;            // threads in the grid
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    long long i = g;
    for (; i + (UNROLL - 1) * G < n4; i += UNROLL * G) {
        const float4 v0 = __ldg(x4 + i);
        const float4 v1 = __ldg(x4 + i + G);
        const float4 v2 = __ldg(x4 + i + 2 * G);
        const float4 v3 = __ldg(x4 + i + 3 * G);
        a0 += hsum(v0);
        a1 += hsum(v1);
        a2 += hsum(v2);
        a3 += hsum(v3);
    }
    for (; i < n4; i += G)                                         // < UNROLL float4s left
        a0 += hsum(__ldg(x4 + i));
    if (g < (N & 3))                                               // the N % 4 tail
        a1 += __ldg(x + 4 * n4 + g);
    const float block = block_sum((a0 + a1) + (a2 + a3));

    if (threadIdx.x == 0) {
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
