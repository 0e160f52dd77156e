"""Where a measurement's wall time goes (compile, checks, references, timing, cuBLAS, ...):
host seconds accumulated per phase in this process, for the run's breakdown.

A phase whose name says it ran beside the others (``beside``: the compiles while the worker
measures, the host's comparisons while the device times the next launch) overlaps them: the
breakdown lists it and leaves it out of the sum."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

CHECKS_BESIDE = "checks (beside the timing)"
"""The timed launches' comparisons on the host, while the device goes on with the next size."""
BATTERY = "checks (battery)"
"""A kernel's check battery before any timing (plan.py)."""
TIMED_SIZE = "checks (timed size)"
"""A size's own check on the operands it is timed on, its launch run twice."""
TIMED_LAUNCHES = "checks (timed launches)"
"""The kept timed repetitions read from the device (and, with no other thread, compared)."""


def beside(name: str) -> bool:
    """Whether phase ``name`` overlaps the others (its wall time is not theirs to add to)."""
    return "(beside " in name


class Phases:
    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._local = threading.local()

    def _stack(self) -> list[str]:
        stack = getattr(self._local, "open", None)
        if stack is None:
            stack = self._local.open = []
        return stack

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        """Time the block as ``name``; a phase inside another (on the same thread) is taken
        out of the outer one."""
        t0 = time.perf_counter()
        stack = self._stack()
        stack.append(name)
        try:
            yield
        finally:
            stack.pop()
            spent = time.perf_counter() - t0
            with self._lock:
                self.seconds[name] += spent
                if stack:
                    self.seconds[stack[-1]] -= spent

    def take(self) -> dict[str, float]:
        """The seconds so far, and start again from zero."""
        with self._lock:
            out = dict(self.seconds)
            self.seconds.clear()
        return out


PHASES = Phases()
"""This process's phases (the worker's, or the CLI's)."""
