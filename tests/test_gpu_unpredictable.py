"""Inputs no kernel can predict, on the GPU (issue 57, items 1, 2 and 9): the device's keyed
draw is the host's bit for bit, the twins' checksum sees one changed word, and the fixtures
that exploit each hole fail with their cause."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import FIXTURE_KERNELS

from harness.bench import keyed
from harness.gpu.timing import TimingOptions
from harness.kinds.gemm import contents, timed_size

UNPREDICTABLE = FIXTURE_KERNELS / "unpredictable"
QUICK = TimingOptions(budget_ms=20, min_ms=5, warmup_ms=5)
SIZE = 512


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fp32", "tf32", "bf16", "fp16", "e4m3", "e5m2"])
def test_the_device_draw_is_the_host_draw_bit_for_bit(device, kind):
    from harness.gpu.driver import Buffer, Stream
    from harness.kinds.gemm.capture import FreshKernels

    stream = Stream()
    fresh = FreshKernels(stream, device.sm_count)
    count = 100_003
    key = contents.content_key(keyed.Secret.fresh(), 12, 2**40 + 3, "B")
    want = contents.draw(key, (count,), kind)
    buf = Buffer(want.nbytes)
    try:
        fresh.fill(buf, count, kind, key)
        got = buf.download(want.dtype, (count,), stream)
    finally:
        buf.close()
    assert np.array_equal(got, want)


@pytest.mark.gpu
def test_the_twin_checksum_sees_one_changed_word_and_depends_on_its_key(device):
    from harness.gpu.compare_sums import SumsKernels
    from harness.gpu.driver import Buffer, Stream

    stream = Stream()
    sums = SumsKernels(stream, device.sm_count)
    words = np.random.default_rng(1).integers(0, 1 << 32, 1 << 20, dtype=np.uint64)
    words = words.astype(np.uint32)
    a, b = Buffer(words.nbytes), Buffer(4096)
    try:
        a.upload(words, stream)
        b.upload(np.arange(1024, dtype=np.uint32), stream)
        first = sums.checksum((a, b), 0x1234)
        assert sums.checksum((a, b), 0x1234) == first  # the atomics' order does not matter
        assert sums.checksum((a, b), 0x1235) != first
        words[777] ^= 1
        a.upload(words, stream)
        assert sums.checksum((a, b), 0x1234) != first
    finally:
        a.close()
        b.close()


def _fixture(name: str):
    from harness.kernels.registry import discover

    return [k for k in discover([UNPREDICTABLE]) if k.name == name]


def _secret_hex(secret: keyed.Secret) -> str:
    return b"".join(w.to_bytes(4, "little") for w in secret.words).hex()


@pytest.mark.gpu
def test_a_kernel_that_tells_checks_by_their_values_fails_in_the_battery(device, tmp_path):
    """It is right only where A holds a value off the 2^-23 grid: no launch does, so it is
    short at every check, the battery's first."""
    from harness.run.runner import RunOptions, run

    record = run(_fixture("tells_checks_by_values"), "sm_90",
                 RunOptions(sizes=((SIZE, SIZE, SIZE),), timing=QUICK),
                 tmp_path / "values.jsonl", lambda _: None)
    (res,) = record.results
    assert res.status == "FAIL" and res.gflops is None, res
    assert f"first at {SIZE}x{SIZE}x{SIZE}" not in res.message, res.message
    assert "timed repetition" not in res.message


@pytest.mark.gpu
def test_a_kernel_that_counts_launches_per_shape_fails_at_the_sizes_check(device, tmp_path,
                                                                         monkeypatch):
    """Wrong on launches 3 to 8 at the timed size and right on the first two: under a secret
    whose checked positions are not the first two it fails at the size's own check."""
    from harness.run.runner import RunOptions, run

    while True:
        secret = keyed.Secret.fresh()
        if timed_size.checked_positions(secret, "counts_launches", SIZE, SIZE, SIZE,
                                        "fp32")[1] >= 2:
            break
    monkeypatch.setenv(keyed.SECRET_ENV, _secret_hex(secret))
    monkeypatch.setattr(keyed, "_RUN", [keyed.Secret(secret.words, replayed=True)])
    record = run(_fixture("counts_launches"), "sm_90",
                 RunOptions(sizes=((SIZE, SIZE, SIZE),), timing=QUICK),
                 tmp_path / "counts.jsonl", lambda _: None)
    (res,) = record.results
    assert res.status == "FAIL" and res.gflops is None, res
    assert f"first at {SIZE}x{SIZE}x{SIZE}" in res.message, res.message
    assert "timed repetition" not in res.message


@pytest.mark.gpu
def test_a_kernel_that_writes_into_the_reference_twin_is_named(device):
    """Pointed at the twin of the timed size's reference (as a kernel scanning memory would
    find it), it writes its own, wrong, output there: the checksum around its launches names
    it, and the host's reference judges it."""
    from harness.bench.result import Result
    from harness.bench.session import BenchSession
    from harness.kinds.gemm import measure
    from harness.kinds.gemm.battery import KernelChecks
    from harness.kinds.gemm.references import known_of
    from harness.kinds.gemm.session import gemm_session

    with BenchSession() as core:
        session = gemm_session(core)  # the GEMM part: its loads, operands and twins
        prep = measure.prepare(session, _fixture("writes_reference")[0])
        ops = session.timing_operands(prep.kernel, SIZE, SIZE, SIZE)
        known = known_of(prep.gemm, ops, ops.seed, 1.0, 0.0)
        twin = session.twins.of(known[0])
        assert twin is not None
        pointer = prep.gemm.module.global_buffer("reference_twin")
        pointer.upload(np.array([twin[0].address], dtype=np.uint64), session.stream)
        battery = KernelChecks(plan=prep.checks.plan)  # its own failures aside
        size, _ = timed_size.launched(session, prep.gemm, ops, known, battery, None)
        assert size.twin_written == 1
        assert all(total is None for total in size.totals)  # judged on the host's reference
        judged = size.judged(Result.of(prep.info, SIZE, SIZE, SIZE))
        assert judged.status == "FAIL"
        assert timed_size.WRITES_REFERENCE in judged.message, judged.message
