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
from dataclasses import dataclass
from pathlib import Path

from harness import kinds
from harness.bench.phases import PHASES
from harness.bench.result import Result
from harness.bench.session import BenchSession
from harness.errors import HarnessError
from harness.gpu.driver import device_uuid
from harness.kernels.registry import Kernel
from harness.kernels.spec import read_spec
from harness.run.protocol import GO, Job, KernelRef, emit


def _progress(kernel: str, problem=None):
    """A ``say`` (measure.Say) that emits progress events: each resets the runner's no-progress
    clock to its ``limit_s``; ``show=False`` ones are heartbeats kept off the console."""
    def say(stage: str, limit_s: float | None = None, show: bool = True) -> None:
        emit("progress", kernel=kernel, stage=stage, limit_s=limit_s, show=show,
             **({"size": problem.short} if problem else {}))
    return say


def _kernel(ref: KernelRef) -> Kernel:
    return Kernel(ref.name, read_spec(Path(ref.file)), ref.params, ref.variant, ref.explicit)


def run_job(job: Job) -> None:
    kernels = [_kernel(ref) for ref in job.kernels]
    if kernels:  # the first kernel's inputs beside the session's start-up (a gated job's
        # kernels come tuned for the GPU already; another's battery may differ, and draws its own)
        _kind(kernels[0]).draw_ahead(kernels[0], job, job.problems(kernels[0], job.sizes[:1]),
                                     None, CONTEXT)
    ahead = tuple(s for k in dict.fromkeys(_kind(k) for k in kernels)
                  for s in k.session_sources())
    with PHASES("worker start"):
        session = BenchSession(job.timing, carveout_pct=job.carveout_pct,
                               say=_progress("ceiling"), run_seed=job.seed, ahead=ahead)
    with session:
        for kind in dict.fromkeys(_kind(k) for k in kernels):
            kind.open_for(session, job)
        said = _say_device(session)
        if job.mode == "compare":
            if kernels:
                kinds_of = {_kind(k) for k in kernels}
                if len(kinds_of) > 1:
                    raise HarnessError("compare times kernels of one kind against each other; "
                                       "found " + ", ".join(sorted(k.name for k in kinds_of)))
                _kind(kernels[0]).compare_kernels(session, kernels, job, CONTEXT)
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
            if set(session.part_facts()) - said:
                said = _say_device(session)
            if before is None:
                return
        _ended_well(before)


def _kind(kernel: Kernel) -> kinds.Kind:
    return kinds.of(kernel.spec)


def _say_device(session: BenchSession) -> set[str]:
    """The device's facts for the run's header; the keys its parts added (a library's
    version). A session opens without waiting for cuBLAS's bindings to import (about 1.3 s of
    a fresh worker's start, issue 37): the facts are said again, with its version, once a
    part adds it."""
    facts = {**session.facts(), "uuid": device_uuid(session.device.ordinal),
             "host": socket.gethostname()}
    emit("device", **facts)
    return set(session.part_facts())


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
    """Every size of one kernel, its rows going out as they are ready (its kind measures it);
    None when the worker must end. ``after``: the kernel to be measured next, whose inputs the
    host draws meanwhile. ``before``: the kernel before's, whose last sizes' kept launches the
    host may still be comparing: waited for once this kernel's check battery has run beside
    them (the waits were 4.4 s of a default run's 48, issue 37). When it failed a check the
    worker ends (``retire``), and this kernel, checked here after it, starts again in a fresh
    worker."""
    emit("kernel_start", kernel=kernel.name)
    return _kind(kernel).run_kernel(session, kernel, job, CONTEXT, after, before)


_BESIDE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-beside")
"""Where a size's kept launches are compared on the host while the device times the next."""
_PREFETCH = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-prefetch")
"""Where the host draws inputs a kernel will need while the device times the one before."""


class InOrder:
    """A kernel's rows emitted in the order of its sizes, each as soon as it and those before
    it are ready: a size whose kept launches are still being compared (Pending) holds back the
    sizes after it, and goes out from the comparing thread when it is done."""

    def __init__(self):
        self.rows: collections.deque = collections.deque()
        self.lock = threading.Lock()
        self.statuses: list[str] = []

    def add(self, row) -> None:
        """A Result, or a pending one (with a ``future``: its comparison still running)."""
        with self.lock:
            self.rows.append(row)
        if _pending(row):
            row.future.add_done_callback(lambda _: self.flush())
        self.flush()

    def flush(self) -> None:
        with self.lock:
            while self.rows and (not _pending(self.rows[0]) or self.rows[0].done()):
                row = self.rows.popleft()
                res = row.result() if _pending(row) else row
                self.statuses.append(res.status)
                emit("result", result=res.to_json())

    def wait(self) -> bool:
        """Every row out (an error in a comparison is raised here); False when one failed."""
        for row in list(self.rows):
            if _pending(row):
                row.future.result()
        self.flush()
        return "FAIL" not in self.statuses


def _pending(row) -> bool:
    """Whether a row is still being compared (a kind's pending row has a ``future``)."""
    return not isinstance(row, Result) and hasattr(row, "future")


@dataclass(frozen=True)
class _Context:
    """What the worker hands a kind (harness.kinds.base.Kind.run_kernel's ``ctx``)."""

    beside: ThreadPoolExecutor
    prefetch: ThreadPoolExecutor

    @staticmethod
    def progress(kernel: str, problem=None):
        return _progress(kernel, problem)

    @staticmethod
    def emit(kind: str, **fields) -> None:
        emit(kind, **fields)

    @staticmethod
    def rows() -> InOrder:
        return InOrder()

    @staticmethod
    def ended_well(ran) -> bool:
        return _ended_well(ran)

    @staticmethod
    def kind_of(kernel: Kernel) -> kinds.Kind:
        return _kind(kernel)


CONTEXT = _Context(_BESIDE, _PREFETCH)


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
    sample_dir = os.environ.get("HARNESS_WORKER_SAMPLE")  # bench/wall_sampler.py
    try:
        try:
            if sample_dir:
                from harness.bench.wall_sampler import sampled

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
