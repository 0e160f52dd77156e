"""Theoretical occupancy, predicted offline from an arch's facts (pure Python, no GPU).

The rules follow NVIDIA's occupancy calculator (``cuda_occupancy.h`` in the CUDA toolkit,
functions ``cudaOccMaxBlocksPerSMRegsLimit``, ``cudaOccMaxBlocksPerSMSmemLimit`` and
``cudaOccSMemPreferenceVoltaPlus``), in the vocabulary of Nsight Compute's occupancy section.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from harness.archs import KB, Arch
from harness.errors import HarnessError

LIMIT_ORDER = ("registers", "shared memory", "warps", "blocks")


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _kb(nbytes: int) -> str:
    return f"{nbytes / KB:g} KB"


@dataclass(frozen=True)
class Occupancy:
    """Nsight Compute's occupancy breakdown for one block shape on one arch."""

    arch: str
    block_threads: int
    registers_per_thread: int
    static_smem_bytes: int
    dynamic_smem_bytes: int
    reserved_smem_bytes: int
    smem_per_block_bytes: int
    """Allocated per block: static + dynamic + the driver's reserve, in allocation units."""
    smem_per_sm_bytes: int
    """The SM's shared-memory configuration the carve-out resolves to."""
    carveout_pct: int | None
    warps_per_block: int
    block_limit_registers: int
    block_limit_smem: int
    block_limit_warps: int
    block_limit_sm: int
    blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy_pct: float
    limiter: str

    def as_dict(self) -> dict:
        return asdict(self)


def _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
                  carveout_pct) -> None:
    if block_threads < 1:
        raise HarnessError(f"block_threads must be at least 1, got {block_threads}")
    for name, value in (("registers_per_thread", registers_per_thread),
                        ("static_smem_bytes", static_smem_bytes),
                        ("dynamic_smem_bytes", dynamic_smem_bytes)):
        if value < 0:
            raise HarnessError(f"{name} must be >= 0, got {value}")
    if carveout_pct is not None and not 0 <= carveout_pct <= 100:
        raise HarnessError(f"carve-out must be a percent in 0..100 or None (driver default), "
                           f"got {carveout_pct}")


def _regs_per_warp(arch: Arch, registers_per_thread: int) -> int:
    return _round_up(registers_per_thread * arch.warp_size, arch.reg_alloc_unit)


def _regs_checked_per_block(arch: Arch, registers_per_thread: int, warps: int) -> int:
    # The hardware's per-block check assumes every sub-partition gets the same number of
    # warps, so the warp count is rounded up to a multiple of the sub-partitions.
    return _regs_per_warp(arch, registers_per_thread) * _round_up(warps, arch.reg_sub_partitions)


