/* harness
kind = "buffers"
entry = "sum_shuffle"
summary = "Grid-stride loop (each thread sums many elements into a register), warp shuffles then 8 warp sums in shared memory, one atomicAdd per block: at most 1056 blocks, so at most 1056 atomics."
predicted = "~2.0-2.5 TB/s at 2^28 and 2^30 (60-75% of DRAM peak): the atomics and the barrier tree are gone from the cost; what is left is bytes in flight, 4 scalar loads per thread per unrolled trip (ptxas unrolls the loop 4x) = ~32 KB per SM where ~25 KB is the bare need, and 4-byte loads make 4x the load instructions and L1 requests of float4."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24", "1<<28", "1<<30"]
args = ["x", "out", "N:i64"]
block = ["256"]
grid = ["min(cdiv(N, 256), 1056)"]
dynamic_smem_bytes = "0"
reference = "sum"
bytes = "4*N + 4"
flops = "N"
baseline = "cub_sum"
nondeterministic = true

[buffers.x]
dtype = "f32"
shape = ["N"]
role = "in"

[buffers.out]
dtype = "f32"
shape = ["1"]
role = "out"
init = "zero"
*/
// Measurements, napkin and lessons: notes/sum.md
// Rung 3: the grid no longer grows with N. At most 1056 = 132 SMs x 8 blocks of 256 threads
// (the H100's whole residency at <= 32 registers a thread) walk the input with a grid-stride
// loop, thread g adding x[g], x[g + G], x[g + 2G], ... (G = gridDim.x * 256) into one
// register: consecutive threads read consecutive words, so each warp load is one 128-byte
// line. Then the block's 256 sums are reduced with __shfl_down_sync inside each warp (5
// steps, no shared memory, no barrier) and the 8 warp sums through shared memory (one
// barrier) and a last shuffle in warp 0; thread 0 adds the block's sum into out.
// What it changes: N / 256 atomics become <= 1056, the 8-step barrier tree becomes one
// barrier, and a block lives for the whole kernel instead of for one 1 KB load.
// What it keeps: 4-byte loads. ptxas unrolls the grid-stride loop 4x (4 independent LDGs per
// trip, see notes/sum.md), so ~4 x 4 B x 2048 threads = 32 KB per SM in flight, just over
// the ~25 KB that 3.35 TB/s x ~1 us needs per SM: expect most, not all, of DRAM bandwidth.
// Napkin: ~2.0-2.5 TB/s at 2^28 and 2^30.
// Numerics: each thread sums <= cdiv(N, G) elements (~4000 at 2^30) in FP32, 1056 block sums
// meet in out; both far inside the bound.

#define THREADS 256
#define WARPS (THREADS / 32)

__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;  // lane 0 holds the warp's sum
}

// The block's sum, valid in thread 0. One barrier; the caller must not call it again before
// a barrier (warp_sums is reused).
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

extern "C" __global__ void __launch_bounds__(THREADS)
sum_shuffle(const float* __restrict__ x, float* __restrict__ out, long long N)
{
    const long long stride = (long long)gridDim.x * THREADS;
    float acc = 0.0f;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < N; i += stride)
        acc += x[i];
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        atomicAdd(out, acc);
}
