/* harness
kind = "buffers"
entry = "sum_vec4"
summary = "As 03, but 128-bit loads (float4) and 4 independent float4 loads per trip of the grid-stride loop into 4 accumulators; grid min(cdiv(N, 2048), 1056); the N % 4 tail read as scalars; one atomicAdd per block."
predicted = "~2.9-3.05 TB/s at 2^28 and 2^30 (87-91% of DRAM peak, at the read-stream ceiling, within a few % of CUB): 64 B in flight per thread = 128 KB per SM, 5x the ~25 KB that Little's law needs, and 4x fewer load instructions than 03; ~1-1.5 TB/s at 2^20 where the ~2-3 us of launch and ramp are as long as the 1.3 us of DRAM time."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24", "1<<28", "1<<30"]
args = ["x", "out", "N:i64"]
block = ["256"]
grid = ["min(cdiv(N, 2048), 1056)"]
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
// Rung 4: bytes in flight, explicitly. x is read as float4 (x comes from cudaMalloc, so it is
// 256-byte aligned and float4 j = x[4j .. 4j+3] is always aligned): n4 = N / 4 whole float4s,
// then the last N % 4 (0..3) elements, read as scalars by global threads 0..N%4-1. A trip of
// the grid-stride loop issues UNROLL = 4 independent LDG.128 (float4s i, i+G, i+2G, i+3G,
// G = gridDim.x * 256 threads) before any of them is added, each into its own accumulator,
// so a thread has 64 B in flight and the adds never wait on each other; a remainder loop
// takes the last < 4 G float4s one at a time. Each warp load is 512 contiguous bytes.
// Grid: min(cdiv(N, 2048), 1056): 1056 = 132 SMs x 8 blocks of 256, the H100's residency at
// <= 32 registers (__launch_bounds__(256, 8) holds ptxas to it), one wave; smaller inputs get
// one block per 2048 elements (2 float4s a thread).
// Napkin: 128 KB per SM in flight against ~25 KB needed (3.35 TB/s x ~1 us / 132), and a
// quarter of 03's load instructions: DRAM-bound, ~2.9-3.05 TB/s at 2^28 and 2^30, where a
// read-only stream on an H100 tops out (a few % under the 3.35 TB/s nominal).
// Atomics: <= 1056 per launch, noise against ~1.3 ms at 2^30; nondeterministic bits still.

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

// The block's sum, valid in thread 0; one barrier.
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
sum_vec4(const float* __restrict__ x, float* __restrict__ out, long long N)
{
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = N >> 2;                                   // whole float4s
    const long long g = (long long)blockIdx.x * THREADS + threadIdx.x;
    const long long G = (long long)gridDim.x * THREADS;            // threads in the grid
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    long long i = g;
    // main loop: all UNROLL float4s of a trip are in range, loads issued before any add
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
    float acc = block_sum((a0 + a1) + (a2 + a3));
    if (threadIdx.x == 0)
        atomicAdd(out, acc);
}
