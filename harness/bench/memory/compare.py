"""``harness compare`` for buffers kernels: each checked (its battery, then each size), then at
each size every kernel that passed and the first one's baseline timed interleaved, round by
round, each on inputs drawn afresh before every repetition with its timed outputs sampled and
checked; each row with its speedup over the first kernel (the median of the per-round ratios,
so that drift between rounds cancels)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from harness.bench.contents import derive
from harness.bench.memory import baselines, roofline
from harness.bench.memory.checks import Battery, battery
from harness.bench.memory.draw import Draws
from harness.bench.memory.measure import Instance, Loaded, load, padded, size_text
from harness.bench.memory.timed import _summary, check_timed_size, keep_slots, verify_kept
from harness.bench.phases import PHASES
from harness.bench.result import Baseline, Comparison, KernelInfo, LaunchInfo, MemoryFigures, Result
from harness.errors import HarnessError, LaunchError
from harness.kernels.registry import Kernel
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


def _copy(found: Battery) -> Battery:
    return Battery(found.passed, found.total, found.worst, found.finding, found.failure,
                   list(found.notes), list(found.skipped))


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
            found = _copy(found)
            try:
                inst = Instance(session, one, draws, dims)
            except LaunchError as exc:
                rows.append(res.ended("launch error", str(exc)))
                continue
            res = res.with_parts(
                resources=one.resources,
                launch=LaunchInfo(kernel.block_threads, list(inst.shape.grid),
                                  inst.shape.dynamic_smem_bytes),
                memory=MemoryFigures(dict(zip(inst.spec.dims, dims, strict=True)), inst.bytes,
                                     inst.flops, ceiling.gbps, ceiling.copy_gbps,
                                     ceiling.dram_peak_gbps))
            seed = derive(session.run_seed, kernel.name, "timed", *dims)
            inst.salt = derive(seed, "salt")
            if found.finding == "ok":
                say(f"check {size_text(dims)}", limit_s=120)
                with PHASES("checks"):
                    check_timed_size(inst, seed, found)
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
    (y,) = first_inst.spec.outputs[:1]
    base = None
    launches, before, after = [], [], []
    for _, inst, _, seed, slots, count, out_bytes in live:
        secret = derive(seed, "secret")
        inst.draws.reset(1000)
        out = inst.spec.outputs[0]

        def draw(inst=inst, seed=seed) -> None:
            inst.draws.tick()
            inst.draw(seed)
            inst.prepare()

        def keep(inst=inst, secret=secret, slots=slots, count=count, out_bytes=out_bytes,
                 out=out) -> None:
            inst.draws.decide(secret, count)
            inst.draws.keep(inst.buffers[out.name], slots, inst.nbytes[out.name], out_bytes)

        launches.append(inst.launch)
        before.append(draw)
        after.append(keep)
    try:
        ins = [baselines.Operand(first_inst.buffers[b.name], b.dtype, first_inst.shapes[b.name])
               for b in first_inst.spec.inputs]
        out = baselines.Operand(first_inst.buffers[y.name], y.dtype, first_inst.shapes[y.name])
        base = baselines.make_baseline(first_inst.spec.baseline, ins, out, first_inst.bytes,
                                       session.stream)
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
            res = rows[row].with_parts(timing=timings[i],
                                       checks=_summary(found, kept, timings[i].reps))
            if base is not None:
                res = res.with_parts(baseline=Baseline("", timings[-1], y.dtype, base.label))
            if found.finding != "ok":
                rows[row] = res.ended("FAIL", found.failure)
                continue
            why = roofline.above_ceiling(res.gbps, ceiling)
            if why:
                found.fail("faster than the memory allows", why)
                rows[row] = res.with_parts(checks=_summary(found, kept, timings[i].reps)
                                           ).ended("FAIL", why)
                continue
            ratios = Summary.of([r[0] / r[i] for r in per_round if r[i] > 0])
            rows[row] = res.with_parts(comparison=Comparison(
                first_name, ratios.median, ratios.p20, ratios.p80,
                i > 0 and ratios.p20 <= 1.0 <= ratios.p80)).ended("pass", "")
    except HarnessError as exc:
        for row, *_ in live:
            rows[row] = rows[row].ended("error", str(exc))
    finally:
        if base is not None:
            base.close()
    yield from rows

