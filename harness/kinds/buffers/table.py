"""The table of buffers kernels' results (notes/buffers_kind.md): GB/s of their compulsory
bytes, in % of the memory ceiling measured in the same run, of the DRAM peak and of their
baseline; GEMM rows keep tables.py's columns."""

from __future__ import annotations

from collections.abc import Sequence

from harness.bench.result import BUFFERS, Result
from harness.report.tables import Column, console_table, table

MEMORY_COLUMNS: tuple[Column, ...] = (
    Column("kernel", "kernel", lambda r: r.kernel.name),
    Column("dims", "size", lambda r: "x".join(str(v) for v in r.memory.dims.values())
           if r.memory else "x".join(map(str, r.size))),
    Column("precision", "type", lambda r: r.kernel.precision),
    Column("gbps", "GB/s", lambda r: r.gbps),
    Column("baseline_gbps", "baseline GB/s", lambda r: r.baseline_gbps),
    Column("pct_baseline", "% baseline", lambda r: r.pct_baseline),
    Column("pct_ceiling", "% ceiling", lambda r: r.pct_copy),
    Column("pct_peak", "% DRAM peak", lambda r: r.pct_peak),
    Column("ceiling_gbps", "ceiling GB/s", lambda r: r.memory.ceiling_gbps if r.memory else None),
    Column("sm_clock_mhz", "SM MHz", lambda r: r.timing.sm_clock_mhz if r.timing else None),
    Column("registers", "regs", lambda r: r.resources.registers if r.resources else None),
    Column("max_rel_err", "err/bound",
           lambda r: r.checks.max_rel_err if r.checks else None),
    Column("timed_checked", "timed kept",
           lambda r: r.checks.timed_checked or None if r.checks else None,
           only_when_present=True),
    Column("baseline", "baseline", lambda r: r.baseline.library if r.baseline else None,
           only_when_present=True),
    Column("bytes_source", "bytes",
           lambda r: r.memory.bytes_source if r.memory and r.memory.bytes_source != "buffers"
           else None, only_when_present=True),
    Column("status", "status", lambda r: r.status),
)
NARROW = ("kernel", "dims", "precision", "gbps", "pct_baseline", "pct_ceiling", "pct_peak",
          "registers", "status")


def is_memory(result: Result) -> bool:
    """Whether ``result`` is a buffers kernel's row (measured or not)."""
    return result.memory is not None or result.kernel.signature.startswith(BUFFERS)


SPEEDUP = Column("speedup", "x first",
                 lambda r: (f"{r.comparison.speedup:.3f} ({r.comparison.speedup_p20:.3f}-"
                            f"{r.comparison.speedup_p80:.3f})" if r.comparison else None),
                 only_when_present=True)
"""A compare row's speedup over the first kernel: the median of the per-round ratios and
their p20-p80."""
COMPARE_COLUMNS = (*MEMORY_COLUMNS[:4], SPEEDUP, *MEMORY_COLUMNS[4:])


def split(results: Sequence[Result]) -> tuple[list[Result], list[Result]]:
    """``results`` as GEMM rows and buffers kernels' rows, each in order."""
    return ([r for r in results if not is_memory(r)], [r for r in results if is_memory(r)])


def memory_console_table(results: Sequence[Result], wide: bool = False,
                         compare: bool = False) -> str:
    """Buffers kernels' rows as the terminal shows them (``wide``: every column;
    ``compare``: with each row's speedup over the first kernel)."""
    columns = COMPARE_COLUMNS if compare else MEMORY_COLUMNS
    keys = (*NARROW[:4], "speedup", *NARROW[4:]) if compare else NARROW
    return console_table(results, columns, wide=wide, keys=keys)


def memory_markdown(results: Sequence[Result]) -> str:
    return table(results, MEMORY_COLUMNS, fmt="github")


def report_notes(results: Sequence[Result]) -> list[str]:
    """What a buffers kernel's row is measured against (notes/buffers_kind.md)."""
    measured = next((r.memory for r in results if r.memory is not None), None)
    if measured is None:
        return []
    return [f"- buffers kernels: GB/s of the compulsory bytes their spec declares; % of "
            f"ceiling: of the memory ceiling measured in this run, {measured.ceiling_gbps:.0f} "
            f"GB/s, the faster of a device-to-device copy ({measured.copy_gbps:.0f} GB/s, "
            "2 x its bytes) and a streaming read of ours, 2 GiB each, cold L2; % of DRAM "
            f"peak: of {measured.dram_peak_gbps:.0f} GB/s (memory clock x bus width); % of "
            "baseline: the baseline's time over the kernel's, timed in the same rounds "
            "(`baseline.library` per row in the JSON)",
            "- kernels' parameters (buffers and dims, in order): " + "; ".join(
                dict.fromkeys(f"{r.kernel.name} `({r.kernel.signature.removeprefix('buffers: ')})`"
                              for r in results))]


def kind_table(results: Sequence[Result], *, mode: str = "run", fmt: str = "github",
               wide: bool = False, width: int | None = None, console: bool = False,
               drop: tuple[str, ...] = ()) -> str:
    """Buffers kernels' rows as a table (Kind.table)."""
    if console:
        return memory_console_table(results, wide, compare=mode == "compare")
    if mode == "side":
        return table(results, COMPARE_COLUMNS[:5], fmt=fmt)
    return table(results, COMPARE_COLUMNS if mode == "compare" else MEMORY_COLUMNS, fmt=fmt)
