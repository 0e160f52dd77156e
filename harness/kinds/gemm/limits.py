"""What the hardware allows a GEMM at most (pure Python): a figure past it is a failure.

Two ceilings. Arithmetic: the dense peak of the precision the kernel claims, at the highest SM
clock seen while it was timed: the FP32 FMA peak for an FP32 kernel, whatever opcodes lie in its
SASS (an instruction that never executes raises no ceiling), unless its spec declares how it
computes FP32 on tensor cores (``fp32_via``: TF32's rate, or BF16's over the products a split
takes); the tensor cores' dense rate for TF32, BF16 and FP16 kernels. Memory, with cold L2
only: the compulsory bytes (A and B read once, C written once) at the device's peak DRAM
bandwidth. A kernel timed faster than either did not do the work it was timed on (it skipped
launches, or memoised), or the timer is wrong: either way the figure is not reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.archs import Arch
from harness.stats import ELEMENT_BYTES

TENSOR_OPCODES = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "DMMA", "BMMA", "BGMMA")
"""SASS opcodes (base names) of tensor-core instructions; Blackwell's start with UTC."""
CLOCK_MARGIN = 1.02
"""NVML samples the SM clock every few ms: a launch between samples may have run a little
faster than the fastest sample. 2% over it is still far under any real kernel's margin to
peak (the wgmma issue ceiling is 98.9% of peak at the clock of the moment)."""


def family(opcodes) -> str:
    """``tensor`` when the SASS has tensor-core instructions, else ``simt``."""
    bases = {op.split(".")[0] for op in opcodes}
    if any(b in TENSOR_OPCODES or b.startswith("UTC") for b in bases):
        return "tensor"
    return "simt"


def claimed_family(precision: str, fp32_via: str = "") -> str:
    """The family a kernel's figure is held to by what it claims, whatever its SASS holds
    (code that never runs raises no ceiling): an FP32 kernel to the FP32 FMA peak unless it
    declares how it computes on tensor cores; every other precision to the tensor cores'."""
    return "simt" if precision == "fp32" and not fp32_via else "tensor"


def _via_peak(table: dict, fp32_via: str) -> float:
    """Dense FLOP per clock per SM of FP32 done as ``fp32_via`` (``bf16x3``: three BF16
    products per FP32 one)."""
    base, _, parts = fp32_via.partition("x")
    return table.get(base, math.nan) / int(parts or 1)


def peak_flops_per_clock_per_sm(arch: Arch, precision: str, instruction_family: str,
                                fp32_via: str = "") -> float:
    """Dense FLOP per clock per SM the family can issue for the precision (NaN unknown).
    ``unknown`` (no SASS could be read) takes the larger of the two; an FP32 kernel that
    declares ``fp32_via`` is held to that scheme's rate."""
    table = arch.fma_flops_per_clock_per_sm
    simt = table.get("fp32", math.nan) * (2 if precision in ("bf16", "fp16") else 1)
    tensor = table.get("tf32" if precision == "fp32" else precision, math.nan)
    if precision == "fp32" and fp32_via:
        tensor = _via_peak(table, fp32_via)
    if instruction_family == "simt":
        return simt
    if instruction_family == "tensor":
        return tensor
    return max(simt, tensor)


def compulsory_bytes(m: int, n: int, k: int, precision: str, c_type: str) -> int:
    """A and B read once, C written once (beta = 0, as timed)."""
    return (m * k + k * n) * ELEMENT_BYTES[precision] + m * n * ELEMENT_BYTES[c_type]


@dataclass(frozen=True)
class Limits:
    """The device facts a timing is judged against."""

    arch: Arch
    sm_count: int
    max_sm_clock_mhz: float
    """The device's boost clock: the clock when NVML saw none."""
    dram_bytes_per_s: float


def violation(limits: Limits, m: int, n: int, k: int, precision: str, c_type: str,
              instruction_family: str, median_ms: float, clock_max_mhz: float,
              cold_l2: bool, fp32_via: str = "") -> str:
    """Why a median time is faster than the hardware allows for what the kernel claims (""
    when it is not)."""
    flops = 2.0 * m * n * k
    gflops = flops / (median_ms * 1e-3) / 1e9
    seen = clock_max_mhz == clock_max_mhz
    clock = clock_max_mhz if seen else limits.max_sm_clock_mhz
    when = "the highest SM clock seen while it ran" if seen else "the boost clock"
    per_clock = peak_flops_per_clock_per_sm(limits.arch, precision, instruction_family,
                                            fp32_via)
    peak = per_clock * limits.sm_count * clock * CLOCK_MARGIN * 1e6 / 1e9
    what = {"simt": "SIMT FMA", "tensor": "tensor-core", "unknown": "best"}[instruction_family]
    if fp32_via:
        what = f"{fp32_via} tensor-core"
    if gflops > peak:
        return (f"faster than the hardware allows: {gflops:,.0f} GFLOP/s is "
                f"{100 * gflops / (peak / CLOCK_MARGIN):.0f}% of the {precision} {what} peak "
                f"({peak / CLOCK_MARGIN:,.0f} GFLOP/s at {clock:.0f} MHz, {when}, "
                f"{per_clock:g} FLOP/clock/SM x {limits.sm_count} SMs): the "
                "timed launches did not all do the work (a kernel that skips launches or "
                "memoises), or the timing is wrong")
    if cold_l2 and limits.dram_bytes_per_s > 0:
        floor_ms = compulsory_bytes(m, n, k, precision, c_type) / limits.dram_bytes_per_s * 1e3
        if median_ms < floor_ms:
            return (f"faster than the hardware allows: {median_ms * 1e3:.2f} us with a cold L2 "
                    f"is less than moving its compulsory "
                    f"{compulsory_bytes(m, n, k, precision, c_type) / 1e6:.1f} MB (A, B read "
                    f"once, C written once) takes at the DRAM's peak "
                    f"{limits.dram_bytes_per_s / 1e12:.2f} TB/s ({floor_ms * 1e3:.2f} us): the "
                    "timed launches did not all do the work")
    return ""
