"""CUDA graphs: work enqueued on a stream once, captured and instantiated, then replayed as one
launch (the sustained timer's batches, timing/batches.py), and copies of one capture whose event
record nodes point at events of their own."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from harness.gpu.check import check
from harness.gpu.driver import Event, Stream, context_resource, cu

_CAPTURING = threading.local()


def on_replay(hook: Callable[[], None]) -> bool:
    """Inside a graph's capture on this thread: ``hook`` runs at every replay of that graph
    (what a call made then does on the device happens there, not now), and True; else
    False."""
    hooks = getattr(_CAPTURING, "hooks", None)
    if hooks is not None:
        hooks.append(hook)
    return hooks is not None


class Graph:
    """Work enqueued on a stream once, captured (cuStreamBeginCapture .. cuStreamEndCapture)
    and instantiated, then replayed as one launch: a whole batch of timed repetitions costs the
    host one driver call, so no repetition in it can wait on the host.

    ``retargets``: for each, one more instance of the same capture (``replicas``), its event
    record nodes moved from the events recorded while capturing to the events the mapping
    gives for them: what runs is the same, what it records is its own. A capture costs the
    host about half a millisecond per timed round (issue 37); an instance, far less."""

    def __init__(self, stream: Stream, enqueue: Callable[[], None], label: str,
                 retargets: Sequence[Mapping[Event, Event]] = ()):
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(cu.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture", label)
        self._hooks = _CAPTURING.hooks = []
        try:
            enqueue()
        except BaseException:
            cu.cuStreamEndCapture(stream.handle)  # leave the stream usable; the error stands
            raise
        finally:
            _CAPTURING.hooks = None
        graph = check(cu.cuStreamEndCapture(stream.handle), "cuStreamEndCapture", label)
        self.label, self.replicas = label, []
        try:
            self._instantiate(graph)
            if retargets:
                nodes = _event_nodes(graph, label)
                for moved in retargets:
                    by_handle = {int(e.handle): target for e, target in moved.items()}
                    self.replicas.append(self._replica(graph, nodes, by_handle))
        except BaseException:
            self.close()
            raise
        finally:
            cu.cuGraphDestroy(graph)

    def _replica(self, graph, nodes: list[tuple[object, int]],
                 moved: Mapping[int, Event]) -> Graph:
        replica = object.__new__(Graph)
        replica.label, replica.replicas, replica._hooks = self.label, [], self._hooks
        replica._instantiate(graph)
        try:
            for node, event in nodes:
                check(cu.cuGraphExecEventRecordNodeSetEvent(replica.handle, node,
                                                            moved[event].handle),
                      "cuGraphExecEventRecordNodeSetEvent", self.label)
        except BaseException:
            replica.close()
            raise
        return replica

    def _instantiate(self, graph) -> None:
        """This instance of ``graph`` (its handle), destroyed with the context or ``close``."""
        self.handle = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate", self.label)
        self._destroy = context_resource(self, cu.cuGraphExecDestroy, self.handle)

    def launch(self, stream: Stream) -> None:
        check(cu.cuGraphLaunch(self.handle, stream.handle), "cuGraphLaunch", self.label)
        for hook in self._hooks:
            hook()

    def close(self) -> None:
        """This instance and its replicas destroyed (once; later calls do nothing)."""
        for replica in self.replicas:
            replica.close()
        destroy = getattr(self, "_destroy", None)
        if destroy is not None:
            destroy()


def _event_nodes(graph, label: str) -> list[tuple[object, int]]:
    """The event record nodes of ``graph``, each with the handle of the event it records."""
    _, count = check(cu.cuGraphGetNodes(graph, 0), "cuGraphGetNodes", label)
    nodes, _ = check(cu.cuGraphGetNodes(graph, count), "cuGraphGetNodes", label)
    found = []
    for node in nodes:
        kind = check(cu.cuGraphNodeGetType(node), "cuGraphNodeGetType", label)
        if kind == cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EVENT_RECORD:
            event = check(cu.cuGraphEventRecordNodeGetEvent(node),
                          "cuGraphEventRecordNodeGetEvent", label)
            found.append((node, int(event)))
    return found
