"""Work beside other work (issue 37): a size's kept launches compared on the host while the
device times the next size, its row still emitted in order; the compiles beside the worker;
phases that overlap listed in the breakdown but not added up. No GPU needed."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest

from harness.bench.phases import CHECKS_BESIDE, Phases, beside
from harness.bench.result import KernelInfo, Result
from harness.kinds.dims import Problem
from harness.kinds.gemm import work
from harness.kinds.gemm.timed_checks import Pending
from harness.run import worker


def _row(size: int, status: str = "pass") -> Result:
    return Result.of(KernelInfo("k", "k.cu", "fp32"), size, size, size).ended(status, status)


def _pending(pool, size: int, gate: threading.Event, status: str = "pass",
             error: Exception | None = None) -> Pending:
    def compare():
        gate.wait(5)
        if error is not None:
            raise error
        return None, 3

    return Pending(pool.submit(compare), lambda verdict: _row(size, status))


@pytest.fixture
def emitted(monkeypatch):
    rows = []
    monkeypatch.setattr(worker, "emit", lambda event, result: rows.append(result["m"]))
    return rows


def test_rows_go_out_in_their_sizes_order_as_their_comparisons_finish(emitted):
    pool = ThreadPoolExecutor(max_workers=2)
    first, second = threading.Event(), threading.Event()
    rows = worker.InOrder()
    rows.add(_pending(pool, 128, first))
    rows.add(_pending(pool, 256, second, status="FAIL"))
    rows.add(_row(512))
    assert emitted == []  # 128 still being compared holds back the rest
    second.set()
    time.sleep(0.1)
    assert emitted == []  # 256 is done, but 128 is not
    first.set()
    assert rows.wait() is False  # one failed
    assert emitted == [128, 256, 512]


def test_an_error_in_a_comparison_is_raised_on_the_measuring_thread(emitted):
    pool = ThreadPoolExecutor(max_workers=1)
    done = threading.Event()
    done.set()
    rows = worker.InOrder()
    rows.add(_row(64))
    rows.add(_pending(pool, 128, done, error=ValueError("a bug in a comparison")))
    with pytest.raises(ValueError, match="a bug in a comparison"):
        rows.wait()
    assert emitted == [64]


def test_sizes_measured_before_a_fault_still_go_out(emitted, monkeypatch):
    """A fault at the third size: the first two rows, one still being compared, go out before
    the error does (the runner then records the fault at the size it was at)."""
    pool = ThreadPoolExecutor(max_workers=1)
    slow = threading.Event()
    threading.Timer(0.2, slow.set).start()
    calls = iter([_pending(pool, 128, slow), _row(256)])

    def measure(*args, **kwargs):
        try:
            return next(calls)
        except StopIteration:
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS") from None

    monkeypatch.setattr(work, "measure", measure)
    monkeypatch.setattr(worker, "_progress", lambda *a: None)
    job = type("Job", (), {"mode": "run", "reuse_baseline": False})()
    problems = [Problem.of(M=n, N=n, K=n) for n in (128, 256, 512)]
    prep = type("Prep", (), {"kernel": KernelInfo("k", "k.cu", "fp32")})()
    with pytest.raises(RuntimeError, match="ILLEGAL_ADDRESS"):
        work._run_sizes(None, prep, problems, job, worker.CONTEXT)
    assert emitted == [128, 256]


def test_phases_nest_per_thread_and_overlapping_ones_are_named():
    phases = Phases()

    def beside_work():
        with phases(CHECKS_BESIDE):
            time.sleep(0.05)

    with phases("timing"):
        thread = threading.Thread(target=beside_work)
        thread.start()
        thread.join()
    seconds = phases.take()
    # the comparing thread's phase is not taken out of the measuring thread's
    assert seconds["timing"] >= 0.05 and seconds[CHECKS_BESIDE] >= 0.05
    assert beside(CHECKS_BESIDE) and beside("compile (beside the worker)")
    assert not beside("checks") and not beside("timing")


def test_the_breakdown_lists_overlapping_phases_without_adding_them():
    from harness.cli.bench import _phases_lines
    from harness.run.record import RunRecord

    record = RunRecord(phases={"timing": 6.0, "checks": 2.0, CHECKS_BESIDE: 3.0,
                               "compile (beside the worker)": 1.0}, wall_s=10.0)
    lines = _phases_lines(record)
    assert lines[-1] == "other (reports, process overhead): 2.0 s"
    assert f"{CHECKS_BESIDE}: 3.0 s (30%)" in lines


def test_inputs_drawn_beside_are_the_inputs_drawn_in_place(monkeypatch):
    """A prefetched draw gives the same values as drawing in place, with its host reference;
    the battery's prefetch covers every check of its plan, as kernel_checks asks for them."""
    import numpy as np

    from harness.kernels.registry import discover, select
    from harness.kinds.gemm import contents, host_values, numerics
    from harness.kinds.gemm.battery import prefetch_battery
    from harness.kinds.gemm.plan import STALE_C, plan

    monkeypatch.setattr(host_values, "_PENDING", {})
    pool = ThreadPoolExecutor(max_workers=1)
    (kernel,) = select(discover(), ["03_smem_tiled:t32"])
    spec = kernel.spec
    host_values.prefetch(pool, spec, 37, 45, 29, 11, True, "uniform", (0.5, 2.0))
    (a, a64, b, b64, c, c64, _), refs = host_values.of(
        37, 45, 29, spec.precision, 11, True, spec.c_type, "uniform")
    drawn = host_values._drawn(37, 45, 29, spec.precision, 11, True, spec.c_type, "uniform", None)
    for got, want in zip((a, a64, b, b64, c, c64), drawn[:6], strict=True):
        np.testing.assert_array_equal(got, want)
    ref, scale = refs[0.5, 2.0]
    np.testing.assert_array_equal(ref, numerics.reference(a64, b64, 0.5, 2.0, c64))
    assert not host_values._PENDING  # taken

    battery = plan(kernel)
    prefetch_battery(spec, battery, 5, pool)
    for planned in battery.checks:
        seed = contents.derive(5, planned.seed)
        keys = [host_values._host_key(*planned.shape, spec.precision, s, planned.beta != 0.0,
                                      spec.c_type, "wide" if planned.kind == "wide exponents"
                                      else "uniform", None)
                for s in ((seed, seed + 1000) if planned.kind == STALE_C else (seed,))]
        assert all(key in host_values._PENDING for key in keys), planned


