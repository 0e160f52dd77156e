"""One worker process (run/worker.py) as the runner sees it: started, handed its job, its
events followed until it ends or goes quiet for longer than its stage's limit, and turned into
results (:class:`WorkerProcess`); the rows of what it never reported (:func:`failure`,
:func:`unrun`). Strategies over several GPUs (multi.py, cluster.py) reuse it."""

from __future__ import annotations

import atexit
import dataclasses
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harness.bench.result import GpuInfo, KernelInfo, Result
from harness.kernels.registry import PROJECT_ROOT, Kernel
from harness.run.gpus import GpuSlot
from harness.run.options import RunOptions, Size
from harness.run.protocol import Job, KernelRef, parse
from harness.run.record import RunRecord

if TYPE_CHECKING:
    from harness.run.gate import Gate

_FAULTS = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED_ADDRESS", "ILLEGAL_INSTRUCTION",
           "HARDWARE_STACK_ERROR", "INVALID_PC", "ASSERT")
WORKER_COMMAND = (sys.executable, "-m", "harness.run.worker")
STARTUP_LIMIT_S = 120.0
"""No word from a new worker for this long (CUDA and cuBLAS start-up) is a hang."""
DEFAULT_LIMIT_S = 60.0
"""The limit after an event that names none (device facts, a ceiling's measurement)."""


def unrun(kernel: Kernel, size: Size, status: str, message: str) -> Result:
    return Result.of(KernelInfo.of(kernel), *size).ended(status, message)


