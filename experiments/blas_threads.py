"""Does OpenBLAS's own thread pool slow the host's comparisons (issue 37)?

The worker compares on the host with a dozen Python threads at once (chunked.pool, the
battery's, the kept launches'); the FP8 bound's walk calls numpy's matmul (OpenBLAS) in small
pieces from each of them. A sampled warm default run spent 60 s of thread time in the walk
(reports/h100/sampled-warm-aa3caf3.txt.gz), where one core of a development host walks the
battery's largest FP8 shape in 0.3 s. Each setting runs in a process of its own (OpenBLAS reads
its variable when it loads):

    python3 experiments/blas_threads.py            # every setting, one after another
    python3 experiments/blas_threads.py --inner    # this process's setting only
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

SETTINGS = ("", "1")  # OPENBLAS_NUM_THREADS: OpenBLAS's default (every core), and one


def _codes(rng, shape):
    import numpy as np

    x = rng.integers(0, 256, shape, dtype=np.uint8)
    x[(x & 0x7F) == 0x7F] = 0  # no NaN codes
    return x


def inner() -> None:
    import numpy as np

    from harness.bench import threads
    from harness.kinds.gemm.fp8 import check as fp8_check
    from harness.kinds.gemm.numerics import stored

    rng = np.random.default_rng(0)
    fp8 = SimpleNamespace(a="e4m3", b="e4m3", promote=None)

    def battery_check(seed: int) -> float:
        m, n, k = 1999, 4208, 208  # the battery's largest FP8 shape
        a, b = _codes(rng, (m, k)), _codes(rng, (k, n))
        g = fp8_check.Fp8Gemm(a, b, "e4m3", "e4m3", 0.5, 0.25)
        ref = fp8_check.reference(g)
        out = stored(ref.astype(np.float32), "bf16")
        t0 = time.perf_counter()
        result = fp8_check.check(out, a, b, fp8, (0.5, 0.25), "bf16", seed=seed, ref=ref)
        assert result.passed, result.message
        return time.perf_counter() - t0

    def sampled_walk(_: int) -> float:
        # the public walk: its row blocks on the pool (reports/h100/blas-threads-9115ee6.log
        # came from this script at 9115ee6, which timed one block's walk on each thread)
        g = fp8_check.Fp8Gemm(_codes(rng, (256, 4096)), _codes(rng, (4096, 256)), "e4m3",
                              "e4m3", 0.5, 0.25)
        t0 = time.perf_counter()
        fp8_check.walk(g)
        return time.perf_counter() - t0

    def timed(label: str, work) -> None:
        t0 = time.perf_counter()
        parts = work()
        wall = time.perf_counter() - t0
        print(f"  {label}: {wall:.3f} s wall" + (f" (each {min(parts):.3f}-{max(parts):.3f} s)"
                                                 if parts else ""), flush=True)

    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}, "
          f"host threads {threads.host_threads()}", flush=True)
    battery_check(0)  # warm: pools, pages
    timed("one battery check, 1999 x 4208 x 208 (row blocks on the pool)",
          lambda: [battery_check(1)])
    with ThreadPoolExecutor(4) as four:
        timed("four such checks at once (the battery's four threads)",
              lambda: list(four.map(battery_check, range(4))))
    with ThreadPoolExecutor(16) as sixteen:
        timed("16 sampled walks, 256 x 256 x 4096, at once (a size's kept launches)",
              lambda: list(sixteen.map(sampled_walk, range(16))))
    a, b = rng.standard_normal((1999, 208)), rng.standard_normal((208, 4208))
    t0 = time.perf_counter()
    for _ in range(5):
        a @ b
    print(f"  float64 product 1999 x 208 x 4208 (a host reference): "
          f"{(time.perf_counter() - t0) / 5 * 1e3:.1f} ms", flush=True)


def main() -> int:
    if "--inner" in sys.argv:
        inner()
        return 0
    for setting in SETTINGS:
        env = dict(os.environ)
        env.pop("OPENBLAS_NUM_THREADS", None)
        if setting:
            env["OPENBLAS_NUM_THREADS"] = setting
        subprocess.run([sys.executable, __file__, "--inner"], env=env, check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
