"""Attention kernels timed (issue 63): each kernel checked by its battery first, then at each
size timed interleaved with the baselines that run here, on the timer's stream.

Every timed repetition of a kernel runs on a content of its own: Q, K and V drawn on the device
before it (the buffers kind's draw kernels, draw.py: a content counter on the device, each
content keyed under the run secret), O and the log-sum-exp poisoned. After each timed
repetition a secret reservoir decides whether its O (and log-sum-exp) is kept; after the timing
every kept one is checked on sampled query rows (the first, the last and random ones, every
head) against the FP64 device reference of the content it was computed from
(device_reference.py). The untimed primer runs on decoy draws, so no launch sees a content of
the timed sequence before its turn. A kernel that fails its battery is not timed; one whose
kept output fails is a FAIL with no figure; either with the cause.

The baselines (baselines.py) run on the same buffers and on the same stream (PyTorch through
an external stream, cuDNN through a handle set to it), each on one content: they are the
yardstick, not the suspect. PyTorch's SDPA and FlashAttention return a fresh tensor, kept as
returned (``output``), not copied into O: until after 42de343 the copy (16 MiB at S = 4096,
B = 4, some 11 us of a millisecond) was timed as the baseline's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from harness.bench.seeds import derive, new_seed
from harness.errors import HarnessError
from harness.kinds.attention import napkin, numerics
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.attention.sampled import judge_rows, lse_rows_of, rows_of, sampled_rows

DRAW_TYPE = {"bf16": "bf16", "fp16": "f16"}
RANGES = {"q": (-4.0, 8.0), "k": (-1.0, 2.0), "v": (-1.0, 2.0)}
"""(lo, span) of each input's draw: Q four times wider than K, so that the logits spread some
(a standard deviation near 1.3 at D = 128) and the softmax is not flat."""
SLOTS = 4
"""Timed outputs the reservoir keeps at most (each one checked)."""
KEEP_BYTES = 1 << 30


@dataclass(frozen=True)
class Row:
    """One kernel or baseline at one size."""

    name: str
    problem: str
    status: str
    """pass, FAIL, unavailable, error."""
    message: str = ""
    median_ms: float = float("nan")
    p20_ms: float = float("nan")
    p80_ms: float = float("nan")
    reps: int = 0
    sm_clock_mhz: float = float("nan")
    stop: str = ""
    tflops: float = float("nan")
    kept_checked: int = 0
    version: str = ""
    baseline: bool = False
    ratios: dict = field(default_factory=dict)
    """The median of the per-round time ratios baseline / this row, by baseline name (> 1:
    faster than it)."""

    def to_json(self) -> dict:
        return asdict(self)


def above_hardware(session, spec, problem: AttentionProblem, timing) -> str:
    """:func:`napkin.too_fast` for ``timing`` on the session's device."""
    device = session.device
    clock = timing.sm_clock_max_mhz
    return napkin.too_fast(
        problem, timing.median_ms, arch=device.arch.name, sms=device.sm_count,
        clock_mhz=clock if clock == clock else device.max_sm_clock_mhz,
        dram_bytes_per_s=device.dram_bytes_per_s,
        tensor_flops_per_clock_per_sm=device.arch.fma_flops_per_clock_per_sm[spec.precision],
        precision=spec.precision, lse=bool(spec.kind_spec.lse))


