"""A gate on the timer's stream: a one-thread spin that holds the work enqueued behind it
until the host opens it, so that work timed "with the host out of the way"
(``Timer.host_free_ms``) waits on the host only inside the gate, outside its events, however
slow the host's enqueueing.

A spin of fixed length (a lead) did that only when the host enqueued the work within it: with
the comparisons of earlier sizes holding the interpreter beside it, the 0.5 ms lead was short
and the work timed again behind 2, 8 and 32 ms ones. In a warm default run at 3c94270 the
first launches timed alone took 25-75 ms a timing at 1024 and 2048 against 4-5 ms at 512
(reports/h100/timing-trace-warm-3c94270.txt.gz; issue 37). The gate spins for what the host
takes, once.

The host's word is page-locked memory the device reads over the bus (``ld.relaxed.sys``);
tokens count up (modulo 2^32), and the gate opens on its token or a later one. It gives way
by itself after ``most_ms``: a host that blocks on the device inside the gate (a synchronous
call in a launch's preparation) waits that long, then the gate is off for the timer."""

from __future__ import annotations

import ctypes

from harness.gpu.check import check
from harness.gpu.driver import context_resource, cu
from harness.gpu.timing.kernels import TimerKernels

_FLAGS = 0x1 | 0x2  # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP


class Gate:
    """A word of host memory the device reads, and the gate kernel that waits on it."""

    def __init__(self, kernels: TimerKernels):
        self.kernels = kernels
        self._host = check(cu.cuMemHostAlloc(4, _FLAGS), "cuMemHostAlloc", "the timer's gate")
        self._free = context_resource(self, cu.cuMemFreeHost, self._host)
        self._device = int(check(cu.cuMemHostGetDevicePointer(self._host, 0),
                                 "cuMemHostGetDevicePointer", "the timer's gate"))
        self._word = ctypes.c_uint32.from_address(int(self._host))
        self._word.value = 0
        self._token = 0

    def close(self, most_ms: float) -> int:
        """Enqueue a gate that holds the stream until :meth:`open` gets its token (at most
        ``most_ms``); the token."""
        self._token = (self._token + 1) & 0xFFFFFFFF
        self.kernels.gate(self._device, self._token, most_ms)
        return self._token

    def open(self, token: int) -> None:
        """Let the work behind the gate of ``token`` (and every one before it) run."""
        self._word.value = token
