"""Nothing off the clock (issue 58), on the simulated GPU and host of test_timing.py: a primer
that does more than its launch, a launch slower alone than timed, the timer's own device
state changed under a timing, and the primer's decoy contents."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from test_timing import Kernels, line  # noqa: F401 (the simulated line, a fixture)

from harness.gpu import timing
from harness.gpu.timing import Timer, TimingOptions, account


def _timer(line, **options):  # noqa: F811
    options = {"warmup_ms": 1, "min_ms": 1, "budget_ms": 20, "max_rel_se_pct": 0,
               "subtract_launch_overhead": False, **options}
    return Timer(line.stream, 50 << 20, line.clocks, TimingOptions(**options))


def _primed(line, launch_ms, prime_ms, calls=None):  # noqa: F811
    calls = [] if calls is None else calls

    def launch():
        calls.append("launch")
        line.kernel(line.launch_host_ms, launch_ms(calls) if callable(launch_ms) else launch_ms)

    def prime():
        calls.append("prime")
        line.kernel(line.launch_host_ms, prime_ms)
    return timing.Primed(launch, prime)


def test_an_honest_primed_launch_has_nothing_off_the_clock(line, monkeypatch):  # noqa: F811
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    t = _timer(line).time(_primed(line, 0.1, 0.1))
    assert t.graph and t.findings == ()


def test_a_primer_that_works_ahead_is_found_in_the_gaps(line, monkeypatch):  # noqa: F811
    """A primer that computes the next repetition beside its own (here: three launches' work
    untimed) leaves the batch's span longer than its parts: the finding names the launch and
    what its gap held against what its parts cost."""
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    t = _timer(line).time(_primed(line, 0.1, 0.3))
    assert t.median_ms == pytest.approx(0.1, abs=1e-9)
    assert len(t.findings) == 1 and t.findings[0].startswith(account.HIDES_WORK)
    assert "primer 100.0" in t.findings[0]


def test_a_finding_on_a_shared_gpu_names_the_other_processes_too(line, monkeypatch):  # noqa: F811
    """Where NVML lists other processes with a context on the GPU, their kernels time-sliced
    in read as work off the clock: the finding stays (the books cannot tell them apart) and
    says so; an honest launch on a shared GPU is not accused."""
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    line.others = 3
    t = _timer(line).time(_primed(line, 0.1, 0.3))
    assert len(t.findings) == 1 and t.findings[0].startswith(account.HIDES_WORK)
    assert "NVML lists 3 other processes" in t.findings[0], t.findings
    assert _timer(line).time(_primed(line, 0.1, 0.1)).findings == ()
    line.others = 1
    t = _timer(line).time(_primed(line, 0.1, 0.3))
    assert "1 other process with" in t.findings[0], t.findings


def test_a_finding_names_no_other_process_where_nvml_lists_none():
    found = account.unexplained([[5.0]] * 3, account.Parts((0.0,), (0.0,), (0.0,), 0.5), 1)[0]
    assert account.on_a_shared_gpu(found, None) == found == account.on_a_shared_gpu(found, 0)
    assert account.on_a_shared_gpu("", 4) == ""


def test_the_keeping_after_a_launch_is_not_booked_as_the_next_ones(line, monkeypatch):  # noqa: F811
    """A launch's ``after`` (the harness keeping its output: at 4096 a copy and the inputs
    read again, 0.25 ms) runs behind its end in stream order; the next launch's gap is read
    from the after's own end, so neither launch is found hiding work (the H100's default
    run at de02d3e flagged cuBLAS behind ten kernels at 4096)."""
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    kept = []

    def keep():
        kept.append(1)
        line.kernel(line.launch_host_ms, 0.3)

    kernel, blas = _primed(line, 0.1, 0.1), _primed(line, 0.1, 0.1)
    timings, _ = _timer(line).time_interleaved([kernel, blas], after=[keep, None],
                                               pairs=[(0, 1)])
    assert kept and [t.findings for t in timings] == [(), ()]
    # the same work before the second launch, where no after explains it, is found
    timings, _ = _timer(line).time_interleaved([kernel, _primed(line, 0.1, 0.4)],
                                               pairs=[(0, 1)])
    assert timings[0].findings == () and timings[1].findings[0].startswith(account.HIDES_WORK)


def test_gaps_start_at_the_end_of_a_launchs_after():
    class At:
        def __init__(self, at):
            self.at = at

        def elapsed_ms(self, since):
            return self.at - since.at

    batch = [[(At(1.0), At(2.0), At(2.4)), (At(2.5), At(3.0))]]
    assert account.gaps(batch, At(0.0)) == [[1.0, pytest.approx(0.1)]]


def test_a_launch_slower_alone_than_timed_is_found(line, monkeypatch):  # noqa: F811
    """Its rest follows its time alone: a launch that knows an unprimed launch (it follows no
    primer) and runs three times slower there rests three times as long when timed."""
    monkeypatch.setattr(Timer, "kernels", Kernels(line))

    def launch_ms(calls):
        return 0.1 if len(calls) > 1 and calls[-2] == "prime" else 0.3

    t = _timer(line).time(_primed(line, launch_ms, 0.1))
    assert t.median_ms == pytest.approx(0.1, abs=1e-9) and t.rest > 0
    assert any(f.startswith(account.SLOWER_ALONE) for f in t.findings), t.findings


def test_an_unrested_launch_is_not_held_to_its_time_alone():
    assert account.slower_alone([0.3, 0.3], [0.1, 0.29], [0.0, 0.3]) == ["", ""]


def test_the_gap_slack_lets_the_flush_and_graph_nodes_move():
    parts = account.Parts((0.1,), (0.05,), (0.01,), 0.5)
    want = parts.expected_ms(0)
    assert want == pytest.approx(0.1 + 0.05 + 0.02 + 0.5)
    near = [[want * 1.05 + 0.02]] * 9
    assert account.unexplained(near, parts, 1) == [""]
    far = [[want * 1.1 + 0.06]] * 9
    assert account.unexplained(far, parts, 1)[0].startswith(account.HIDES_WORK)
    # a few kept repetitions (a copy more) do not move the median
    assert account.unexplained(near + [[5.0]] * 3, parts, 1) == [""]


def test_gaps_are_read_from_the_events_of_each_round():
    class At:
        def __init__(self, at):
            self.at = at

        def elapsed_ms(self, since):
            return self.at - since.at

    batch = [[(At(1.0), At(2.0)), (At(2.5), At(3.0))], [(At(4.0), At(5.0)), (At(5.2), At(6.0))]]
    assert account.gaps(batch, At(0.0)) == [[1.0, 0.5], [1.0, pytest.approx(0.2)]]


def test_rests_and_calibration_spans_changed_under_a_timing_are_findings():
    assert account.rests_changed([100, 200], [100, 200]) == ""
    found = account.rests_changed([100, 200], [100, 900])
    assert found.startswith(account.TIMER_STATE) and "launch 1" in found
    spin = 10_000
    assert account.spans_changed([spin + 300, spin + 5, 0, 0], 2, spin) == ""
    assert account.spans_changed([spin, 0, 0], 2, spin) == ""  # a capture never replayed
    for spans in ([spin - 1, spin, 0], [0, 0, 0], [spin, spin, 7], [spin, 2_000_000, 0]):
        assert account.spans_changed(spans, 2, spin).startswith(account.TIMER_STATE), spans


def test_the_timer_kernels_set_their_device_state_against_what_they_wrote():
    """TimerKernels.state_findings reads back the rests and spans (fake buffers here)."""
    from harness.gpu.timing.kernels import CALIBRATION_SLOTS, TimerKernels

    class Held:
        def __init__(self, words):
            self.words = np.array(words, dtype=np.uint64)

        def download_at(self, offset, dtype, count, stream):
            return self.words[:count].copy()

        def download(self, dtype, shape, stream):
            return self.words.copy()

    kernels = TimerKernels.__new__(TimerKernels)
    kernels.stream, kernels._slot, kernels._spin_ns = None, 2, 10_000
    kernels._written_ns = np.array([300_000, 0], dtype=np.uint64)
    spans = [10_100, 10_200] + [0] * (CALIBRATION_SLOTS - 2)
    kernels._rests, kernels._spans = Held([300_000, 0]), Held(spans)
    assert kernels.state_findings() == []
    kernels._rests = Held([900_000, 0])  # a kernel lengthened its own rest
    found = kernels.state_findings()
    assert len(found) == 1 and "rest of launch 0" in found[0]
    kernels._rests, kernels._spans = Held([300_000, 0]), Held([1, 10_200] + spans[2:])
    assert "calibration slot 0" in kernels.state_findings()[0]


def test_the_primer_runs_on_decoys_and_the_timed_content_is_drawn_after_it(monkeypatch):
    """With fresh inputs, the primer's copy holds decoy contents (a key of their own) when
    the primer runs, and the content the repetition is timed on is drawn after it: nothing
    the untimed launch reads or stashes is of the timed sequence."""
    from harness.kinds.gemm import launches, measure
    calls = []

    def launch_on(gemm, ops, session):
        def launch():
            calls.append(("run", ops.name))
        launch.prepare = lambda: calls.append(("zero", ops.name))
        launch.run = launch
        return launch

    monkeypatch.setattr(launches, "launcher", launch_on)
    copies = [SimpleNamespace(name=i, poison_c=lambda stream, i=i: calls.append(("poison", i)))
              for i in range(3)]
    timed = SimpleNamespace(
        decoy=lambda i: calls.append(("decoy", i)),
        befores=lambda bs: [lambda i=i, b=b: (calls.append(("draw", i)), b())
                            for i, b in enumerate(bs)],
        afters=lambda: [lambda: None] * 3)
    launch, before = measure.kernel_timed(None, copies[0], SimpleNamespace(stream=None), copies,
                                          timed)
    for _ in range(4):  # a timed round: primer, before, launch
        timing.primer_of(launch, before)()
        before()
        launch()
    rounds = [calls[i:i + 7] for i in range(0, len(calls), 7)]
    for r, got in enumerate(rounds):
        copy = (r + 1) % 3
        assert got == [("decoy", copy), ("zero", copy), ("run", copy), ("draw", copy),
                       ("poison", copy), ("zero", copy), ("run", copy)], got


def test_a_kept_output_of_the_primers_decoy_is_named_a_replay():
    """A kernel that hands back what its primer computed returns the product of decoy
    inputs: the replay search tries the decoys' contents too."""
    from harness.kinds.gemm import capture, kept_checks
    def operands(content, rows, cols, decoy=False):
        return (("decoy" if decoy else "real", content), None)

    def compare(out, a, b, seed, rows, cols):
        return SimpleNamespace(passed=a == out)

    timed = SimpleNamespace(copies=[0], k=64, kinds=("fp32", "fp32"), decoys_drawn=40,
                            operands=operands, compare=compare)
    initial = SimpleNamespace(codes=[np.zeros((4, 4)), np.zeros((4, 4))])
    rows = cols = np.arange(2)
    one = capture.Kept(0, 5, 30)
    found = kept_checks._replayed(timed, initial, one, ("decoy", 37), rows, cols)
    assert found == "the decoy inputs its untimed primer ran on"
    assert kept_checks._replayed(timed, initial, one, ("real", 29), rows, cols) == \
        "the inputs of the repetition before it"


