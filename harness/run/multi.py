"""Kernels spread over several GPUs of one host: one worker process per GPU, each pinned to its
GPU by ``CUDA_VISIBLE_DEVICES``, fed kernels (each with every size) from one queue.

A driver thread per GPU takes the next kernel from the queue and hands it to its worker
(protocol.py's ``feed``: one kernel per stdin line, the worker says ``ready`` for the next).
Results go to the run's one stream as they arrive. A kernel that faults, hangs or fails its
checks ends that GPU's worker only, with the same rows one worker would give; the driver starts
a fresh worker for its next kernel while the other GPUs go on. A GPU whose worker cannot start
hands its kernel back to the queue and drops out; when none is left, the kernels still queued
get that failure. Once every driver is done, the run's rows are put in the order one worker
gives: kernel by kernel as they were named, each size in order.
"""

from __future__ import annotations

import collections
import dataclasses
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from harness.bench.result import Result
from harness.kernels.registry import Kernel
from harness.run.gpus import GpuSlot
from harness.run.options import RunOptions
from harness.run.process import (
    DEFAULT_LIMIT_S,
    STARTUP_LIMIT_S,
    WorkerProcess,
    failure,
    unrun,
)
from harness.run.protocol import KernelRef
from harness.run.record import RunRecord

Say = Callable[[str], None]


class WorkerStartError(Exception):
    """A worker process ended or went quiet before it was ready for a kernel."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class FedWorker(WorkerProcess):
    """A worker process on one GPU, handed kernels one at a time; after one that ends it (a
    fault, a hang, a failed check), the next kernel starts a fresh process."""

    def __init__(self, gpu: GpuSlot, options: RunOptions, record: RunRecord,
                 keep: Callable[[Result], None], say: Say, reuse_baseline: bool = False,
                 mode: str = "run"):
        super().__init__((), options, record, keep, say, reuse_baseline, mode, gpu=gpu)
        self.job = dataclasses.replace(self.job, feed=True)
        self.proc = None
        self.lines = None
        self.stderr = None
        self.killed = False
        self.opens = 0
        """Processes it started that got ready."""
        self.start_s: float | None = None
        """How long its last process took from its start to ``ready`` (CUDA, cuBLAS, the
        ceilings): a Dask worker's first rows came 3.7 s after `--gpus all`'s on two H200s
        (notes/multi_gpu.md), and this says whether its worker's start is where they went."""

    def measure(self, kernel: Kernel) -> None:
        """Every size of ``kernel`` on this GPU, each row to ``keep`` as it comes. Raises
        WorkerStartError, with nothing of ``kernel`` recorded, when no worker could start."""
        if self.proc is None:
            self._open()
        self.kernels, self.by_name = (kernel,), {kernel.name: kernel}
        self.current, self.at, self.stage = None, None, "starting"
        self.limit_s = self.options.timeout_s or DEFAULT_LIMIT_S
        try:
            self.proc.stdin.write(KernelRef.of(kernel).to_json() + "\n")
            self.proc.stdin.flush()
        except OSError:  # it ended since it said ready: its last words are still to be read
            pass
        hung, error = self._wait("ready")
        if not self.idle:
            returncode, tail = self._reap()
            if not self.killed:  # killed for an interrupt: no row blames the kernel
                self._record_unreported(error, hung, returncode, tail)

    def close(self) -> None:
        """End the worker (its stdin closed, its last events read)."""
        if self.proc is None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.limit_s = self.options.timeout_s or DEFAULT_LIMIT_S
        self._wait(None)
        self._reap()

    def kill(self) -> None:
        """End the worker now (an interrupt): safe from another thread."""
        self.killed = True
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()

    def _open(self) -> None:
        t0 = time.perf_counter()
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc, self.lines = self._start(self.stderr)
        self.proc.stdin.write(self.job.to_json() + "\n")
        self.proc.stdin.flush()
        self.stage = "starting"
        self.limit_s = self.options.timeout_s or STARTUP_LIMIT_S
        hung, error = self._wait("ready")
        if not self.idle:
            returncode, tail = self._reap()
            raise WorkerStartError(*failure(error, hung, returncode, tail, self.limit_s,
                                             self.stage))
        self.start_s, self.opens = time.perf_counter() - t0, self.opens + 1
        self.say(f"its worker ready in {self.start_s:.1f} s")

    def _wait(self, until: str | None) -> tuple[bool, dict | None]:
        try:
            return self._follow(self.proc, self.lines, until)
        except BaseException:  # an interrupt: the worker goes with it
            self.proc.kill()
            self._reap()
            raise

    def _reap(self) -> tuple[int, str]:
        """Wait for the ended (or killed) worker; its return code and the end of its stderr."""
        returncode = self.proc.wait()
        self.stderr.seek(0)
        tail = self.stderr.read()[-2000:].strip()
        self.stderr.close()
        self.proc = self.lines = self.stderr = None
        return returncode, tail


