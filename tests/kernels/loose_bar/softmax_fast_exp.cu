/* harness
kind = "buffers"
entry = "softmax_fast_exp"
summary = "Loose-bar fixture (issue 57, item 10): a right three-pass softmax with __expf (ex2.approx, relative error up to about 2^-21): must pass every check at every battery shape."
min_arch = "sm_80"
dims = ["ROWS", "COLS"]
sizes = ["8192x16384", "4096x32768"]
args = ["x", "y", "ROWS", "COLS"]
block = ["256"]
grid = ["ROWS"]
dynamic_smem_bytes = "0"
reference = "softmax"
bytes = "2*4*ROWS*COLS"
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
// Issue 57 fixture: cu/memory/softmax_01_three_pass.cu with one change (__expf for expf).
#define EXP __expf  // fast, approximate
#define SCALE 1.0f
#define THREADS 256
#define WARPS (THREADS / 32)
#define NEG_INF (__int_as_float(0xff800000))

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_max(float v, float* red) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < WARPS ? red[threadIdx.x & 31] : NEG_INF;
    return warp_max(v);
}

__device__ __forceinline__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = (threadIdx.x & 31) < WARPS ? red[threadIdx.x & 31] : 0.0f;
    return warp_sum(v);
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_fast_exp(const float* __restrict__ x, float* __restrict__ y, int ROWS, int COLS) {
    __shared__ float red_max[WARPS];
    __shared__ float red_sum[WARPS];
    (void)ROWS;
    const size_t offset = (size_t)blockIdx.x * (size_t)COLS;
    const float* xr = x + offset;
    float* yr = y + offset;
    float m = NEG_INF;
    for (int j = threadIdx.x; j < COLS; j += THREADS) m = fmaxf(m, xr[j]);
    m = block_max(m, red_max);
    float s = 0.0f;
    for (int j = threadIdx.x; j < COLS; j += THREADS) s += EXP(xr[j] - m);
    s = block_sum(s, red_sum) * SCALE;
    for (int j = threadIdx.x; j < COLS; j += THREADS) yr[j] = EXP(xr[j] - m) / s;
}