def test_a_buffers_kernels_primer_runs_on_decoys_of_its_own_key():
    """The buffers kind primes the same way: its primer fills the drawn buffers with a seed
    and salt of their own, poisons the outputs, launches; the timed content is drawn after."""
    from harness.kinds.buffers import timed

    calls = []
    draws = SimpleNamespace(reset=lambda content: None, tick=lambda: calls.append("tick"),
                            fill=lambda d, seed, salt, verify=False: calls.append(
                                ("fill", d, seed, salt)))
    inst = SimpleNamespace(
        draws=draws, spec=SimpleNamespace(outputs=[SimpleNamespace(name="y")]),
        drawn=lambda: ["x"], prepare=lambda: calls.append("poison"),
        launch=lambda: calls.append("launch"),
        draw=lambda seed: calls.append(("fill", "x", seed, "salt")))
    before, _, prime = timed.hooks(inst, 1234, None, 8, 64)
    prime()
    before()
    (_, _, decoy_seed, decoy_salt), *rest = calls
    assert rest == ["poison", "launch", "tick", ("fill", "x", 1234, "salt"), "poison"]
    assert decoy_seed != 1234 and isinstance(decoy_salt, int)
    _, _, again = timed.hooks(inst, 1234, None, 8, 64)
    calls.clear()
    again()
    assert calls[0][2:] != (decoy_seed, decoy_salt)  # a key of their own, every timing


