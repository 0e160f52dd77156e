/* harness
entry = "P12::gemm_tma<BM, BN, BK, QSIZE>"
summary = "Test fixture (compiled offline only, never launched): a file shaped like a public Hopper kernel brought as written - a kernel template whose parameters BM, BN, BK and QSIZE are the spec's [params], in a namespace, with a __host__ tensor-map builder, host globals, a schedule built in std::vector, a launcher with <<<...>>>, and a using-declaration of it, beside <cuda.h> (NVRTC's -default-device)."
precision = "bf16"
min_arch = "sm_90"
block = ["128"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "QSIZE * (BM + BN) * BK * 2"
[params]
BM = 128
BN = 128
BK = 64
QSIZE = 3
[tma]
A = ["BK", "BM"]
B = ["BN", "BK"]
*/
#include <cassert>
#include <cstring>
#include <vector>

#include <cuda.h>
#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

namespace P12 {

constexpr int SCHEDULE_LEN = 64;

__device__ static inline unsigned smem_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <int BM, int BN, int BK, int QSIZE>
struct Stages {
    alignas(128) bf16 A[BM * BK * QSIZE];
    alignas(128) bf16 B[BK * BN * QSIZE];
};

template <int BlockRows, int BlockCols, bool swizzle = true>
__host__ static inline CUtensorMap make_tensor_map(bf16* base, int rows, int cols) {
    CUtensorMap map;
    cuuint64_t shape[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t stride[1] = {sizeof(bf16) * cols};
    cuuint32_t box[2] = {BlockCols, BlockRows}, step[2] = {1, 1};
    CUresult status = cuTensorMapEncodeTiled(
        &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, shape, stride, box, step,
        CU_TENSOR_MAP_INTERLEAVE_NONE,
        swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    assert(status == CUDA_SUCCESS);
    return map;
}

CUtensorMap g_map_A, g_map_B;
int g_prev_m = 0;
int* g_schedule;

template <int BM, int BN, int BK, int QSIZE>
__global__ void __launch_bounds__(128) gemm_tma(int M, int N, int K, float alpha,
                                                const bf16* A, const bf16* B, float beta,
                                                float* C,
                                                const __grid_constant__ CUtensorMap map_A,
                                                const __grid_constant__ CUtensorMap map_B) {
    extern __shared__ __align__(128) unsigned char smem[];
    auto& stages = *reinterpret_cast<Stages<BM, BN, BK, QSIZE>*>(smem);
    const int row = blockIdx.y * BM + threadIdx.x, col = blockIdx.x * BN;
    if (row < M && col < N && K > 0) {
        C[(size_t)row * N + col] = alpha * (float)A[(size_t)row * K] * smem_address(stages.A)
                                   + beta * (float)B[col] + (float)(size_t)&map_A
                                   + (float)(size_t)&map_B;
    }
}

// Rotate a quadrant of the curve (plain integer code: a device function under -default-device)
void rotate(int n, int& x, int& y, int rx, int ry) {
    if (ry == 0) {
        if (rx == 1) { x = n - 1 - x; y = n - 1 - y; }
        int t = x; x = y; y = t;
    }
}

void build_schedule(int tiles_m, int tiles_n, int sms, int* out) {
    std::vector<std::vector<int>> per_sm(sms);
    for (int t = 0; t < tiles_m * tiles_n; ++t) per_sm[t % sms].push_back(t);
    memset(out, -1, sizeof(int) * sms * SCHEDULE_LEN);
    for (int s = 0; s < sms; ++s)
        for (size_t i = 0; i < per_sm[s].size(); ++i) out[s * SCHEDULE_LEN + i] = per_sm[s][i];
}

void run_gemm_tma(int M, int N, int K, bf16* A, bf16* B, float* C) {
    constexpr int BM = 128, BN = 128, BK = 64, QSIZE = 3;
    if (g_prev_m != M) {
        g_map_A = make_tensor_map<BM, BK>(A, M, K);
        g_map_B = make_tensor_map<BN, BK>(B, N, K);
        std::vector<int> schedule(132 * SCHEDULE_LEN);
        build_schedule(M / BM, N / BN, 132, schedule.data());
        cudaMalloc((void**)&g_schedule, schedule.size() * sizeof(int));
        g_prev_m = M;
    }
    constexpr size_t smem = sizeof(Stages<BM, BN, BK, QSIZE>);
    gemm_tma<BM, BN, BK, QSIZE><<<dim3(N / BN, M / BM), 128, smem>>>(
        M, N, K, 1.0f, A, B, 0.0f, C, g_map_A, g_map_B);
}

}  // namespace P12

using P12::run_gemm_tma;