class _Device:
    """Device memory in host bytes, by address: the buffers and the gather launch that
    TimedOutputs.blocks uses, the launch doing in numpy what fresh_gather does."""

    def __init__(self):
        self.memory, self.launches = {}, 0
        device = self

        class Buffer:
            def __init__(self, nbytes):
                self.raw, self.address = bytearray(nbytes), 1 + len(device.memory)
                device.memory[self.address] = self

            def upload(self, array, stream):
                self.raw[:] = np.ascontiguousarray(array).tobytes()

            def download(self, dtype, shape, stream):
                return np.frombuffer(bytes(self.raw), dtype).reshape(shape).copy()

            def close(self):
                pass

        self.Buffer = Buffer

    def gather(self, shape, stream, args):
        kept, stride, where, blocks, lines, across, line, word, out = (a.value for a in args)
        index = np.frombuffer(bytes(self.memory[where].raw), np.uint32).reshape(blocks, -1)
        dtype = np.uint32 if word == 4 else np.uint16
        raw = np.frombuffer(bytes(self.memory[kept].raw), np.uint8)
        got = []
        for ix in index:
            slot = raw[ix[0] * stride:(ix[0] + 1) * stride].view(dtype)
            picked, at = ix[2:2 + lines], ix[2 + lines:2 + lines + across]
            got.append(slot[(picked[:, None] * line + at[None, :]).reshape(-1)])
        self.memory[out].raw[:] = np.concatenate(got).astype(dtype).tobytes()
        self.launches += 1


@pytest.mark.parametrize("layout", ["row", "col"])
@pytest.mark.parametrize("c_type", ["fp32", "bf16"])
def test_the_kept_outputs_sampled_blocks_are_gathered_at_once(layout, c_type, monkeypatch):
    """The sampled block of each kept repetition (rows x columns of C) comes from its own slot
    in either layout of C and either width of its elements, every block in one launch."""
    from harness.kinds.gemm import capture, numerics
    device = _Device()
    monkeypatch.setattr(capture, "Buffer", device.Buffer)
    m, n, slots = 12, 9, 3
    word = numerics.c_bytes(c_type)
    dtype = np.uint32 if word == 4 else np.uint16
    outputs = np.random.default_rng(5).integers(0, 60000, (slots, m, n)).astype(dtype)
    stored = outputs if layout == "row" else outputs.transpose(0, 2, 1)
    stride = m * n * word + 64  # slots are padded apart
    kept = device.Buffer(slots * stride)
    for j in range(slots):
        kept.raw[j * stride:j * stride + m * n * word] = np.ascontiguousarray(stored[j]).tobytes()
    fresh = SimpleNamespace(gather=SimpleNamespace(launch=device.gather),
                            shape=lambda count: None)
    timed = SimpleNamespace(spec=SimpleNamespace(layout_c=layout), c_type=c_type, m=m, n=n,
                            word_bytes=word, stride=stride, kept_buffer=kept, stream=None,
                            fresh=fresh)
    picks = [(2, np.array([0, 4, 11]), np.array([2, 3, 8])),
             (0, np.array([1, 5, 7]), np.array([0, 6, 7]))]
    got = capture.TimedOutputs.blocks(timed, picks)
    for (slot, rows, cols), block in zip(picks, got, strict=True):
        assert np.array_equal(block.view(dtype), outputs[slot][np.ix_(rows, cols)])
    assert device.launches == 1


