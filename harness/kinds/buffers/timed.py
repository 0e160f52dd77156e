"""A buffers kernel at one timed size: checked there, timed interleaved with its baseline (cold
L2, the inputs drawn afresh on the device before every repetition, the outputs poisoned), a
secret sample of the timed repetitions' outputs kept and checked against their own draws, the
figure held to the memory ceiling, and its Result; :func:`measure_kernel` does every size.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from harness.bench.phases import PHASES
from harness.bench.result import (
    Baseline,
    CheckSummary,
    KernelInfo,
    LaunchInfo,
    MemoryFigures,
    Result,
)
from harness.bench.seeds import derive, new_seed
from harness.errors import HarnessError, LaunchError
from harness.gpu.driver import Buffer
from harness.gpu.timing import Primed
from harness.kernels.registry import Kernel
from harness.kinds.buffers import baselines, named, roofline, softmax_bound
from harness.kinds.buffers.checks import Battery, battery
from harness.kinds.buffers.draw import Draws, as_float64
from harness.kinds.buffers.measure import (
    SLOTS,
    VERIFIED,
    Instance,
    Loaded,
    judge_all,
    load,
    padded,
    size_text,
)
from harness.kinds.buffers.references import NUMPY, Judged, expected, judge
from harness.kinds.gemm import chunked

KEEP_BYTES = 4 << 30
"""Device memory the kept outputs may take at one size."""


def _softmax(inst: Instance) -> bool:
    return inst.spec.reference == "softmax"


def _whole_softmax(inst: Instance, raw_x: np.ndarray, raw_y: np.ndarray) -> Judged:
    """Every row of a softmax's output ``raw_y`` against its input ``raw_x`` (as downloaded),
    in blocks of rows on the comparing pool, then the rows together (softmax_bound): the
    element bound and the whole-output scan for the sentinel and NaN on every row (issue 57
    item 8; before it 32 random rows were read)."""
    (x,), (y,) = inst.spec.inputs, inst.spec.outputs
    rows, cols = inst.shapes[x.name]
    xs, ys = raw_x.reshape(rows, cols), raw_y.reshape(rows, cols)
    step = max(1, (1 << 20) // max(cols, 1))

    def block(lo: int) -> tuple[Judged, float, float]:
        x64 = as_float64(xs[lo:lo + step], x.dtype)
        want = expected(inst.spec, {x.name: x64}, {})[y.name]
        j = judge(ys[lo:lo + step], y.dtype, replace(want, rows_variance=None))
        got = as_float64(ys[lo:lo + step], y.dtype)
        return (j, float(softmax_bound.row_excess(got, want.value, y.dtype).sum()),
                float(want.rows_variance.sum()))

    parts = list(chunked.pool().map(block, range(0, rows, step)))
    counts = [sum(getattr(p[0], f) for p in parts) for f in ("unwritten", "nonfinite",
                                                              "outside")]
    worst = max(p[0].worst for p in parts)
    for lo, (j, _, _) in zip(range(0, rows, step), parts, strict=True):
        if not j.ok:
            first = lo * cols + j.first
            return Judged(rows * cols, *counts, worst, first,
                          f"row {first // cols}: {j.detail}")
    _, ratio, story = softmax_bound.rows_verdict(sum(p[1] for p in parts),
                                                 sum(p[2] for p in parts), rows)
    return Judged(rows * cols, *counts, max(worst, ratio), -1, story, story)


def _story(j: Judged) -> str:
    what = ("unwritten" if j.unwritten else "not finite" if j.nonfinite else
            "misnormalised" if j.misnormalised else "wrong")
    return (f"{what}: {j.unwritten} unwritten, {j.nonfinite} not finite, {j.outside} outside "
            f"the bound of {j.elements} (every row read); {j.detail}")


def check_timed_size(inst: Instance, seed: int, found: Battery) -> None:
    """The kernel once on the timed size's own inputs, against the reference."""
    loaded = inst.loaded
    inst.draws.reset(1)
    inst.draw(seed)
    inst.prepare()
    inst.launch()
    inst.session.stream.synchronize(f"{loaded.kernel.name} at {size_text(inst.dims)}")
    dims = dict(zip(inst.spec.dims, inst.dims, strict=True))
    if not _softmax(inst):
        want = expected(inst.spec, inst.inputs64(), dims, loaded.reference)
        ok, worst, detail, _ = judge_all(inst, want)
    else:
        (x,), (y,) = inst.spec.inputs, inst.spec.outputs
        j = _whole_softmax(inst, inst.download(x.name), inst.download(y.name))
        ok, worst, detail = j.ok, j.worst, _story(j)
    found.worst = max(found.worst, worst if np.isfinite(worst) else 0.0)
    if ok:
        found.ok()
    else:
        found.fail("wrong", f"at {size_text(inst.dims)} (seed {seed}, the timed size): {detail}")


