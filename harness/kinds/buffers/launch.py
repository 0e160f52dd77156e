"""A buffers kernel as ``harness launch`` launches it for a profiler: its dims read from
``--size``, checked once at those dims, then launched between cuProfilerStart and
cuProfilerStop (``harness profile`` runs it under Nsight Compute; notes/buffers_kind.md).
"""

from __future__ import annotations

import time

from harness.errors import HarnessError
from harness.kernels.expr import size_formulas
from harness.kernels.registry import Kernel


def parse_dims(kernel: Kernel, text: str) -> tuple[int, ...]:
    """``--size`` read as ``kernel``'s dims (``"1<<28"``, ``"4096x1024"``), as ``harness run``
    reads it; a GEMM's ``M,N,K`` is refused for the dims it does not fit."""
    dims = kernel.spec.buffers.dims

    def fail(message: str) -> HarnessError:
        gemm = "; M,N,K is a GEMM's size" if "," in str(text) else ""
        return HarnessError(f"{message} (the dims of {kernel.name}{gemm})")

    return tuple(int(e({})) for e in size_formulas(str(text).replace(",", "x"), dims, fail,
                                                   "--size"))


def default_dims(kernel: Kernel) -> tuple[int, ...]:
    """The dims ``kernel`` is launched at without ``--size``: its spec's largest size."""
    return kernel.spec.buffers.default_sizes()[-1]


def launch_buffers(kernel: Kernel, dims: tuple[int, ...], repeats: int, checked: bool = True,
                   gap_ms: float = 0.0) -> Kernel:
    """Launch ``kernel`` at ``dims``: checked once there against its reference first
    (``checked``; a failure is a HarnessError naming its finding), then its inputs drawn and
    its outputs poisoned, one launch outside the profiler range (module load, first touch),
    and ``repeats`` launches inside it. The kernel launched, as loaded."""
    from harness.bench.seeds import derive
    from harness.bench.session import BenchSession
    from harness.gpu.driver import profiler_range
    from harness.kinds.buffers.checks import Battery
    from harness.kinds.buffers.draw import Draws
    from harness.kinds.buffers.measure import Instance, load, size_text
    from harness.kinds.buffers.timed import check_timed_size

    with BenchSession() as session:
        loaded = load(session, kernel)
        draws = Draws(session.stream, session.arch, session.device.sm_count)
        inst = None
        try:
            inst = Instance(session, loaded, draws, dims)
            seed = derive(session.run_seed, loaded.kernel.name, "launch", *dims)
            inst.salt = derive(seed, "salt")
            where = f"{loaded.kernel.name} at {size_text(dims)}"
            if checked:
                found = Battery()
                check_timed_size(inst, seed, found)
                if found.finding != "ok":
                    raise HarnessError(f"{where} fails its check ({found.finding}): "
                                       f"{found.failure}")
            draws.reset(1)
            inst.draw(seed)  # the draw is a kernel of ours: before the range, never in it
            inst.prepare()
            inst.launch()
            session.stream.synchronize(f"{where}, first launch")
            with profiler_range():
                for _ in range(repeats):
                    # memsets (cuMemsetD16/D32, not kernels: ncu profiles none of them), so
                    # that an atomic target starts at zero and an output at its sentinel as
                    # in every timed repetition
                    inst.prepare()
                    inst.launch()
                    if gap_ms:
                        session.stream.synchronize("isolated launch")
                        time.sleep(gap_ms / 1e3)
                session.stream.synchronize(f"{where}, launches")
        finally:
            if inst is not None:
                inst.close()
            draws.close()
            loaded.close()
    return loaded.kernel