def test_a_replay_is_named_however_far_back_the_result_it_returns_was_computed():
    """A kernel that replays at every launch back to back returns what it computed after the
    last pause, which may be hundreds of launches before a kept repetition (the suite at
    b3a8285: primer_replay, failing, was named only by the state it keeps): the output is
    compared with the products of the contents drawn before its own, as far back as
    REPLAY_WORK allows."""
    from harness.kinds.gemm import capture, kept_checks
    k, rows, cols = 32, np.arange(8), np.arange(8)

    def drawn(content):
        rng = np.random.default_rng(content)
        return rng.standard_normal((8, k)), rng.standard_normal((k, 8))

    class Compared:
        def __init__(self, passed):
            self.passed = passed

    timed = SimpleNamespace(
        copies=[0, 1], k=k, kinds=("fp32", "fp32"), decoys_drawn=0,
        operands=lambda content, r, c: drawn(content),
        compare=lambda out, a, b, seed, r, c: Compared(np.allclose(out, a @ b)))
    initial = SimpleNamespace(codes=(np.ones((8, k), np.float32), np.ones((k, 8), np.float32)))
    one = capture.Kept(slot=0, rep=250, content=300)

    def named(source):
        a, b = drawn(source)
        return kept_checks._replayed(timed, initial, one, a @ b, rows, cols)

    assert named(299) == "the inputs of the repetition before it"
    assert named(298) == "the inputs its placement held before"
    assert named(40) == "the inputs drawn 260 draws before its own"
    assert named(301) == ""  # a later content is no replay
    timed.k = kept_checks.REPLAY_WORK  # so deep that the work allows the fewest: 64 draws back
    assert named(300 - 64) == "the inputs drawn 64 draws before its own"
    assert named(300 - 65) == ""


def test_a_sizes_own_comparisons_start_on_their_own_thread(monkeypatch):
    """A size's own check is judged on a thread of its own as soon as its launches are made,
    beside the size's timing, not queued behind the kept launches of the sizes before it
    (which wait on it, never the other way)."""
    from harness.kinds.gemm import timed_size
    ran = []

    def judged(self, res):
        ran.append(threading.current_thread().name)
        return res

    monkeypatch.setattr(timed_size.SizeCheck, "judged", judged)
    row = _row(512)
    assert object.__new__(timed_size.SizeCheck).start(row).result(5) is row
    assert ran and ran[0].startswith("harness-size-check")


def test_a_kernel_is_checked_while_the_one_before_is_still_compared(monkeypatch):
    """The next kernel's check battery runs beside the kernel before's last comparisons;
    its sizes wait for that kernel's rows, and none is measured when it failed: the worker
    retires it (the next kernel then starts in a fresh worker)."""
    pool = ThreadPoolExecutor(max_workers=1)
    events = []

    def emit(event, **fields):
        events.append((event, fields.get("kernel", fields.get("result", {}).get("m"))))

    monkeypatch.setattr(worker, "emit", emit)
    monkeypatch.setattr(work, "_prefetch", lambda *a: None)
    monkeypatch.setattr(worker, "_progress", lambda *a: None)
    monkeypatch.setattr(work, "prepare", lambda *a: events.append(("battery", "next")) or
                        SimpleNamespace(gemm=SimpleNamespace(kernel=None)))
    monkeypatch.setattr(work, "_run_sizes",
                        lambda *a: events.append(("sizes", "next")) or worker.InOrder())
    job = SimpleNamespace(strict_blas=False, problems=lambda kernel: ())
    kernel = SimpleNamespace(name="next", spec=SimpleNamespace(kind="gemm"))
    for status in ("pass", "FAIL"):
        events.clear()
        slow = threading.Event()
        rows = worker.InOrder()
        rows.add(_pending(pool, 4096, slow, status=status))
        threading.Timer(0.2, slow.set).start()
        ran = worker._run_kernel(None, kernel, job, before=("before", rows))
        assert events[:2] == [("kernel_start", "next"), ("battery", "next")]
        assert events[2] == ("result", 4096)  # the kernel before's last row, after the battery
        if status == "pass":
            assert events[3:] == [("sizes", "next")] and ran[0] == "next"
        else:
            assert events[3:] == [("retire", "before")] and ran is None

    def faults(*args):
        raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")

    monkeypatch.setattr(work, "prepare", faults)
    for status in ("pass", "FAIL"):  # a fault in the battery after a failed kernel: retired
        rows = worker.InOrder()
        rows.add(_row(4096, status))
        events.clear()
        with pytest.raises(RuntimeError, match="ILLEGAL_ADDRESS"):
            worker._run_kernel(None, kernel, job, before=("before", rows))
        assert events == [("kernel_start", "next")] + ([("retire", "before")]
                                                       if status == "FAIL" else [])
