/* harness
entry = "sgemm_hoisted"
summary = "10's kernel (the same source, included) with tiles for sizes that leave 10's 128 x 256 tiles on 8 (512^3) or 32 (1024^3) of 132 SMs: 32 x 64 to 128 x 128 tiles of 4 or 8 warps, so that 64-512 blocks share the SMs."
predicted = "10 at 512^3 runs 8 blocks for 89 us (cuBLAS FP32 13.0 us); its FFMA rate per SM at 4096 is ~0.37 TFLOP/s (48.9 TFLOP/s over 132 SMs). With 4 warps per block a warp keeps ~1 FFMA per clock per scheduler only with 2+ blocks per SM; m32n64 at 512 is 128 blocks of 2 MFLOP: ~6-8 us per block at 1-2 warps per scheduler, ~8-10 us in all (130-160% of cuBLAS). At 1024^3 (cuBLAS 60 us) m64n64 is 256 blocks, 2 per SM: 8.4 M FMA per SM at ~70% of 128 per clock, ~48 us (~125%); m64n128 (128 blocks of 8 warps) ~55 us. At 2048 and up, 10's tuned 128 x 256 stays the best (fewer bytes per FLOP)."
precision = "fp32"
layout_b = "row"
min_arch = "sm_80"
representative = "m64n64"
block = ["(BM // WM) * (BN // WN) * 32"]
grid = ["cdiv(N, BN)", "cdiv(M, BM)"]
dynamic_smem_bytes = "STAGES * BK * (BM + PADA + BN) * 4"
constraints = ["K % 4 == 0", "N % 4 == 0", "BM % WM == 0", "BN % WN == 0", "WM % 32 == 0", "WN % 16 == 0", "STAGES >= 2", "(BM * BK) % ((BM // WM) * (BN // WN) * 32) == 0", "(BK * BN // 4) % ((BM // WM) * (BN // WN) * 32) == 0", "((BM // WM) * (BN // WN) * 32) % BK == 0", "((BM // WM) * (BN // WN) * 32) % (BN // 4) == 0"]
[model]  # napkin: as 10's
tile_m = "BM"
tile_n = "BN"
smem_loads = "WM // 32 + WN // 16"
fmas = "(WM // 8) * (WN // 4)"
smem_ld_requests = "(WM // 32 + WN // 16) * BK"
smem_ld_wavefronts = "(2 * (WM // 32) + 4 * (WN // 16)) * BK"
[params]
BM = 64
BN = 64
BK = 16
WM = 32
WN = 32
PADA = 4
STAGES = 4
MINB = 1
[variants]
m32n64 = { BM = 32, WN = 16 }
m64n64 = { }
m64n128 = { BN = 128 }
m128n128 = { BM = 128, BN = 128, WM = 64 }
*/
// The kernel is 10_hoisted.cu's, included whole (its spec comment is only a comment here):
// only the tile parameters differ, passed as -D defines like every variant's. Napkin and
// what the GPU run must show: notes/small_sizes.md.
#include "10_hoisted.cu"
