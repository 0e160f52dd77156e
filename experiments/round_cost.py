"""What one timed round costs the GPU, piece by piece (issue 37).

    python3 experiments/round_cost.py [KERNEL ...] [--sizes 512 1024]

A default run's trace (HARNESS_TIMING_TRACE) read 0.7 ms of GPU time per round of a tensor-core
kernel at 512 (its kernel 8 us, cuBLAS 3 us, three L2 flushes of 35 us), and about 0.6 ms more
per round than its launches, rests and flushes add up to at every size. This times, in CUDA
graphs of many calls each (GPU time per call, the host out of the way), every piece a round of
a run enqueues (the kernel over its placements with its fresh inputs, primer and kept output;
cuBLAS with its primer and poison; the empty calibration kernel; the flushes; the event
records), then whole rounds with one piece left out at a time. Prints only; a one-off probe.
"""

from __future__ import annotations

import argparse

from harness.gpu.driver import Event
from harness.gpu.graph import Graph
from harness.kernels.registry import discover, select
from harness.kinds.gemm.launches import kernel_timed
from harness.kinds.gemm.measure import checked, prepare
from harness.kinds.gemm.session import GemmSession

CALLS = 100


def per_call_us(session: GemmSession, work, calls: int = CALLS) -> float:
    """GPU microseconds per call of ``work``, replayed from a graph of ``calls`` calls."""
    graph = Graph(session.stream, lambda: [work() for _ in range(calls)], "round cost")
    try:
        session.timer.cost(lambda: graph.launch(session.stream), 1)
        return 1e3 * min(session.timer.cost(lambda: graph.launch(session.stream), 1)[0]
                         for _ in range(3)) / calls
    finally:
        graph.close()


def one_round(timer, stream, slots, events, skip: str) -> None:
    """A round as the timer enqueues it (batches.Batches), less the pieces ``skip`` names."""
    for (run, primer, prep, after), (start, end) in zip(slots, events, strict=True):
        if skip != "primers":
            primer()
        if prep is not None and skip != "befores":
            prep()
        if skip != "flushes":
            timer.flush()
        if skip != "events":
            start.record(stream, True)
        run()
        if skip != "events":
            end.record(stream, True)
        if after is not None and skip != "afters":
            after()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", default=["15_wgmma_tma_bf16:m128n256",
                                                       "07_vectorized"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512, 1024])
    args = parser.parse_args()
    with GemmSession.open() as session:
        timer, stream = session.timer, session.stream
        print(f"one L2 flush: {per_call_us(session, timer.flush, 20):.1f} us; "
              f"empty kernel {per_call_us(session, timer.kernels.empty):.1f} us")
        e1, e2 = Event(), Event()

        def records() -> None:
            e1.record(stream, True)
            e2.record(stream, True)

        print(f"two event records: {per_call_us(session, records):.1f} us")
        for kernel in select(discover(), args.kernels):
            prep = prepare(session, kernel)
            for n in args.sizes:
                _, ready = checked(session, prep, n, n, n)
                ops = ready.ops
                for copies in (session.placements(prep.kernel, ops), [ops]):
                    outputs = session.timed_outputs(prep.kernel, copies)
                    launch, before = kernel_timed(prep.gemm, ops, session, copies, outputs)
                    blas, poison = session.baseline_timed(prep.kernel, ops, copies)
                    blas_prime = getattr(blas, "prime", blas)
                    parts = {
                        "kernel": launch, "kernel primer": launch.prime,
                        "kernel before (draws, poison)": before,
                        "kernel after (keep, verify)": launch.after,
                        "cuBLAS": blas, "cuBLAS primer": blas_prime, "cuBLAS poison": poison,
                    }
                    where = f"{kernel.name} {n}, {len(copies)} placement(s)"
                    for name, work in parts.items():
                        print(f"  {where}: {name}: {per_call_us(session, work):.1f} us")
                    slots = ((launch, launch.prime, before, launch.after),
                             (blas, blas_prime, poison, None),
                             (timer.kernels.empty, timer.kernels.empty, None, None))
                    events = [(Event(), Event()) for _ in slots]

                    def round_(skip: str = "", slots=slots, events=events) -> None:
                        one_round(timer, stream, slots, events, skip)

                    full = per_call_us(session, round_, 50)
                    print(f"  {where}: whole round {full:.1f} us")
                    for skip in ("primers", "befores", "flushes", "events", "afters"):
                        less = per_call_us(session, lambda s=skip: round_(s), 50)
                        print(f"  {where}: round without {skip}: {less:.1f} us "
                              f"({full - less:.1f} us less)")
                    outputs.close()
                    for each in dict.fromkeys(copies):
                        each.restore(stream)


if __name__ == "__main__":
    main()
