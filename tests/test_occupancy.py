"""Offline occupancy against hand-worked cases (the arithmetic is in the comments)."""

import dataclasses
import json

import pytest

from harness.archs import KB, get_arch
from harness.compiler.occupancy import (
    Occupancy,
    abi_problems,
    carveout_bytes,
    dims_problems,
    kernel_launch_problems,
    launch_problems,
    predict,
    waves_per_sm,
)
from harness.errors import HarnessError

SM80, SM86, SM89, SM90 = (get_arch(a) for a in ("sm_80", "sm_86", "sm_89", "sm_90"))


# --- warps, registers, blocks ---------------------------------------------------------------

def test_warps_and_registers_tie_at_full_occupancy():
    # 256 threads = 8 warps; 64 warp slots / 8 = 8 blocks.
    # 32 regs x 32 = 1024 per warp; 16384 / 1024 = 16 warps per sub-partition x 4 = 64 warps
    # -> 64 / 8 = 8 blocks too: a tie, named in LIMIT_ORDER.
    occ = predict(SM90, 256, 32)
    assert (occ.block_limit_warps, occ.block_limit_registers, occ.blocks_per_sm) == (8, 8, 8)
    assert occ.active_warps_per_sm == 64 and occ.occupancy_pct == 100.0
    assert occ.limiter == "registers & warps"


def test_registers_bound_1024_threads():
    # 64 regs x 32 = 2048 per warp; 16384 / 2048 = 8 warps per sub-partition, 32 per SM;
    # a 1024-thread block is 32 warps (65536 registers) -> 1 block, 32 of 64 warps = 50 %.
    occ = predict(SM90, 1024, 64)
    assert occ.block_limit_registers == 1 and occ.blocks_per_sm == 1
    assert occ.occupancy_pct == 50.0 and occ.limiter == "registers"


def test_register_allocation_rounds_per_warp():
    # 255 regs x 32 = 8160, rounded up to 8192 per warp; 16384 / 8192 = 2 warps per
    # sub-partition, 8 per SM; 128 threads = 4 warps -> 2 blocks, 8 of 64 warps = 12.5 %.
    occ = predict(SM90, 128, 255)
    assert (occ.block_limit_registers, occ.blocks_per_sm, occ.active_warps_per_sm) == (2, 2, 8)
    assert occ.occupancy_pct == 12.5
    # 40 regs x 32 = 1280 (a multiple of 256); 16384 // 1280 = 12 per sub-partition, 48 per SM;
    # 192 threads = 6 warps -> 48 / 6 = 8 blocks.
    assert predict(SM90, 192, 40).block_limit_registers == 8
    # 33 regs x 32 = 1056 -> 1280 per warp: the same limit as 40 registers.
    assert predict(SM90, 192, 33).block_limit_registers == 8


def test_register_file_is_split_into_sub_partitions():
    # 168 regs x 32 = 5376 per warp (a multiple of 256). Whole SM: 65536 // 5376 = 12 warps,
    # but per sub-partition 16384 // 5376 = 3 (5248 left over each) -> 12 warps: the same here.
    assert predict(SM90, 32, 168).block_limit_registers == 12
    # 72 regs x 32 = 2304: 65536 // 2304 = 28 warps for the whole SM, but 16384 // 2304 = 7 per
    # sub-partition -> 28 too; 96 regs x 32 = 3072: 65536 // 3072 = 21 for the whole SM, but
    # 16384 // 3072 = 5 per sub-partition -> 20 warps -> 20 one-warp blocks.
    assert predict(SM90, 32, 72).block_limit_registers == 28
    assert predict(SM90, 32, 96).block_limit_registers == 20


def test_no_registers_means_no_register_limit():
    # 0 registers: nothing to allocate; 1024 threads = 32 warps -> 64 / 32 = 2 blocks by warps.
    occ = predict(SM90, 1024, 0)
    assert occ.blocks_per_sm == 2 and occ.limiter == "warps"
    assert occ.block_limit_registers == SM90.max_blocks_per_sm   # shown as never binding


