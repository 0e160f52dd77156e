"""The timed attention path on the GPU (harness/kinds/attention/timed.py): a kernel checked,
then timed beside the baselines that run here with its kept timed outputs checked; a kernel
whose output is wrong only when timed is named for it."""

from __future__ import annotations

import pytest

from harness.gpu.timing import TimingOptions
from harness.kinds.attention.problem import read_size

pytestmark = pytest.mark.gpu
QUICK = TimingOptions(warmup_ms=20, min_ms=20, budget_ms=60, graph=False)
SIZE = read_size("B=1,H=4,S=1024,D=128")


@pytest.fixture(scope="module")
def session(device):
    from harness.bench.session import BenchSession

    with BenchSession(QUICK) as opened:
        yield opened


def test_our_kernel_is_timed_beside_the_baselines_its_kept_outputs_checked(session):
    from harness.kinds.attention.timed import compare

    rows = list(compare([("cu/attention/attention_02_online.cu", "d128")], [SIZE],
                        ["torch_sdpa_flash", "torch_sdpa_cudnn", "cudnn_sdpa"], seeds=1,
                        session=session, say=lambda _: None))
    ours = [r for r in rows if not r.baseline]
    assert [r.status for r in ours] == ["pass"], [r.message for r in ours]
    assert ours[0].kept_checked >= 1 and ours[0].median_ms > 0 and ours[0].reps >= 10
    bases = [r for r in rows if r.baseline]
    assert len(bases) == 3
    for r in bases:
        assert r.status == "pass" or (r.status == "unavailable" and r.message), r
        if r.status == "pass":
            assert r.version and r.median_ms > 0 and r.name in ours[0].ratios


def test_a_kernel_that_tells_a_timed_launch_by_its_inputs_fails_when_timed(session):
    from harness.kinds.attention.timed import compare

    rows = list(compare([("tests/kernels/attention/attention_tell.cu", None)], [SIZE], [],
                        seeds=1, session=session, say=lambda _: None))
    assert [r.status for r in rows] == ["FAIL"], rows
    assert rows[0].message.startswith("wrong when timed"), rows[0].message
    assert rows[0].kept_checked >= 1
