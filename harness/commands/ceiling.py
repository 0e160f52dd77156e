"""``harness ceiling``: the issue ceiling of ``mma.sync`` (or ``wgmma``) on this GPU, one row
per precision and launch shape, measured in this process (kinds/ceiling/probe.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from harness.gpu.timing import TimingOptions
from harness.kernels.registry import Kernel
from harness.kinds.ceiling.kind import CeilingKind
from harness.kinds.ceiling.probe import CeilingOptions

Say = Callable[[str], None]
KIND = CeilingKind.name
"""The kind of the kernels ``harness ceiling`` measures (its own command)."""


@dataclass(frozen=True)
class CeilingRunOptions:
    """What ``harness ceiling`` measures and how."""

    timing: TimingOptions
    """Hot L2 (the kernels load nothing) and the whole budget spent (``max_rel_se_pct`` 0)."""
    precisions: tuple[str, ...] = ()
    """``--precision``: none, every precision a ceiling kernel of ``family`` covers."""
    family: str = "mma.sync"
    """``--family``: ``mma.sync`` or ``wgmma`` (sm_90a)."""
    launches: tuple[CeilingOptions, ...] = (CeilingOptions(),)
    """One row per precision and launch shape (``--launch-ms``, each ``--blocks-per-sm``)."""


@dataclass
class CeilingRecord:
    """The rows (CeilingResult as dicts, per precision and launch), the GPU's facts, and the
    kernels measured."""

    kernels: list[Kernel]
    rows: list[dict] = field(default_factory=list)
    facts: dict = field(default_factory=dict)


def kernels_for(kernels: Sequence[Kernel], options: CeilingRunOptions
                ) -> tuple[list[str], list[Kernel]]:
    """The precisions measured and the ceiling kernel of each (a precision no kernel of the
    family covers fails here, before a GPU is looked for)."""
    from harness.kinds.ceiling.probe import ceiling_kernel, ceiling_precisions

    precisions = list(options.precisions) or ceiling_precisions(kernels, options.family)
    return precisions, [ceiling_kernel(p, kernels, options.family) for p in precisions]


def measure(kernels: Sequence[Kernel], options: CeilingRunOptions, say: Say) -> CeilingRecord:
    """Every precision's ceiling at every launch shape, in one GPU session."""
    from harness.bench.session import BenchSession
    from harness.kinds.ceiling.probe import measure_ceiling

    precisions, chosen = kernels_for(kernels, options)
    record = CeilingRecord(chosen)
    with BenchSession(options.timing) as session:
        for precision, kernel in zip(precisions, chosen, strict=True):
            for launch in options.launches:
                say(f"measuring the {precision} ceiling ({kernel.name}) on "
                    f"{session.device.name}")
                record.rows.append(asdict(measure_ceiling(session.device, session.timer,
                                                          precision, launch, kernels,
                                                          options.family)))
        record.facts = session.facts()
    return record
