"""The timer's own kernels, compiled for the current device the first time they are needed:
an empty launch, a ``%globaltimer`` spin, a spin that keeps the span it measured of itself
(the launch overhead's calibration), and a gate: a spin that ends when the host opens it
(gate.py)."""

from __future__ import annotations

import ctypes

import numpy as np

from harness.gpu import own_kernels
from harness.gpu.driver import LaunchShape, Stream

REST_SLOTS = 256
"""Launches of a round whose rests are read from the device (:meth:`TimerKernels.rest`): a
round's rests follow its launches' times at the warmed clock, known only after its batches
may have been captured (sustained.py)."""
CALIBRATION_SLOTS = 8192
"""Calibration spins whose spans are kept (a ring; the mean is over those written)."""
_TIMER_SOURCE = rb"""
// the span each calibration spin measured of itself, in its own slot: one store after the
// spin, as the known-duration spin has (with a read-modify-write of two counters after it,
// hot 2 and 5 us spins read 0.32-0.35 us short; notes/timing.md)
__device__ unsigned long long calibration_spans[SLOTS];
// each launch's rest (ns) by its place in a round, written before the rounds run
__device__ unsigned long long rest_ns[RESTS];
extern "C" __global__ void empty() {}
__device__ unsigned long long spin_for(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
    return t - t0;
}
extern "C" __global__ void spin(unsigned long long ns) { spin_for(ns); }
extern "C" __global__ void rest(unsigned int slot) {  // its read of the slot inside the spin
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const unsigned long long ns = rest_ns[slot];
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
extern "C" __global__ void calibration_spin(unsigned long long ns, unsigned int slot) {
    calibration_spans[slot] = spin_for(ns);
}
// spins until the host writes ``token`` (or a later one) into its mapped word, at most ``ns``
extern "C" __global__ void gate(const unsigned int* word, unsigned int token,
                                unsigned long long ns) {
    unsigned long long t0, t;
    unsigned int seen;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("ld.relaxed.sys.u32 %0, [%1];" : "=r"(seen) : "l"(word) : "memory");
        if ((int)(seen - token) >= 0) return;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}
""".replace(b"SLOTS", str(CALIBRATION_SLOTS).encode()).replace(b"RESTS",
                                                               str(REST_SLOTS).encode())
SOURCE = own_kernels.Source(_TIMER_SOURCE, "timer_kernels.cu", "the timer's kernels")


class TimerKernels:
    """The one-thread kernels the timer launches (compiled for the current device): ``empty``
    (a launch with no work in it), ``spin`` (GPU time with no memory traffic, timed on
    ``%globaltimer``: the work queued ahead of a timed launch so that it
    never waits on the host), ``calibration_spin`` (a spin that keeps the span it measured
    of itself, for the launch overhead's calibration in every round), ``rest`` (a spin as long
    as its slot says) and ``gate`` (a spin the host ends)."""

    def __init__(self, stream: Stream):
        self.module = own_kernels.module(SOURCE, "timer kernels")
        self.stream = stream
        self._empty, self._spin = self.module.function("empty"), self.module.function("spin")
        self._calibration = self.module.function("calibration_spin")
        self._gate = self.module.function("gate")
        self._rest = self.module.function("rest")
        self._rests = self.module.global_buffer("rest_ns")
        self._spans = self.module.global_buffer("calibration_spans")
        self._slot = 0
        self._one = LaunchShape((1, 1, 1), (1, 1, 1), 0)
        self._written_ns = np.zeros(0, dtype=np.uint64)
        """The rests last written (``set_rests``), to set the device's against."""
        self._spin_ns = 0
        """The length of the calibration spins since the last reset."""

    def empty(self) -> None:
        self._empty.launch(self._one, self.stream, ())

    def spin(self, ms: float) -> None:
        self._spin.launch(self._one, self.stream, (ctypes.c_uint64(int(ms * 1e6)),))

    def rest(self, slot: int, ms: float) -> None:
        """The rest of the round's launch ``slot``: a spin as long as :meth:`set_rests` last
        wrote there when it runs (``ms`` where the round has more launches than slots)."""
        if slot >= REST_SLOTS:
            self.spin(ms)
        else:
            self._rest.launch(self._one, self.stream, (ctypes.c_uint32(slot),))

    def set_rests(self, rests_ms) -> None:
        """Each launch's rest, by its place in a round, for the rests enqueued or replayed
        from now on (waits for the stream)."""
        ns = np.array([int(ms * 1e6) for ms in list(rests_ms)[:REST_SLOTS]], dtype=np.uint64)
        if ns.size:
            self._rests.upload_at(ns, 0, self.stream)
        self._written_ns = ns

    def lead(self, ms: float) -> None:
        """A spin ahead of work the host enqueues behind it, so that the GPU does not wait on
        the host (sustained.alone_ms); not a launch's rest."""
        self.spin(ms)

    def gate(self, word_address: int, token: int, most_ms: float) -> None:
        """A spin until the word at ``word_address`` (host memory the device reads) holds
        ``token`` or a later one, at most ``most_ms`` (gate.Gate)."""
        self._gate.launch(self._one, self.stream, (
            ctypes.c_uint64(word_address), ctypes.c_uint32(token & 0xFFFFFFFF),
            ctypes.c_uint64(int(most_ms * 1e6))))

    def calibration_spin(self, ms: float) -> None:
        """A spin that keeps the span it measured of itself, each launch in the next slot
        (captured in a graph, a launch keeps its slot on every replay)."""
        slot = ctypes.c_uint32(self._slot % CALIBRATION_SLOTS)
        self._slot += 1
        self._spin_ns = int(ms * 1e6)
        self._calibration.launch(self._one, self.stream,
                                 (ctypes.c_uint64(int(ms * 1e6)), slot))

    def reset_calibration_spins(self) -> None:
        """Forget the calibration spins' spans (enqueued on the stream)."""
        self._spans.fill_u32(0, self.stream)
        self._slot = 0
        self._spin_ns = 0

    def calibration_spin_mean_ms(self) -> float:
        """The mean span the calibration spins since the last reset measured of themselves
        (after the stream's work); 0 when none ran."""
        spans = self._spans.download(np.uint64, (CALIBRATION_SLOTS,), self.stream)
        written = spans[spans > 0]
        return float(written.mean()) / 1e6 if written.size else 0.0

    def state_findings(self) -> list[str]:
        """After a timing (the stream's work done): what changed in the timer's device state
        under it (timing.account: the rests against those written, the calibration spans
        against the spins' length). Two reads of a few KB: about 50 us of host time."""
        from harness.gpu.timing import account

        found = []
        if self._written_ns.size:
            held = self._rests.download_at(0, np.uint64, self._written_ns.size, self.stream)
            found.append(account.rests_changed([int(x) for x in self._written_ns],
                                               [int(x) for x in held]))
        if self._spin_ns:
            spans = self._spans.download(np.uint64, (CALIBRATION_SLOTS,), self.stream)
            found.append(account.spans_changed([int(x) for x in spans],
                                               min(self._slot, CALIBRATION_SLOTS), self._spin_ns))
        return [f for f in found if f]