def test_partial_warps_count_as_whole_warps():
    # 33 threads = 2 warps; 64 / 2 = 32 blocks by warps, 32 by the SM's block limit.
    occ = predict(SM90, 33, 16)
    assert occ.warps_per_block == 2 and occ.blocks_per_sm == 32
    assert occ.occupancy_pct == 100.0 and occ.limiter == "warps & blocks"


def test_block_count_limits_per_arch():
    # 32 threads = 1 warp: 64 by warps, but at most 32 blocks per SM on sm_90 -> 32 / 64 = 50 %.
    occ = predict(SM90, 32, 16)
    assert occ.blocks_per_sm == 32 and occ.limiter == "blocks" and occ.occupancy_pct == 50.0
    # sm_86: 16 blocks and 48 warps per SM: 16 one-warp blocks = 16 / 48 = 33.3 %.
    occ = predict(SM86, 32, 16)
    assert (occ.block_limit_sm, occ.max_warps_per_sm, occ.blocks_per_sm) == (16, 48, 16)
    assert occ.occupancy_pct == pytest.approx(100 * 16 / 48)
    # sm_89: 24 blocks of 48 warps -> 50 %.
    occ = predict(SM89, 32, 16)
    assert occ.blocks_per_sm == 24 and occ.occupancy_pct == 50.0 and occ.limiter == "blocks"


def test_sm86_1536_threads_per_sm():
    # 512 threads = 16 warps: 48 / 16 = 3 blocks (100 %); 32 regs allow 64 / 16 = 4.
    occ = predict(SM86, 512, 32)
    assert (occ.block_limit_warps, occ.block_limit_registers, occ.blocks_per_sm) == (3, 4, 3)
    assert occ.occupancy_pct == 100.0 and occ.limiter == "warps"
    # 1024 threads = 32 warps: 48 // 32 = 1 block -> 32 / 48 = 66.7 % (16 warp slots idle).
    occ = predict(SM86, 1024, 32)
    assert occ.blocks_per_sm == 1 and occ.occupancy_pct == pytest.approx(200 / 3)


# --- shared memory ---------------------------------------------------------------------------

def test_shared_memory_bound():
    # 48 KB dynamic + 1 KB reserve = 50176 B per block; default carve-out is 228 KB = 233472 B;
    # 233472 // 50176 = 4 blocks.
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=48 * KB)
    assert occ.smem_per_block_bytes == 50176 and occ.smem_per_sm_bytes == 228 * KB
    assert occ.reserved_smem_bytes == 1024
    assert occ.block_limit_smem == 4 and occ.limiter == "shared memory"
    # 100 KB + 1 KB = 103424 B -> 233472 // 103424 = 2 blocks.
    assert predict(SM90, 128, 32, dynamic_smem_bytes=100 * KB).blocks_per_sm == 2
    # 227 KB + 1 KB = 228 KB -> exactly 1 block.
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=227 * KB)
    assert occ.blocks_per_sm == 1 and occ.smem_per_block_bytes == 228 * KB


def test_shared_memory_rounds_to_128_bytes():
    # static 8000 + dynamic 100 + reserve 1024 = 9124 -> 9216 B (72 x 128);
    # 233472 // 9216 = 25 blocks.
    occ = predict(SM90, 64, 32, static_smem_bytes=8000, dynamic_smem_bytes=100)
    assert occ.smem_per_block_bytes == 9216 and occ.block_limit_smem == 25
    # 1 B of dynamic still takes a whole 128 B unit: 1 + 1024 -> 1152.
    assert predict(SM90, 64, 32, dynamic_smem_bytes=1).smem_per_block_bytes == 1152


def test_no_shared_memory_still_pays_the_reserve():
    # 0 + 1 KB reserve per block: 228 KB / 1 KB = 228, far above the 32-block limit.
    occ = predict(SM90, 32, 16)
    assert occ.smem_per_block_bytes == 1024 and occ.block_limit_smem == 228


