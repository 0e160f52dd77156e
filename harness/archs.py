"""Per-architecture facts the offline tools need (occupancy, peaks), one table.

Sources: CUDA C++ Programming Guide, "Features and Technical Specifications" (threads, blocks,
shared memory, carve-out sizes per compute capability); the project's design notes (allocation
units, the 1 KB per-block reserve, FLOP per clock per SM).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError

KB = 1024


@dataclass(frozen=True)
class Arch:
    """Hardware limits of one SM architecture, as the occupancy calculator uses them."""

    name: str
    """Compiler target name, e.g. ``sm_90`` (``-arch=`` for NVRTC and nvJitLink)."""
    compute_capability: tuple[int, int]
    max_threads_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm_bytes: int
    """Largest shared-memory carve-out of one SM."""
    smem_optin_per_block_bytes: int
    """Largest dynamic + static shared memory one block may use after opt-in."""
    carveout_sizes_kb: tuple[int, ...]
    """Shared-memory sizes an SM can be configured to (the carve-out rounds up to one)."""
    fma_flops_per_clock_per_sm: dict[str, int]
    """Dense FLOP per clock per SM by precision (an FMA counts two)."""
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    """Threads of a block along x, y, z (their product at most max_threads_per_block)."""
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    """Blocks of a grid along x, y, z (the programming guide's table, cc 3.0 and later)."""
    smem_default_per_block_bytes: int = 48 * KB
    smem_reserved_per_block_bytes: int = 1 * KB
    smem_alloc_unit_bytes: int = 128
    regs_per_sm: int = 64 * KB
    regs_per_block: int = 64 * KB
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256
    """Registers are given to a warp in units of this many."""
    reg_sub_partitions: int = 4
    warp_size: int = 32
    needs_arch_specific: bool = False
    """True for ``sm_90a``: its cubins run only on exactly compute capability 9.0."""

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


_AMPERE_FLOPS = {"fp32": 128, "tf32": 1024, "bf16": 2048, "fp16": 2048}
_ADA_FLOPS = {"fp32": 128, "tf32": 512, "bf16": 1024, "fp16": 1024}
_HOPPER_FLOPS = {"fp32": 256, "tf32": 2048, "bf16": 4096, "fp16": 4096, "fp8": 8192}
"""Hopper's dense FP8 rate is twice BF16's: 1,979 TFLOP/s on an H100 SXM's 132 SMs at
1.83 GHz (NVIDIA's figure, issue 36)."""
_SM86_CARVEOUTS = (0, 8, 16, 32, 64, 100)

ARCHS: dict[str, Arch] = {
    a.name: a
    for a in (
        Arch("sm_80", (8, 0), 2048, 32, 164 * KB, 163 * KB,
             (0, 8, 16, 32, 64, 100, 132, 164), _AMPERE_FLOPS),
        Arch("sm_86", (8, 6), 1536, 16, 100 * KB, 99 * KB, _SM86_CARVEOUTS, _ADA_FLOPS),
        Arch("sm_89", (8, 9), 1536, 24, 100 * KB, 99 * KB, _SM86_CARVEOUTS, _ADA_FLOPS),
        Arch("sm_90", (9, 0), 2048, 32, 228 * KB, 227 * KB,
             (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), _HOPPER_FLOPS),
        Arch("sm_90a", (9, 0), 2048, 32, 228 * KB, 227 * KB,
             (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), _HOPPER_FLOPS,
             needs_arch_specific=True),
        # Blackwell (programming guide, cc 10.0): known so that a kernel may require it; its
        # per-precision peaks are not recorded here, so % of peak is left blank for it.
        Arch("sm_100", (10, 0), 2048, 32, 228 * KB, 227 * KB,
             (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), {}),
    )
}


def get_arch(name: str) -> Arch:
    """The facts for ``name`` (``sm_80``, ``sm_86``, ``sm_89``, ``sm_90``, ``sm_90a``)."""
    try:
        return ARCHS[name]
    except KeyError:
        raise HarnessError(
            f"unknown architecture {name!r}: expected one of {', '.join(ARCHS)}"
        ) from None


def arch_for_capability(major: int, minor: int) -> Arch:
    """The plain (not arch-specific) target for a device of compute capability major.minor."""
    for arch in ARCHS.values():
        if arch.compute_capability == (major, minor) and not arch.needs_arch_specific:
            return arch
    raise HarnessError(
        f"compute capability {major}.{minor} is not one the harness knows: expected one of "
        + ", ".join(f"{a.compute_capability[0]}.{a.compute_capability[1]}" for a in ARCHS.values())
    )


def can_run(kernel_arch: Arch, device_arch: Arch) -> bool:
    """Whether a kernel whose min_arch is ``kernel_arch`` can run on ``device_arch``."""
    if kernel_arch.needs_arch_specific:
        return kernel_arch.compute_capability == device_arch.compute_capability
    return kernel_arch.compute_capability <= device_arch.compute_capability


def cubin_runs_on(target: Arch, device_arch: Arch) -> bool:
    """Whether a cubin built for ``target`` loads on ``device_arch``: cubins run only within
    one major version, on the same or a later minor (sm_80 code does not run on sm_90)."""
    same_major = target.compute_capability[0] == device_arch.compute_capability[0]
    return can_run(target, device_arch) and same_major


def compile_target(min_arch: str, device_arch: str) -> str:
    """The target a kernel whose min_arch is ``min_arch`` compiles for on a device of
    ``device_arch``: the device's own, or the arch-specific one (``sm_90a``) it needs."""
    need = get_arch(min_arch)
    return need.name if need.needs_arch_specific else device_arch
