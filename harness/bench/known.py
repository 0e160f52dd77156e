"""Kernels of known duration, to prove the timer: a single thread that spins on ``%globaltimer``
for a requested time, and a copy of known bytes.

A kernel's duration is what it measures of itself: for the spin ``%globaltimer`` at exit
minus at entry, for the copy (many blocks) the last block's end minus the first block's start,
from one more launch after the timing (after an L2 flush in cold regimes). The timer must read
it within max(2%, 0.3 us) in every regime: cold and hot L2, sustained and isolated.
"""

from __future__ import annotations

import ctypes
from dataclasses import asdict, dataclass

import numpy as np

from harness.errors import CompileError
from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, Function, LaunchShape, Stream
from harness.gpu.timing import Timer, Timing

SOURCE = r"""
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void spin(unsigned long long ns, unsigned long long* spent) {
    const unsigned long long t0 = now_ns();
    unsigned long long t = t0;
    while (t - t0 < ns) t = now_ns();
    *spent = t - t0;
}

extern "C" __global__ void copy(const float4* src, float4* dst, unsigned long long n,
                                unsigned long long* span) {
    if (threadIdx.x == 0) atomicMin(&span[0], now_ns());  // the first block's start
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        dst[i] = src[i];
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&span[1], now_ns());  // the last block's end
}
"""
SPIN_US = (2.0, 5.0, 20.0, 200.0)
COPY_MB = (256.0,)
TOLERANCE_PCT, TOLERANCE_US = 2.0, 0.3
"""A reading passes within max(2%, 0.3 us) of the expected duration."""


def tolerance_us(expected_us: float) -> float:
    return max(TOLERANCE_PCT / 100 * expected_us, TOLERANCE_US)


@dataclass(frozen=True)
class KnownRow:
    """One known-duration kernel timed in one regime."""

    kernel: str
    regime: str
    """``cold``/``hot`` L2, ``sustained``/``isolated``."""
    expected_us: float
    measured_us: float
    p20_us: float
    p80_us: float
    reps: int
    queue_ahead_ms: float
    graph: bool

    @property
    def error_us(self) -> float:
        return self.measured_us - self.expected_us

    @property
    def passed(self) -> bool:
        return abs(self.error_us) <= tolerance_us(self.expected_us)

    def to_json(self) -> dict:
        return {**asdict(self), "error_us": self.error_us,
                "tolerance_us": tolerance_us(self.expected_us), "passed": self.passed}


KNOWN_SOURCE = own_kernels.Source(SOURCE.encode(), "known.cu", "harness/bench/known.py's kernels",
                                  ("-std=c++17",))


class KnownKernels:
    """The spin and copy kernels compiled for ``arch`` and loaded."""

    def __init__(self, arch: str, stream: Stream, sm_count: int):
        self.module = own_kernels.module(KNOWN_SOURCE, "known-duration kernels", arch,
                                         CompileError)
        self.stream, self.sm_count = stream, sm_count
        self.spent = Buffer(8)
        self.span = Buffer(16)

    def spin(self, us: float):
        """A launch that spins ``us`` microseconds on one thread."""
        function: Function = self.module.function("spin")
        args = (ctypes.c_uint64(int(us * 1e3)), ctypes.c_uint64(self.spent.address))
        shape = LaunchShape((1, 1, 1), (1, 1, 1), 0)
        return lambda: function.launch(shape, self.stream, args)

    def spent_us(self) -> float:
        """What the last spin measured of itself."""
        return float(self.spent.download(np.uint64, (1,), self.stream)[0]) / 1e3

    def copy(self, mb: float) -> tuple:
        """A launch copying ``mb`` MB between two buffers (kept alive with it)."""
        function: Function = self.module.function("copy")
        n = int(mb * 1e6) // 16
        src, dst = Buffer(n * 16), Buffer(n * 16)
        src.fill_u32(0x3F800000, self.stream)
        args = (ctypes.c_uint64(src.address), ctypes.c_uint64(dst.address), ctypes.c_uint64(n),
                ctypes.c_uint64(self.span.address))
        shape = LaunchShape((4 * self.sm_count, 1, 1), (512, 1, 1), 0)
        return (lambda: function.launch(shape, self.stream, args)), (src, dst)

    def copy_span_us(self, launch, timer: Timer) -> float:
        """One more launch of the copy (after an L2 flush when the timer flushes), and the
        span it measured of itself: the last block's end minus the first block's start."""
        self.span.upload(np.array([np.iinfo(np.uint64).max, 0], dtype=np.uint64), self.stream)
        if timer.options.cold_l2:
            timer.flush()
        launch()
        first, last = self.span.download(np.uint64, (2,), self.stream)
        return float(last - first) / 1e3


def row(kernel: str, regime: str, expected_us: float, t: Timing) -> KnownRow:
    return KnownRow(kernel, regime, expected_us, t.median_ms * 1e3, t.p20_ms * 1e3,
                    t.p80_ms * 1e3, t.reps, t.queue_ahead_ms, t.graph)


def measure(known: KnownKernels, timers: dict[str, Timer]) -> list[KnownRow]:
    """Every known kernel timed by every timer (regime name -> Timer)."""
    rows = []
    for us in SPIN_US:
        launch = known.spin(us)
        for regime, timer in timers.items():
            t = timer.time(launch)
            rows.append(row(f"spin {us:g} us", regime, known.spent_us(), t))
    for mb in COPY_MB:
        launch, _buffers = known.copy(mb)
        for regime, timer in timers.items():
            t = timer.time(launch)
            rows.append(row(f"copy {mb:g} MB", regime, known.copy_span_us(launch, timer), t))
    return rows
