"""Offline occupancy against hand-worked cases (arithmetic in the comments)."""

import pytest

from harness.archs import KB, get_arch
from harness.errors import HarnessError
from harness.occupancy import carveout_bytes, launch_problems, predict, waves_per_sm

SM80, SM86, SM89, SM90 = (get_arch(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90"))


def test_warps_bound():
    # 256 threads = 8 warps; 64 warps per SM -> 8 blocks. 32 regs: 1024 per warp, 16 warps per
    # sub-partition (16384 / 1024), 64 per SM -> 8 blocks too: a tie.
    occ = predict(SM90, 256, 32)
    assert (occ.block_limit_warps, occ.block_limit_registers, occ.blocks_per_sm) == (8, 8, 8)
    assert occ.occupancy_pct == 100.0 and occ.limiter == "registers & warps"


def test_registers_bound_1024_threads():
    # 64 regs x 32 = 2048 per warp; 16384 / 2048 = 8 warps per sub-partition, 32 per SM;
    # a 1024-thread block is 32 warps -> 1 block, 32 of 64 warps = 50 %.
    occ = predict(SM90, 1024, 64)
    assert occ.block_limit_registers == 1 and occ.blocks_per_sm == 1
    assert occ.occupancy_pct == 50.0 and occ.limiter == "registers"


def test_register_allocation_rounds_per_warp():
    # 255 regs x 32 = 8160, rounded up to 8192 per warp; 16384 / 8192 = 2 warps per
    # sub-partition, 8 per SM; 128 threads = 4 warps -> 2 blocks, 8 warps = 12.5 %.
    occ = predict(SM90, 128, 255)
    assert (occ.block_limit_registers, occ.blocks_per_sm, occ.active_warps_per_sm) == (2, 2, 8)
    assert occ.occupancy_pct == 12.5
    # 40 regs x 32 = 1280 (a multiple of 256); 16384 // 1280 = 12 per sub-partition, 48 per SM;
    # 192 threads = 6 warps -> 8 blocks (48 warps).
    assert predict(SM90, 192, 40).block_limit_registers == 8
    # 33 regs x 32 = 1056 -> 1280 per warp: same limit as 40 registers.
    assert predict(SM90, 192, 33).block_limit_registers == 8


def test_partial_warps_count_as_whole_warps():
    # 33 threads = 2 warps; 64 / 2 = 32 blocks by warps, 32 by the SM's block limit.
    occ = predict(SM90, 33, 16)
    assert occ.warps_per_block == 2 and occ.blocks_per_sm == 32
    assert occ.occupancy_pct == 100.0 and occ.limiter == "warps & blocks"


def test_block_count_limit():
    # 32 threads = 1 warp: 64 by warps, but at most 32 blocks per SM on sm_90 -> 50 %.
    occ = predict(SM90, 32, 16)
    assert occ.blocks_per_sm == 32 and occ.limiter == "blocks" and occ.occupancy_pct == 50.0
    # sm_86 holds 16 blocks and 48 warps: 16 one-warp blocks = 16 / 48 = 33.3 %
    occ = predict(SM86, 32, 16)
    assert occ.blocks_per_sm == 16 and occ.max_warps_per_sm == 48
    assert occ.occupancy_pct == pytest.approx(100 * 16 / 48)
    # sm_89 holds 24 blocks
    assert predict(SM89, 32, 16).blocks_per_sm == 24


def test_shared_memory_bound():
    # 48 KB dynamic + 1 KB reserve = 50176 B per block; default carve-out 228 KB = 233472 B;
    # 233472 // 50176 = 4 blocks.
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=48 * KB)
    assert occ.smem_per_block_bytes == 50176 and occ.smem_per_sm_bytes == 228 * KB
    assert occ.block_limit_smem == 4 and occ.limiter == "shared memory"
    # 100 KB + 1 KB = 103424 -> 2 blocks; 227 KB + 1 KB = 228 KB -> exactly 1 block.
    assert predict(SM90, 128, 32, dynamic_smem_bytes=100 * KB).blocks_per_sm == 2
    assert predict(SM90, 128, 32, dynamic_smem_bytes=227 * KB).blocks_per_sm == 1
    # static and dynamic add up, and the sum is rounded to 128 B: 8000 + 100 + 1024 = 9124
    # -> 9216 B per block; 233472 // 9216 = 25
    occ = predict(SM90, 64, 32, static_smem_bytes=8000, dynamic_smem_bytes=100)
    assert occ.smem_per_block_bytes == 9216 and occ.block_limit_smem == 25


def test_carveout_rounds_up_to_a_supported_size():
    # 50 % of 228 KB = 114 KB -> the next supported size, 132 KB
    assert carveout_bytes(SM90, 50) == 132 * KB
    assert carveout_bytes(SM90, 100) == 228 * KB and carveout_bytes(SM90, 0) == 0
    assert carveout_bytes(SM90, None) == 228 * KB
    # 25 % of 164 KB = 41 KB -> 64 KB on sm_80
    assert carveout_bytes(SM80, 25) == 64 * KB
    # 16 KB blocks (+1 KB) under a 132 KB carve-out: 135168 // 17408 = 7
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=16 * KB, carveout_pct=50)
    assert occ.smem_per_sm_bytes == 132 * KB and occ.block_limit_smem == 7


