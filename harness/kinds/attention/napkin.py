"""Attention's napkin: FLOPs counted exactly, compulsory bytes, and the ceiling that binds.

FLOPs: each unmasked query-key pair costs one dot product of length D for the logit (2D) and one
for its share of the output (2D): ``4 * B * H * pairs * D``, ``pairs = S_q * S_kv`` without a
mask and the causal mask's pairs counted exactly (problem.unmasked_pairs), not halved: at
S_q = S_kv = 1024 the causal count is 1024 * 1025 / 2, 0.05% over the half, and with
S_q < S_kv far more. The softmax's own adds and multiplies are not counted (FlashAttention's
convention, so figures compare with its papers).

Exponentials: one per unmasked pair. They run on the SFU (MUFU.EX2), 16 per clock per SM on
sm_80 and sm_90 (CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table:
base-2 exponential, 16 results per clock per SM for compute capability 8.0 and 9.0; FA3,
arXiv 2407.08608 section 3.1: "3.9 TFLOPS of special functions" on an H100 SXM = 16.1 per clock
per SM at 132 SMs and 1.83 GHz). Against BF16 tensor cores (2048 / 4096 FLOP per clock per SM)
a pair's 4D FLOPs take 4D/2048 or 4D/4096 clocks and its exponential 1/16: at D = 128 on sm_90
the exponentials need half the tensor cores' time, at D = 64 as much.

Compulsory bytes: Q, K, V read once and O written once (plus the log-sum-exp in FP32 when the
kernel writes it); a causal mask does not shrink them (every key is seen by the last query).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.kinds.attention.problem import AttentionProblem, unmasked_pairs

ELEMENT_BYTES = {"bf16": 2, "fp16": 2}
SFU_EXP2_PER_CLOCK_PER_SM = {"sm_80": 16, "sm_86": 16, "sm_89": 16, "sm_90": 16, "sm_90a": 16}
"""MUFU.EX2 results per clock per SM (see the module's documentation for the sources)."""


def pairs(problem: AttentionProblem) -> int:
    """Unmasked query-key pairs over every batch and head."""
    return problem["B"] * problem["H"] * unmasked_pairs(problem["S_q"], problem["S_kv"],
                                                        problem.causal)


def flops(problem: AttentionProblem) -> int:
    """``4 * D`` per unmasked pair (two products of length D)."""
    return 4 * problem["D"] * pairs(problem)


def exponentials(problem: AttentionProblem) -> int:
    return pairs(problem)


def compulsory_bytes(problem: AttentionProblem, precision: str = "bf16",
                     lse: bool = False) -> int:
    """Q, K, V read once and O written once (16-bit elements); the log-sum-exp's FP32 row
    values where the kernel writes them."""
    b, h, hkv, sq, skv, d = problem.values
    element = ELEMENT_BYTES[precision]
    moved = element * (2 * b * h * sq * d + 2 * b * hkv * skv * d)
    return moved + (4 * b * h * sq if lse else 0)


@dataclass(frozen=True)
class Ceiling:
    """The shortest time each unit allows for one launch, and which one binds."""

    tensor_ms: float
    exp_ms: float
    memory_ms: float

    @property
    def ms(self) -> float:
        return max(self.tensor_ms, self.exp_ms, self.memory_ms)

    @property
    def limiter(self) -> str:
        times = {"tensor cores": self.tensor_ms, "exponentials (SFU)": self.exp_ms,
                 "memory": self.memory_ms}
        return max(times, key=times.get)

    def tflops(self, problem: AttentionProblem) -> float:
        return flops(problem) / (self.ms * 1e9)


def ceiling(problem: AttentionProblem, *, arch: str, sms: int, clock_hz: float,
            dram_bytes_per_s: float, tensor_flops_per_clock_per_sm: int,
            precision: str = "bf16", lse: bool = False) -> Ceiling:
    """The three lower bounds on one launch's time on a GPU of ``sms`` SMs at ``clock_hz``
    (the measured SM clock) and ``dram_bytes_per_s`` (the copy bandwidth measured, or the
    DRAM peak); the largest binds. ``tensor_flops_per_clock_per_sm``: the precision's dense
    rate on the instruction the kernel uses (harness.archs gives the peak; mma.sync reaches
    about 65% of it on sm_90)."""
    if arch not in SFU_EXP2_PER_CLOCK_PER_SM:
        raise ValueError(f"no SFU rate known for {arch}; known: "
                         f"{', '.join(SFU_EXP2_PER_CLOCK_PER_SM)}")
    per_s = sms * clock_hz
    tensor_s = flops(problem) / (tensor_flops_per_clock_per_sm * per_s)
    exp_s = exponentials(problem) / (SFU_EXP2_PER_CLOCK_PER_SM[arch] * per_s)
    memory_s = compulsory_bytes(problem, precision, lse) / dram_bytes_per_s
    return Ceiling(tensor_s * 1e3, exp_s * 1e3, memory_s * 1e3)


def too_fast(problem: AttentionProblem, median_ms: float, *, arch: str, sms: int,
             clock_mhz: float, dram_bytes_per_s: float, tensor_flops_per_clock_per_sm: int,
             precision: str = "bf16", lse: bool = False) -> str:
    """Why a launch timed at ``median_ms`` is faster than the hardware allows ("" when it is
    not): under :func:`ceiling`'s bound at ``clock_mhz`` (the highest SM clock seen while it
    ran) with the GEMM's margin for NVML's sampling (limits.CLOCK_MARGIN)."""
    from harness.kinds.gemm.limits import CLOCK_MARGIN

    bound = ceiling(problem, arch=arch, sms=sms, clock_hz=clock_mhz * CLOCK_MARGIN * 1e6,
                    dram_bytes_per_s=dram_bytes_per_s,
                    tensor_flops_per_clock_per_sm=tensor_flops_per_clock_per_sm,
                    precision=precision, lse=lse)
    if median_ms >= bound.ms:
        return ""
    return (f"faster than the hardware allows: {median_ms:.4f} ms is under the {bound.ms:.4f} ms "
            f"its {bound.limiter} need at {clock_mhz:.0f} MHz (napkin.py): the timed launches "
            "did not all do the work, or the timing is wrong")
