"""The GPU side of ``harness run`` and ``compare``: a child process that measures the kernels of
a :class:`~harness.run.protocol.Job` in one :class:`~harness.bench.session.BenchSession` and
reports each result as it comes (protocol.py).

One worker measures kernels one after another until one of them faults (its CUDA context is
lost), hangs (the runner kills it) or fails its checks (it may have written memory it does not
own): then it ends, and the runner starts a fresh worker for the kernels after it.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import sys
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.bench.checks import prefetch_battery
from harness.bench.measure import Prepared, check_only, compare, measure, prepare
from harness.bench.operands import prefetch
from harness.bench.phases import PHASES
from harness.bench.plan import plan
from harness.bench.result import Result
from harness.bench.session import BenchSession, timing_key
from harness.bench.timed_checks import Pending
from harness.errors import HarnessError, LaunchError
from harness.gpu.driver import device_uuid
from harness.kernels.registry import Kernel
from harness.kernels.spec import read_spec
from harness.run.protocol import GO, Job, KernelRef, emit


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
    if kernels:  # the first kernel's inputs beside the session's start-up (a gated job's
        # kernels come tuned for the GPU already; another's battery may differ, and draws its own)
        _draw_ahead(kernels[0], job, job.sizes[:1])
    with PHASES("worker start"):
        session = BenchSession(job.timing, carveout_pct=job.carveout_pct,
                               say=_progress("ceiling"), run_seed=job.seed)
    with session:
        if job.mode == "compare" or job.feed:
            session.blas  # noqa: B018 (opened: these say the device once)
        blas_said = _say_device(session)
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
        before = None  # the kernel before: its name and its rows, maybe still compared
        for i, kernel in enumerate(kernels):
            if job.gated and not _released(kernel):
                continue  # the runner kept its rows (a compile error, or refused offline)
            before = _run_kernel(session, kernel, job, next(iter(kernels[i + 1:]), None),
                                 before)
            if not blas_said and session.blas_open:
                blas_said = _say_device(session)
            if before is None:
                return
        _ended_well(before)


def _say_device(session: BenchSession) -> bool:
    """The device's facts for the run's header; whether cuBLAS's version was among them. A
    session opens without waiting for cuBLAS's bindings to import (about 1.3 s of a fresh
    worker's start, issue 37): the facts are said again, with its version, once its handle
    is open."""
    facts = {**session.facts(), "uuid": device_uuid(session.device.ordinal),
             "host": socket.gethostname()}
    emit("device", **facts)
    return "cublas_version" in facts


GATE_LIMIT_S = 600.0
"""How long a gated worker waits for the runner to release its next kernel (its compile)."""


def _released(kernel: Kernel) -> bool:
    """A gated job: whether the runner lets ``kernel`` be measured (its compile done); the
    wait is a progress stage of its own, with a compile's limit rather than a kernel's."""
    emit("progress", kernel=kernel.name, stage="waiting for its compile", limit_s=GATE_LIMIT_S,
         show=False, gate=True)
    return sys.stdin.readline().strip() == GO


def _run_fed(session: BenchSession, job: Job) -> None:
    """Kernels one stdin line at a time, ``ready`` before each, until stdin ends."""
    while True:
        emit("phases", seconds=PHASES.take())  # per kernel: a fed worker may never end
        emit("ready")
        line = sys.stdin.readline()
        if not line.strip():
            return
        ran = _run_kernel(session, _kernel(KernelRef.from_dict(json.loads(line))), job)
        if not _ended_well(ran):
            return


Ran = tuple[str, "InOrder"]
"""A kernel measured: its name and its rows, the last sizes' maybe still being compared."""


def _ended_well(ran: Ran | None) -> bool:
    """Every row of the kernel ``ran`` out; False, with ``retire`` said, when it failed a
    check (the worker must end). An error in its comparisons is raised, ``retire`` said with
    ``error`` first: the runner's current kernel may already be the next one."""
    if ran is None:
        return True
    name, rows = ran
    try:
        if rows.wait():
            return True
    except BaseException:  # an error in its comparisons: the runner blames it, not the next
        emit("retire", kernel=name, error=True)
        raise
    emit("retire", kernel=name)
    return False


def _run_kernel(session: BenchSession, kernel: Kernel, job: Job, after: Kernel | None = None,
                before: Ran | None = None) -> Ran | None:
    """Every size of one kernel, its rows going out as they are ready; None when the worker
    must end. ``after``: the kernel to be measured next, whose inputs the host draws
    meanwhile. ``before``: the kernel before's, whose last sizes' kept launches the host may
    still be comparing: waited for once this kernel's check battery has run beside them (the
    waits were 4.4 s of a default run's 48, issue 37). When it failed a check the worker ends
    (``retire``), and this kernel, checked here after it, starts again in a fresh worker."""
    emit("kernel_start", kernel=kernel.name)
    if kernel.spec.kind == "buffers":
        if not _ended_well(before):
            return None
        return (kernel.name, InOrder()) if _run_buffers(session, kernel, job) else None
    try:
        prep = prepare(session, kernel, job.strict_blas, _progress(kernel.name))
    except LaunchError as exc:  # refused before any launch: the context is intact
        if not _ended_well(before):
            return None
        emit("kernel_error", kernel=kernel.name, kind="LaunchError", message=str(exc))
        return kernel.name, InOrder()
    except BaseException:
        if before is not None:  # its rows out before this kernel's error ends the worker;
            # after a failed check the error may be that kernel's doing (it may have written
            # memory it does not own): retired, this kernel starts again in a fresh worker
            try:
                if not before[1].wait():
                    emit("retire", kernel=before[0])
            except Exception:  # the error on its way out is the one to report
                pass
        raise
    if not _ended_well(before):
        return None
    _prefetch(session, prep.gemm.kernel, after, job)
    return kernel.name, _run_sizes(session, prep, job)


