/* harness
kind = "buffers"
entry = "sum_smem_tree"
summary = "One element per thread, a shared-memory tree per 256-thread block (8 barrier steps), one atomicAdd per block: N/256 same-address atomics instead of N."
predicted = "~1.0-1.3 TB/s at 2^24 and 2^28 (30-40% of DRAM peak): a block moves 1 KB and then spends ~8 barrier steps in the tree, so only ~8 KB per SM (~1 MB on the GPU) is in flight where ~25 KB per SM is needed, and N/256 same-address atomics (2^20 at 2^28: ~0.6 ms at ~1.7 G/s) cap it near 1.7 TB/s anyway; ~0.5-1 TB/s at 2^20 (4096 blocks, ~4 waves, launch latency as long as the loads)."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24", "1<<28"]  # not 2^30: 2^22 same-address FP32 adds lose the bound (notes/sum.md)
args = ["x", "out", "N:i64"]
block = ["256"]
grid = ["cdiv(N, 256)"]
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
// Rung 2: the textbook block reduction (Harris's "sequential addressing" version): each
// thread loads one element (0 past the end), the block halves its 256 values in shared
// memory 8 times (thread t adds s[t + h] into s[t], h = 128 .. 1; consecutive threads touch
// consecutive words, so no bank conflicts), and thread 0 adds the block's sum into out.
// What it changes against rung 1: N / 256 atomics instead of N.
// What it keeps: one element per thread, so a block moves 1 KB and spends most of its life in
// the barrier tree; with 8 resident blocks per SM the GPU has ~132 x 8 KB = ~1 MB of loads
// in flight, where Little's law (3.35 TB/s x ~0.8 us loaded latency) wants ~2.7 MB. And
// 2^20 blocks at N = 2^28 means 2^20 same-address atomics: ~0.6 ms at ~1.7 G/s against
// 0.32 ms of DRAM time, so expect the atomics and the block turnover, not DRAM, to bound it.
// Napkin: ~1.0-1.3 TB/s at 2^24 and 2^28.
// Numerics: N/256 block sums (each ~256 m, spread ~9) go into one FP32 accumulator. At
// N = 2^30 its ulp (32-64) exceeds the spread of what is added, the rounding turns biased,
// and for some means (m ~ 0.40-0.48 of the harness's [0, 0.5)) the error passes the bound
// (simulated in notes/sum.md): the timed sizes stop at 2^28, worst simulated error 2% of it.
// 64-bit index: blockIdx.x * 256 reaches 2^28 and more; grid cdiv(N, 256) <= 2^22 at 2^30.

#define THREADS 256

extern "C" __global__ void __launch_bounds__(THREADS)
sum_smem_tree(const float* __restrict__ x, float* __restrict__ out, long long N)
{
    __shared__ float s[THREADS];
    const unsigned t = threadIdx.x;
    const long long i = (long long)blockIdx.x * THREADS + t;
    s[t] = i < N ? x[i] : 0.0f;  // the tail block pads with zeros
    __syncthreads();
#pragma unroll
    for (unsigned h = THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0)
        atomicAdd(out, s[0]);
}
