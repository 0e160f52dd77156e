"""Theoretical occupancy, predicted offline from an arch's facts (pure Python, no GPU).

The rules are those of NVIDIA's occupancy calculator, ``cuda_occupancy.h`` (CUDA 12.6 toolkit:
``cudaOccMaxBlocksPerSMRegsLimit``, ``cudaOccMaxBlocksPerSMSmemLimit``,
``cudaOccMaxBlocksPerSMWarpsLimit``, ``cudaOccSMemPreferenceVoltaPlus`` and
``cudaOccAlignUpShmemSizeVoltaPlus``), re-written here; the numbers come from
:mod:`harness.archs`. The vocabulary (block limits, theoretical occupancy) is Nsight Compute's.
Two parts of that header are left out on purpose: partitioned global caching (sm_5x/6x only) and
the Hopper block-barrier limit (2 x the block limit, so it never binds for one barrier).
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from harness.archs import KB, Arch
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.kernels.registry import Kernel

LIMIT_ORDER = ("registers", "shared memory", "warps", "blocks")
"""The order in which tied limiters are named."""
ABI_MAX_DIM = 2**31 - 1
"""The largest M, N or K the GEMM ABI passes: they are C ``int`` parameters."""
_AXES = "xyz"


@dataclass(frozen=True)
class Occupancy:
    """Nsight Compute's occupancy breakdown for one block shape on one arch."""

    arch: str
    block_threads: int
    registers_per_thread: int
    static_smem_bytes: int
    dynamic_smem_bytes: int
    reserved_smem_bytes: int
    """The driver's own shared memory per block (sm_80 and later)."""
    smem_per_block_bytes: int
    """Allocated per block: static + dynamic + reserve, rounded up to the allocation unit."""
    smem_per_sm_bytes: int
    """The SM's shared-memory configuration the carve-out resolves to."""
    carveout_pct: int | None
    warps_per_block: int
    block_limit_registers: int
    """With 0 registers per thread there is no register limit; the SM's block limit is shown."""
    block_limit_smem: int
    block_limit_warps: int
    block_limit_sm: int
    blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy_pct: float
    limiter: str
    """The binding limits of LIMIT_ORDER, tied ones joined by " & "."""

    def as_dict(self) -> dict:
        return asdict(self)


def _ceil_div(value: int, unit: int) -> int:
    return -(-value // unit)


def _round_up(value: int, unit: int) -> int:
    return _ceil_div(value, unit) * unit


def _size(nbytes: int) -> str:
    """Bytes as a person reads them: "240 KB" when a whole number of KB, else "9124 B"."""
    if nbytes == 0:
        return "0"
    return f"{nbytes // KB} KB" if nbytes % KB == 0 else f"{nbytes} B"


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise HarnessError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise HarnessError(f"{name}: expected an integer >= {minimum}, got {value}")


def _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
                  carveout_pct=None) -> None:
    _check_int("block_threads", block_threads, 1)
    _check_int("registers_per_thread", registers_per_thread, 0)
    _check_int("static_smem_bytes", static_smem_bytes, 0)
    _check_int("dynamic_smem_bytes", dynamic_smem_bytes, 0)
    if carveout_pct is not None and (isinstance(carveout_pct, bool)
                                     or not isinstance(carveout_pct, numbers.Integral)
                                     or not 0 <= carveout_pct <= 100):
        raise HarnessError(f"carveout_pct: expected an integer percent in 0..100 or None (the "
                           f"driver default), got {carveout_pct!r}")


def regs_per_warp(arch: Arch, registers_per_thread: int) -> int:
    """Registers a warp is given: 32 threads' worth, rounded up to the allocation unit (256)."""
    return _round_up(registers_per_thread * arch.warp_size, arch.reg_alloc_unit)


def _regs_checked_per_block(arch: Arch, registers_per_thread: int, warps: int) -> int:
    # The hardware's per-block check assumes the block's warps are spread evenly over the
    # sub-partitions, so it counts the warps rounded up to a multiple of them (cuda_occupancy.h,
    # regsAssumedPerCTA). This is never less than the plain per-warp x warps count.
    return regs_per_warp(arch, registers_per_thread) * _round_up(warps, arch.reg_sub_partitions)


def smem_per_block_bytes(arch: Arch, static_smem_bytes: int, dynamic_smem_bytes: int) -> int:
    """Shared memory one resident block takes from the SM: static + dynamic + the driver's 1 KB,
    rounded up to the 128 B allocation unit (the reserve is added first, as in the header; being
    a multiple of the unit, it makes no difference)."""
    total = static_smem_bytes + dynamic_smem_bytes + arch.smem_reserved_per_block_bytes
    return _round_up(total, arch.smem_alloc_unit_bytes)