_BESIDE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-beside")
"""Where a size's kept launches are compared on the host while the device times the next."""
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-prefetch")
"""Where the host draws inputs a kernel will need while the device times the one before."""


def _draw_ahead(kernel: Kernel, job: Job, sizes, session: BenchSession | None = None) -> None:
    """On the prefetch thread, beside other work: ``kernel``'s check battery (inputs and host
    references) and the timing operands of ``sizes``, those ``session`` does not hold yet
    (before the session starts, all). A spec the plan cannot read is left to the kernel's own
    turn, which says why."""
    if job.mode != "run" or kernel.spec.kind != "gemm" or job.seed is None:
        return
    try:
        prefetch_battery(kernel.spec, plan(kernel), job.seed, _PREFETCH)
        for size in sizes:
            if session is not None:
                session.prefetch_timing_operands(kernel, *size, _PREFETCH)
            else:
                prefetch(_PREFETCH, kernel.spec, *size, timing_key(job.seed, kernel, *size)[1])
    except HarnessError:
        pass


def _prefetch(session: BenchSession, kernel: Kernel, after: Kernel | None, job: Job) -> None:
    """Beside this kernel's timings (the host idle): the inputs of its later sizes, then the
    next kernel's battery and first size."""
    if job.mode != "run" or kernel.spec.kind != "gemm":
        return
    for size in job.sizes[1:]:
        session.prefetch_timing_operands(kernel, *size, _PREFETCH)
    if after is not None:
        _draw_ahead(session.kernel(after), job, job.sizes[:1], session)


class InOrder:
    """A kernel's rows emitted in the order of its sizes, each as soon as it and those before
    it are ready: a size whose kept launches are still being compared (Pending) holds back the
    sizes after it, and goes out from the comparing thread when it is done."""

    def __init__(self):
        self.rows: collections.deque[Result | Pending] = collections.deque()
        self.lock = threading.Lock()
        self.statuses: list[str] = []

    def add(self, row: Result | Pending) -> None:
        with self.lock:
            self.rows.append(row)
        if isinstance(row, Pending):
            row.future.add_done_callback(lambda _: self.flush())
        self.flush()

    def flush(self) -> None:
        with self.lock:
            while self.rows and (not isinstance(self.rows[0], Pending) or self.rows[0].done()):
                row = self.rows.popleft()
                res = row.result() if isinstance(row, Pending) else row
                self.statuses.append(res.status)
                emit("result", result=res.to_json())

    def wait(self) -> bool:
        """Every row out (an error in a comparison is raised here); False when one failed."""
        for row in list(self.rows):
            if isinstance(row, Pending):
                row.future.result()
        self.flush()
        return "FAIL" not in self.statuses


def _run_sizes(session: BenchSession, prep: Prepared, job: Job) -> InOrder:
    """Measure (mode ``check``: check only) every size; the rows, the last sizes' kept
    launches maybe still compared (``InOrder.wait``: False when the kernel failed a check).
    Every row measured goes out before this raises, when a later size raises (a fault)."""
    rows = InOrder()
    try:
        for size in job.sizes:
            say = _progress(prep.kernel.name, size)
            rows.add(check_only(session, prep, *size, say=say) if job.mode == "check" else
                     measure(session, prep, *size, reuse_baseline=job.reuse_baseline, say=say,
                             beside=_BESIDE))
    except BaseException:
        try:
            rows.wait()
        except Exception:  # the error on its way out is the one to report
            pass
        raise
    return rows


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


def _early_imports() -> None:
    """nvmath's cuBLAS and cuBLASLt bindings (the baselines and the GPU references) imported
    on a thread of their own while the worker waits for its job and opens its session: on a
    fresh host the import took about 2 s of the worker's main thread, in its first size
    (reports/h100/default-run-sampled-7ec6307.txt.gz). Nothing is reported here: the session
    says why when it needs them and they are missing."""
    from harness.gpu.nvmath_libs import nvmath_bindings

    def load() -> None:
        try:
            nvmath_bindings("the baselines", "cublas", "cublasLt")
        except Exception:  # missing or broken: said when a baseline is asked for
            pass

    threading.Thread(target=load, name="harness-early-imports", daemon=True).start()


SWITCH_INTERVAL_MS = 0.5
"""How long a thread may hold the interpreter before one waiting for it gets its turn (Python's
default is 5 ms): the main thread drives the device, and the comparisons beside it on a dozen
threads held it between their numpy calls, so a launch timed alone waited for its own
enqueueing (timing.Timer.host_free_ms). ``HARNESS_SWITCH_INTERVAL_MS`` sets another
(experiments)."""


def main() -> int:
    sys.setswitchinterval(float(os.environ.get("HARNESS_SWITCH_INTERVAL_MS",
                                               SWITCH_INTERVAL_MS)) / 1e3)
    _early_imports()
    early = _early_context()  # a worker started ahead of its job: CUDA's start-up meanwhile
    line = sys.stdin.readline()  # one line; a fed job's kernels follow it
    if not line.strip():  # started ahead, then not needed
        return 0
    job = Job.from_json(line)
    profile_dir = os.environ.get("HARNESS_WORKER_PROFILE")  # experiments: where the time goes
    sample_dir = os.environ.get("HARNESS_WORKER_SAMPLE")  # harness/run/wall_sampler.py
    try:
        try:
            if sample_dir:
                from harness.run.wall_sampler import sampled

                sampled(lambda: run_job(job), f"{sample_dir}/sampled-{os.getpid()}.txt")
            elif profile_dir:
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
