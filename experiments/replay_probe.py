"""Why the cached_replay fixture passed in the suite at 2ee7dad (issue 37, notes/verification.md).

    python3 experiments/replay_probe.py [--size 1024] [--repeat 3] [--after 60 40]
        [--per-compute 3] [--prime-below MS]

The fixture (tests/kernels/adversarial/cached_replay.cu) copies its last output back instead
of computing from its 61st launch on, when launched within 500 us of its last launch's end.
The test times it at 1024 with QUICK timing and expects "replays an earlier result" or "keeps
state between launches"; at 2ee7dad it passed. A pass means either no kept timed repetition
was a replay (the kernel computed in every timed launch: its launch count or the gaps between
its launches kept it from replaying) or the verification missed one. This reads the fixture's
own launch counter after its battery and after the measurement (the timed size's check, the
timing and the check of its kept repetitions), in a session of the worker's kind, and prints
the row the measurement gives with its timing (repetitions, why it stopped, rest, the GPU's
idle time between batches) and how many kept repetitions were checked, so that the two can
be told apart. ``--after`` also tries copies of the fixture with other launch thresholds
(``REPLAY_AFTER``), written to a temporary folder; ``--per-compute`` sets the part of its
window that follows its own computing time (``WINDOW_PER_COMPUTE``; 0: an absolute 500 us, as
before this commit's fixture); ``--prime-below`` another primer threshold (0: no primer, as for
a launch timed above 1 ms). Prints only; a one-off probe.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness.bench.session import BenchSession
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import discover
from harness.kinds.gemm.measure import measure, prepare

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "kernels" / "adversarial"
QUICK = TimingOptions(budget_ms=20, min_ms=5, warmup_ms=5)
"""The timing the adversarial test uses (tests/test_gpu.py)."""


def launches(session: BenchSession, gemm) -> int:
    """The fixture's own count of its launches (a ``__device__`` global of its module)."""
    count = gemm.module.global_buffer("launches").download(np.uint32, (1,), session.stream)
    return int(count[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3, help="fresh sessions to try")
    parser.add_argument("--after", type=int, nargs="+", default=[60],
                        help="REPLAY_AFTER thresholds to try (60: the fixture as it is)")
    parser.add_argument("--per-compute", type=int, default=3,
                        help="WINDOW_PER_COMPUTE (0: an absolute window of 500 us)")
    parser.add_argument("--prime-below", type=float, default=QUICK.prime_below_ms)
    args = parser.parse_args()
    source = (FIXTURE / "cached_replay.cu").read_text().replace(
        "#define WINDOW_PER_COMPUTE 3ull", f"#define WINDOW_PER_COMPUTE {args.per_compute}ull")
    options = replace(QUICK, prime_below_ms=args.prime_below)
    print(f"window 500 us + {args.per_compute}x its computing time, primer below "
          f"{args.prime_below:g} ms")
    for after in args.after:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "cached_replay.cu"
            path.write_text(source.replace("#define REPLAY_AFTER 60u",
                                           f"#define REPLAY_AFTER {after}u"))
            (kernel,) = [k for k in discover([Path(tmp)]) if k.name == "cached_replay"]
            print(f"REPLAY_AFTER {after}")
            probe(kernel, args.size, args.repeat, options)


def probe(kernel, n: int, repeat: int, options: TimingOptions) -> None:
    """The fixture measured at ``n`` in ``repeat`` fresh sessions, its launch count beside."""
    for attempt in range(repeat):
        with BenchSession(options) as session:
            prep = prepare(session, kernel)
            after_battery = launches(session, prep.gemm)
            res = measure(session, prep, n, n, n)
            after_timing = launches(session, prep.gemm)
            took = prep.gemm.module.global_buffer("compute_ns").download(
                np.uint64, (1,), session.stream)
            print(f"  its last computing launch took {int(took[0]) / 1e3:.1f} us")
            t = res.timing
            print(f"session {attempt + 1}: launches after the battery {after_battery}, after "
                  f"the timing {after_timing}; row {res.status}: {res.message[:300]}")
            if t is not None:
                print(f"  timed {t.reps} repetitions ({t.stop}), median {t.median_ms * 1e3:.1f} "
                      f"us, p20-p80 {t.p20_ms * 1e3:.1f}-{t.p80_ms * 1e3:.1f} us, rest {t.rest}, "
                      f"warm-up {t.warmup_ms:.1f} ms, queue ahead {t.queue_ahead_ms:.3f} ms")
            if res.checks is not None:
                print(f"  checks: {res.checks.passed} of {res.checks.total} passed, timed "
                      f"repetitions checked {res.checks.timed_checked} of "
                      f"{res.checks.launches} launches; finding {res.checks.finding}")


if __name__ == "__main__":
    main()
