/* harness
kind = "buffers"
entry = "sum_atomic"
summary = "Every thread atomicAdd's its one element into out: 2^k same-address atomics, the floor of the ladder."
predicted = "Bound by same-address atomics serialised at the one L2 slice that owns out (about one add per L2 clock, ~1.7 G adds/s): ~7 GB/s at every size (0.2% of DRAM peak), not memory at all."
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20", "1<<24"]  # not 2^28/2^30: one FP32 accumulator stalls at 2^25 (notes/sum.md)
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
// Rung 1 of the sum ladder: the reduction written as "everyone adds into the answer". One
// thread per element, grid cdiv(N, 256): at N = 2^30 that is 2^22 blocks, under the 2^31 - 1
// limit of grid.x. Every add is a RED.ADD.F32 to the one address `out`: they reach the L2
// slice that owns it and are applied there one after another, so the time is N / (that
// slice's same-address rate), whatever the DRAM can do.
// Napkin: ~1 same-address atomic per L2 clock (~1.7 GHz) -> ~1.7e9 adds/s -> 4 B x 1.7e9 =
// ~7 GB/s. If the L2 applies a warp's 32 same-address lanes faster than one per clock the rate
// is a few times higher, still two orders of magnitude under the DRAM's 3350 GB/s.
// Numerics, the second lesson: all N adds go into one FP32 accumulator. Once |out| passes
// 2^25 (ulp 4), an element with |x| < 2 rounds away to nothing, so the sum stalls there; for
// inputs in [-1, 1] with mean m it is wrong beyond the bound once m N > 2^25 (m > 1/8 at
// N = 2^28), hence the timed sizes stop at 2^24 (simulated in notes/sum.md).
// out is zeroed by the harness before every launch (init = "zero"); the order of the atomics
// changes from launch to launch, so the bits do too (nondeterministic = true).

extern "C" __global__ void __launch_bounds__(256)
sum_atomic(const float* __restrict__ x, float* __restrict__ out, long long N)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // 64-bit: N up to 2^30+
    if (i < N)
        atomicAdd(out, x[i]);  // result unused: compiles to RED, not ATOM
}
