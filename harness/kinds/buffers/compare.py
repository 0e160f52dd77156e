"""``harness compare`` for buffers kernels: each checked (its battery, then each size), then at
each size every kernel that passed and the first one's baseline timed interleaved, round by
round, each on inputs drawn afresh before every repetition with its timed outputs sampled and
checked; each row with its speedup over the first kernel (the median of the per-round ratios,
so that drift between rounds cancels)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from harness.bench.phases import PHASES
from harness.bench.result import Comparison, KernelInfo, Result
from harness.errors import HarnessError, LaunchError
from harness.gpu.timing import Primed
from harness.kernels.registry import Kernel
from harness.kinds.buffers.checks import Battery, battery
from harness.kinds.buffers.draw import Draws
from harness.kinds.buffers.measure import Instance, Loaded, load, padded, size_text
from harness.kinds.buffers.timed import (
    _summary,
    baseline_of,
    checked_at_size,
    finished,
    hooks,
    keep_slots,
    row_of,
    verify_kept,
)
from harness.stats import Summary


def compare_kernels(session, kernels: Sequence[Kernel], sizes: list[tuple[int, ...]], ceiling,
                    say) -> Iterator[Result]:
    """Every kernel at every size, timed interleaved; the first is the reference."""
    loaded: list[tuple[Kernel, Loaded | None, Draws | None, Battery | None, str]] = []
    try:
        for kernel in kernels:
            try:
                one = load(session, kernel)
            except LaunchError as exc:
                loaded.append((kernel, None, None, None, str(exc)))
                continue
            draws = Draws(session.stream, session.arch, session.device.sm_count)
            with PHASES("checks"):
                found = battery(session, one, draws, say)
            loaded.append((kernel, one, draws, found, ""))
        for dims in sizes:
            yield from _one_size(session, loaded, dims, ceiling, say)
    finally:
        for _, one, draws, _, _ in loaded:
            if draws is not None:
                draws.close()
            if one is not None:
                one.close()


def _one_size(session, loaded, dims, ceiling, say) -> Iterator[Result]:
    rows: list[Result] = []
    live = []  # (index in rows, instance, found, seed, slots, count, out_bytes)
    try:
        for kernel, one, draws, found, error in loaded:
            res = Result.of(KernelInfo.of(kernel), *padded(dims)).with_parts(
                seed=session.run_seed)
            if one is None:
                rows.append(res.ended("launch error", error))
                continue
            found = found.copy()
            try:
                inst = Instance(session, one, draws, dims)
            except LaunchError as exc:
                rows.append(res.ended("launch error", str(exc)))
                continue
            res = row_of(session, one, inst, dims, ceiling)
            seed = checked_at_size(session, inst, dims, found, say)
            if found.finding != "ok":
                inst.close()
                rows.append(res.with_parts(checks=_summary(found)).ended("FAIL", found.failure))
                continue
            slots, count, out_bytes = keep_slots(inst)
            live.append((len(rows), inst, found, seed, slots, count, out_bytes))
            rows.append(res)
        yield from _timed(session, rows, live, ceiling, say, dims)
    finally:
        for _, inst, _, _, slots, _, _ in live:
            slots.close()
            inst.close()


def _timed(session, rows: list[Result], live, ceiling, say, dims) -> Iterator[Result]:
    if not live:
        yield from rows
        return
    first_inst = live[0][1]
    base = None
    launches, before, after = [], [], []
    for _, inst, _, seed, slots, count, out_bytes in live:
        draw, keep, prime = hooks(inst, seed, slots, count, out_bytes)
        launches.append(Primed(inst.launch, prime))
        before.append(draw)
        after.append(keep)
    try:
        base = baseline_of(session, first_inst)
        if base is not None:
            launches.append(base.launch)
            before.append(None)
            after.append(None)
        say(f"time {size_text(dims)}")
        with PHASES("timing"):
            timings, per_round = session.timer.time_interleaved(
                launches, before=before, after=after, budget_scale=len(live))
        first_name = rows[live[0][0]].kernel.name
        for i, (row, inst, found, seed, slots, count, out_bytes) in enumerate(live):
            say(f"verify {size_text(dims)}", limit_s=120)
            with PHASES("references"):
                kept = verify_kept(inst, seed, slots, count, out_bytes, found)
            res = finished(rows[row], found, kept, timings[i], timings[-1], base,
                           first_inst.spec.outputs[0].dtype, ceiling)
            if res.status == "pass":
                ratios = Summary.of([r[0] / r[i] for r in per_round if r[i] > 0])
                res = res.with_parts(comparison=Comparison(
                    first_name, ratios.median, ratios.p20, ratios.p80,
                    i > 0 and ratios.p20 <= 1.0 <= ratios.p80))
            rows[row] = res
    except HarnessError as exc:
        for row, *_ in live:
            rows[row] = rows[row].ended("error", str(exc))
    finally:
        if base is not None:
            base.close()
    yield from rows
