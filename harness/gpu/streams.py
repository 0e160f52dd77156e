"""Streams and events: a non-blocking stream, a timing event, and a pool of events used
again."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from harness.gpu.check import check
from harness.gpu.context import context_resource
from harness.gpu.devices import cu


class Stream:
    """A non-blocking stream."""

    def __init__(self):
        flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING
        self.handle = check(cu.cuStreamCreate(flags), "cuStreamCreate")
        self._destroy = context_resource(self, cu.cuStreamDestroy, self.handle)

    @classmethod
    def of(cls, handle) -> Stream:
        """A stream something else owns (a CUstream or its address; 0, the legacy default
        stream): never destroyed here."""
        stream = cls.__new__(cls)
        stream.handle = handle if isinstance(handle, cu.CUstream) else cu.CUstream(int(handle))
        stream._destroy = lambda: None
        return stream

    def synchronize(self, context: str = "") -> None:
        check(cu.cuStreamSynchronize(self.handle), "cuStreamSynchronize", context)

    def close(self) -> None:
        self._destroy()


class Event:
    """A timing event."""

    def __init__(self):
        self.handle = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
        self._destroy = context_resource(self, cu.cuEventDestroy, self.handle)

    def record(self, stream: Stream, in_graph: bool = False) -> None:
        """Record on ``stream``; ``in_graph`` while the stream is captured (Graph): a plain
        record there only joins streams inside the capture, an EXTERNAL one becomes an event
        record node, recorded on every replay (and is refused outside a capture)."""
        if in_graph:
            check(cu.cuEventRecordWithFlags(self.handle, stream.handle,
                                            cu.CUevent_record_flags.CU_EVENT_RECORD_EXTERNAL),
                  "cuEventRecordWithFlags")
        else:
            check(cu.cuEventRecord(self.handle, stream.handle), "cuEventRecord")

    def done(self) -> bool:
        (status,) = cu.cuEventQuery(self.handle)
        if status == cu.CUresult.CUDA_ERROR_NOT_READY:
            return False
        check((status,), "cuEventQuery")
        return True

    def elapsed_ms(self, since: Event) -> float:
        return check(cu.cuEventElapsedTime(since.handle, self.handle), "cuEventElapsedTime")


class EventPool:
    """Events made once and used again: a timer's batches of repetitions made and destroyed
    some 77,000 events in a default run, about 1.3 s of its worker's main thread (issue 37).
    An event goes back (``give``) only once no pending work and no live graph records it."""

    def __init__(self):
        self._free: list[Event] = []

    def take(self, make: Callable[[], Event] = Event) -> Event:
        return self._free.pop() if self._free else make()

    def give(self, events: Iterable[Event]) -> None:
        self._free.extend(events)
