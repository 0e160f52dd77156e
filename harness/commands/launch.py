"""``harness launch``: a kernel checked, then launched (and cuBLAS beside it) a few times
between cuProfilerStart and cuProfilerStop, for a profiler started with ``--profile-from-start
off`` (Nsight Compute under ``harness profile``). A buffers kernel is launched at its dims,
alone (kinds/buffers/launch.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.commands.params import with_knobs
from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.knobs import GAP_MS, REPEATS, check_knobs, knob


@dataclass(frozen=True)
class LaunchOptions:
    """How ``harness launch`` launches; checked when made."""

    size: tuple[int, ...] = (4096, 4096, 4096)
    """``--size``: a GEMM's M, N, K; a buffers kernel's dims, in its spec's order."""
    setting: dict[str, int] = field(default_factory=dict)
    """``--param NAME=VALUE``: parameters set (the launches are then unchecked)."""
    repeats: int = knob(5, REPEATS)
    baseline: bool = True
    """cuBLAS launched too (``--no-baseline`` leaves it out); never beside a buffers kernel."""
    gap_ms: float = knob(0.0, GAP_MS)
    """A synchronise and a sleep between launches (isolated launches); 0, back to back."""

    def __post_init__(self) -> None:
        check_knobs(self)


def kernel_for(kernel: Kernel, options: LaunchOptions) -> Kernel:
    """``kernel`` with ``options.setting`` (an unknown parameter fails here)."""
    return with_knobs(kernel, options.setting) if options.setting else kernel


def launch(kernel: Kernel, options: LaunchOptions) -> Kernel:
    """Launch ``kernel`` (:func:`kernel_for`: checked first unless parameters were set)
    ``repeats`` times, then cuBLAS as often, inside the profiler range; first launches (module
    load, cuBLAS's choice) outside it. The kernel launched, as loaded. A buffers kernel is
    launched at its dims (``options.size``) with no baseline."""
    import time

    if kernel.spec.kind == "buffers":
        from harness.kinds.buffers.launch import launch_buffers

        return launch_buffers(kernel, tuple(options.size), options.repeats,
                              checked=not options.setting, gap_ms=options.gap_ms)

    from harness.bench.session import BenchSession
    from harness.gpu.driver import profiler_range
    from harness.kinds.gemm.checks import check_one
    from harness.kinds.gemm.launches import launcher

    m, n, k = options.size
    with BenchSession() as session:
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
