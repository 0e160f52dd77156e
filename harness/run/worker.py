"""The GPU side of ``harness run`` and ``compare``: a child process that measures the kernels of
a :class:`~harness.run.protocol.Job` in one :class:`~harness.bench.session.BenchSession` and
reports each result as it comes (protocol.py).

One worker measures kernels one after another until one of them faults (its CUDA context is
lost), hangs (the runner kills it) or fails its checks (it may have written memory it does not
own): then it ends, and the runner starts a fresh worker for the kernels after it.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from harness.bench.measure import Prepared, check_only, compare, measure, prepare
from harness.bench.phases import PHASES
from harness.bench.session import BenchSession
from harness.errors import HarnessError, LaunchError
from harness.kernels.registry import Kernel
from harness.kernels.spec import read_spec
from harness.run.protocol import Job, emit


def _progress(kernel: str, size=None):
    """A ``say`` (measure.Say) that emits progress events: each resets the runner's no-progress
    clock to its ``limit_s``; ``show=False`` ones are heartbeats kept off the console."""
    def say(stage: str, limit_s: float | None = None, show: bool = True) -> None:
        emit("progress", kernel=kernel, stage=stage, limit_s=limit_s, show=show,
             **({"size": list(size)} if size else {}))
    return say


def run_job(job: Job) -> None:
    kernels = [Kernel(ref.name, read_spec(Path(ref.file)), ref.params) for ref in job.kernels]
    with PHASES("worker start"):
        session = BenchSession(job.timing, carveout_pct=job.carveout_pct,
                               say=_progress("ceiling"))
        facts = {**session.facts(), "cublas_version": session.blas.version}
    with session:
        emit("device", **facts)
        if job.mode == "compare":
            preps = [prepare(session, k, job.strict_blas, _progress(k.name)) for k in kernels]
            for size in job.sizes:
                for res in compare(session, preps, *size, say=_progress("compare", size)):
                    emit("result", result=res.to_json())
            return
        for kernel in kernels:
            emit("kernel_start", kernel=kernel.name)
            try:
                prep = prepare(session, kernel, job.strict_blas, _progress(kernel.name))
            except LaunchError as exc:  # refused before any launch: the context is intact
                emit("kernel_error", kernel=kernel.name, kind="LaunchError", message=str(exc))
                continue
            if not _run_sizes(session, prep, job):
                emit("retire", kernel=kernel.name)
                return


def _run_sizes(session: BenchSession, prep: Prepared, job: Job) -> bool:
    """Measure (mode ``check``: check only) every size; False when the kernel failed a check
    (the worker should end)."""
    ok = True
    for size in job.sizes:
        say = _progress(prep.kernel.name, size)
        res = (check_only(session, prep, *size, say=say) if job.mode == "check" else
               measure(session, prep, *size, reuse_baseline=job.reuse_baseline, say=say))
        emit("result", result=res.to_json())
        ok = ok and res.status != "FAIL"
    return ok


def main() -> int:
    job = Job.from_json(sys.stdin.read())
    try:
        try:
            run_job(job)
        finally:
            emit("phases", seconds=PHASES.take())
    except HarnessError as exc:
        emit("error", kind=type(exc).__name__, message=str(exc))
        return 3
    except Exception as exc:  # an unexpected failure: report it whole, the parent goes on
        emit("error", kind=type(exc).__name__, message=f"{exc}\n{traceback.format_exc()}")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