@pytest.mark.parametrize("hidden_ms", [0.0, 0.4])
def test_a_kernel_and_its_baseline_on_copies_with_draws_are_booked(line, monkeypatch,  # noqa: F811
                                                                   hidden_ms):
    """As a run times them: the kernel and cuBLAS on copies in turn, fresh draws before every
    repetition and decoys before every primer (20 us each on the line), the overhead
    calibrated. Honest, nothing is found; a primer with 0.4 ms more untimed, the kernel is
    named, not cuBLAS."""
    from harness.bench.session import in_turn
    from harness.kinds.gemm import launches, measure

    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    line.launch_overhead_ms = 0.003
    draw_ms, kernel_ms = 0.02, 0.1
    calls = []

    def kernel_on(gemm, ops, session):
        def launch():
            primer = calls[-1:] == ["decoy"]
            calls.append("kernel")
            line.kernel(line.launch_host_ms, kernel_ms + (hidden_ms if primer else 0.0))
        return launch

    def draw(what):
        calls.append(what)
        line.kernel(line.launch_host_ms, draw_ms)

    monkeypatch.setattr(launches, "launcher", kernel_on)
    copies = [SimpleNamespace(name=i, poison_c=lambda stream: None) for i in range(4)]
    timed = SimpleNamespace(
        decoy=lambda i: draw("decoy"),
        befores=lambda bs: [lambda b=b: (draw("draw"), b()) for b in bs],
        afters=lambda: [lambda: None] * 4)
    launch, before = measure.kernel_timed(None, copies[0], SimpleNamespace(stream=None), copies,
                                          timed)
    blas, poison = in_turn([lambda: line.kernel(line.launch_host_ms, 0.05)] * 4,
                           [lambda: None] * 4)
    timer = _timer(line, subtract_launch_overhead=True)
    (kernel, base), _ = timer.time_interleaved([launch, blas], [before, poison],
                                               after=[launch.after, None], pairs=[(0, 1)])
    assert kernel.median_ms == pytest.approx(kernel_ms, abs=1e-9) and base.findings == ()
    if hidden_ms:
        assert len(kernel.findings) == 1 and kernel.findings[0].startswith(account.HIDES_WORK)
    else:
        assert kernel.findings == ()


