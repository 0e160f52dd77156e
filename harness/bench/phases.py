"""Where a measurement's wall time goes (compile, checks, references, timing, cuBLAS, ...):
host seconds accumulated per phase in this process, for the run's breakdown."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager


class Phases:
    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._open: list[str] = []

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block as ``name``; a phase inside another is taken out of the outer one."""
        t0 = time.perf_counter()
        self._open.append(name)
        try:
            yield
        finally:
            self._open.pop()
            spent = time.perf_counter() - t0
            self.seconds[name] += spent
            if self._open:
                self.seconds[self._open[-1]] -= spent

    def take(self) -> dict[str, float]:
        """The seconds so far, and start again from zero."""
        out = dict(self.seconds)
        self.seconds.clear()
        return out


PHASES = Phases()
"""This process's phases (the worker's, or the CLI's)."""
