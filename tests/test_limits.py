"""What the hardware allows (no GPU): a figure past the peak of the kernel's instruction family
at the measured clock, or past the DRAM floor with cold L2, is a failure."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from harness.archs import get_arch
from harness.kinds.gemm import limits
from harness.kinds.gemm.checks import KEEPS_STATE, NONDETERMINISTIC, Checked, repeat_finding
from harness.kinds.gemm.limits import Limits, family, violation
from harness.kinds.gemm.numerics import CheckResult

H100 = Limits(get_arch("sm_90"), 132, 1980.0, 3.35e12)


def _ms(gflops: float, m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k / (gflops * 1e9) * 1e3


def test_the_lazy_kernel_of_issue_20_is_past_the_fp32_peak():
    """149,463 GFLOP/s at 1024 (a kernel lazy after 60 launches) was certified as 223% of the
    FP32 peak: at 1755 MHz the SIMT peak is 256 x 132 x 1.755 GHz = 59.3 TFLOP/s."""
    why = violation(H100, 1024, 1024, 1024, "fp32", "fp32", "simt",
                    _ms(149_463, 1024, 1024, 1024), 1755.0, cold_l2=True)
    assert why.startswith("faster than the hardware allows: 149,463 GFLOP/s is 252% of the "
                          "fp32 SIMT FMA peak"), why
    # the project's best FP32 rung (49 TFLOP/s at 4096) is not
    assert violation(H100, 4096, 4096, 4096, "fp32", "fp32", "simt",
                     _ms(49_039, 4096, 4096, 4096), 1755.0, cold_l2=True) == ""


def test_tensor_cores_are_held_to_their_dense_peak_and_fp32_on_them_to_tf32():
    # rung 19 BF16 at 8192: 770 TFLOP/s at 1755 MHz (the dense peak there is 949)
    assert violation(H100, 8192, 8192, 8192, "bf16", "bf16", "tensor",
                     _ms(770_398, 8192, 8192, 8192), 1755.0, True) == ""
    assert "tensor-core peak" in violation(H100, 8192, 8192, 8192, "bf16", "bf16", "tensor",
                                           _ms(1_000_000, 8192, 8192, 8192), 1755.0, True)
    # an FP32 kernel on tensor cores (3xTF32 and the like) may pass the SIMT peak
    assert violation(H100, 4096, 4096, 4096, "fp32", "fp32", "tensor",
                     _ms(120_000, 4096, 4096, 4096), 1755.0, True) == ""
    assert violation(H100, 4096, 4096, 4096, "fp32", "fp32", "simt",
                     _ms(120_000, 4096, 4096, 4096), 1755.0, True) != ""


def test_no_clock_seen_takes_the_boost_clock():
    at_boost = 256 * 132 * 1.98  # GFLOP/s at 1980 MHz
    assert violation(H100, 4096, 4096, 4096, "fp32", "fp32", "simt",
                     _ms(0.99 * at_boost, 4096, 4096, 4096), float("nan"), True) == ""
    assert violation(H100, 4096, 4096, 4096, "fp32", "fp32", "simt",
                     _ms(1.05 * at_boost, 4096, 4096, 4096), float("nan"), True) != ""


def test_cold_l2_time_below_the_compulsory_bytes_is_impossible_hot_is_not_judged():
    # a skinny GEMM whose bytes dominate: 8192 x 8192 x 16, 16 MB of A and B... in fp32
    m, n, k = 8192, 8192, 16
    floor_ms = limits.compulsory_bytes(m, n, k, "fp32", "fp32") / 3.35e12 * 1e3
    assert floor_ms > 0.08
    why = violation(H100, m, n, k, "fp32", "fp32", "tensor", floor_ms / 2, 1755.0, True)
    assert "less than moving its compulsory" in why
    assert violation(H100, m, n, k, "fp32", "fp32", "tensor", floor_ms / 2, 1755.0, False) == ""
    assert violation(H100, m, n, k, "fp32", "fp32", "tensor", floor_ms * 1.1, 1755.0,
                     True) == ""


def test_the_family_comes_from_the_sass_opcodes():
    assert family({"FFMA": 10, "LDS.128": 4}) == "simt"
    assert family({"HMMA.16816.F32.BF16": 4}) == "tensor"
    assert family({"HGMMA.64x256x16.F32.BF16": 1}) == "tensor"
    assert limits.peak_flops_per_clock_per_sm(get_arch("sm_90"), "bf16", "simt") == 512
    assert limits.peak_flops_per_clock_per_sm(get_arch("sm_90"), "fp32", "unknown") == 2048


def _gemm(nondeterministic=False):
    return SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(
        nondeterministic=nondeterministic, c_type="fp32")))


def _run(values, passed, finding="ok"):
    out = np.asarray(values, dtype=np.float32).reshape(2, 2)
    return Checked(out, CheckResult(passed, 2, 2, 8, 1, 1.0, 0.0, 0.0, 0.0, 0, 0, 1e-6,
                                    "ok" if passed else "unwritten: 4 of 4 outputs", finding),
                   0)


def test_identical_runs_name_state_race_and_nondeterminism():
    right, lazy = [1, 2, 3, 4], [9, 9, 9, 9]
    state = repeat_finding(_gemm(), [_run(right, True), _run(lazy, False, "unwritten"),
                                     _run(lazy, False, "unwritten")])
    assert state.finding == KEEPS_STATE and not state.passed
    assert "wrong after 1 launches on the same buffers" in state.message
    race = repeat_finding(_gemm(), [_run(right, True), _run([1, 2, 3, 5], False),
                                    _run([1, 2, 7, 4], False)])
    assert race.finding == "race" and not race.passed
    jitter = repeat_finding(_gemm(), [_run(right, True), _run([1, 2, 3, 4.0000005], True)])
    assert jitter.finding == NONDETERMINISTIC and not jitter.passed
    assert "declare nondeterministic = true" in jitter.message
    declared = repeat_finding(_gemm(True), [_run(right, True), _run([1, 2, 3, 4.0000005], True)])
    assert declared.passed and "1 of 4 outputs differ" in declared.message
    assert repeat_finding(_gemm(), [_run(right, True), _run(right, True)]) is None


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16"])
def test_compulsory_bytes_count_each_operand_once(precision):
    size = limits.ELEMENT_BYTES[precision]
    assert limits.compulsory_bytes(2, 3, 4, precision, "fp32") == (8 + 12) * size + 6 * 4