def verify_kept(inst: Instance, seed: int, slots: Buffer, count: int, out_bytes: int,
                found: Battery) -> int:
    """The kept timed outputs, each against its own draw; returns how many were checked."""
    state = inst.draws.read_state()
    seen = int(state[1])
    kept = min(count, seen)
    (y,) = inst.spec.outputs[:1]
    dims = dict(zip(inst.spec.dims, inst.dims, strict=True))
    checked = 0
    elements = sum(inst.counts[b.name] for b in inst.spec.inputs)
    # every kept output against a whole reference costs a download and a float64 pass over
    # the inputs: four up to 2^24 input elements, two up to 2^28, then one
    verified = VERIFIED if elements <= 1 << 24 else 2 if elements <= 1 << 28 else 1
    if _softmax(inst):  # as many as when 32 rows of each were read (blocks on the pool)
        verified = VERIFIED
    for j in range(min(kept, verified)):
        content = int(state[3 + j])
        inst.draws.set_content(content)
        inst.draw(seed)
        raw = slots.download_at(j * out_bytes, NUMPY[y.dtype], inst.counts[y.name],
                                inst.session.stream)
        if not _softmax(inst):
            want = expected(inst.spec, inst.inputs64(), dims, inst.loaded.reference)
            got = judge(raw, y.dtype, want[y.name])
            detail = got.detail
        else:
            got = _whole_softmax(inst, inst.download(inst.spec.inputs[0].name), raw)
            detail = _story(got)
        checked += 1
        if not got.ok:
            found.fail("wrong when timed", f"at {size_text(inst.dims)}: timed repetition kept "
                       f"in slot {j} (content {content}) of {seen}: {detail}")
            return checked
    return checked