def _config_at_least(arch: Arch, nbytes: int) -> int | None:
    """The smallest shared-memory size the SM can be configured to that holds ``nbytes``."""
    for size_kb in arch.carveout_sizes_kb:
        if nbytes <= size_kb * KB:
            return size_kb * KB
    return None


def carveout_bytes(arch: Arch, carveout_pct: int | None) -> int:
    """The SM shared-memory size a carve-out preference asks for (before growing to hold one
    block): pct x the largest size / 100 in whole bytes, rounded up to a supported size (0 stays
    0). The driver default (None, i.e. -1) leaves the largest size available."""
    if carveout_pct is None:
        return arch.smem_per_sm_bytes
    return _config_at_least(arch, carveout_pct * arch.smem_per_sm_bytes // 100)


def launch_problems(arch: Arch, block_threads: int, registers_per_thread: int,
                    static_smem_bytes: int, dynamic_smem_bytes: int) -> list[str]:
    """Every reason a block of this shape cannot launch on ``arch`` at all (empty: it can).

    Shared memory is checked against the opt-in limit: the harness raises a kernel's maximum
    dynamic size whenever it needs more than the default 48 KB.
    """
    _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes)
    problems = []
    if block_threads > arch.max_threads_per_block:
        problems.append(f"needs {block_threads} threads per block, {arch.name} allows "
                        f"{arch.max_threads_per_block}")
    if registers_per_thread > arch.max_regs_per_thread:
        problems.append(f"needs {registers_per_thread} registers per thread, {arch.name} allows "
                        f"at most {arch.max_regs_per_thread}")
    warps = _ceil_div(block_threads, arch.warp_size)
    regs_block = _regs_checked_per_block(arch, registers_per_thread, warps)
    if regs_block > arch.regs_per_block:
        counted = _round_up(warps, arch.reg_sub_partitions)
        problems.append(
            f"needs {regs_block} registers per block ({regs_per_warp(arch, registers_per_thread)}"
            f" per warp at {registers_per_thread} per thread x {counted} warps: {warps} rounded "
            f"up to a multiple of the {arch.reg_sub_partitions} register sub-partitions), "
            f"{arch.name} allows {arch.regs_per_block}")
    smem = static_smem_bytes + dynamic_smem_bytes
    if smem > arch.smem_optin_per_block_bytes:
        problems.append(
            f"needs {_size(smem)} shared memory per block (static {_size(static_smem_bytes)} + "
            f"dynamic {_size(dynamic_smem_bytes)}), {arch.name} allows "
            f"{_size(arch.smem_optin_per_block_bytes)}")
    return problems


def abi_problems(m: int, n: int, k: int) -> list[str]:
    """The sizes the GEMM ABI's ``int M, int N, int K`` cannot pass (empty: all fit)."""
    return [f"{name} = {value} exceeds {ABI_MAX_DIM}: the GEMM ABI passes M, N and K as int "
            "(32-bit); a larger size cannot be launched through it"
            for name, value in zip("MNK", (m, n, k), strict=True) if value > ABI_MAX_DIM]


def dims_problems(arch: Arch, block: tuple[int, ...], grid: tuple[int, ...],
                  size: tuple[int, int, int] | None = None) -> list[str]:
    """Every axis of the block (threads) or the grid (blocks) over ``arch``'s limits: x up to
    2^31 - 1 blocks, y and z up to 65535; x and y up to 1024 threads, z up to 64."""
    at = f" at {'x'.join(map(str, size))}" if size else ""
    problems = []
    for what, dims, limits, fix in (
            ("block", block, arch.max_block_dims, "fewer threads along that axis"),
            ("grid", grid, arch.max_grid_dims,
             "a smaller size, or a grid formula that puts the largest block count in x")):
        for axis, value, limit in zip(_AXES, dims, limits, strict=False):
            if value > limit:
                allowed = ", ".join(f"{a} {lim}" for a, lim in zip(_AXES, limits, strict=True))
                problems.append(f"{what} {tuple(dims)}{at}: {axis} = {value} exceeds {limit}: "
                                f"{arch.name} allows {allowed} ({fix})")
    return problems


def kernel_launch_problems(kernel: Kernel, arch: Arch, m: int, n: int, k: int,
                           registers_per_thread: int = 0, static_smem_bytes: int = 0,
                           sm_count: int | None = None) -> list[str]:
    """Every reason ``kernel`` cannot launch at m x n x k on ``arch``, offline: sizes the ABI
    cannot pass, block and grid dimensions over the arch's limits, then the block's threads,
    registers and shared memory (:func:`launch_problems`; registers and static shared memory
    are the compiled kernel's, 0 before compiling). ``sm_count``: for grids that name SMS
    (default: the offline count)."""
    problems = abi_problems(m, n, k)
    if problems:
        return problems
    grid = (kernel.grid_dims(m, n, k) if sm_count is None
            else kernel.grid_dims(m, n, k, sm_count))
    problems += dims_problems(arch, kernel.block_dims, grid, (m, n, k))
    return problems + launch_problems(arch, kernel.block_threads, registers_per_thread,
                                      static_smem_bytes, kernel.dynamic_smem_bytes(m, n, k))