def test_carveout_too_small_grows_to_hold_one_block():
    # carve-out 0 with a 40 KB + 1 KB block: grown to the smallest size holding one, 64 KB
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=40 * KB, carveout_pct=0)
    assert occ.smem_per_sm_bytes == 64 * KB and occ.blocks_per_sm == 1
    # 10 % = 22.8 KB -> 32 KB, holds one 20 KB + 1 KB block, not two
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=20 * KB, carveout_pct=10)
    assert occ.smem_per_sm_bytes == 32 * KB and occ.blocks_per_sm == 1


def test_launch_problems_name_numbers_and_limits():
    assert launch_problems(SM90, 256, 32, 0, 48 * KB) == []
    (smem,) = launch_problems(SM90, 32, 16, 0, 240 * KB)
    assert smem == ("needs 240 KB shared memory per block (static 0 KB + dynamic 240 KB), "
                    "sm_90 allows 227 KB")
    (threads,) = launch_problems(SM90, 2048, 16, 0, 0)
    assert threads == "needs 2048 threads per block, sm_90 allows 1024"
    # 255 regs -> 8192 per warp x 32 warps = 262144 registers for one block
    assert launch_problems(SM86, 1024, 255, 0, 100 * KB) == [
        "needs 262144 registers per block (255 per thread, 8192 per warp x 32 warps rounded up "
        "to 32), sm_86 allows 65536",
        "needs 100 KB shared memory per block (static 0 KB + dynamic 100 KB), sm_86 allows 99 KB"]
    # 300 x 32 = 9600 -> 9728 per warp x 4 (2 warps rounded up to the 4 sub-partitions) fits
    # the register file; only the per-thread limit is broken
    assert launch_problems(SM90, 64, 300, 0, 0) == [
        "needs 300 registers per thread, sm_90 allows at most 255"]


def test_unlaunchable_block_predicts_zero():
    occ = predict(SM90, 32, 16, dynamic_smem_bytes=240 * KB)
    assert occ.blocks_per_sm == 0 and occ.limiter.startswith("cannot launch: needs 240 KB")
    with pytest.raises(HarnessError, match="does not fit"):
        waves_per_sm(100, 0, 132)


def test_waves():
    # 128 x 128 blocks of 1024 threads, 2 per SM on 132 SMs: 16384 / 264 = 62.06 waves
    assert waves_per_sm(128 * 128, 2, 132) == pytest.approx(62.06, abs=0.01)


@pytest.mark.parametrize(
    ("args", "match"),
    [((0, 32), "block_threads must be at least 1"), ((32, -1), "registers_per_thread"),
     ((32, 32, -5), "static_smem_bytes"), ((32, 32, 0, 0, 101), "carve-out must be a percent")],
)
def test_bad_input(args, match):
    with pytest.raises(HarnessError, match=match):
        predict(SM90, *args)
