"""FP8 GEMMs on the GPU (issue 36): SIMT fixtures of our own, one right and one per mistake,
run as a user runs them; each wrong one fails with its cause and no figure, the right ones
pass against cuBLASLt FP8 timed in the same rounds. The FP8 rung is held to the same check in
the suite's own battery (tests/test_gpu.py, test_numerics)."""

from __future__ import annotations

import pytest
from conftest import FIXTURE_KERNELS

from harness.gpu.timing import TimingOptions
from harness.kernels.registry import discover
from harness.run.runner import RunOptions, run

pytestmark = pytest.mark.gpu
FP8 = FIXTURE_KERNELS / "fp8"
QUICK = TimingOptions(budget_ms=20, min_ms=5, warmup_ms=5)
RIGHT = ("simt_e4m3:right", "simt_e4m3_e5m2:right", "simt_e4m3_fp32:right",
         "simt_e4m3_block:right")
ACCUMULATOR = ("less accurate than the tensor core's FP8 accumulation",
               "not the tensor core's accumulation")
"""An FP16 accumulator's sums are neither the tensor core's nor FP32's (fp8/check.accumulation):
named by whether its error is above the tensor core's on the same inputs."""
WRONG = {"simt_e4m3:ignores_scale_a": "ignores the scale of A",
         "simt_e4m3:fp16_accumulator": ACCUMULATOR,
         "simt_e4m3_fp32:fp16_accumulator": ACCUMULATOR,
         "b_e5m2_read_as_e4m3": "reads B as e4m3",
         "simt_e4m3_block:first_block_scales": "wrong values",
         "simt_e4m3_block:transposed_scale_a": "wrong values",
         "simt_e4m3_block:no_promotion": "wrong values"}


def test_fp8_kernels_pass_or_fail_with_their_cause(device, tmp_path):
    kernels = discover([FP8])
    record = run(kernels, "sm_90", RunOptions(sizes=((512, 512, 512),), timing=QUICK),
                 tmp_path / "fp8.jsonl", lambda _: None)
    got = {r.kernel.name: r for r in record.results}
    for name in RIGHT:
        r = got[name]
        assert r.status == "pass", (name, r.message)
        assert r.baseline.library == "cuBLASLt" and "FP8" in r.baseline.compute, r.baseline
        assert ("scales of 1" in r.baseline.compute) == ("block" in name), r.baseline
        assert r.checks.timed_checked > 0
    wrong = {name: (r.status, r.checks.finding if r.checks else None, r.message)
             for name, cause in WRONG.items()
             if (r := got[next(k for k in got if k.startswith(name))]).status != "FAIL"
             or r.checks.finding not in ((cause,) if isinstance(cause, str) else cause)
             or r.gflops is not None}
    assert not wrong, wrong


def test_a_promotion_declared_and_not_done_is_found(device, tmp_path):
    """Rung 20's own body declaring promote = 128 (tests/kernels/fp8_declared): its sums are
    the tensor core's over all of K, and the sampled outputs say so at every K (issue 57)."""
    kernels = [k for k in discover([FIXTURE_KERNELS / "fp8_declared"])
               if k.spec.path.name == "promotes_never.ptx"]
    assert kernels, "the fixture promotes_never.ptx is not found"
    record = run(kernels, "sm_90", RunOptions(sizes=((512, 512, 512),), timing=QUICK),
                 tmp_path / "declared.jsonl", lambda _: None)
    (r,) = record.results
    assert r.status == "FAIL" and r.gflops is None, (r.status, r.message)
    assert r.checks.finding in ACCUMULATOR, r.message
    assert "no promotion" in r.message, r.message
