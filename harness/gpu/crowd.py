"""A crowd: blocks that hold part of the GPU's SMs for a while, on a stream of their own, while
a kernel launched behind them runs its blocks on the SMs left, in waves and an order it
does not get on an idle GPU.

The checks launch a kernel behind a crowd before they call two of its launches alike: a kernel
whose result depends on the order its blocks run in (atomics summing floats, a race between
blocks) can give the same bits launch after launch on an idle GPU, or on one time-sliced
between processes (the suite's eight workers on one H100 did at 3b9d0ae, 29 checks running;
notes/buffers_kind.md), and gives other bits when its blocks meet other SMs and waves.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass

from harness.gpu import own_kernels
from harness.gpu.check import check
from harness.gpu.driver import Event, LaunchShape, Stream, cu

_SOURCE = rb"""
__device__ unsigned long long arrived;  // crowd blocks resident so far, over every launch
__device__ unsigned long long released;  // the last crowd the hold let its kernel go behind
__device__ unsigned long long released_ns;  // when
// a memory clobber: without it the compiler may move the crowd's arrival (an atomic) past
// the spin, and the hold sees the crowd only as it leaves (the H200 at b6b79e8)
__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}
// every thread spins, one block to an SM (CROWD_THREADS), until ns after the hold let the
// kernel go behind this crowd (``target``: the blocks launched so far), or at most most_ns
extern "C" __global__ void __launch_bounds__(1024) crowd(unsigned long long ns,
                                                         unsigned long long target,
                                                         unsigned long long most_ns) {
    unsigned long long t0 = now_ns(), t;
    if (threadIdx.x == 0) {
        atomicAdd(&arrived, 1ull);
        __threadfence();
    }
    do {
        t = now_ns();
        if (*(volatile unsigned long long*)&released >= target
            && t - *(volatile unsigned long long*)&released_ns >= ns) break;
    } while (t - t0 < most_ns);
}
// one thread ahead of the kernel on its stream: until every crowd block is resident (at most
// most_ns, then the kernel goes anyway); the crowd's stay counts from here
extern "C" __global__ void hold(unsigned long long target, unsigned long long most_ns) {
    unsigned long long t0 = now_ns();
    while (*(volatile unsigned long long*)&arrived < target && now_ns() - t0 < most_ns) {}
    released_ns = now_ns();
    __threadfence();
    *(volatile unsigned long long*)&released = target;
}
"""
MOST_US = 20_000.0
"""The longest a crowd waits for its kernel, or a kernel for its crowd (a safety: either comes
within tens of microseconds)."""
CROWD_THREADS = 1024
"""A crowd block's threads; one block holds its SM. On an H200 at b6b79e8 a one-thread kernel
of another stream started on no SM that held a crowd block: behind 132 blocks of 1024 threads
(one an SM, where two fit) it waited out the crowd's whole stay; behind one block it started
at once (experiments/crowd_probe.py)."""


@dataclass(frozen=True)
class Press:
    """One perturbed launch: the share of the SMs the crowd fills and how long it stays (us)
    once the kernel behind it may start (every crowd block resident): a launch on another
    stream reached the GPU some 60 us after the crowd's on an H100 (crowd-probe-e6e60ad.log),
    and a stay counted from the crowd's own start had ended by then."""

    share: float
    stay_us: float

    def __post_init__(self):
        if not 0.0 < self.share < 1.0:
            raise ValueError(f"a crowd's share of the SMs must be in (0, 1), not {self.share}")
        if self.stay_us <= 0.0:
            raise ValueError(f"a crowd must stay a while, not {self.stay_us} us")

    def blocks(self, sm_count: int) -> int:
        """One block an SM, on ``share`` of them (the block scheduler spreads a grid of fewer
        blocks than SMs one to an SM)."""
        return max(1, round(self.share * sm_count))

    def __str__(self) -> str:
        return f"{self.share:.0%} of the SMs held for {self.stay_us:g} us"


PRESSES = (Press(0.5, 40.0), Press(0.875, 120.0))
"""The perturbed launches a check makes before it calls launches alike: half the SMs held a
little while (the kernel's first blocks on the other half), and most of them held longer
(its blocks in many waves on few SMs)."""


SOURCE = own_kernels.Source(_SOURCE, "crowd.cu", "the crowd's kernels")


class Crowd:
    """The crowd's kernels compiled for the current device, and its stream."""

    def __init__(self, stream: Stream, sm_count: int):
        self.module = own_kernels.module(SOURCE, "crowd")
        self._crowd, self._hold = self.module.function("crowd"), self.module.function("hold")
        self.stream, self.sm_count = stream, sm_count
        self.side = Stream()
        self._done = Event()
        self.launched = 0
        """Crowd blocks launched so far (what the hold waits to see arrive)."""
        # loaded now (lazy loading would load each on its first launch, the crowd gone by
        # the time the kernel behind it starts)
        self.around(lambda: None, Press(0.01, 1.0))
        self.stream.synchronize("the crowd's first launch")

    def around(self, launch: Callable[[], None], press: Press) -> None:
        """``launch`` (which enqueues on the crowd's stream) behind a crowd pressed as said;
        the stream's later work waits for the crowd to leave."""
        blocks = press.blocks(self.sm_count)
        self.launched += blocks
        target, most = ctypes.c_uint64(self.launched), ctypes.c_uint64(int(MOST_US * 1e3))
        self._crowd.launch(LaunchShape((blocks, 1, 1), (CROWD_THREADS, 1, 1), 0), self.side,
                           (ctypes.c_uint64(int(press.stay_us * 1e3)), target, most))
        self._hold.launch(LaunchShape((1, 1, 1), (1, 1, 1), 0), self.stream, (target, most))
        launch()
        self._done.record(self.side)
        check(cu.cuStreamWaitEvent(self.stream.handle, self._done.handle, 0),
              "cuStreamWaitEvent")
