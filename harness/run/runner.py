"""``harness run``, ``compare`` and ``tune``: kernels measured in worker processes, results
recorded as they arrive.

What runs where: this process compiles the kernels on a pool of threads (a compile error is a
row, and the worker finds the cubins in the compile cache), and releases each to the worker as
soon as it and those before it are compiled (a gated job). One worker process (run/worker.py)
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

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from pathlib import Path

from harness import kinds
from harness.archs import get_arch
from harness.bench.result import Result
from harness.bench.threads import host_threads
from harness.compiler.compile import compile_kernel
from harness.compiler.occupancy import kernel_launch_problems
from harness.errors import CompileError, HarnessError
from harness.kernels.registry import Kernel
from harness.run.gate import Gate
from harness.run.gpus import GpuSlot
from harness.run.multi import measure_spread
from harness.run.options import RunOptions, Size, parse_size
from harness.run.process import Started, WorkerProcess, drop_ahead, take_ahead, unrun
from harness.run.record import ResultStream, RunRecord, describe

__all__ = ["RunOptions", "RunRecord", "Size", "describe", "parse_size", "run", "screen"]


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
    spread = gpus is not None and len(gpus) > 1
    # the one worker's process starts now: its imports and CUDA's start-up beside the compiles
    started = None
    if not spread and kernels:
        first = gpus[0] if gpus else None
        started = take_ahead(first) or Started(first)
    else:
        drop_ahead()
    # with one worker measuring as the compiles finish, half the host's threads compile: the
    # worker starts and checks its first kernel beside them. With the first compile alone and
    # the worker started ahead, the first kernel's battery began 1.6 s after the header at
    # 3759deb, against 3.3 s at 86d7164 with 32 compiles at once
    # (reports/h100/default-run-cold-3759deb.log.gz, default-run-stamped-86d7164.log.gz)
    threads = host_threads() // 2 if started is not None and mode != "compare" else 0
    pool = ThreadPoolExecutor(max_workers=max(1, threads or host_threads()),
                              thread_name_prefix="harness-prepare")
    try:
        _measure(kernels, arch, options, record, jsonl_path, say, reuse_baseline, mode, gpus,
                 t0, started, pool)
    finally:
        if started is not None:
            started.close()
        # nothing of this run goes on after it: a caller may time something next
        pool.shutdown(wait=True, cancel_futures=True)
    record.wall_s = time.perf_counter() - t0
    return record


def _measure(kernels, arch, options, record, jsonl_path, say, reuse_baseline, mode, gpus, t0,
             started: Started | None, pool: ThreadPoolExecutor) -> None:
    """:func:`run`'s work, into ``record``; ``started``: the one worker's process, begun."""
    total = len(kernels) * len(options.sizes)
    spread = gpus is not None and len(gpus) > 1
    with jsonl_path.open("a") as sink:
        keep = ResultStream(record, sink, total, say, t0, name_gpu=spread)
        t_compile = time.perf_counter()
        if started is not None and mode != "compare":  # one worker: each kernel as it compiles
            gate = Gate(prepared(kernels, arch, options.sizes, pool, first_alone=True), keep)
            say(f"      starting a worker for {len(kernels)} kernel(s), each once compiled")
            worker = WorkerProcess([k.for_arch(arch) for k in kernels], options, record, keep,
                                   say, reuse_baseline, mode, gpu=gpus[0] if gpus else None)
            finished = worker.run(started, gate)
            record.phases["compile"] = gate.first_s - t_compile
            record.phases[COMPILE_BESIDE] = gate.last_s - gate.first_s
            runnable = [k for k in gate.runnable if k.name not in finished]
            started = None
        else:
            runnable = []
            for kernel, rows in prepared(kernels, arch, options.sizes, pool):
                for row in rows:
                    keep(row)
                if not rows:
                    runnable.append(kernel)
            record.phases["compile"] = time.perf_counter() - t_compile
        if spread:
            measure_spread(runnable, gpus, options, record, keep, say, reuse_baseline, mode)
        while runnable and not spread:
            say(f"      starting a worker for {len(runnable)} kernel(s)")
            finished = WorkerProcess(runnable, options, record, keep, say, reuse_baseline,
                                     mode, gpu=gpus[0] if gpus else None).run(started)
            started = None  # a fresh worker after the first
            runnable = [k for k in runnable if k.name not in finished]


COMPILE_BESIDE = "compile (beside the worker)"
"""The phase of the compiles that ran while the worker measured the kernels compiled before
them: listed in the wall-time breakdown, not added to it."""


def prepared(kernels: Sequence[Kernel], arch: str, sizes: Sequence[Size],
             pool: ThreadPoolExecutor, first_alone: bool = False
             ) -> Iterator[tuple[Kernel, list[Result]]]:
    """Every kernel through :func:`screen` (compiled, or its rows without a worker), on
    ``pool``'s threads, each given as soon as it and those before it are done: the compiles
    run in child processes, several at once, where one after another they cost a fresh host a
    second or more each. The pool then goes on, beside the worker, with what the worker would
    otherwise wait for: each GEMM's SASS read (its instruction family and screening, cached by
    the cubin's hash) in the kernels' order, and the ceiling kernels tensor-core rows are held
    to. A worker that gets there first does the same work itself; the cache keeps one copy.
    The caller shuts the pool down when its worker is done.

    ``first_alone`` (a worker waits for each kernel as it compiles): the first kernel compiles
    alone, and its SASS read is queued ahead of the others' compiles: its row is the first a
    user sees, and among 32 compile children started at once on a fresh H100 (16 cores, the
    worker starting beside them) the compiles up to the first kernel took 1.9 s
    (reports/h100/default-run-cold-ef6439f.log.gz), where 01_naive's alone took 0.4 s on a
    two-core development host (issue 37)."""
    def screened(k: Kernel) -> tuple[Kernel, list[Result]]:
        return screen(k, arch, sizes)

    head = [screened(k) for k in kernels[:1 if first_alone else 0]]  # this thread, alone
    for kernel, rows in head:  # its host work first in the pool's queue
        if not rows:
            kinds.of(kernel.spec).compile_ahead(kernel, arch, pool)
    sent: dict[kinds.Kind, list[Kernel]] = {}
    for i, (kernel, rows) in enumerate(chain(head, pool.map(screened, kernels[len(head):]))):
        if not rows:
            kind = kinds.of(kernel.spec)
            if i >= len(head):
                kind.compile_ahead(kernel, arch, pool)
            sent.setdefault(kind, []).append(kernel)
        yield kernel, rows
    for kind, sent_kernels in sent.items():
        kind.compiled_ahead(sent_kernels, arch, pool)


def screen(kernel: Kernel, arch: str, sizes: Sequence[Size]) -> tuple[Kernel, list[Result]]:
    """``kernel`` as ``arch`` runs it (its tuned parameters), compiled, with the rows it gets
    without a worker: a compile error at every size, or a launch error at every size where
    it is refused offline (grid and block limits, registers, shared memory) at all of them.
    No rows: it goes to a worker, which refuses the sizes it cannot launch at before launching."""
    kernel = kernel.for_arch(arch)
    try:
        res = compile_kernel(kernel, arch).resources
    except CompileError as exc:
        return kernel, [unrun(kernel, size, "compile error", str(exc)) for size in sizes]
    if not kinds.of(kernel.spec).launch_checked_offline:  # its worker says what cannot
        return kernel, []  # launch, at its own dims
    refused = {size: problems for size in sizes
               if (problems := kernel_launch_problems(
                   kernel, get_arch(arch), *size, res.registers, res.static_smem_bytes))}
    if len(refused) < len(sizes):
        return kernel, []
    return kernel, [unrun(kernel, size, "launch error", f"{kernel.name} at "
                           f"{'x'.join(map(str, size))} cannot launch: " + "; ".join(problems))
                    for size, problems in refused.items()]
