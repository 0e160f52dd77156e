"""``harness run``: every kernel in its own worker process, results recorded as they arrive.

A kernel that fails to compile, faults (an illegal address poisons its CUDA context), hangs
(no event within the timeout) or errors is recorded as such in its rows, and the run goes on.
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.build.compile import compile_kernel
from harness.errors import CompileError, HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import PROJECT_ROOT, Kernel, project_relative
from harness.report.files import jsonable
from harness.run.worker import EVENT_PREFIX

_FAULTS = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED_ADDRESS", "ILLEGAL_INSTRUCTION",
           "HARDWARE_STACK_ERROR", "INVALID_PC", "ASSERT")


@dataclass(frozen=True)
class RunOptions:
    sizes: tuple[tuple[int, int, int], ...]
    timing: TimingOptions = TimingOptions()
    carveout_pct: int | None = None
    timeout_s: float = 300.0
    """Longest wait for the next event from a worker before the kernel is called hung."""


@dataclass
class RunRecord:
    """What a run produced: device facts from the first worker, and one row per result."""

    device: dict = field(default_factory=dict)
    rows: list[dict] = field(default_factory=list)


def run(kernels: Sequence[Kernel], arch: str, options: RunOptions, jsonl_path: Path,
        say: Callable[[str], None], baseline: str = "every", mode: str = "run") -> RunRecord:
    """Check and time ``kernels`` at every size; append each row to ``jsonl_path`` at once.

    ``baseline``: ``every`` times cuBLAS right after each kernel at each size; ``once`` times it
    once per size and worker (for tuning sweeps of many variants). ``mode``: ``run`` times each
    kernel on its own; ``compare`` times them (and cuBLAS) interleaved, round by round, in one
    worker, with each kernel's speedup over the first."""
    record = RunRecord()
    jsonl_path.parent.mkdir(parents=True, exist_ok=True)
    total = len(kernels) * len(options.sizes)
    with jsonl_path.open("a") as sink:

        def keep(row: dict) -> None:
            row = jsonable(row)
            record.rows.append(row)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            say(f"[{len(record.rows):>3}/{total}] {_describe(row)}")

        runnable = []
        for kernel in kernels:
            kernel = kernel.for_arch(arch)
            try:
                compile_kernel(kernel, arch)
                runnable.append(kernel)
            except CompileError as exc:
                for m, n, k in options.sizes:
                    keep({**_base(kernel), "m": m, "n": n, "k": k, "status": "compile error",
                          "message": str(exc)})
        while runnable:
            say(f"      starting a worker for {len(runnable)} kernel(s)")
            finished = _run_worker(runnable, options, record, keep, say, baseline, mode)
            runnable = [k for k in runnable if k.name not in finished]
    return record


def _base(kernel: Kernel) -> dict:
    return {"kernel": kernel.name, "file": project_relative(kernel.spec.path),
            "precision": kernel.spec.precision, "params": dict(kernel.params)}


def _run_worker(kernels: Sequence[Kernel], options: RunOptions, record: RunRecord, keep,
                say: Callable[[str], None], baseline: str, mode: str) -> set[str]:
    """Run one worker over ``kernels``; return the names it finished (or that failed in it).

    A kernel that faults or hangs ends the worker; its unreported sizes are recorded with the
    failure and the caller starts a new worker for the kernels after it."""
    job = {"kernels": [{"name": k.name, "file": str(k.spec.path), "params": list(k.params)}
                       for k in kernels],
           "sizes": [list(s) for s in options.sizes], "timing": asdict(options.timing),
           "carveout_pct": options.carveout_pct, "baseline": baseline, "mode": mode}
    by_name = {k.name: k for k in kernels}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    finished: set[str] = set()
    reported: set[tuple] = set()
    current: str | None = None
    pending: list[tuple[int, int, int]] = []
    with tempfile.TemporaryFile(mode="w+") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "harness.run.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        error: dict | None = None
        hung = False
        deadline = time.monotonic() + options.timeout_s
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            if not line.startswith(EVENT_PREFIX):
                continue
            deadline = time.monotonic() + options.timeout_s
            event = json.loads(line[len(EVENT_PREFIX):])
            kind = event.pop("event")
            if kind == "device":
                record.device = record.device or event
            elif kind == "kernel_start":
                if current is not None:
                    finished.add(current)
                current = event["kernel"]
                pending = [tuple(s) for s in options.sizes]
            elif kind == "progress":
                where = "x".join(map(str, event["size"])) + " " if "size" in event else ""
                say(f"      {event['kernel']} {where}{event['stage']}")
            elif kind == "result":
                size = (event["m"], event["n"], event["k"])
                if size in pending:
                    pending.remove(size)
                reported.add((event["kernel"], size))
                keep({**_base(by_name[event["kernel"]]), **event})
            elif kind == "kernel_error":
                for m, n, k in pending:
                    keep({**_base(by_name[current]), "m": m, "n": n, "k": k,
                          "status": "launch error", "message": event["message"]})
                pending = []
            elif kind == "error":
                error = event
        returncode = proc.wait()
        stderr.seek(0)
        tail = stderr.read()[-2000:].strip()
    if current is None:  # compare mode, or died before any kernel started
        missing = [(kernel, size) for kernel in kernels for size in options.sizes
                   if (kernel.name, tuple(size)) not in reported]
        if missing:
            status, message = _failure(error, hung, returncode, tail, options.timeout_s)
            for kernel, (m, n, k) in missing:
                keep({**_base(kernel), "m": m, "n": n, "k": k, "status": status,
                      "message": message})
        return set(by_name)
    finished.add(current)
    if pending:
        status, message = _failure(error, hung, returncode, tail, options.timeout_s)
        for m, n, k in pending:
            keep({**_base(by_name[current]), "m": m, "n": n, "k": k, "status": status,
                  "message": message})
    return finished


def _failure(error: dict | None, hung: bool, returncode: int, stderr_tail: str,
             timeout_s: float) -> tuple[str, str]:
    """Status and message for sizes a worker never reported."""
    if hung:
        return "timeout", (f"no progress for {timeout_s:.0f} s: the kernel hung (or is far "
                           "slower than expected); its worker was killed; raise --timeout-s "
                           "if it is merely slow")
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


def _describe(row: dict) -> str:
    size = f"{row['m']}x{row['n']}x{row['k']}"
    if row["status"] == "pass":
        return (f"{row['kernel']} {size}: {row['gflops']:.0f} GFLOP/s, "
                f"{row['pct_cublas']:.1f}% of cuBLAS ({row['cublas_gflops']:.0f} GFLOP/s)")
    return f"{row['kernel']} {size}: {row['status']}: {row['message'].splitlines()[0][:160]}"


def parse_size(text: str) -> tuple[int, int, int]:
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
    return tuple(values)