def _limit_registers(arch: Arch, registers_per_thread: int, warps: int) -> int | None:
    """Blocks per SM the register file allows; None when the kernel uses no registers."""
    if registers_per_thread == 0:
        return None
    if (registers_per_thread > arch.max_regs_per_thread
            or _regs_checked_per_block(arch, registers_per_thread, warps) > arch.regs_per_block):
        return 0
    # Each of the 4 sub-partitions (one per warp scheduler) has its own 16384-register file and
    # a warp's registers all come from one of them, so whole warps are packed per sub-partition
    # and the remainder of each file is wasted; the block count then follows from the SM's total
    # of such warps.
    per_partition = arch.regs_per_sm // arch.reg_sub_partitions
    warps_per_partition = per_partition // regs_per_warp(arch, registers_per_thread)
    return warps_per_partition * arch.reg_sub_partitions // warps


def _smem_config_and_limit(arch: Arch, smem_block: int, smem_used: int,
                           carveout_pct: int | None) -> tuple[int, int]:
    """(the SM's shared-memory size, the blocks it holds)."""
    preferred = carveout_bytes(arch, carveout_pct)
    if smem_used > arch.smem_optin_per_block_bytes:
        return preferred, 0
    if preferred >= smem_block:
        return preferred, preferred // smem_block
    # A preference too small for even one block is only a hint: the driver grows the carve-out
    # to the smallest supported size that holds one block.
    grown = _config_at_least(arch, smem_block)
    if grown is None:  # larger than any configuration: cannot be resident
        return preferred, 0
    return grown, grown // smem_block


def predict(arch: Arch, block_threads: int, registers_per_thread: int,
            static_smem_bytes: int = 0, dynamic_smem_bytes: int = 0,
            carveout_pct: int | None = None) -> Occupancy:
    """Blocks per SM, each resource's limit, and which one binds.

    A block that cannot launch gets 0 blocks per SM; the failing resource's limit is 0 and the
    limiter names it (a block over the thread limit counts as a warps failure, as in the header).
    """
    _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
                  carveout_pct)
    warps = _ceil_div(block_threads, arch.warp_size)

    limit_regs = _limit_registers(arch, registers_per_thread, warps)
    smem_block = smem_per_block_bytes(arch, static_smem_bytes, dynamic_smem_bytes)
    smem_sm, limit_smem = _smem_config_and_limit(
        arch, smem_block, static_smem_bytes + dynamic_smem_bytes, carveout_pct)
    # Warp slots (the schedulers' hardware contexts) are per SM; a partial warp takes a slot.
    limit_warps = (0 if block_threads > arch.max_threads_per_block
                   else arch.max_warps_per_sm // warps)
    limit_sm = arch.max_blocks_per_sm

    limits = {"registers": limit_regs, "shared memory": limit_smem, "warps": limit_warps,
              "blocks": limit_sm}
    blocks = min(v for v in limits.values() if v is not None)
    limiter = " & ".join(k for k in LIMIT_ORDER if limits[k] == blocks)
    active = blocks * warps
    return Occupancy(
        arch=arch.name, block_threads=block_threads, registers_per_thread=registers_per_thread,
        static_smem_bytes=static_smem_bytes, dynamic_smem_bytes=dynamic_smem_bytes,
        reserved_smem_bytes=arch.smem_reserved_per_block_bytes, smem_per_block_bytes=smem_block,
        smem_per_sm_bytes=smem_sm, carveout_pct=carveout_pct, warps_per_block=warps,
        block_limit_registers=limit_sm if limit_regs is None else limit_regs,
        block_limit_smem=limit_smem, block_limit_warps=limit_warps, block_limit_sm=limit_sm,
        blocks_per_sm=blocks, active_warps_per_sm=active, max_warps_per_sm=arch.max_warps_per_sm,
        occupancy_pct=100.0 * active / arch.max_warps_per_sm, limiter=limiter,
    )


def waves_per_sm(grid_blocks: int, blocks_per_sm: int, sm_count: int) -> float:
    """How many rounds of resident blocks the grid needs: grid / (blocks per SM x SMs)."""
    _check_int("grid_blocks", grid_blocks, 0)
    _check_int("sm_count", sm_count, 1)
    _check_int("blocks_per_sm", blocks_per_sm, 0)
    if blocks_per_sm == 0:
        raise HarnessError("waves per SM: expected at least 1 block per SM, got 0 (the block "
                           "does not fit on an SM; see launch_problems)")
    return grid_blocks / (blocks_per_sm * sm_count)
