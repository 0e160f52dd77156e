"""``harness.time``: any launch or callable timed by the harness's method, as
``triton.testing.do_bench`` times one, and its median and quantiles.

The method is the timer's (harness/gpu/timing/): CUDA events around every repetition, a
warm-up of ``warmup_ms``, repetitions until the stop rule says so (the median's standard error
at most ``max_rel_se_pct``, between ``min_ms`` and ``budget_ms`` of GPU time), L2 flushed
before each (``cold_l2``, the default) or warm, the launch overhead calibrated in the same
rounds and subtracted, the SM clock sampled by NVML. The callable must enqueue its GPU work on
``stream`` (default: the legacy default stream, where a library's work goes unless it is told
otherwise) and return without waiting for it.

With ``graph=True`` (the default, as for the harness's own kernels) the repetitions are
captured once in a CUDA graph and replayed, so that no repetition waits on the host; the
legacy default stream cannot be captured, and a callable that refuses capture is enqueued from
the host instead (``Timing.graph`` says which). A callable that changes what it launches from
one call to the next (a counter, buffers in turn) must be timed with ``graph=False``.

The callable is called more often than it is timed, and every call has its effects: its first
call and the ones that time it alone, the warm-up's, and with cold L2 (the default), where a
repetition takes less than ``prime_below_ms`` (1 ms), an untimed call before each timed one
(the primer: it runs before the L2 flush, so that the SMs hold the callable's code as in a
loop of it). A callable that alternates by call count, ping-pongs buffers or pipelines steps
can move half its work into the primer: time it with ``prime_below_ms=0`` (one call per
repetition) or make each call whole. Then the wall pass (wall.py): ``Timed.wall`` calls back
to back between context-wide synchronisations, whose time per call is set beside the median:
work the timer's events did not see (another stream) is ``Timed.findings``; with graphs, a
refusal (HarnessError), as that work never ran in the replays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.commands.wall import Wall, calls_for, refused_in_graph, unseen, wall_pass
from harness.errors import HarnessError
from harness.gpu.timing import Timing, TimingOptions
from harness.stats import tick_percentile

DEFAULT_QUANTILES = (0.2, 0.5, 0.8)


@dataclass(frozen=True)
class Timed:
    """What :func:`time` measured: the median and the quantiles asked for (ms, each
    repetition less the launch overhead), every repetition's time, and the Timing record
    (repetitions, why they stopped, the clock and what held it, the regime)."""

    median_ms: float
    quantiles: tuple[float, ...]
    """The quantiles asked for, in order."""
    quantiles_ms: tuple[float, ...]
    times_ms: tuple[float, ...]
    timing: Timing
    options: TimingOptions
    wall: Wall | None = None
    """The wall pass (wall.py): calls, wall and host ms per call."""
    findings: tuple[str, ...] = ()
    """What the timing's books (timing/account.py) and the wall pass found: not empty, the
    median is not the callable's time."""

    def __float__(self) -> float:
        return self.median_ms


def time(launch: Callable[[], Any], *, stream: Any = None,
         timing: TimingOptions | Mapping[str, Any] | None = None,
         quantiles: Sequence[float] = DEFAULT_QUANTILES, **options: Any) -> Timed:
    """Time ``launch`` (a callable that enqueues GPU work on ``stream``) by the harness's
    method; ``timing`` (TimingOptions or a dict of its fields) and ``options`` (its fields as
    keywords: ``cold_l2=False``, ``budget_ms=100``, ...) say how. ``stream``: None, the legacy
    default stream; a :class:`harness.gpu.driver.Stream`; a CUstream or its address; or an
    object with ``__cuda_stream__`` (cuda.core, CuPy) or ``cuda_stream`` (PyTorch). Needs a
    GPU: NoGpu without one, after the arguments are checked."""
    if not callable(launch):
        raise HarnessError(f"harness.time({launch!r}): expected a callable that enqueues GPU "
                           "work (a kernel launch, a library call) and returns")
    asked = _quantiles(quantiles)
    opts = _options(timing, options)
    from harness.gpu.driver import gpu_status

    gpu_status().require("harness.time() times on a GPU")
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.driver import Device
    from harness.gpu.timing import Timer

    with Device() as device:
        timer = Timer(_stream(stream), device.l2_bytes, ClockSampler(device.pci_bus_id), opts)
        try:
            timings, per_round = timer.time_interleaved([launch])
            measured = timer.with_power(timings[0], launch)
            wall = wall_pass(launch, device.synchronize,
                             calls_for(measured.median_ms, timer.cost(launch, 1)[1]))
        finally:
            timer.flush_buffer.close()
    found = unseen(wall, measured.median_ms, measured.launch_overhead_ms)
    if found and measured.graph:
        raise refused_in_graph(found)
    times = tuple(r[0] for r in per_round)
    return Timed(measured.median_ms, asked, tuple(tick_percentile(times, 100 * q)
                                                   for q in asked), times, measured, opts,
                 wall, measured.findings + ((found,) if found else ()))


def _quantiles(quantiles: Sequence[float]) -> tuple[float, ...]:
    try:
        asked = tuple(float(q) for q in quantiles)
    except (TypeError, ValueError):
        raise HarnessError(f"quantiles {quantiles!r}: expected numbers from 0 to 1, e.g. "
                           "(0.2, 0.5, 0.8)") from None
    if not asked or any(not 0 <= q <= 1 for q in asked):
        raise HarnessError(f"quantiles {quantiles!r}: expected numbers from 0 to 1, e.g. "
                           "(0.2, 0.5, 0.8)")
    return asked


def _options(timing: TimingOptions | Mapping[str, Any] | None, options: Mapping[str, Any]
             ) -> TimingOptions:
    """``timing`` with ``options`` over it, checked (an unknown name or a bad value fails)."""
    base = TimingOptions.of(timing)
    return TimingOptions.of({**asdict(base), **options}) if options else base


def _stream(stream: Any):
    """The timer's stream for what ``stream`` names."""
    from harness.gpu.driver import Stream

    if stream is None:
        return Stream.of(0)
    if isinstance(stream, Stream):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        return Stream.of(stream.__cuda_stream__()[1])
    if hasattr(stream, "cuda_stream"):
        return Stream.of(stream.cuda_stream)
    try:
        return Stream.of(stream)
    except (TypeError, ValueError):
        raise HarnessError(f"stream {stream!r}: expected None (the default stream), a "
                           "harness Stream, a CUstream or its address, or an object with "
                           "__cuda_stream__ or cuda_stream") from None
