"""What a run produced (:class:`RunRecord`) and where its results go as they arrive
(:class:`ResultStream`: the record, a JSON line, a progress line)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.bench.result import Result


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
        once in ``devices``, with its index. Facts said again of a GPU already seen add what
        they add (a worker says cuBLAS's version once its handle is open)."""
        key = (facts.get("host"), facts.get("uuid"), index)
        seen = next((d for d in self.devices
                     if (d.get("host"), d.get("uuid"), d.get("index")) == key), None)
        if seen is None:
            self.devices.append({**facts, "index": index})
        else:
            seen.update({k: v for k, v in facts.items() if k not in seen})
        if not self.device:
            self.device = dict(facts)
        elif (self.device.get("host"), self.device.get("uuid")) == key[:2]:
            self.device.update({k: v for k, v in facts.items() if k not in self.device})


class ResultStream:
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
            done = len(self.record.results)
            left = time_left(elapsed, done, self.total)
            self.say(f"[{done:>3}/{self.total} {elapsed:5.1f} s{left}] {describe(result)}{on}")


def time_left(elapsed_s: float, done: int, total: int) -> str:
    """``, ~N s left`` from the rows' mean time so far (after the third row: the first carry
    the start-up); "" before that and at the end."""
    if done < 3 or done >= total:
        return ""
    left = elapsed_s / done * (total - done)
    return f", ~{left:.0f} s left" if left < 120 else f", ~{left / 60:.0f} min left"


def describe(result: Result) -> str:
    """One line for a progress log."""
    kind = result.kind_of
    size = kind.size_text(result)
    said = kind.describe(result)
    if said is not None:
        return said
    first = (result.message.splitlines() or [""])[0]
    return f"{result.kernel.name} {size}: {result.status}" + (f": {first[:160]}" if first else "")