class Operands:
    """One size's device buffers, the draws that fill them and the kept outputs' slots."""

    def __init__(self, session, spec, problem: AttentionProblem, draws) -> None:
        from harness.gpu.driver import Buffer
        from harness.kinds.buffers.draw import Drawn

        p = problem
        self.problem, self.spec, self.session, self.draws = p, spec, session, draws
        # elements of Q and O, of K and V, of the log-sum-exp
        self.q_count = q_count = p["B"] * p["H"] * p["S_q"] * p["D"]
        self.kv_count = kv_count = p["B"] * p["H_kv"] * p["S_kv"] * p["D"]
        self.lse_count = p["B"] * p["H"] * p["S_q"]
        dtype = DRAW_TYPE[spec.precision]
        self.q, self.k, self.v = Buffer(2 * q_count), Buffer(2 * kv_count), Buffer(2 * kv_count)
        self.o = Buffer(2 * q_count)
        self.o_bytes = -(-2 * q_count // 16) * 16
        self.lse = Buffer(4 * self.lse_count) if spec.kind_spec.lse else None
        self.drawn = [Drawn(buf, i, dtype, count, *RANGES[name]) for i, (name, buf, count) in
                      enumerate((("q", self.q, q_count), ("k", self.k, kv_count),
                                 ("v", self.v, kv_count)))]
        self.count = max(2, min(SLOTS, KEEP_BYTES // self.o_bytes))
        self.slots = Buffer(self.count * self.o_bytes)
        self.lse_bytes = -(-4 * self.lse_count // 16) * 16
        self.lse_slots = Buffer(self.count * self.lse_bytes) if self.lse is not None else None
        self.poison = (numerics.BF16_POISON if spec.precision == "bf16"
                       else numerics.FP16_POISON)

    def fill(self, seed: int, salt: int) -> None:
        for d in self.drawn:
            self.draws.fill(d, seed, salt)

    def poisoned(self) -> None:
        stream = self.session.stream
        self.o.fill(self.poison, 2, stream)
        if self.lse is not None:
            self.lse.fill(numerics.LSE_POISON, 4, stream)

    def close(self) -> None:
        for buffer in (self.q, self.k, self.v, self.o, self.lse, self.slots, self.lse_slots):
            if buffer is not None:
                buffer.close()


def hooks(ops: Operands, seed: int, salt: int, launch: Callable[[], None]):
    """Before every timed repetition (the next content drawn, outputs poisoned), after it (the
    reservoir's decision, O kept) and the primer (the launch on decoy draws)."""
    secret = derive(seed, "attention secret")
    decoy_seed, decoy_salt = new_seed(), secrets.randbits(32)
    ops.draws.reset(1000)

    def before() -> None:
        ops.draws.tick()
        ops.fill(seed, salt)
        ops.poisoned()

    def after() -> None:  # one decision, O and the log-sum-exp kept in the same slot
        ops.draws.decide(secret, ops.count)
        ops.draws.keep(ops.o, ops.slots, 2 * ops.q_count, ops.o_bytes)
        if ops.lse is not None:
            ops.draws.keep(ops.lse, ops.lse_slots, 4 * ops.lse_count, ops.lse_bytes)

    def prime() -> None:
        ops.fill(decoy_seed, decoy_salt)
        ops.poisoned()
        launch()

    return before, after, prime


def verify_kept(ops: Operands, seed: int, salt: int, scale: float,
                rng: np.random.Generator) -> tuple[int, numerics.Verdict | None]:
    """Every kept timed output against the reference of its own content at sampled rows;
    (how many were checked, the first failing verdict or None)."""
    from harness.kinds.attention import device_reference

    state = ops.draws.read_state()
    kept = min(ops.count, int(state[1]))
    p, spec = ops.problem, ops.spec
    stream = ops.session.stream
    checked = 0
    for j in range(kept):
        content = int(state[3 + j])
        ops.draws.set_content(content)
        ops.fill(seed, salt)
        rows = sampled_rows(p, rng)
        ref = device_reference.run(ops.q, ops.k, ops.v, rows, p, scale,
                                   precision=spec.precision, layout=spec.kind_spec.layout,
                                   p_precision=spec.kind_spec.p_precision(spec.precision),
                                   stream=stream)
        raw = ops.slots.download_at(j * ops.o_bytes, np.uint16, ops.q_count, stream)
        lse = None
        if ops.lse_slots is not None:
            lse = lse_rows_of(ops.lse_slots.download_at(
                j * ops.lse_bytes, np.float32, ops.lse_count, stream), rows, p)
        verdict = judge_rows(spec, p, rows_of(raw, rows, p, spec.kind_spec.layout), ref, lse)
        checked += 1
        if not verdict.ok:
            return checked, verdict
    return checked, None


class _OnStream:
    """A baseline's launch on the timer's stream (torch's external stream around it)."""

    def __init__(self, base, stream, device) -> None:
        import torch
        self.base = base
        self.torch_stream = torch.cuda.ExternalStream(int(stream.handle), device=device)

    def __call__(self) -> None:
        import torch
        with torch.cuda.stream(self.torch_stream):
            self.base.launch()


def _refusal(exc: Exception, most: int = 300) -> str:
    """A library's refusal for a report's row: its first and last lines, each at most ``most``
    characters (a pybind11 signature mismatch lists every overload between them, some 4 KB a
    row, and says what it was given last)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    ends = lines[:1] + lines[1:][-1:]  # the first and the last, each once
    return f"{type(exc).__name__}: " + " ... ".join(
        line if len(line) <= most else line[:most] + " ..." for line in ends)


def baseline_launches(ops: Operands, names: Sequence[str], scale: float, stream):
    """(name, baseline, its launch on ``stream`` or None, why not) for each baseline name,
    prepared on ``ops``'s buffers."""
    import torch

    from harness.kinds.attention.baselines import BASELINES
    from harness.kinds.attention.baselines import Operands as BaseOperands
    from harness.kinds.buffers.baselines import context_kept, current_ordinal, torch_view

    p = ops.problem
    dtype = DRAW_TYPE[ops.spec.precision]
    with context_kept():
        device = torch.device("cuda", current_ordinal())
        views = [torch_view(torch, b, dtype, (n,), device)
                 for b, n in ((ops.q, ops.q_count), (ops.k, ops.kv_count),
                              (ops.v, ops.kv_count), (ops.o, ops.q_count))]
    operands = BaseOperands(*views, lse=None, problem=p, scale=scale,
                            layout=ops.spec.kind_spec.layout, precision=ops.spec.precision,
                            stream=int(stream.handle))
    out = []
    for name in names:
        base = BASELINES.make(name, ops.spec, p)
        why = base.unavailable()
        if why:
            out.append((name, base, None, why))
            continue
        try:
            with context_kept(), torch.cuda.stream(torch.cuda.ExternalStream(
                    int(stream.handle), device=device)):
                base.prepare(operands)
                base.launch()  # its first call (a library sets up here), then waited for
            stream.synchronize(f"baseline {name}, first call")
        except Exception as exc:  # a library's own refusal (shape, backend): its message
            out.append((name, base, None, _refusal(exc)))
            continue
        out.append((name, base, _OnStream(base, stream, device), ""))
    return out


def time_size(session, launchers: Sequence[tuple[str, object]], problem: AttentionProblem,
              baselines: Sequence[str], say: Callable[[str], None]) -> Iterator[Row]:
    """Every launcher (name, launch.Launcher on ``session.stream``) and baseline at
    ``problem``, timed interleaved; a Row each."""
    from harness.gpu.timing import Primed
    from harness.kinds.buffers.draw import Draws
    from harness.stats import Summary

    scale = 1.0 / float(np.sqrt(problem["D"]))
    flops = float(napkin.flops(problem))
    live, rows, opened, bases = [], [], [], []
    seed = session.run_seed
    try:
        for name, launcher in launchers:
            draws = Draws(session.stream, session.arch, session.device.sm_count)
            ops = Operands(session, launcher.spec, problem, draws)
            opened.append(ops)
            try:
                launch = launcher.bind(problem, (ops.q, ops.k, ops.v), ops.o, ops.lse, scale)
            except HarnessError as exc:
                rows.append(Row(name, problem.text, "error", str(exc)))
                continue
            salt = derive(seed, f"attention {name} {problem.text}") & 0xFFFFFFFF
            before, after, prime = hooks(ops, seed, salt, launch)
            live.append((name, ops, salt, Primed(launch, prime), before, after))
        # the baselines run on the first kernel's buffers, on whatever content they hold
        if opened:
            opened[0].fill(seed ^ 0x5A5A, 7)
        bases = baseline_launches(opened[0], baselines, scale, session.stream) if opened else []
        launches = [e[3] for e in live] + [b[2] for b in bases if b[2] is not None]
        befores = [e[4] for e in live] + [None for b in bases if b[2] is not None]
        afters = [e[5] for e in live] + [None for b in bases if b[2] is not None]
        timed_bases = [b for b in bases if b[2] is not None]
        for name, base, _, why in bases:
            if why:
                rows.append(Row(name, problem.text, "unavailable", why, version=base.version(),
                                baseline=True))
        if not launches:
            yield from rows
            return
        say(f"time {problem.text}: {len(live)} kernel(s), {len(timed_bases)} baseline(s)")
        timings, per_round = session.timer.time_interleaved(
            launches, before=befores, after=afters, budget_scale=len(launches))
        rng = np.random.default_rng(derive(seed, f"rows {problem.text}"))
        names = [e[0] for e in live] + [b[0] for b in timed_bases]

        def ratios(i: int) -> dict:
            return {names[j]: Summary.of([r[j] / r[i] for r in per_round if r[i] > 0]).median
                    for j in range(len(live), len(names))}

        for i, (name, ops, salt, _, _, _) in enumerate(live):
            t = timings[i]
            say(f"verify {name} at {problem.text}")
            checked, failed = verify_kept(ops, seed, salt, scale, rng)
            if failed is not None:  # no figure for a kernel that was wrong when timed
                rows.append(Row(name, problem.text, "FAIL", "wrong when timed: a kept timed "
                                f"output at {problem.text}: {failed}", kept_checked=checked))
                continue
            too_fast = above_hardware(session, ops.spec, problem, t)
            if too_fast:
                rows.append(Row(name, problem.text, "FAIL", too_fast, kept_checked=checked))
                continue
            rows.append(Row(name, problem.text, "pass", "", t.median_ms, t.p20_ms,
                            t.p80_ms, t.reps, t.sm_clock_mhz, t.stop,
                            flops / t.median_ms / 1e9, checked, ratios=ratios(i)))
        for j, (name, base, _, _) in enumerate(timed_bases, start=len(live)):
            t = timings[j]
            rows.append(Row(name, problem.text, "pass", base.compute, t.median_ms, t.p20_ms,
                            t.p80_ms, t.reps, t.sm_clock_mhz, t.stop,
                            flops / t.median_ms / 1e9, version=base.version(), baseline=True))
    finally:
        for _, base, _, _ in bases:
            base.close()
        for ops in opened:
            ops.draws.close()
            ops.close()
    yield from rows


def compare(kernels: Sequence[tuple[str, str | None]], problems: Sequence[AttentionProblem],
            baselines: Sequence[str], *, seeds: int = 3, say=print, session=None
            ) -> Iterator[Row]:
    """``kernels`` (path, variant) checked by the battery (``seeds`` draws a case), then
    timed at each problem, interleaved, beside ``baselines``; a Row each, as they come."""
    from harness.bench.session import BenchSession
    from harness.gpu.timing import TimingOptions
    from harness.kinds.attention.build import fits, load
    from harness.kinds.attention.launch import Launcher, battery_verdicts

    own = session is None
    if own:
        # launches of a millisecond and more, some through PyTorch: enqueued from the host
        session = BenchSession(TimingOptions(graph=False))
    launchers = []
    try:
        for path, variant in kernels:
            spec = load(path)
            name = f"{spec.path.stem}:{variant}" if variant else spec.path.stem
            say(f"check {name}: its battery, {seeds} draws a case")
            failed = [f"{case.name}: {v}" for case, v in battery_verdicts(
                spec, session.arch, seeds=seeds, seed=session.run_seed, variant=variant)
                if not v.ok]
            if failed:
                for p in problems:
                    yield Row(name, p.text, "FAIL", "the battery: " + "; ".join(failed[:3]))
                continue
            launchers.append((name, Launcher(spec, session.arch, variant, session.stream)))
        for p in problems:
            fitting = [(n, lc) for n, lc in launchers if fits(lc.spec, p, lc.params)]
            for n, lc in launchers:
                if (n, lc) not in fitting:
                    yield Row(n, p.text, "error", "its constraints refuse this size")
            if fitting:
                yield from time_size(session, fitting, p, baselines, say)
    finally:
        for _, lc in launchers:
            lc.close()
        if own:
            session.close()