def test_carveout_rounds_up_to_a_supported_size():
    # 50 % of 228 KB = 114 KB -> the next supported size, 132 KB.
    assert carveout_bytes(SM90, 50) == 132 * KB
    assert carveout_bytes(SM90, 100) == 228 * KB and carveout_bytes(SM90, 0) == 0
    assert carveout_bytes(SM90, None) == 228 * KB
    # 25 % of 164 KB = 41 KB -> 64 KB on sm_80; 50 % of 100 KB = 50 KB -> 64 KB on sm_86.
    assert carveout_bytes(SM80, 25) == 64 * KB and carveout_bytes(SM86, 50) == 64 * KB
    # 1 % of 228 KB = 2334 B -> 8 KB, the smallest non-zero size.
    assert carveout_bytes(SM90, 1) == 8 * KB
    # 16 KB + 1 KB = 17408 B blocks: 132 KB = 135168 // 17408 = 7, against 233472 // 17408 = 13
    # under the default carve-out.
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=16 * KB, carveout_pct=50)
    assert occ.smem_per_sm_bytes == 132 * KB and occ.block_limit_smem == 7
    assert predict(SM90, 128, 32, dynamic_smem_bytes=16 * KB).block_limit_smem == 13


def test_carveout_too_small_grows_to_hold_one_block():
    # carve-out 0 with a 40 KB + 1 KB = 41 KB block: grown to the smallest size holding one,
    # 64 KB, which holds only one (64 // 41).
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=40 * KB, carveout_pct=0)
    assert occ.smem_per_sm_bytes == 64 * KB and occ.blocks_per_sm == 1
    assert occ.limiter == "shared memory"
    # carve-out 0 with no shared memory: 1 KB reserve -> 8 KB -> 8 blocks of 1 KB.
    occ = predict(SM90, 32, 16, carveout_pct=0)
    assert occ.smem_per_sm_bytes == 8 * KB and occ.block_limit_smem == 8
    # 10 % = 23347 B -> 32 KB; a 20 KB + 1 KB block fits once, not twice.
    occ = predict(SM90, 128, 32, dynamic_smem_bytes=20 * KB, carveout_pct=10)
    assert occ.smem_per_sm_bytes == 32 * KB and occ.blocks_per_sm == 1
    # 10 % with a 99 KB + 1 KB block on sm_86: 10 KB -> 16 KB, too small -> grown to 100 KB.
    occ = predict(SM86, 128, 32, dynamic_smem_bytes=99 * KB, carveout_pct=10)
    assert occ.smem_per_sm_bytes == 100 * KB and occ.blocks_per_sm == 1


# --- blocks that cannot launch ---------------------------------------------------------------

def test_launch_problems_name_numbers_and_limits():
    assert launch_problems(SM90, 256, 32, 0, 48 * KB) == []
    assert launch_problems(SM90, 1024, 64, 0, 227 * KB) == []        # exactly at both limits
    (smem,) = launch_problems(SM90, 32, 16, 0, 240 * KB)
    assert smem == ("needs 240 KB shared memory per block (static 0 + dynamic 240 KB), "
                    "sm_90 allows 227 KB")
    (threads,) = launch_problems(SM90, 2048, 16, 0, 0)
    assert threads == "needs 2048 threads per block, sm_90 allows 1024"
    # 300 x 32 = 9600 -> 9728 per warp x 4 (2 warps rounded up to the 4 sub-partitions) = 38912
    # fits the register file; only the per-thread limit is broken.
    assert launch_problems(SM90, 64, 300, 0, 0) == [
        "needs 300 registers per thread, sm_90 allows at most 255"]


