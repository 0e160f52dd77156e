"""The buffers kind in the worker (run/worker.py): the memory ceiling measured once per
worker, each kernel measured (or checked) at its dims, the kernels of a compare timed
interleaved with the first one's baseline."""

from __future__ import annotations

from harness.bench.phases import PHASES
from harness.kernels.registry import Kernel

PART = "buffers"


class _Part:
    """What the buffers kind keeps in a session: the memory ceiling, once measured."""

    def __init__(self, session):
        self.ceiling = None

    def close(self) -> None:
        self.ceiling = None


def memory_ceiling(session, name: str, ctx):
    """The memory ceiling buffers kernels are held to, measured once per worker."""
    part = session.part(PART, _Part)
    if part.ceiling is None:
        from harness.kinds.buffers.roofline import measure_ceiling

        with PHASES("memory ceiling"):
            ctx.progress(name)("memory ceiling", limit_s=120)
            part.ceiling = measure_ceiling(session.device, session.stream,
                                           session.timer.options)
    return part.ceiling


def compare_kernels(session, kernels: list[Kernel], job, ctx) -> None:
    from harness.kinds.buffers.compare import compare_kernels as compare

    ceiling = memory_ceiling(session, kernels[0].name, ctx)
    for res in compare(session, kernels, [p.values for p in job.problems(kernels[0])], ceiling,
                       ctx.progress("compare")):
        ctx.emit("result", result=res.to_json())


def run_kernel(session, kernel: Kernel, job, ctx, after: Kernel | None = None, before=None):
    """A buffers kernel at each of the job's sizes, read as its dims; None when the worker
    must end."""
    from harness.kinds.buffers.timed import measure_kernel

    if not ctx.ended_well(before):
        return None
    ceiling = memory_ceiling(session, kernel.name, ctx) if job.mode != "check" else None
    ok = True
    for res in measure_kernel(session, kernel, [p.values for p in job.problems(kernel)], ceiling,
                              ctx.progress(kernel.name), timed=job.mode != "check"):
        ctx.emit("result", result=res.to_json())
        ok = ok and res.status != "FAIL"
    return (kernel.name, ctx.rows()) if ok else None