class _Drivers:
    """What the driver threads share: the queue, the kernels in flight, who is still driving,
    the last reason a GPU dropped out, and any error that must stop the run."""

    def __init__(self, kernels: Sequence[Kernel], count: int):
        self.todo = collections.deque(kernels)
        self.changed = threading.Condition()
        self.in_flight = 0
        self.driving = count
        self.dropped: tuple[str, str] | None = None
        self.errors: list[BaseException] = []
        self.stopped = False

    def take(self) -> Kernel | None:
        """The next kernel; None once the queue is empty and no kernel is in flight (one in
        flight may yet come back from a GPU that drops out), or the run is stopped."""
        with self.changed:
            while not self.stopped:
                if self.todo:
                    self.in_flight += 1
                    return self.todo.popleft()
                if not self.in_flight:
                    return None
                self.changed.wait()
            return None

    def done(self) -> None:
        with self.changed:
            self.in_flight -= 1
            self.changed.notify_all()

    def give_back(self, kernel: Kernel, status: str, message: str) -> None:
        """A kernel its GPU could not start a worker for: first in line for another GPU."""
        with self.changed:
            self.todo.appendleft(kernel)
            self.in_flight -= 1
            self.dropped = (status, message)
            self.changed.notify_all()

    def stop(self, error: BaseException | None = None) -> None:
        with self.changed:
            if error is not None:
                self.errors.append(error)
            self.stopped = True
            self.changed.notify_all()

    def leave(self, sink: Callable[[Result], None], sizes) -> None:
        """A driver is done; when the last one leaves with kernels still queued (every GPU
        dropped out), they get the reason the last GPU dropped out."""
        with self.changed:
            self.driving -= 1
            if self.driving or self.dropped is None or self.stopped:
                return
            status, message = self.dropped
            while self.todo:
                kernel = self.todo.popleft()
                for size in sizes:  # on no GPU: the row names none
                    sink(unrun(kernel, size, status, "no GPU could start a worker: " + message))


def _drive(worker: FedWorker, drivers: _Drivers, say: Say) -> None:
    try:
        while (kernel := drivers.take()) is not None:
            try:
                worker.measure(kernel)
            except WorkerStartError as exc:
                drivers.give_back(kernel, exc.status, exc.message)
                say(f"      GPU {worker.gpu.index}: its worker could not start ({exc.status}: "
                    f"{exc.message.splitlines()[0][:160]}); the other GPUs take its kernels")
                return
            drivers.done()
        worker.close()
    except BaseException as exc:  # a bug or an interrupt: the run stops, the others with it
        drivers.stop(exc)
    finally:
        drivers.leave(worker.sink, worker.options.sizes)


def measure_spread(kernels: Sequence[Kernel], gpus: Sequence[GpuSlot], options: RunOptions,
                   record: RunRecord, keep: Callable[[Result], None], say: Say,
                   reuse_baseline: bool = False, mode: str = "run") -> None:
    """Every size of every kernel, on one worker per GPU of ``gpus`` fed from one queue; rows
    to ``keep`` (thread-safe) as they come, then ``record.results`` from where they began put
    in one worker's order."""
    if not kernels:
        return
    first = len(record.results)
    say(f"      {len(kernels)} kernel(s) over {len(gpus)} GPUs ("
        + ", ".join(str(g.index) for g in gpus) + "), one worker each")
    drivers = _Drivers(kernels, len(gpus))
    workers = [FedWorker(gpu, options, RunRecord(), keep, _on_gpu(say, gpu), reuse_baseline,
                         mode) for gpu in gpus]
    threads = [threading.Thread(target=_drive, args=(w, drivers, say), daemon=True,
                                name=f"harness-gpu-{w.gpu.index}") for w in workers]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # in slices: an interrupt reaches this thread
    except BaseException:
        drivers.stop()
        for worker in workers:
            worker.kill()
        raise
    if drivers.errors:
        raise drivers.errors[0]
    for worker in workers:
        for facts in worker.record.devices:
            record.saw({k: v for k, v in facts.items() if k != "index"}, facts["index"])
        for name, seconds in worker.record.phases.items():
            record.phases[name] = record.phases.get(name, 0.0) + seconds
    record.results[first:] = in_run_order(record.results[first:], kernels, options.sizes)


def in_run_order(results: Sequence[Result], kernels: Sequence[Kernel],
                 sizes: Sequence[tuple[int, int, int]]) -> list[Result]:
    """``results`` as one worker gives them: kernel by kernel in ``kernels``' order, each size
    in ``sizes``' order (stable: anything unnamed keeps its place at the end)."""
    kernel_at = {k.name: i for i, k in enumerate(kernels)}
    size_at = {tuple(s): i for i, s in enumerate(sizes)}
    return sorted(results, key=lambda r: (kernel_at.get(r.kernel.name, len(kernel_at)),
                                          size_at.get(r.size, len(size_at))))


def _on_gpu(say: Say, gpu: GpuSlot) -> Say:
    return lambda line: say(f"      GPU {gpu.index}: {line.strip()}")
