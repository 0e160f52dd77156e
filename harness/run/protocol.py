"""What the runner and a worker process say to each other.

The runner writes one :class:`Job` (JSON) to the worker's stdin. The worker answers with lines
``HARNESS-EVENT {json}`` on stdout, each flushed as soon as it is known: ``device`` (the GPU's
facts, once), ``kernel_start``, ``progress`` (a stage, optionally at a size), ``result`` (one
:class:`~harness.bench.result.Result` as JSON), ``kernel_error`` (a kernel refused before any
launch), ``retire`` (the worker stops after a kernel that failed its checks, so the next kernel
starts in a fresh process; the next one's battery may have begun: its rows are not this
worker's; with ``error``, the error that follows is the retired kernel's), and ``error`` (the
worker could not go on).

A job with ``feed`` set names no kernels: the worker says ``ready`` once its session is up and
after each kernel, and reads the next kernel as one :class:`KernelRef` JSON line from stdin; the
end of stdin ends it. Workers on several GPUs are fed so from one queue (multi.py). A job with
``gated`` set names every kernel, and before each the worker reads one stdin line, ``go`` or
``skip``: the runner releases each kernel once its compile is done.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.gpu.timing import TimingOptions
from harness.kernels.registry import Kernel
from harness.kinds import sizes as kernel_sizes
from harness.kinds.dims import Problem

EVENT_PREFIX = "HARNESS-EVENT "
GO, SKIP = "go", "skip"
"""A gated job's lines: measure the next kernel, or pass over it."""


@dataclass(frozen=True)
class KernelRef:
    """A kernel as a job names it: enough to rebuild it on the other side, its variant and
    whether its parameters were chosen one by one (a tuning point) included, so that the
    worker's ``[tuned.<arch>]`` defaults replace no more than they did here."""

    name: str
    file: str
    params: tuple[tuple[str, int], ...]
    variant: str | None = None
    explicit: bool = False

    @classmethod
    def of(cls, kernel: Kernel) -> KernelRef:
        return cls(kernel.name, str(kernel.spec.path), kernel.params, kernel.variant,
                   kernel.explicit)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KernelRef:
        return cls(data["name"], data["file"], tuple(tuple(p) for p in data["params"]),
                   data.get("variant"), data.get("explicit", False))


@dataclass(frozen=True)
class Job:
    kernels: tuple[KernelRef, ...]
    sizes: tuple[tuple[int, int, int], ...]
    """The run's sizes as the runner keys its rows (a result's ``m, n, k``): a kind reads them
    as its kernels' named dims with :meth:`problems`, never as these slots."""
    timing: TimingOptions = field(default_factory=TimingOptions)
    carveout_pct: int | None = None
    reuse_baseline: bool = False
    """Time cuBLAS once per size and types in a worker (tuning sweeps), not after each kernel."""
    mode: str = "run"
    """``run``: each kernel timed on its own; ``compare``: all timed interleaved; ``check``:
    the check battery and the sizes' checks, no timing."""
    strict_blas: bool = False
    feed: bool = False
    """Kernels come one JSON line at a time on stdin after the job, each after a ``ready``."""
    seed: int | None = None
    """The run's seed (RunOptions.seed): every input the worker draws comes from it."""
    gated: bool = False
    """Before each kernel the worker reads one stdin line: ``go`` (its compile is done and it
    can launch) or anything else (the runner has its rows; skip it). The runner compiles while
    the worker measures the kernels already compiled (the first row is not held by the last
    compile)."""

    def problems(self, kernel: Kernel, sizes=None) -> tuple[Problem, ...]:
        """The job's sizes (or ``sizes``, some of them) as ``kernel``'s problems: its kind's
        dims by name, in order (``M, N, K``; a buffers kernel's ``ROWS, COLS``)."""
        return tuple(kernel_sizes.problem_at(kernel, s)
                     for s in (self.sizes if sizes is None else sizes))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        data = json.loads(text)
        return cls(
            kernels=tuple(KernelRef.from_dict(k) for k in data["kernels"]),
            sizes=tuple(tuple(s) for s in data["sizes"]),
            timing=TimingOptions(**data["timing"]), carveout_pct=data["carveout_pct"],
            reuse_baseline=data["reuse_baseline"], mode=data["mode"],
            strict_blas=data["strict_blas"], feed=data.get("feed", False),
            seed=data.get("seed"), gated=data.get("gated", False))


_EMITTING = threading.Lock()


def emit(event: str, **fields: Any) -> None:
    """Write one event line to stdout and flush it (whole, whichever thread emits it)."""
    line = EVENT_PREFIX + json.dumps({"event": event, **fields}, default=_json) + "\n"
    with _EMITTING:
        sys.stdout.write(line)
        sys.stdout.flush()


def _json(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def parse(line: str) -> tuple[str, dict[str, Any]] | None:
    """``(event, fields)`` of an event line; None for any other output of the worker."""
    if not line.startswith(EVENT_PREFIX):
        return None
    fields = json.loads(line[len(EVENT_PREFIX):])
    return fields.pop("event"), fields
