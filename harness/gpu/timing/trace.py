"""A sustained timing's steps, traced for experiments (issue 37)."""

from __future__ import annotations

import json
import os
import time


class Trace:
    """Experiments (issue 37): with ``HARNESS_TIMING_TRACE`` set to a file, each sustained
    timing appends a JSON line there: the host's wall in each of its steps, and the GPU's
    in its batches."""

    def __init__(self):
        self.path = os.environ.get("HARNESS_TIMING_TRACE")
        self.t = time.perf_counter()
        self.steps: dict[str, float] = {}
        self.stretches: list[float] | None = [] if self.path else None
        """The warm-up's time per round, stretch by stretch (warmup.warm_up)."""

    def mark(self, step: str) -> None:
        if self.path:
            now = time.perf_counter()
            self.steps[step] = self.steps.get(step, 0.0) + (now - self.t) * 1e3
            self.t = now

    def write(self, **facts) -> None:
        if self.path:
            with open(self.path, "a") as out:
                out.write(json.dumps({"steps_ms": self.steps, **facts}) + "\n")
