"""A batch of timed rounds captured once and instantiated three times (issue 37, a probe).

    python3 experiments/graph_replicas.py [KERNEL] [--size 512] [--rounds 80]

The sustained timer captures three graphs of a batch each (sustained.Batches: a finished
batch's events are read before its graph runs again), at about a quarter of a millisecond of
host time per round; since each launch's rest is its own time (6b5f97c), a batch at 512 holds
some 80 rounds, and the three captures cost about as much host time as the batch's GPU time.
This times, for one kernel's round as a run enqueues it (experiments/round_cost.py):

- three captures and instantiations, as now;
- one capture, instantiated three times, each copy's event record nodes pointed at events of
  its own (``cuGraphExecEventRecordNodeSetEvent``);

then replays each copy and checks that its own events were recorded, with plausible times,
and that the others' were not moved. Prints only; it uses the driver API directly.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cuda.bindings import driver as cu

from harness.bench.launches import kernel_timed
from harness.bench.measure import checked, prepare
from harness.bench.session import BenchSession
from harness.gpu.check import check
from harness.gpu.driver import Event
from harness.gpu.graph import Graph
from harness.kernels.registry import discover, select

sys.path.insert(0, str(Path(__file__).resolve().parent))
from round_cost import one_round  # noqa: E402


def event_nodes(graph) -> list[tuple[object, int]]:
    """The event record nodes of ``graph`` with the handle of the event each records."""
    _, count = check(cu.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")
    nodes, _ = check(cu.cuGraphGetNodes(graph, count), "cuGraphGetNodes")
    out = []
    for node in nodes:
        kind = check(cu.cuGraphNodeGetType(node), "cuGraphNodeGetType")
        if kind == cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_EVENT_RECORD:
            event = check(cu.cuGraphEventRecordNodeGetEvent(node), "cuGraphEventRecordNodeGetEvent")
            out.append((node, int(event)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", nargs="?", default="15_wgmma_tma_bf16:m128n256")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=80)
    args = parser.parse_args()
    with BenchSession() as session:
        timer, stream = session.timer, session.stream
        (kernel,) = select(discover(), [args.kernel])
        prep = prepare(session, kernel)
        _, ready = checked(session, prep, args.size, args.size, args.size)
        ops = ready.ops
        copies = session.placements(prep.kernel, ops)
        outputs = session.timed_outputs(prep.kernel, copies)
        launch, before = kernel_timed(prep.gemm, ops, session, copies, outputs)
        blas, poison = session.baseline_timed(prep.kernel, ops, copies)
        slots = ((launch, launch.prime, before, launch.after),
                 (blas, getattr(blas, "prime", blas), poison, None),
                 (timer.kernels.empty, timer.kernels.empty, None, None))

        def batch_events():
            return [[(Event(), Event()) for _ in slots] for _ in range(args.rounds)]

        def enqueue(events):
            for round_events in events:
                one_round(timer, stream, slots, round_events, "")

        sets = [batch_events() for _ in range(3)]
        t0 = time.perf_counter()
        graphs = [Graph(stream, lambda e=e: enqueue(e), "three captures") for e in sets]
        three_ms = (time.perf_counter() - t0) * 1e3
        for g in graphs:
            g.close()

        t0 = time.perf_counter()
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        check(cu.cuStreamBeginCapture(stream.handle, mode), "cuStreamBeginCapture")
        enqueue(sets[0])
        graph = check(cu.cuStreamEndCapture(stream.handle), "cuStreamEndCapture")
        captured_ms = (time.perf_counter() - t0) * 1e3
        nodes = event_nodes(graph)
        execs = [check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate") for _ in sets]
        moved = 0
        for k in (1, 2):
            pairs = [e for r in sets[0] for pair in r for e in pair]
            targets = [e for r in sets[k] for pair in r for e in pair]
            where = {int(a.handle): b for a, b in zip(pairs, targets, strict=True)}
            for node, handle in nodes:
                check(cu.cuGraphExecEventRecordNodeSetEvent(execs[k], node, where[handle].handle),
                      "cuGraphExecEventRecordNodeSetEvent")
                moved += 1
        once_ms = (time.perf_counter() - t0) * 1e3
        cu.cuGraphDestroy(graph)
        print(f"{kernel.name} at {args.size}, {args.rounds} rounds a batch, "
              f"{len(nodes)} event nodes a batch")
        print(f"  three captures and instantiations: {three_ms:.1f} ms of host time")
        print(f"  one capture ({captured_ms:.1f} ms), three instantiations and {moved} event "
              f"nodes moved: {once_ms:.1f} ms")
        for k, exe in enumerate(execs):
            check(cu.cuGraphLaunch(exe, stream.handle), "cuGraphLaunch")
            stream.synchronize("replica")
            own = [end.elapsed_ms(start) for r in sets[k] for start, end in r]
            print(f"  copy {k}: its {len(own)} launches read {min(own) * 1e3:.2f}-"
                  f"{max(own) * 1e3:.2f} us; the batch took "
                  f"{sets[k][-1][-1][1].elapsed_ms(sets[k][0][0][0]):.2f} ms")
            if k:  # the first copy's events still hold what its own replay recorded
                first = sets[0][-1][-1][1].elapsed_ms(sets[0][0][0][0])
                print(f"    copy 0's batch still reads {first:.2f} ms")
        for exe in execs:
            cu.cuGraphExecDestroy(exe)
        outputs.close()
        ops.restore(stream)


if __name__ == "__main__":
    main()