def test_launch_problems_register_file_per_block():
    # 255 regs -> 8192 per warp; 320 threads = 10 warps, counted as 12 (multiple of 4)
    # -> 98304 > 65536. (Plain 10 x 8192 = 81920 would also be over.)
    (regs,) = launch_problems(SM90, 320, 255, 0, 0)
    assert regs == ("needs 98304 registers per block (8192 per warp at 255 per thread x 12 warps:"
                    " 10 rounded up to a multiple of the 4 register sub-partitions), sm_90 allows"
                    " 65536")
    # 128 regs -> 4096 per warp; 544 threads = 17 warps, counted as 20 -> 81920 > 65536
    # (plain 17 x 4096 = 69632 is over too).
    assert "needs 81920 registers per block" in launch_problems(SM90, 544, 128, 0, 0)[0]
    # The sub-partition rounding alone can refuse a block: 104 regs -> 3328 per warp; 19 warps
    # = 63232 fits, but counted as 20 -> 66560 does not.
    (regs,) = launch_problems(SM90, 19 * 32, 104, 0, 0)
    assert regs.startswith("needs 66560 registers per block") and "19 rounded up" in regs
    # Every problem is listed, and odd sizes are given in bytes.
    assert launch_problems(SM86, 1024, 255, 8000, 100 * KB) == [
        "needs 262144 registers per block (8192 per warp at 255 per thread x 32 warps: 32 rounded"
        " up to a multiple of the 4 register sub-partitions), sm_86 allows 65536",
        "needs 110400 B shared memory per block (static 8000 B + dynamic 100 KB), sm_86 allows "
        "99 KB"]


def test_unlaunchable_block_predicts_zero_and_names_the_resource():
    occ = predict(SM90, 32, 16, dynamic_smem_bytes=240 * KB)
    assert occ.blocks_per_sm == 0 and occ.block_limit_smem == 0
    assert occ.limiter == "shared memory" and occ.occupancy_pct == 0.0
    occ = predict(SM90, 2048, 16)
    assert occ.blocks_per_sm == 0 and occ.limiter == "warps"
    occ = predict(SM90, 1024, 255)
    assert occ.blocks_per_sm == 0 and occ.limiter == "registers"
    # 300 registers per thread: over the per-thread limit even though the file would hold it.
    assert predict(SM90, 64, 300).limiter == "registers"
    # Two failing resources are both named.
    occ = predict(SM90, 1024, 255, dynamic_smem_bytes=228 * KB)
    assert occ.limiter == "registers & shared memory" and occ.active_warps_per_sm == 0


# --- every launchable block fits: invariants over a grid --------------------------------------

@pytest.mark.parametrize("arch", [SM80, SM86, SM89, SM90], ids=lambda a: a.name)
def test_launchable_blocks_are_resident_and_consistent(arch):
    for threads in (1, 32, 96, 128, 200, 256, 384, 512, 640, 768, 1024):
        for regs in (0, 16, 32, 40, 64, 96, 128, 168, 255):
            for dynamic in (0, 1, 16 * KB, 48 * KB, 64 * KB, 99 * KB, 163 * KB, 227 * KB):
                for carveout in (None, 0, 25, 50, 100):
                    occ = predict(arch, threads, regs, 0, dynamic, carveout)
                    if launch_problems(arch, threads, regs, 0, dynamic):
                        assert occ.blocks_per_sm == 0
                        continue
                    assert occ.blocks_per_sm >= 1
                    assert occ.smem_per_sm_bytes // KB in arch.carveout_sizes_kb
                    assert occ.blocks_per_sm * occ.smem_per_block_bytes <= occ.smem_per_sm_bytes
                    assert occ.active_warps_per_sm <= arch.max_warps_per_sm
                    assert occ.blocks_per_sm == min(
                        occ.block_limit_registers, occ.block_limit_smem,
                        occ.block_limit_warps, occ.block_limit_sm)


# --- the record, waves, inputs -----------------------------------------------------------------

def test_as_dict_is_json_and_complete():
    occ = predict(SM90, 128, 32, 1024, 16 * KB, 50)
    d = json.loads(json.dumps(occ.as_dict()))
    assert set(d) == {f.name for f in dataclasses.fields(Occupancy)}
    assert d["carveout_pct"] == 50 and d["limiter"] == occ.limiter
    with pytest.raises(dataclasses.FrozenInstanceError):
        occ.blocks_per_sm = 3


def test_waves():
    # 128 x 128 blocks of 1024 threads, 2 per SM on 132 SMs: 16384 / 264 = 62.06 waves.
    assert waves_per_sm(128 * 128, 2, 132) == pytest.approx(62.06, abs=0.01)
    assert waves_per_sm(132, 1, 132) == 1.0
    with pytest.raises(HarnessError, match="expected at least 1 block per SM, got 0"):
        waves_per_sm(100, 0, 132)
    with pytest.raises(HarnessError, match="sm_count: expected an integer >= 1, got 0"):
        waves_per_sm(100, 2, 0)


