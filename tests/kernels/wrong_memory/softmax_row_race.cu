/* harness
kind = "buffers"
entry = "softmax_row_race"
summary = "Wrong-kernel fixture (issue 35): a row softmax, one 256-thread block a row, with the row max reduced right but the row sum gathered by the 8 warps adding their partial sums into one shared float with a plain read-modify-write (no atomic, no barrier between them): updates get lost as the warps interleave, the sum comes out too small and y too large, in different rows at every launch. Expected finding: race (identical launches on the same inputs differ and are wrong); nondeterministic, undeclared."
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
// Row r is block r: its threads stride over the row's columns (any COLS). The max is reduced
// with barriers (warps by butterfly shuffles, then every thread over the warps' maxima), x - max
// keeps exp finite on any input, and each element is exp(x - max) / sum. The race is the one of
// tests/kernels/classes/race.cu (seen on the H100 as a race there): each warp's lane 0 does
// total = total + part on a volatile shared float, so two warps that read total before either
// stores it lose one part. With the atomicAdd the line needs, the kernel is right.

#define THREADS 256

// The block's max, the same in every thread.
__device__ float block_max(float v) {
    __shared__ float warp_max[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
    __syncthreads();
    v = warp_max[0];
    for (int w = 1; w < THREADS / 32; ++w) v = fmaxf(v, warp_max[w]);
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax_row_race(const float* x, float* y,
                                                                       int ROWS, int COLS) {
    const float* xr = x + (size_t)blockIdx.x * COLS;
    float* yr = y + (size_t)blockIdx.x * COLS;
    __shared__ float total;

    float m = __int_as_float(0xff800000);  // -Inf
    for (int c = threadIdx.x; c < COLS; c += THREADS) m = fmaxf(m, xr[c]);
    m = block_max(m);

    if (threadIdx.x == 0) total = 0.0f;
    __syncthreads();
    float s = 0.0f;
    for (int c = threadIdx.x; c < COLS; c += THREADS) s += expf(xr[c] - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0 && threadIdx.x < COLS) {  // the warps that hold columns
        volatile float* t = &total;
        *t = *t + s;  // the defect: read-modify-write without an atomic, updates get lost
    }
    __syncthreads();
    s = total;
    for (int c = threadIdx.x; c < COLS; c += THREADS) yr[c] = expf(xr[c] - m) / s;
}
