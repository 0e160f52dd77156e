/* harness
kind = "buffers"
entry = "softmax_no_max"
summary = "Wrong-kernel fixture (issue 35): a row softmax, one 256-thread block a row, that takes exp(x) without subtracting the row's max. Right on the default draw ([-1, 1] and its shift: exp stays below 5); on the wide draw (range x 128, so x up to about 190) expf(x) overflows past 88.7, the row sum is Inf and y is 0 or Inf/Inf = NaN. Expected finding: overflows on wide inputs (NaN in y there, right at every size and seed otherwise)."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["1024x1024"]
args = ["x", "y", "ROWS", "COLS"]
block = ["256"]
grid = ["ROWS"]
reference = "softmax"
bytes = "8*ROWS*COLS"
baseline = "none"

[buffers.x]
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "in"

[buffers.y]
dtype = "f32"
shape = ["ROWS", "COLS"]
role = "out"
*/
// Row r is block r: its threads stride over the row's columns (any COLS), the block reduces the
// sum of exp(x) in a fixed order (deterministic), and each element is exp(x) / sum, rounded once.
// An honest kernel reduces the row's max first and takes exp(x - max) in both places: the
// one change that separates it from this one.

#define THREADS 256

// The block's sum, the same in every thread: warps by butterfly shuffles, then every thread
// adds the warps' sums in order (a fixed order of additions).
__device__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    __syncthreads();  // an earlier call's reads of warp_sums are done
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_sums[0];
    for (int w = 1; w < THREADS / 32; ++w) v += warp_sums[w];
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax_no_max(const float* x, float* y,
                                                                     int ROWS, int COLS) {
    const float* xr = x + (size_t)blockIdx.x * COLS;
    float* yr = y + (size_t)blockIdx.x * COLS;
    float s = 0.0f;
    for (int c = threadIdx.x; c < COLS; c += THREADS) s += expf(xr[c]);  // the defect: no - max
    s = block_sum(s);
    for (int c = threadIdx.x; c < COLS; c += THREADS) yr[c] = expf(xr[c]) / s;
}
