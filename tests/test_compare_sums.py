"""A large check's comparison sums on the GPU (issue 37, harness/gpu/compare_sums.py): on the
CPU, the device copies of references kept and given up, and sums handed to the quick verdict
used as they are (a pass from them alone, anything else left to the whole path); on a GPU, the
device's sums against the host's over outputs right, wrong, not finite and unwritten, in each
C type and layout, and a session's timed size compared on its device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.gpu.compare_sums import Twins
from harness.kinds.gemm import chunked, numerics


class FakeBuffer:
    def __init__(self, nbytes):
        self.nbytes, self.closed = nbytes, False

    def close(self):
        self.closed = True


def test_twins_are_found_by_their_host_array_and_given_up_with_it():
    twins = Twins(budget=250)
    a, b = np.zeros(3), np.zeros(3)
    bufs = {name: (FakeBuffer(60), FakeBuffer(40)) for name in "abc"}
    twins.keep(a, *bufs["a"])
    twins.keep(b, *bufs["b"])
    assert twins.of(a) == bufs["a"] and twins.of(b) == bufs["b"]
    assert twins.of(np.zeros(3)) is None  # another array, even with the same values
    c = np.zeros(3)
    twins.keep(c, *bufs["c"])  # 300 bytes over a budget of 250: the oldest goes
    assert twins.of(a) is None and all(x.closed for x in bufs["a"])
    assert twins.of(c) == bufs["c"]
    del b  # the host's copy gone: its twin goes at the next keep
    twins.keep(a, FakeBuffer(1), FakeBuffer(1))
    assert all(x.closed for x in bufs["b"]) and not any(x.closed for x in bufs["c"])
    twins.close()
    assert all(x.closed for x in bufs["c"])


def test_a_twin_given_up_stays_allocated_until_the_session_closes():
    """A kernel that wrote into a twin may write again: its memory is not freed under it
    (freed, the next write is an illegal address, or lands in whatever took the memory)."""
    twins = Twins()
    ref, bufs = np.zeros(3), (FakeBuffer(8), FakeBuffer(8))
    twins.keep(ref, *bufs, checksum=7)
    twins.forget(ref)
    assert twins.of(ref) is None and twins.sealed(ref) is None
    assert not any(x.closed for x in bufs)
    twins.close()
    assert all(x.closed for x in bufs)


def _case(c_type, m=300, n=260, k=384, seed=4):
    rng = np.random.default_rng(seed)
    a, b = rng.uniform(-1, 1, (m, k)), rng.uniform(-1, 1, (k, n))
    ref = a @ b
    scale = (np.abs(a) @ np.abs(b)).astype(np.float32)
    out = numerics.stored(ref + rng.normal(0, 1e-7, ref.shape), c_type)
    return ref, scale, out


def test_sums_handed_in_decide_a_pass_and_leave_a_doubt_to_the_whole_path():
    """The quick verdict from sums made elsewhere is the one from its own; sums that count a
    bad element leave the verdict to the whole path, which compares what it is given."""
    ref, scale, out = _case("fp32")
    args = dict(scale=scale, k=384, seed=0, alpha=1.0, beta=0.0, c_type="fp32")
    factor = chunked.element_factor(384, 0.0)
    total = chunked.sums(out, ref, scale, None, "fp32", factor)
    own, given = chunked.compare(out, ref, "fp32", **args), \
        chunked.compare(out, ref, "fp32", **args, total=total)
    assert own == given and own.passed
    doubted = chunked.Sums(total.nan, 1, 0, total.err2, total.max_abs, total.ref2,
                           total.scale2, total.rounding2)
    assert chunked.passed_quickly(out, ref, "fp32", scale, 384, 0, 1.0, 0.0, "fp32", None,
                                  None, None, 0.0, 0.0, doubted) is None
    whole = chunked.compare(out, ref, "fp32", **args, total=doubted)  # it passes there
    assert whole.passed and whole.bad_elements == 0
    assert whole.rel_err_norm == pytest.approx(own.rel_err_norm, rel=1e-9)
    values = [total.nan, total.bad, total.unwritten, total.err2, total.max_abs, total.ref2,
              total.scale2, total.rounding2]
    assert chunked.of_device(np.array(values, dtype=np.float64)) == total


@pytest.mark.gpu
@pytest.mark.gpu_shared
@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("c_type", numerics.C_TYPES)
def test_the_devices_sums_are_the_hosts(device, c_type, layout):
    """Counts and the largest error exactly, the squared sums to 1e-12: over a right output,
    and one with wrong, NaN, infinite and unwritten (sentinel) elements, with and without the
    initial bits to count the unwritten by; the output in the layout the kernel stores it."""
    from harness.gpu.compare_sums import SumsKernels
    from harness.gpu.driver import Buffer, Stream

    ref, scale, out = _case(c_type)
    m, n = ref.shape
    word = numerics.SENTINEL[c_type]
    bits = numerics.bits(out)
    wrong = out.copy()
    wrong_bits = numerics.bits(wrong)
    wrong_bits[3, 5] = numerics.bits(numerics.stored(np.array([[0.5]]), c_type))[0, 0]
    wrong_bits[7, :40] = word  # unwritten
    wrong_bits[m - 1, n - 1] = numerics.NAN_BITS[c_type]
    wrong_bits[10, 11] = numerics.bits(numerics.stored(np.array([[np.inf]]), c_type))[0, 0]
    assert not np.array_equal(bits, wrong_bits)
    initial = np.full(out.shape, word, dtype=bits.dtype).view(out.dtype)
    stream = Stream()
    kernels = SumsKernels(stream, device.sm_count)
    ref_buf, scale_buf = Buffer(ref.nbytes), Buffer(scale.nbytes)
    ref_buf.upload(ref, stream)
    scale_buf.upload(scale, stream)
    factor = chunked.element_factor(384, 0.0)
    try:
        for output in (out, wrong):
            stored = output if layout == "row" else np.ascontiguousarray(output.T)
            out_buf = Buffer(stored.nbytes)
            out_buf.upload(stored, stream)
            for start in (None, initial):
                got = chunked.of_device(kernels.sums(
                    out_buf, c_type, layout, ref_buf, scale_buf,
                    None if start is None else word, factor, m, n))
                want = chunked.sums(output, ref, scale, start, c_type, factor)
                assert (got.nan, got.bad, got.unwritten, got.max_abs) == \
                       (want.nan, want.bad, want.unwritten, want.max_abs), (got, want)
                for field in ("err2", "ref2", "scale2", "rounding2"):
                    a, b = getattr(got, field), getattr(want, field)
                    assert math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) or a == b, field
            out_buf.close()
        assert want.bad >= 40 + 2 and want.nan == 2 and want.unwritten == 40
    finally:
        ref_buf.close()
        scale_buf.close()
        stream.close()


@pytest.mark.gpu
@pytest.mark.gpu_shared
def test_a_sessions_timed_size_is_compared_on_its_device():
    """At 512^3 and more the reference is made on the device and kept there: the size's own
    check and cuBLAS's take their sums from the device, the host's sums agree, and it
    passes."""
    from harness.kernels.registry import DEFAULT_KERNEL_DIRS, load_registry
    from harness.kinds.gemm import measure
    from harness.kinds.gemm.session import GemmSession

    kernel = load_registry(DEFAULT_KERNEL_DIRS).select(["07_vectorized"])[0]
    with GemmSession.open() as session:
        prep = measure.prepare(session, kernel)
        res, ready = measure.checked(session, prep, 640, 576, 512, defer=True)
        size = ready.size
        assert all(total is not None for total in size.totals)
        assert size.baseline is not None and size.baseline_total is not None  # cuBLAS's too
        assert size.baseline_total.bad == 0 and size.baseline_total.unwritten == 0
        ref, scale, _ = size.known
        assert session.twins.of(ref) is not None
        out = size.runs[0][0]
        want = chunked.sums(out, ref, scale, ready.ops.initial(), "fp32",
                            chunked.element_factor(512, 0.0))
        got = size.totals[0]
        assert (got.nan, got.bad, got.unwritten, got.max_abs) == \
               (want.nan, want.bad, want.unwritten, want.max_abs)
        assert math.isclose(got.err2, want.err2, rel_tol=1e-12)
        judged = size.judged(res)
        assert judged.status != "FAIL" and judged.checks.passed, judged
