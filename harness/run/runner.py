"""``harness run``, ``compare`` and ``tune``: kernels measured in worker processes, results
recorded as they arrive.

What runs where: this process compiles every kernel first (a compile error is a row, and the
worker then finds the cubins in the compile cache). One worker process (run/worker.py) then
measures the kernels one after another, each with its own module, so a carve-out or dynamic
shared-memory limit set for one kernel's function cannot reach another's. A worker ends after a
kernel that faults (its CUDA context is lost), hangs (no event within the timeout: it is
killed) or fails its checks (it may have written memory it does not own), and the next kernel
starts in a fresh worker. A kernel that faulted or hung is not tried again at its other sizes.
Each result is appended to a JSON-lines file as it comes, so an interrupted run keeps what it
measured. With several GPUs (``gpus``), multi.py feeds one worker per GPU from one queue;
cluster.py does the same over a Dask cluster.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.archs import get_arch
from harness.bench.contents import new_seed
from harness.bench.result import GpuInfo, KernelInfo, Result
from harness.compiler.compile import compile_kernel
from harness.compiler.occupancy import abi_problems, kernel_launch_problems
from harness.errors import CompileError, HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import PROJECT_ROOT, Kernel
from harness.knobs import CARVEOUT, TIMEOUT_S, check_knobs, knob
from harness.run.gpus import GpuSlot
from harness.run.protocol import Job, KernelRef, parse

_FAULTS = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED_ADDRESS", "ILLEGAL_INSTRUCTION",
           "HARDWARE_STACK_ERROR", "INVALID_PC", "ASSERT")
Size = tuple[int, int, int]
WORKER_COMMAND = (sys.executable, "-m", "harness.run.worker")
STARTUP_LIMIT_S = 120.0
"""No word from a new worker for this long (CUDA and cuBLAS start-up) is a hang."""
DEFAULT_LIMIT_S = 60.0
"""The limit after an event that names none (device facts, a ceiling's measurement)."""


@dataclass(frozen=True)
class RunOptions:
    """How ``harness run``, ``compare`` and ``check`` measure (and ``tune`` its points): they
    check themselves when made, with the command line's messages."""

    sizes: tuple[Size, ...]
    timing: TimingOptions = TimingOptions()
    """TimingOptions, or a dict of its fields."""
    carveout_pct: int | None = knob(None, CARVEOUT)
    """``--carveout``: the preferred shared-memory carve-out in percent, for every kernel;
    None, the spec's (else the driver's default)."""
    timeout_s: float | None = knob(None, TIMEOUT_S)
    """Longest wait for the next event from a worker before the kernel is called hung; None
    lets each stage say how long it may take (measure.py: scaled with the work of the launches
    in flight, about 30 s at the default sizes)."""
    strict_blas: bool = False
    """Reading C when beta = 0 fails the check instead of being a note."""
    seed: int | None = None
    """What every input of the run is drawn from (the checks' and the timed repetitions');
    None draws one, which the report records (``--seed`` replays it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "timing", TimingOptions.of(self.timing))
        check_knobs(self)

    def seeded(self) -> RunOptions:
        """These options with a seed: their own, or one drawn now."""
        return self if self.seed is not None else replace(self, seed=new_seed())


@dataclass
class RunRecord:
    """What a run produced: device facts from the first worker, and one result per kernel and
    size."""

    device: dict = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    """Wall seconds per phase (compile, worker start, checks, references, timing, ...); summed
    over the workers where several GPUs ran at once."""
    wall_s: float = 0.0
    seed: int | None = None
    """The run's seed (RunOptions.seed)."""
    devices: list[dict] = field(default_factory=list)
    """The device facts of every GPU that ran a kernel (one entry on one GPU), each with its
    ``index`` in the harness's numbering."""

    def saw(self, facts: dict, index: int) -> None:
        """Note a worker's device facts: the first become ``device``; each GPU is listed
        once in ``devices``, with its index."""
        self.device = self.device or facts
        key = (facts.get("host"), facts.get("uuid"), index)
        if all((d.get("host"), d.get("uuid"), d.get("index")) != key for d in self.devices):
            self.devices.append({**facts, "index": index})


class Stream:
    """Where a run's results go as they arrive: the record, a line of the JSON-lines file and
    a progress line each; safe to call from the threads of several workers."""

    def __init__(self, record: RunRecord, sink, total: int, say: Callable[[str], None],
                 t0: float, name_gpu: bool = False):
        self.record, self.sink, self.total, self.say, self.t0 = record, sink, total, say, t0
        self.name_gpu = name_gpu
        self.lock = threading.Lock()

    def __call__(self, result: Result) -> None:
        with self.lock:
            self.record.results.append(result)
            self.sink.write(json.dumps(result.to_json()) + "\n")
            self.sink.flush()
            elapsed = time.perf_counter() - self.t0
            on = f" (GPU {result.gpu.index})" if self.name_gpu and result.gpu else ""
            self.say(f"[{len(self.record.results):>3}/{self.total} {elapsed:5.1f} s] "
                     f"{describe(result)}{on}")


def run(kernels: Sequence[Kernel], arch: str, options: RunOptions, jsonl_path: Path,
        say: Callable[[str], None], reuse_baseline: bool = False, mode: str = "run",
        gpus: Sequence[GpuSlot] | None = None) -> RunRecord:
    """Check and time ``kernels`` at every size; append each result to ``jsonl_path`` at once.

    ``reuse_baseline``: time cuBLAS once per size in each worker (tuning sweeps of many
    variants) instead of right after each kernel. ``mode``: ``run`` times each kernel on its
    own; ``compare`` times them (and cuBLAS) interleaved, round by round, in one worker, with
    each kernel's speedup over the first. ``gpus``: the GPUs the workers are pinned to (None:
    the one worker sees every GPU and uses device 0); with several, one worker per GPU, each
    fed kernels from one queue (``run`` and ``check`` modes), the results kept in the order one
    worker gives."""
    if gpus is not None and len(gpus) > 1 and mode == "compare":
        raise HarnessError(f"compare times its kernels interleaved on one GPU; expected one "
                           f"GPU, got {len(gpus)}")
    options = options.seeded()
    record = RunRecord(seed=options.seed)
    t0 = time.perf_counter()
    jsonl_path.parent.mkdir(parents=True, exist_ok=True)
    total = len(kernels) * len(options.sizes)
    spread = gpus is not None and len(gpus) > 1
    with jsonl_path.open("a") as sink:
        keep = Stream(record, sink, total, say, t0, name_gpu=spread)
        runnable = []
        t_compile = time.perf_counter()
        for kernel in kernels:
            kernel, rows = screen(kernel, arch, options.sizes)
            for row in rows:
                keep(row)
            if not rows:
                runnable.append(kernel)
        record.phases["compile"] = time.perf_counter() - t_compile
        if spread:
            from harness.run.multi import measure_spread

            measure_spread(runnable, gpus, options, record, keep, say, reuse_baseline, mode)
        while runnable and not spread:
            say(f"      starting a worker for {len(runnable)} kernel(s)")
            finished = _Worker(runnable, options, record, keep, say, reuse_baseline, mode,
                               gpu=gpus[0] if gpus else None).run()
            runnable = [k for k in runnable if k.name not in finished]
    record.wall_s = time.perf_counter() - t0
    return record


def screen(kernel: Kernel, arch: str, sizes: Sequence[Size]) -> tuple[Kernel, list[Result]]:
    """``kernel`` as ``arch`` runs it (its tuned parameters), compiled, with the rows it gets
    without a worker: a compile error at every size, or a launch error at every size where
    it is refused offline (grid and block limits, registers, shared memory) at all of them.
    No rows: it goes to a worker, which refuses the sizes it cannot launch at before launching."""
    kernel = kernel.for_arch(arch)
    try:
        res = compile_kernel(kernel, arch).resources
    except CompileError as exc:
        return kernel, [_unrun(kernel, size, "compile error", str(exc)) for size in sizes]
    refused = {size: problems for size in sizes
               if (problems := kernel_launch_problems(
                   kernel, get_arch(arch), *size, res.registers, res.static_smem_bytes))}
    if len(refused) < len(sizes):
        return kernel, []
    return kernel, [_unrun(kernel, size, "launch error", f"{kernel.name} at "
                           f"{'x'.join(map(str, size))} cannot launch: " + "; ".join(problems))
                    for size, problems in refused.items()]


def _unrun(kernel: Kernel, size: Size, status: str, message: str) -> Result:
    return Result.of(KernelInfo.of(kernel), *size).ended(status, message)


class _Worker:
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
        self.at: Size | None = None  # the size the current kernel was last reported at
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
        env = dict(os.environ) if self.gpu is None else self.gpu.env()
        env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")])
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(list(WORKER_COMMAND),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=stderr, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        return proc, lines

    def run(self) -> set[str]:
        """Run the worker to its end; the names of the kernels it finished or failed."""
        with tempfile.TemporaryFile(mode="w+") as stderr:
            proc, lines = self._start(stderr)
            proc.stdin.write(self.job.to_json())
            proc.stdin.close()
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
            self.limit_s = self.options.timeout_s or event[1].get("limit_s") or DEFAULT_LIMIT_S
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
                self.at = tuple(event["size"])
            if event.get("show", True):
                where = "x".join(map(str, event["size"])) + " " if "size" in event else ""
                self.say(f"      {event['kernel']} {where}{event['stage']}")
            self.stage = event["stage"]
        elif kind == "result":
            result = Result.from_json(event["result"])
            self.reported.add((result.kernel.name, result.size))
            self.keep(result)
        elif kind == "kernel_error":
            for size in self._pending(event["kernel"]):
                self.keep(_unrun(self.by_name[event["kernel"]], size, "launch error",
                                 event["message"]))
                self.reported.add((event["kernel"], size))
        elif kind == "retire":
            self.say(f"      {event['kernel']} failed its checks: the next kernel starts in a "
                     "fresh worker")
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
                status, message = _failure(error, hung, returncode, tail, self.limit_s,
                                           self.stage)
                for kernel, size in missing:
                    self.keep(_unrun(kernel, size, status, message))
            self.finished |= set(self.by_name)
            return
        self._finish_current()
        pending = self._pending(self.current)
        if not pending:
            return
        status, message = _failure(error, hung, returncode, tail, self.limit_s, self.stage)
        kernel = self.by_name[self.current]
        failed_at = self.at if self.at in pending else pending[0]
        self.keep(_unrun(kernel, failed_at, status, message))
        word = {"timeout": "hung", "fault": "faulted"}.get(status, status)
        where = (f"at {'x'.join(map(str, self.at))}" if self.at
                 else "while its check battery ran")
        for size in pending:
            if size != failed_at:
                self.keep(_unrun(kernel, size, "skipped",
                                 f"{word} {where}: not tried again in this run"))


def _failure(error: dict | None, hung: bool, returncode: int, stderr_tail: str,
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


def describe(result: Result) -> str:
    """One line for a progress log."""
    size = "x".join(map(str, result.size))
    if result.status == "pass" and result.timing is not None and result.baseline is not None:
        return (f"{result.kernel.name} {size}: {result.gflops:.0f} GFLOP/s, "
                f"{result.pct_baseline:.1f}% of cuBLAS ({result.baseline_gflops:.0f} GFLOP/s)")
    return (f"{result.kernel.name} {size}: {result.status}: "
            f"{result.message.splitlines()[0][:160]}")


def parse_size(text: str) -> Size:
    """``N`` (square) or ``M,N,K``."""
    parts = text.replace("x", ",").split(",")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise HarnessError(f"size {text!r} is not N or M,N,K with positive integers") from None
    if len(values) == 1:
        values *= 3
    if len(values) != 3 or any(v < 1 for v in values):
        raise HarnessError(f"size {text!r} is not N or M,N,K with positive integers")
    too_large = abi_problems(*values)
    if too_large:
        raise HarnessError(f"size {text!r}: {too_large[0]}")
    return tuple(values)
