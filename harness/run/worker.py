"""The GPU side of ``harness run`` and ``compare``: a child process that measures the kernels of
a :class:`~harness.run.protocol.Job` in one :class:`~harness.bench.session.BenchSession` and
reports each result as it comes (protocol.py).

One worker measures kernels one after another until one of them faults (its CUDA context is
lost), hangs (the runner kills it) or fails its checks (it may have written memory it does not
own): then it ends, and the runner starts a fresh worker for the kernels after it.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import traceback
from pathlib import Path

from harness.bench.measure import Prepared, check_only, compare, measure, prepare
from harness.bench.phases import PHASES
from harness.bench.session import BenchSession
from harness.errors import HarnessError, LaunchError
from harness.gpu.driver import device_uuid
from harness.kernels.registry import Kernel
from harness.kernels.spec import read_spec
from harness.run.protocol import Job, KernelRef, emit


def _progress(kernel: str, size=None):
    """A ``say`` (measure.Say) that emits progress events: each resets the runner's no-progress
    clock to its ``limit_s``; ``show=False`` ones are heartbeats kept off the console."""
    def say(stage: str, limit_s: float | None = None, show: bool = True) -> None:
        emit("progress", kernel=kernel, stage=stage, limit_s=limit_s, show=show,
             **({"size": list(size)} if size else {}))
    return say


def _kernel(ref: KernelRef) -> Kernel:
    return Kernel(ref.name, read_spec(Path(ref.file)), ref.params, ref.variant, ref.explicit)


def run_job(job: Job) -> None:
    kernels = [_kernel(ref) for ref in job.kernels]
    with PHASES("worker start"):
        session = BenchSession(job.timing, carveout_pct=job.carveout_pct,
                               say=_progress("ceiling"), run_seed=job.seed)
        facts = {**session.facts(), "cublas_version": session.blas.version,
                 "uuid": device_uuid(session.device.ordinal), "host": socket.gethostname()}
    with session:
        emit("device", **facts)
        if job.mode == "compare" and kernels and all(k.spec.kind == "buffers"
                                                     for k in kernels):
            _compare_buffers(session, kernels, job)
            return
        if job.mode == "compare":
            preps = [prepare(session, k, job.strict_blas, _progress(k.name)) for k in kernels]
            for size in job.sizes:
                for res in compare(session, preps, *size, say=_progress("compare", size)):
                    emit("result", result=res.to_json())
            return
        if job.feed:
            _run_fed(session, job)
            return
        for kernel in kernels:
            if not _run_kernel(session, kernel, job):
                return


def _run_fed(session: BenchSession, job: Job) -> None:
    """Kernels one stdin line at a time, ``ready`` before each, until stdin ends."""
    while True:
        emit("phases", seconds=PHASES.take())  # per kernel: a fed worker may never end
        emit("ready")
        line = sys.stdin.readline()
        if not line.strip():
            return
        if not _run_kernel(session, _kernel(KernelRef.from_dict(json.loads(line))), job):
            return


def _run_kernel(session: BenchSession, kernel: Kernel, job: Job) -> bool:
    """Every size of one kernel; False when the worker must end (it failed its checks)."""
    emit("kernel_start", kernel=kernel.name)
    if kernel.spec.kind == "buffers":
        return _run_buffers(session, kernel, job)
    try:
        prep = prepare(session, kernel, job.strict_blas, _progress(kernel.name))
    except LaunchError as exc:  # refused before any launch: the context is intact
        emit("kernel_error", kernel=kernel.name, kind="LaunchError", message=str(exc))
        return True
    if not _run_sizes(session, prep, job):
        emit("retire", kernel=kernel.name)
        return False
    return True


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


def _memory_ceiling(session: BenchSession, name: str):
    """The memory ceiling buffers kernels are held to, measured once per worker."""
    if getattr(session, "memory_ceiling", None) is None:
        from harness.bench.memory.roofline import measure_ceiling

        with PHASES("memory ceiling"):
            _progress(name)("memory ceiling", limit_s=120)
            session.memory_ceiling = measure_ceiling(session.device, session.stream,
                                                     session.timer.options)
    return session.memory_ceiling


def _compare_buffers(session: BenchSession, kernels: list[Kernel], job: Job) -> None:
    from harness.bench.memory.compare import compare_kernels

    ceiling = _memory_ceiling(session, kernels[0].name)
    rank = len(kernels[0].spec.buffers.dims)
    for res in compare_kernels(session, kernels, [tuple(s[:rank]) for s in job.sizes],
                               ceiling, _progress("compare")):
        emit("result", result=res.to_json())


def _run_buffers(session: BenchSession, kernel: Kernel, job: Job) -> bool:
    """A buffers kernel (bench/memory/): the job's sizes hold its dims, padded with 1."""
    from harness.bench.memory.timed import measure_kernel

    ceiling = _memory_ceiling(session, kernel.name) if job.mode != "check" else None
    rank = len(kernel.spec.buffers.dims)
    ok = True
    for res in measure_kernel(session, kernel, [tuple(s[:rank]) for s in job.sizes],
                              ceiling, _progress(kernel.name),
                              timed=job.mode != "check"):
        emit("result", result=res.to_json())
        ok = ok and res.status != "FAIL"
    return ok


def _early_context():
    """GPU 0's primary context, retained before the job arrives (the session retains it again:
    it is made once); None where it cannot be (the session then says why)."""
    from harness.gpu.driver import Device

    try:
        return Device(0)
    except Exception:  # no GPU, a bad driver: the job's session reports it
        return None


def main() -> int:
    early = _early_context()  # a worker started ahead of its job: CUDA's start-up meanwhile
    line = sys.stdin.readline()  # one line; a fed job's kernels follow it
    if not line.strip():  # started ahead, then not needed
        return 0
    job = Job.from_json(line)
    profile_dir = os.environ.get("HARNESS_WORKER_PROFILE")  # experiments: where the time goes
    try:
        try:
            if profile_dir:
                import cProfile

                cProfile.runctx("run_job(job)", globals(), {"job": job},
                                f"{profile_dir}/worker-{os.getpid()}.prof")
            else:
                run_job(job)
        finally:
            emit("phases", seconds=PHASES.take())
            if early is not None:
                early.close()
    except HarnessError as exc:
        emit("error", kind=type(exc).__name__, message=str(exc))
        return 3
    except Exception as exc:  # an unexpected failure: report it whole, the parent goes on
        emit("error", kind=type(exc).__name__, message=f"{exc}\n{traceback.format_exc()}")
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
