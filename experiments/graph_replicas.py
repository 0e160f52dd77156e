"""A batch of timed rounds captured once and instantiated three times (issue 37, a probe).

    python3 experiments/graph_replicas.py [KERNEL] [--size 512] [--rounds 80]

The sustained timer captured three graphs of a batch each (sustained.Batches: a finished
batch's events are read before its graph runs again), at about half a millisecond of host
time per round and graph (0.47 ms, the median of 79 timings in timing-trace-b7d688f.txt.gz);
since each launch's rest is its own time (6b5f97c), a batch at 512 holds some 80 rounds, and
the three captures cost about as much host time as the batch's GPU time.
This times, for one kernel's round as a run enqueues it (experiments/round_cost.py):

- three captures and instantiations, as before (and still for batches under 16 rounds);
- one capture, instantiated three times, each copy's event record nodes pointed at events of
  its own (harness.gpu.graph.Graph's ``retargets``: ``cuGraphExecEventRecordNodeSetEvent``),
  as the timer now makes a batch of whole cycles;

then replays each copy and checks that its own events were recorded, with plausible times,
and that the others' were not moved. Prints only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.gpu.driver import Event
from harness.gpu.graph import Graph
from harness.kernels.registry import discover, select
from harness.kinds.gemm.launches import kernel_timed
from harness.kinds.gemm.measure import checked, prepare
from harness.kinds.gemm.session import GemmSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from round_cost import one_round  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", nargs="?", default="15_wgmma_tma_bf16:m128n256")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=80)
    args = parser.parse_args()
    with GemmSession.open() as session:
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

        def events(k: int) -> list[Event]:
            return [e for r in sets[k] for pair in r for e in pair]

        moved = [dict(zip(events(0), events(k), strict=True)) for k in (1, 2)]
        first = Graph(stream, lambda: enqueue(sets[0]), "one capture", retargets=moved)
        once_ms = (time.perf_counter() - t0) * 1e3
        execs = [first, *first.replicas]
        nodes = len(moved[0])
        print(f"{kernel.name} at {args.size}, {args.rounds} rounds a batch, "
              f"{nodes} event records a batch")
        print(f"  three captures and instantiations: {three_ms:.1f} ms of host time")
        print(f"  one capture, instantiated three times, two copies' events moved "
              f"(harness.gpu.graph.Graph's replicas): {once_ms:.1f} ms")
        for k, exe in enumerate(execs):
            exe.launch(stream)
            stream.synchronize("replica")
            own = [end.elapsed_ms(start) for r in sets[k] for start, end in r]
            print(f"  copy {k}: its {len(own)} launches read {min(own) * 1e3:.2f}-"
                  f"{max(own) * 1e3:.2f} us; the batch took "
                  f"{sets[k][-1][-1][1].elapsed_ms(sets[k][0][0][0]):.2f} ms")
            if k:  # the first copy's events still hold what its own replay recorded
                still_ms = sets[0][-1][-1][1].elapsed_ms(sets[0][0][0][0])
                print(f"    copy 0's batch still reads {still_ms:.2f} ms")
        first.close()
        outputs.close()
        ops.restore(stream)


if __name__ == "__main__":
    main()