class WorkerProcess:
    """One worker process over ``kernels``, its events turned into results, each naming the
    GPU it ran on (``gpu``: the one the process is pinned to; None: device 0 of all)."""

    def __init__(self, kernels: Sequence[Kernel], options: RunOptions, record: RunRecord,
                 keep: Callable[[Result], None], say: Callable[[str], None],
                 reuse_baseline: bool, mode: str, gpu: GpuSlot | None = None):
        self.kernels, self.options, self.record = kernels, options, record
        self.sink, self.say, self.mode = keep, say, mode
        self.gpu = gpu
        self.gpu_info = GpuInfo(gpu.index) if gpu else None
        self.job = Job(tuple(KernelRef.of(k) for k in kernels), options.sizes, options.timing,
                       options.carveout_pct, reuse_baseline, mode, options.strict_blas,
                       seed=options.seed)
        self.by_name = {k.name: k for k in kernels}
        self.finished: set[str] = set()
        self.reported: set[tuple[str, Size]] = set()
        self.current: str | None = None
        self.at: str | None = None  # the size the current kernel was last reported at
        # (its problem's short text, 4096x4096x4096: the worker speaks in named dims)
        self.stage = "starting"
        self.limit_s = options.timeout_s or STARTUP_LIMIT_S
        self.idle = False

    def keep(self, result: Result) -> None:
        """A row out, naming this worker's GPU."""
        if result.gpu is None and self.gpu_info is not None:
            result = result.with_parts(gpu=self.gpu_info)
        self.sink(result)

    def _start(self, stderr) -> tuple[subprocess.Popen, queue.Queue]:
        """The worker process (pinned to ``gpu``), and the queue its stdout lines arrive on."""
        return spawn(self.gpu, stderr)

    def run(self, started: Started | None = None, gate: Gate | None = None) -> set[str]:
        """Run the worker to its end; the names of the kernels it finished or failed.
        ``started``: a worker process started ahead (:class:`Started`, for this GPU), which
        then takes this job. ``gate`` (gate.Gate): the job is gated, every kernel named, and
        ``gate`` tells the worker which to measure as their compiles finish; only those it
        released count as the worker's."""
        if gate is not None:
            self.job = dataclasses.replace(self.job, gated=True)
        with (started.stderr if started else tempfile.TemporaryFile(mode="w+")) as stderr:
            proc, lines = (started.proc, started.lines) if started else self._start(stderr)
            proc.stdin.write(self.job.to_json() + "\n")
            proc.stdin.flush()
            if gate is None:
                proc.stdin.close()
            else:
                gate.start(proc.stdin)
            self.limit_s = self.options.timeout_s or STARTUP_LIMIT_S
            try:
                hung, error = self._follow(proc, lines)
            except BaseException:  # an interrupt (a notebook's too): the worker goes with it
                proc.kill()
                proc.wait()
                raise
            returncode = proc.wait()
            stderr.seek(0)
            tail = stderr.read()[-2000:].strip()
        if gate is not None:
            gate.join()
            self.kernels = tuple(gate.runnable)
        self._record_unreported(error, hung, returncode, tail)
        return self.finished

    def _follow(self, proc: subprocess.Popen, lines: queue.Queue, until: str | None = None
                ) -> tuple[bool, dict | None]:
        """The worker's events until it ends, or until it sends the event ``until`` (then
        ``idle`` is set: a fed worker waiting for its next kernel); (hung, the error it
        reported)."""
        error = None
        self.idle = False
        deadline = time.monotonic() + self.limit_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                proc.kill()
                return True, error
            if line is None:
                return False, error
            event = parse(line)
            if event is None:
                continue
            if until is not None and event[0] == until:
                self.idle = True
                return False, error
            self.limit_s = ((event[1].get("limit_s") if event[1].get("gate") else None)
                            or self.options.timeout_s or event[1].get("limit_s")
                            or DEFAULT_LIMIT_S)
            deadline = time.monotonic() + self.limit_s
            error = self._on(*event) or error

    def _on(self, kind: str, event: dict) -> dict | None:
        if kind == "device":
            index = self.gpu.index if self.gpu else 0
            self.gpu_info = GpuInfo.of(index, event)
            self.record.saw(event, index)
        elif kind == "kernel_start":
            self._finish_current()
            self.current, self.at = event["kernel"], None
        elif kind == "progress":
            if "size" in event:
                self.at = str(event["size"])
            if event.get("show", True):
                where = f"{event['size']} " if "size" in event else ""
                self.say(f"      {event['kernel']} {where}{event['stage']}")
            self.stage = event["stage"]
        elif kind == "result":
            result = Result.from_json(event["result"])
            self.reported.add((result.kernel.name, result.size))
            self.keep(result)
        elif kind == "kernel_error":
            for size in self._pending(event["kernel"]):
                self.keep(unrun(self.by_name[event["kernel"]], size, "launch error",
                                 event["message"]))
                self.reported.add((event["kernel"], size))
        elif kind == "retire":
            if not event.get("error"):  # else the error that follows is this kernel's
                self.say(f"      {event['kernel']} failed its checks: the next kernel starts "
                         "in a fresh worker")
            if event["kernel"] != self.current:  # the next one's battery ran beside its last
                # comparisons (worker._run_kernel): it is not this worker's, and starts afresh
                self.current, self.at = event["kernel"], None
        elif kind == "phases":
            for name, seconds in event["seconds"].items():
                self.record.phases[name] = self.record.phases.get(name, 0.0) + seconds
        elif kind == "error":
            return event
        return None

    def _pending(self, name: str) -> list[Size]:
        return [s for s in self.options.sizes if (name, tuple(s)) not in self.reported]

    def _finish_current(self) -> None:
        if self.current is not None:
            self.finished.add(self.current)

    def _record_unreported(self, error: dict | None, hung: bool, returncode: int,
                           tail: str) -> None:
        """Rows for what the worker never reported: the kernel it was on gets the failure at
        the size it was at, and is skipped at its other sizes; in compare mode, every kernel
        still missing gets it."""
        if self.current is None:  # compare mode, or died before any kernel started
            missing = [(k, s) for k in self.kernels for s in self._pending(k.name)]
            if missing:
                status, message = failure(error, hung, returncode, tail, self.limit_s,
                                           self.stage)
                for kernel, size in missing:
                    self.keep(unrun(kernel, size, status, message))
            self.finished |= set(self.by_name)
            return
        self._finish_current()
        pending = self._pending(self.current)
        if not pending:
            return
        status, message = failure(error, hung, returncode, tail, self.limit_s, self.stage)
        kernel = self.by_name[self.current]
        at = [s for s in pending if self.job.problems(kernel, [s])[0].short == self.at]
        failed_at = at[0] if at else pending[0]
        self.keep(unrun(kernel, failed_at, status, message))
        word = {"timeout": "hung", "fault": "faulted"}.get(status, status)
        where = f"at {self.at}" if self.at else "while its check battery ran"
        for size in pending:
            if size != failed_at:
                self.keep(unrun(kernel, size, "skipped",
                                 f"{word} {where}: not tried again in this run"))