def test_the_timing_trace_says_each_warm_up_stretch(line, monkeypatch, tmp_path):  # noqa: F811
    """With HARNESS_TIMING_TRACE set, a sustained timing's line holds the warm-up's time per
    round stretch by stretch, the first launches' times (where a warm-up ends at its cap
    without two stretches agreeing, they say why: issue 61) and whether the timer's gate was
    off (leads instead: the first suspect when stretches disagree by tens of percent)."""
    import json

    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv("HARNESS_TIMING_TRACE", str(path))
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    timer = _timer(line, warmup_ms=40)
    gave_way = timer.gate_off
    timer.time(_primed(line, 0.1, 0.1))
    timer._gate_off = not gave_way  # as when the gate gives way: the next line says so
    timer.time(_primed(line, 0.1, 0.1))
    entry, after = [json.loads(x) for x in path.read_text().splitlines()]
    assert (entry["gate_off"], after["gate_off"]) == (gave_way, not gave_way)
    assert entry["gate_gave_way_ms"] == timer.gate_gave_way_ms
    assert entry["warmup_per_round_ms"] and all(x > 0 for x in entry["warmup_per_round_ms"])
    assert len(entry["first_ms"]) == 1 and entry["steps_ms"]["warm-up"] >= 0


def test_a_first_launch_read_long_once_is_timed_again_not_rested_on(line, monkeypatch):  # noqa: F811
    """cuBLASLt's first launch for a new shape loads its kernel: in the H100's cold run at
    67f770d a 20 us launch read 21.8 ms as it first ran, that reading was kept (FIRST_KEPT_MS)
    and the rests followed it, and the row got no figure ("slower alone than timed"). The
    first warm-up stretch runs far faster than the first launches said: the launches are timed
    alone again and the timing starts over from them."""
    monkeypatch.setattr(Timer, "kernels", Kernels(line))
    calls = []

    def blas():
        calls.append(1)
        line.kernel(line.launch_host_ms, 25.0 if len(calls) == 1 else 0.02)

    def kernel():
        line.kernel(line.launch_host_ms, 0.1)

    timings, _ = _timer(line, warmup_ms=60, rest=1.0).time_interleaved([kernel, blas],
                                                                        pairs=[(0, 1)])
    assert [t.median_ms for t in timings] == pytest.approx([0.1, 0.02], abs=1e-9)
    assert [t.findings for t in timings] == [(), ()]
    assert timings[1].rest > 0 and len(calls) < 400


def test_a_reading_alone_far_past_its_first_is_taken_again(line):  # noqa: F811
    """A launch of a millisecond or more alone is prepared, not timed, on the second pass (a
    long kernel runs once); but one read at over twice its first time (the first at an idle
    clock, so no faster) had the GPU taken from it, as by other processes time-sliced in
    (4.3 ms for a 20 us launch in 67f770d's suite): it is timed again and the least kept."""
    from harness.gpu.timing.warmup import alone_ms

    calls = []

    def blas():
        calls.append(1)
        line.kernel(line.launch_host_ms, 4.3 if len(calls) == 1 else 0.02)

    timer = _timer(line)
    assert alone_ms(timer, [blas], [None], hint=[0.03]) == [pytest.approx(0.02)]
    calls.clear()
    assert alone_ms(timer, [blas], [None]) == [pytest.approx(4.3)]  # no hint: kept
    calls.clear()
    # a long launch as long as its hint runs once
    assert alone_ms(timer, [blas], [None], hint=[4.0]) == [pytest.approx(4.3)]
    assert len(calls) == 1
