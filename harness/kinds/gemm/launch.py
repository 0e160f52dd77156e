"""A GEMM launched for a profiler (``harness launch``): checked once at its size, then
launched, and cuBLAS beside it, between cuProfilerStart and cuProfilerStop."""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.kinds.gemm.session import GemmSession


def launch_gemm(kernel: Kernel, options: Any) -> Kernel:
    """``kernel`` checked at ``options.size`` (unless ``options.setting`` set parameters),
    then launched ``options.repeats`` times, and cuBLAS as often (``options.baseline``)."""
    import time

    from harness.gpu.driver import profiler_range
    from harness.kinds.gemm.checks import check_one
    from harness.kinds.gemm.launches import launcher

    m, n, k = options.size
    with GemmSession.open() as session:
        gemm = session.load(kernel)
        if not options.setting:
            failed = [r for r in check_one(gemm, session.stream, m, n, k, seed=1)
                      if not r.passed]
            if failed:
                raise HarnessError(f"{kernel.name} fails its check at {m}x{n}x{k}: "
                                   f"{failed[0].message}")
        spec = gemm.kernel.spec
        ops = session.operands(gemm.kernel, m, n, k, seed=1)
        ops.poison_c(session.stream)
        works = [launcher(gemm, ops, session)]
        if options.baseline:
            works.append(lambda: session.blas.gemm(
                spec.precision, m, n, k, 1.0, ops.a.address, ops.b.address, 0.0, ops.out.address,
                spec.layout_b, spec.c_type, layout_a=ops.layout_a, layout_c=ops.layout_c,
                fp8=ops.blas_fp8))
        for work in works:  # first launches (module load, cuBLAS's choice) outside the range
            work()
        session.stream.synchronize("warm-up")
        with profiler_range():
            for work in works:
                for _ in range(options.repeats):
                    work()
                    if options.gap_ms:
                        session.stream.synchronize("isolated launch")
                        time.sleep(options.gap_ms / 1e3)
            session.stream.synchronize("launches")
        ops.close()
    return gemm.kernel
