"""The GEMM kind in the worker (run/worker.py): a kernel prepared (compiled, loaded, its
battery run), then measured (or checked) at each size, its rows in order as they are ready;
the kernels of a compare timed interleaved; the next kernel's inputs drawn ahead on the host.

The worker hands each kind a context (``ctx``): ``progress(name, problem)``, ``emit``,
``rows()`` (its in-order row queue), ``ended_well(ran)``, and the ``beside`` and ``prefetch``
executors.
"""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError, LaunchError
from harness.kernels.registry import Kernel
from harness.kinds.gemm.battery import prefetch_battery
from harness.kinds.gemm.host_values import prefetch
from harness.kinds.gemm.measure import Prepared, check_only, compare, measure, prepare
from harness.kinds.gemm.plan import plan
from harness.kinds.gemm.session import gemm_session, timing_key


def _mnk(problem) -> tuple[int, int, int]:
    """A GEMM problem's M, N, K by name (Job.problems gives every size so)."""
    return problem["M"], problem["N"], problem["K"]


def open_for(session, job) -> None:
    """What a job opens first: cuBLAS for a compare or a fed worker (its facts said once)."""
    if job.mode == "compare" or job.feed:
        gemm_session(session).blas  # noqa: B018 (opened: these say the device once)


def run_kernel(session, kernel: Kernel, job, ctx, after: Kernel | None = None, before=None):
    """Every size of one GEMM kernel (worker._run_kernel); None when the worker must end."""
    gemm = gemm_session(session) if session is not None else None  # None: tests
    try:
        prep = prepare(gemm, kernel, job.strict_blas, ctx.progress(kernel.name))
    except LaunchError as exc:  # refused before any launch: the context is intact
        if not ctx.ended_well(before):
            return None
        ctx.emit("kernel_error", kernel=kernel.name, kind="LaunchError", message=str(exc))
        return kernel.name, ctx.rows()
    except BaseException:
        if before is not None:  # its rows out before this kernel's error ends the worker;
            # after a failed check the error may be that kernel's doing (it may have written
            # memory it does not own): retired, this kernel starts again in a fresh worker
            try:
                if not before[1].wait():
                    ctx.emit("retire", kernel=before[0])
            except Exception:  # the error on its way out is the one to report
                pass
        raise
    if not ctx.ended_well(before):
        return None
    _prefetch(gemm, prep.gemm.kernel, after, job, ctx)
    return kernel.name, _run_sizes(gemm, prep, job.problems(kernel), job, ctx)


def _run_sizes(session, prep: Prepared, problems, job, ctx):
    """Measure (mode ``check``: check only) at every problem; the rows, the last sizes' kept
    launches maybe still compared (``InOrder.wait``: False when the kernel failed a check).
    Every row measured goes out before this raises, when a later size raises (a fault)."""
    rows = ctx.rows()
    try:
        for problem in problems:
            size = _mnk(problem)
            say = ctx.progress(prep.kernel.name, problem)
            rows.add(check_only(session, prep, *size, say=say) if job.mode == "check" else
                     measure(session, prep, *size, reuse_baseline=job.reuse_baseline, say=say,
                             beside=ctx.beside))
    except BaseException:
        try:
            rows.wait()
        except Exception:  # the error on its way out is the one to report
            pass
        raise
    return rows


def compare_kernels(session, kernels: list[Kernel], job, ctx) -> None:
    """``harness compare``: every kernel prepared, then each size timed interleaved."""
    gemm = gemm_session(session)
    preps = [prepare(gemm, k, job.strict_blas, ctx.progress(k.name)) for k in kernels]
    for problem in job.problems(kernels[0]):
        for res in compare(gemm, preps, *_mnk(problem), say=ctx.progress("compare", problem)):
            ctx.emit("result", result=res.to_json())


def draw_ahead(kernel: Kernel, job, problems, session: Any, ctx) -> None:
    """On the prefetch thread, beside other work: ``kernel``'s check battery (inputs and host
    references) and the timing operands of ``problems``, those ``session`` does not hold yet
    (before the session starts, all). A spec the plan cannot read is left to the kernel's own
    turn, which says why."""
    if job.mode != "run" or job.seed is None:
        return
    try:
        prefetch_battery(kernel.spec, plan(kernel), job.seed, ctx.prefetch)
        for size in map(_mnk, problems):
            if session is not None:
                gemm_session(session).prefetch_timing_operands(kernel, *size, ctx.prefetch)
            else:
                prefetch(ctx.prefetch, kernel.spec, *size,
                         timing_key(job.seed, kernel, *size)[1])
    except HarnessError:
        pass


def _prefetch(session, kernel: Kernel, after: Kernel | None, job, ctx) -> None:
    """Beside this kernel's timings (the host idle): the inputs of its later sizes, then the
    next kernel's battery and first size."""
    if job.mode != "run":
        return
    for problem in job.problems(kernel)[1:]:
        session.prefetch_timing_operands(kernel, *_mnk(problem), ctx.prefetch)
    if after is not None:
        after_kind = ctx.kind_of(after)
        after_kind.draw_ahead(session.kernel(after), job, job.problems(after, job.sizes[:1]),
                              session, ctx)
