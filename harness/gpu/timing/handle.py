"""The narrow handle the timer's strategies (sustained.py, isolated.py, warmup.py) take: what
of a :class:`~harness.gpu.timing.timer.Timer` they read, as a Protocol, so that they import
nothing of timer.py (which imports them) and no import circle closes, not even for typing."""

from __future__ import annotations

from typing import Any, Protocol


class TimerHandle(Protocol):
    """What a timing strategy reads of the timer that runs it."""

    stream: Any
    """The stream every launch and event is ordered on."""
    clocks: Any
    """The clock sampler (gpu/clocks.py)."""
    options: Any
    """The timing's TimingOptions."""
    events: Any
    kernels: Any
    """The timer's own kernels (gpu/timing/kernels.py)."""
    timings: Any
    cost: Any
    primers_below: Any
    host_free_ms: Any
    host_free_each: Any
    flush_ms: Any
    gate_off: bool
    """Whether work timed with the host out of the way runs behind leads, not the gate."""
    gate_gave_way_ms: float | None
    """The host's enqueueing time that made the gate give way (None: it has not)."""

    def flush(self, *args: Any, **kwargs: Any) -> Any: ...
