/* harness
kind = "buffers"
entry = "softmax_row_race"
summary = "Wrong-kernel fixture (issue 35): a row softmax split over cdiv(COLS, 128) blocks a row; each block reduces the row's max (the whole row, right), sums exp(x - max) over its 128 columns and atomicAdds that part into row_sum[row], a scratch zeroed before every launch, then divides by what the atomic returned plus its part: the row's sum so far, not its total, for every block of the row but the last to add. Which blocks come first changes from launch to launch. Expected finding: race (wrong wherever a row has 2 or more blocks, COLS > 128, with other bits at every launch); nondeterministic, undeclared. Right where COLS <= 128."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["1024x1024"]
args = ["x", "y", "row_sum", "ROWS", "COLS"]
block = ["128"]
grid = ["cdiv(COLS, 128)", "ROWS"]
constraints = ["ROWS <= 65535"]  # a row per grid.y
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

[buffers.row_sum]
dtype = "f32"
shape = ["ROWS"]
role = "scratch"
init = "zero"  # each row's sum is gathered here by atomics: zeroed before every launch
*/
// Block (b, r) holds columns 128 b .. 128 b + 127 of row r, one a thread. The max is the whole
// row's, reduced in every block of the row (warps by butterfly shuffles, then every thread
// over the warps' maxima: a fixed order), so x - max keeps exp finite on any input. The
// block's part of the sum is reduced the same way. The defect is the one line that takes the
// row's total: atomicAdd returns the sum of the parts that reached row_sum[r] before this
// one, so only the last block of the row to add sees the whole row; the others divide by a
// sum too small (y too large), and which block is last, and the order (the bits) of the
// additions, depend on when each block gets there: a race between the blocks of a row,
// undeclared. A right kernel waits for the row's blocks (a second kernel, or a per-row count
// and a wait) before it divides. With one block a row (COLS <= 128) the atomic returns 0 and
// the kernel is right, bit for bit the same at every launch.

#define THREADS 128

// The block's max and sum, the same in every thread.
__device__ float block_max(float v) {
    __shared__ float warp_max[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_max[0];
    for (int w = 1; w < THREADS / 32; ++w) v = fmaxf(v, warp_max[w]);
    return v;
}

__device__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_sums[0];
    for (int w = 1; w < THREADS / 32; ++w) v += warp_sums[w];
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax_row_race(const float* x, float* y,
                                                                       float* row_sum,
                                                                       int ROWS, int COLS) {
    const size_t row = blockIdx.y;
    const float* xr = x + row * COLS;
    float m = __int_as_float(0xff800000);  // -Inf
    for (int c = threadIdx.x; c < COLS; c += THREADS) m = fmaxf(m, xr[c]);
    m = block_max(m);

    const int c = blockIdx.x * THREADS + threadIdx.x;  // this thread's column
    const float e = c < COLS ? expf(xr[c] - m) : 0.0f;
    const float part = block_sum(e);

    __shared__ float total;
    if (threadIdx.x == 0)
        total = atomicAdd(&row_sum[row], part) + part;  // the defect: the sum so far, not the total
    __syncthreads();
    if (c < COLS) y[row * COLS + c] = e / total;
}