@pytest.mark.parametrize(
    ("args", "match"),
    [((0, 32), r"block_threads: expected an integer >= 1, got 0"),
     ((32, -1), r"registers_per_thread: expected an integer >= 0, got -1"),
     ((32, 32, -5), r"static_smem_bytes: expected an integer >= 0, got -5"),
     ((32, 32, 0, -1), r"dynamic_smem_bytes: expected an integer >= 0, got -1"),
     ((32.5, 32), r"block_threads: expected an integer >= 1, got 32\.5"),
     ((32, 32, 0, 0, 101), r"carveout_pct: expected an integer percent in 0\.\.100 or None .*"
                           r"got 101"),
     ((32, 32, 0, 0, -1), r"carveout_pct: .* got -1"),
     ((32, 32, 0, 0, 50.0), r"carveout_pct: .* got 50\.0")],
)
def test_bad_input(args, match):
    with pytest.raises(HarnessError, match=match):
        predict(SM90, *args)


def test_launch_problems_validates_too():
    with pytest.raises(HarnessError, match="dynamic_smem_bytes: expected an integer >= 0"):
        launch_problems(SM90, 32, 32, 0, -128)


# --- grid and block dimensions, the ABI's int -----------------------------------------------

@pytest.mark.parametrize("arch", [SM80, SM86, SM89, SM90])
def test_grid_and_block_dimension_limits(arch):
    # programming guide: grid x up to 2^31 - 1, y and z up to 65535; block x, y up to 1024,
    # z up to 64
    assert dims_problems(arch, (1024, 1, 1), (2**31 - 1, 65535, 65535)) == []
    assert dims_problems(arch, (1, 1024, 64), (1, 1, 1)) == []
    (grid_y,) = dims_problems(arch, (16, 16, 1), (6250000, 6250000, 1),
                              (100000000, 100000000, 100000000))
    assert grid_y.startswith("grid (6250000, 6250000, 1) at 100000000x100000000x100000000: "
                             "y = 6250000 exceeds 65535: ")
    assert "x 2147483647, y 65535, z 65535" in grid_y
    (grid_x,) = dims_problems(arch, (32, 1, 1), (2**31, 1, 1))
    assert grid_x.startswith(f"grid ({2**31}, 1, 1): x = {2**31} exceeds 2147483647")
    (grid_z,) = dims_problems(arch, (32, 1, 1), (1, 1, 65536))
    assert "z = 65536 exceeds 65535" in grid_z
    (block_z,) = dims_problems(arch, (2, 2, 128), (1, 1, 1))
    assert block_z.startswith("block (2, 2, 128): z = 128 exceeds 64: ")
    assert len(dims_problems(arch, (2048, 1, 1), (1, 70000, 1))) == 2


def test_sizes_over_the_abis_int_are_refused():
    assert abi_problems(2**31 - 1, 1, 1) == []
    (problem,) = abi_problems(1, 2**31, 1)
    assert problem.startswith(f"N = {2**31} exceeds 2147483647: the GEMM ABI passes M, N and "
                              "K as int")


def test_a_kernel_at_a_size_whose_grid_does_not_fit_cannot_launch():
    from harness.kernels.registry import discover, select

    (t16,) = select(discover(), ["03_smem_tiled:t16"])
    assert kernel_launch_problems(t16, SM90, 4096, 4096, 4096, 32, 2048) == []
    (problem,) = kernel_launch_problems(t16, SM90, 100000000, 100000000, 100000000, 32, 2048)
    assert problem.startswith("grid (6250000, 6250000, 1) at 100000000x100000000x100000000: "
                              "y = 6250000 exceeds 65535")
    # the compiled resources count too, and the ABI's int is checked first
    (smem,) = kernel_launch_problems(t16, SM90, 64, 64, 64, 32, 240 * KB)
    assert smem.startswith("needs 240 KB shared memory per block")
    (abi,) = kernel_launch_problems(t16, SM90, 2**31, 1, 1)
    assert abi.startswith(f"M = {2**31} exceeds")