def spawn(gpu: GpuSlot | None, stderr) -> tuple[subprocess.Popen, queue.Queue]:
    """A worker process (pinned to ``gpu``; None: every GPU, device 0 used), waiting for its
    job on stdin, and the queue its stdout lines arrive on."""
    env = dict(os.environ) if gpu is None else gpu.env()
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen(list(WORKER_COMMAND), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, env=env)
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    return proc, lines


class Started:
    """A worker process started before its job is known, so that its imports and CUDA's
    start-up overlap the compiles (``harness run``'s first row); :meth:`WorkerProcess.run`
    takes it, :meth:`close` ends one that got no job."""

    def __init__(self, gpu: GpuSlot | None = None):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc, self.lines = spawn(gpu, self.stderr)

    def close(self) -> None:
        """End the process if it still runs (after a run that took it, it has ended)."""
        if self.proc.poll() is None:
            self.proc.stdin.close()  # no job line (or no more): the worker ends at once
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


_AHEAD: list[Started] = []
NVIDIA_DEVICE = "/dev/nvidiactl"
"""Where a host with an NVIDIA driver shows it: a worker is started ahead only there."""


def start_ahead() -> None:
    """Start the worker of a run on one GPU now, before the command has read its kernels and
    asked the driver for the GPU (about a second of a fresh H100 host's start, issue 37), so
    that the worker's imports and CUDA's start-up go on meanwhile; only where this host shows
    an NVIDIA driver. :func:`take_ahead` hands it to the run; one nobody takes ends with this
    process."""
    if not _AHEAD and os.path.exists(NVIDIA_DEVICE):
        _AHEAD.append(Started())


def take_ahead(gpu: GpuSlot | None) -> Started | None:
    """The worker :func:`start_ahead` started, for a run whose one worker sees every GPU
    (``gpu`` None); None otherwise (that one is ended: it would hold a context on GPU 0)."""
    if gpu is not None:
        drop_ahead()
        return None
    return _AHEAD.pop() if _AHEAD else None


def drop_ahead() -> None:
    """End a worker started ahead that no run took."""
    while _AHEAD:
        _AHEAD.pop().close()


atexit.register(drop_ahead)


def failure(error: dict | None, hung: bool, returncode: int, stderr_tail: str,
             timeout_s: float, stage: str = "") -> tuple[str, str]:
    """Status and message for sizes a worker never reported."""
    if hung:
        during = f" while {stage}" if stage else ""
        return "timeout", (f"no progress for {timeout_s:.0f} s{during}: the kernel hung (or "
                           "is far slower than expected); its worker was killed; pass "
                           "--timeout-s with a longer limit if it is merely slow")
    if error is not None:
        message = error["message"]
        if any(f in message for f in _FAULTS):
            return "fault", f"kernel faulted, its CUDA context is lost: {message.splitlines()[0]}"
        status = "launch error" if error["kind"] == "LaunchError" else "error"
        return status, message
    if returncode < 0:
        return "fault", f"worker killed by signal {-returncode}: {stderr_tail[-500:]}"
    return "error", f"worker exited with code {returncode}: {stderr_tail[-1000:]}"


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)
