"""The GEMM kind's part of reports: the lines a run report says about GEMM rows (the
baseline, the ceiling, the kernels in their own signatures) and its tables (report/tables.py's
columns)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.bench.result import Result
from harness.kinds.gemm.session import BASELINE_PLACEMENTS
from harness.report import tables


def report_notes(results: Sequence[Result]) -> list[str]:
    """The header lines of a run report's GEMM rows."""
    fp8 = any(r.kernel.precision == "fp8" for r in results)
    return ["- baseline: cuBLAS `cublasGemmEx` on the same buffers (where A, B and C take at "
            f"most 64 MiB, on them and {BASELINE_PLACEMENTS - 1} copies elsewhere in memory, "
            "one per round in turn), timed by the same code in the same rounds as the kernel; "
            "compute type per row in the JSON (`baseline.compute`)"
            + ("; FP8 rows: cuBLASLt `cublasLtMatmul` with the same scales (per tensor), A and "
               "B K-major (TN), the same output type" if fp8 else ""),
            *_ceiling_note(results), *_signature_lines(results)]


def table(results: Sequence[Result], *, mode: str = "run", fmt: str = "github",
          wide: bool = False, width: int | None = None, console: bool = False,
          drop: tuple[str, ...] = ()) -> str:
    """GEMM rows as a table (Kind.table)."""
    if mode in ("compare", "side"):
        if console and not wide:
            return tables.compare_table(results, fmt="simple", width=width)
        return tables.compare_table(results, fmt="github" if fmt == "simple" else fmt)
    if mode == "check":
        return tables.check_table(results, fmt=fmt)
    columns = tables.columns_without(*drop) if drop else tables.RUN_COLUMNS
    if console:
        return tables.console_table(results, columns, wide=wide)
    return tables.table(results, columns, fmt=fmt)


def _signature_lines(results: Sequence[Result]) -> list[str]:
    """One header line per kernel that does not take the common ABI or row-major operands:
    its declared signature and its layouts (issue 22)."""
    seen: dict[str, str] = {}
    for r in results:
        info = r.kernel
        attributes = info.launch_attributes
        if (info.signature or (info.layouts and info.layouts != "A row, B row, C row")
                or attributes) and info.name not in seen:
            seen[info.name] = (f"- {info.name}: `({info.signature or 'the common ABI'})`; "
                               f"{info.layouts}" + (f"; launched with {attributes}"
                                                    if attributes else ""))
    return (["- kernels in their own signatures or launch attributes (parameters in order; "
             "layouts; attributes):", *seen.values()] if seen else [])


def _ceiling_note(results: Sequence[Result]) -> list[str]:
    """The header line that says what % ceiling is measured against, where results have it."""
    seen = {}
    for r in results:
        if r.ceiling is not None:
            seen.setdefault((r.kernel.precision, r.ceiling.instruction), r.ceiling)
    if not seen:
        return []
    each = "; ".join(f"{p} {c.gflops:.0f} GFLOP/s (`{c.instruction}`, SM "
                     f"{tables.cell('', c.sm_clock_mhz)} MHz)" for (p, _), c in seen.items())
    return [f"- % ceiling: of the issue ceiling of the instruction the kernel uses (mma.sync "
            f"or wgmma), measured in the same worker (`harness ceiling`): {each}"]