def launch_problems(arch: Arch, block_threads: int, registers_per_thread: int,
                    static_smem_bytes: int, dynamic_smem_bytes: int) -> list[str]:
    """Every reason a block of this shape cannot launch on ``arch`` (empty: it can)."""
    _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
                  None)
    problems = []
    if block_threads > arch.max_threads_per_block:
        problems.append(f"needs {block_threads} threads per block, {arch.name} allows "
                        f"{arch.max_threads_per_block}")
    if registers_per_thread > arch.max_regs_per_thread:
        problems.append(f"needs {registers_per_thread} registers per thread, {arch.name} allows "
                        f"at most {arch.max_regs_per_thread}")
    warps = -(-block_threads // arch.warp_size)
    regs_block = _regs_checked_per_block(arch, registers_per_thread, warps)
    if regs_block > arch.regs_per_block:
        problems.append(
            f"needs {regs_block} registers per block ({registers_per_thread} per thread, "
            f"{_regs_per_warp(arch, registers_per_thread)} per warp x {warps} warps rounded up "
            f"to {_round_up(warps, arch.reg_sub_partitions)}), {arch.name} allows "
            f"{arch.regs_per_block}")
    smem = static_smem_bytes + dynamic_smem_bytes
    if smem > arch.smem_optin_per_block_bytes:
        problems.append(
            f"needs {_kb(smem)} shared memory per block (static {_kb(static_smem_bytes)} + "
            f"dynamic {_kb(dynamic_smem_bytes)}), {arch.name} allows "
            f"{_kb(arch.smem_optin_per_block_bytes)}")
    return problems


def carveout_bytes(arch: Arch, carveout_pct: int | None) -> int:
    """The SM shared-memory size a carve-out preference resolves to (before growing to fit
    one block): the percent of the largest size, rounded up to a supported size; the driver
    default (None) leaves the largest size available."""
    if carveout_pct is None:
        return arch.smem_per_sm_bytes
    return _align_to_config(arch, arch.smem_per_sm_bytes * carveout_pct // 100)


def _align_to_config(arch: Arch, nbytes: int) -> int:
    for size_kb in arch.carveout_sizes_kb:
        if nbytes <= size_kb * KB:
            return size_kb * KB
    return arch.smem_per_sm_bytes


def predict(arch: Arch, block_threads: int, registers_per_thread: int,
            static_smem_bytes: int = 0, dynamic_smem_bytes: int = 0,
            carveout_pct: int | None = None) -> Occupancy:
    """Blocks per SM, each resource's limit, and which one binds."""
    _check_inputs(block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes,
                  carveout_pct)
    warps = -(-block_threads // arch.warp_size)
    launchable = not launch_problems(arch, block_threads, registers_per_thread,
                                     static_smem_bytes, dynamic_smem_bytes)

    limit_warps = arch.max_warps_per_sm // warps
    limit_sm = arch.max_blocks_per_sm

    if registers_per_thread == 0:
        limit_regs = limit_sm  # no registers, no register limit
    else:
        # Registers come from each of the sub-partitions' files; a warp lives in one.
        per_partition = arch.regs_per_sm // arch.reg_sub_partitions
        warps_per_partition = per_partition // _regs_per_warp(arch, registers_per_thread)
        limit_regs = warps_per_partition * arch.reg_sub_partitions // warps

    smem_block = _round_up(static_smem_bytes + dynamic_smem_bytes
                           + arch.smem_reserved_per_block_bytes, arch.smem_alloc_unit_bytes)
    smem_sm = carveout_bytes(arch, carveout_pct)
    if smem_sm < smem_block:
        # A preference too small for one block is grown to the smallest size that holds one.
        smem_sm = _align_to_config(arch, smem_block)
    limit_smem = smem_sm // smem_block

    limits = {"registers": limit_regs, "shared memory": limit_smem, "warps": limit_warps,
              "blocks": limit_sm}
    if not launchable:
        blocks = 0
        limiter = "cannot launch: " + "; ".join(launch_problems(
            arch, block_threads, registers_per_thread, static_smem_bytes, dynamic_smem_bytes))
    else:
        blocks = min(limits.values())
        considered = [k for k in LIMIT_ORDER if not (k == "registers" and
                                                     registers_per_thread == 0)]
        limiter = " & ".join(k for k in considered if limits[k] == blocks)
    active = blocks * warps
    return Occupancy(
        arch=arch.name, block_threads=block_threads, registers_per_thread=registers_per_thread,
        static_smem_bytes=static_smem_bytes, dynamic_smem_bytes=dynamic_smem_bytes,
        reserved_smem_bytes=arch.smem_reserved_per_block_bytes, smem_per_block_bytes=smem_block,
        smem_per_sm_bytes=smem_sm, carveout_pct=carveout_pct, warps_per_block=warps,
        block_limit_registers=limit_regs, block_limit_smem=limit_smem,
        block_limit_warps=limit_warps, block_limit_sm=limit_sm, blocks_per_sm=blocks,
        active_warps_per_sm=active, max_warps_per_sm=arch.max_warps_per_sm,
        occupancy_pct=100.0 * active / arch.max_warps_per_sm, limiter=limiter,
    )


def waves_per_sm(grid_blocks: int, blocks_per_sm: int, sm_count: int) -> float:
    """How many full waves of resident blocks the grid needs."""
    if blocks_per_sm <= 0:
        raise HarnessError("waves per SM: the block does not fit on an SM (0 blocks per SM)")
    return grid_blocks / (blocks_per_sm * sm_count)
