"""Where a thread's wall time goes: its stack sampled every few milliseconds (issue 37).

cProfile slows Python calls by several times and follows one thread; the default run's wall is
the worker's main thread, which waits on the device, on futures and on other threads. This
samples ``sys._current_frames()`` from a thread of its own and charges each sample's interval to
every function on the main thread's stack (cumulative) and to its innermost frame (own), and
to the innermost project frame under it (where a wait or a library call was made from).

    HARNESS_WORKER_SAMPLE=DIR python3 -m harness run ...   # the worker writes DIR/sampled-PID.txt

A one-off probe: harness/run/worker.py calls :func:`sampled` when the variable is set.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable

INTERVAL_S = 0.002


def _name(code) -> str:
    path = code.co_filename
    cut = path.rfind("/harness/")
    short = path[cut + 1:] if cut >= 0 else path.rsplit("/", 1)[-1]
    return f"{short}:{code.co_name}"


def sampled(run: Callable[[], None], path: str, interval_s: float = INTERVAL_S) -> None:
    """``run()`` on this thread while another samples it; the report written to ``path``."""
    main = threading.get_ident()
    cumulative: Counter[str] = Counter()
    own: Counter[str] = Counter()
    caller: Counter[str] = Counter()
    chains: Counter[str] = Counter()
    others: Counter[str] = Counter()
    done = threading.Event()
    spent = [0.0]

    def sample() -> None:
        last = time.perf_counter()
        while not done.wait(interval_s):
            now = time.perf_counter()
            dt, last = now - last, now
            spent[0] += dt
            names_of = {t.ident: t.name.split("_")[0] for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == threading.get_ident():
                    continue
                names, project, chain = [], "", []
                f = frame
                while f is not None:
                    names.append(_name(f.f_code))
                    if "harness/" in names[-1]:
                        project = project or names[-1]
                        if len(chain) < 3:
                            chain.append(f"{names[-1]}:{f.f_lineno}")
                    f = f.f_back
                if ident != main:
                    if project:
                        others[f"{names_of.get(ident, '?')}: {project}"] += dt
                    continue
                for name in set(names):
                    cumulative[name] += dt
                own[names[0]] += dt
                caller[f"{project} -> {names[0]}"] += dt
                chains[" < ".join(chain)] += dt

    sampler = threading.Thread(target=sample, name="wall-sampler", daemon=True)
    sampler.start()
    try:
        run()
    finally:
        done.set()
        sampler.join()
        lines = [f"main thread sampled every {interval_s * 1e3:g} ms over {spent[0]:.1f} s",
                 "", "cumulative (s): every function on the main thread's stack"]
        lines += [f"{s:8.2f}  {n}" for n, s in cumulative.most_common(90)]
        lines += ["", "own (s): the innermost frame"]
        lines += [f"{s:8.2f}  {n}" for n, s in own.most_common(40)]
        lines += ["", "innermost project frame -> innermost frame (s)"]
        lines += [f"{s:8.2f}  {n}" for n, s in caller.most_common(60)]
        lines += ["", "the three innermost project frames, with their lines (s)"]
        lines += [f"{s:8.2f}  {n}" for n, s in chains.most_common(80)]
        lines += ["", "other threads: name, innermost project frame (s, summed)"]
        lines += [f"{s:8.2f}  {n}" for n, s in others.most_common(40)]
        with open(path, "w") as out:
            out.write("\n".join(lines) + "\n")