def keep_slots(inst: Instance) -> tuple[Buffer, int, int]:
    """Device memory for the kept timed outputs of ``inst``'s first output: the buffer, the
    slots it holds, and the bytes between two (a multiple of 16)."""
    (y,) = inst.spec.outputs[:1]
    out_bytes = -(-inst.nbytes[y.name] // 16) * 16
    count = max(2, min(SLOTS, KEEP_BYTES // out_bytes))
    return Buffer(count * out_bytes), count, out_bytes


def measure_kernel(session, kernel: Kernel, sizes: list[tuple[int, ...]], ceiling, say,
                   timed: bool = True) -> Iterator[Result]:
    """Every size of one buffers kernel, each Result as it comes: its battery once, then each
    size checked and (``timed``) timed against ``ceiling`` (roofline.MemoryCeiling; None
    only where nothing is timed)."""
    info = KernelInfo.of(kernel)
    try:
        loaded = load(session, kernel)
    except LaunchError as exc:
        yield from (Result.of(info, *padded(s)).ended("launch error", str(exc)) for s in sizes)
        return
    draws = Draws(session.stream, session.arch, session.device.sm_count)
    try:
        with PHASES("checks"):
            found = battery(session, loaded, draws, say)
        for dims in sizes:
            yield _one(session, loaded, draws, dims, found, ceiling, say, timed)
    finally:
        draws.close()
        loaded.close()


def _summary(found: Battery, kept: int = 0, launches: int = 0) -> CheckSummary:
    return CheckSummary(found.passed, found.total, found.worst, tuple(found.skipped),
                        found.finding, found.failure, tuple(found.notes), timed_checked=kept,
                        launches=launches)


def row_of(session, loaded: Loaded, inst: Instance, dims, ceiling) -> Result:
    """The row of ``inst`` before it is checked or timed: its launch and its memory figures
    (the ceiling's NaN where nothing is timed)."""
    kernel = loaded.kernel
    return Result.of(KernelInfo.of(kernel), *padded(dims)).with_parts(
        resources=loaded.resources, seed=session.run_seed,
        launch=LaunchInfo(kernel.block_threads, list(inst.shape.grid),
                          inst.shape.dynamic_smem_bytes),
        memory=MemoryFigures(
            dict(zip(inst.spec.dims, dims, strict=True)), inst.bytes, inst.flops,
            *((ceiling.gbps, ceiling.copy_gbps, ceiling.dram_peak_gbps) if ceiling
              else (math.nan, math.nan, session.device.dram_bytes_per_s / 1e9)),
            inst.bytes_source))


def checked_at_size(session, inst: Instance, dims, found: Battery, say) -> int:
    """The timed size's seed (its salt set on ``inst``), after the check there when the
    battery passed."""
    seed = derive(session.run_seed, inst.loaded.kernel.name, "timed", *dims)
    inst.salt = derive(seed, "salt")
    if found.finding == "ok":
        say(f"check {size_text(dims)}", limit_s=120)
        with PHASES("checks"):
            check_timed_size(inst, seed, found)
    return seed


def hooks(inst: Instance, seed: int, slots: Buffer, count: int, out_bytes: int):
    """The work before every timed repetition of ``inst`` (the next content drawn, outputs
    poisoned) and after it (the reservoir's decision, the output kept), the draws reset; and
    its primer (``timing.primer_of``): the launch on decoy contents, drawn with a seed and salt
    of their own from the operating system (never recorded, never checked), so that its
    untimed launch never runs on a content of the timed sequence and the next one is drawn
    after it (notes/timing.md, "Nothing off the clock", 1: the seam for issue 57's
    generator, as capture.TimedOutputs.decoy is the GEMM's)."""
    secret = derive(seed, "secret")
    decoy_seed, decoy_salt = new_seed(), secrets.randbits(32)
    inst.draws.reset(1000)
    y = inst.spec.outputs[0]

    def before() -> None:
        inst.draws.tick()
        inst.draw(seed)
        inst.prepare()

    def after() -> None:
        inst.draws.decide(secret, count)
        inst.draws.keep(inst.buffers[y.name], slots, inst.nbytes[y.name], out_bytes)

    def prime() -> None:
        for d in inst.drawn():
            inst.draws.fill(d, decoy_seed, decoy_salt)
        inst.prepare()
        inst.launch()

    return before, after, prime


def baseline_of(session, inst: Instance):
    """The library baseline of ``inst``'s spec on its buffers (None for "none")."""
    y = inst.spec.outputs[0]
    ins = [baselines.Operand(inst.buffers[b.name], b.dtype, inst.shapes[b.name])
           for b in inst.spec.inputs]
    out = baselines.Operand(inst.buffers[y.name], y.dtype, inst.shapes[y.name])
    return named.make_baseline(inst.spec.baseline, ins, out, inst.bytes, session.stream)


def finished(res: Result, found: Battery, kept: int, timing, base_timing, base, base_type: str,
             ceiling) -> Result:
    """A timed row's verdict: its kept outputs' findings, then the memory ceiling;
    ``base_type`` is the baseline's output type."""
    res = res.with_parts(timing=timing, checks=_summary(found, kept, timing.reps))
    if base is not None:
        res = res.with_parts(baseline=Baseline("", base_timing, base_type, base.label))
    if found.finding != "ok":
        return res.ended("FAIL", found.failure)
    if base is not None and base_timing.findings:  # the timer's books (timing/account.py)
        return res.ended("error", f"the baseline's timing: {base_timing.findings[0]}")
    if timing.findings:
        found.fail(timing.findings[0].split(":", 1)[0], timing.findings[0])
        return res.with_parts(checks=_summary(found, kept, timing.reps)).ended(
            "FAIL", f"{timing.findings[0]}; its timing is not a figure")
    why = roofline.above_ceiling(res.gbps, ceiling)
    if why:
        found.fail("faster than the memory allows", why)
        return res.with_parts(checks=_summary(found, kept, timing.reps)).ended("FAIL", why)
    return res.ended("pass", "")


def _one(session, loaded: Loaded, draws: Draws, dims, battery_found: Battery, ceiling, say,
         timed: bool = True) -> Result:
    found = battery_found.copy()
    res = Result.of(KernelInfo.of(loaded.kernel), *padded(dims)).with_parts(
        resources=loaded.resources, seed=session.run_seed)
    try:
        inst = Instance(session, loaded, draws, dims)
    except LaunchError as exc:
        return res.ended("launch error", str(exc))
    base = None
    try:
        res = row_of(session, loaded, inst, dims, ceiling)
        seed = checked_at_size(session, inst, dims, found, say)
        if found.finding != "ok":
            return res.with_parts(checks=_summary(found)).ended("FAIL", found.failure)
        if not timed:
            return res.with_parts(checks=_summary(found)).ended(
                "pass", f"checked ({found.passed} of {found.total}), not timed")
        slots, count, out_bytes = keep_slots(inst)
        try:
            base = baseline_of(session, inst)
            before, after, prime = hooks(inst, seed, slots, count, out_bytes)
            say(f"time {size_text(dims)}")
            launches = [Primed(inst.launch, prime)] + ([base.launch] if base is not None
                                                       else [])
            with PHASES("timing"):
                timings, _ = session.timer.time_interleaved(
                    launches, before=[before] + [None] * (len(launches) - 1),
                    after=[after] + [None] * (len(launches) - 1))
            say(f"verify {size_text(dims)}", limit_s=120)
            with PHASES("references"):
                kept = verify_kept(inst, seed, slots, count, out_bytes, found)
        finally:
            slots.close()
        return finished(res, found, kept, timings[0], timings[-1], base,
                        inst.spec.outputs[0].dtype, ceiling)
    except HarnessError as exc:
        return res.ended("error", str(exc))
    finally:
        if base is not None:
            base.close()
        inst.close()
