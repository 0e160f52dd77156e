"""Tables of results (tabulate), for the terminal and for markdown reports.

Run results render through :data:`RUN_COLUMNS`, each a title and the figure it reads from a
:class:`~harness.bench.result.Result`; offline build rows (dicts) through :data:`BUILD_COLUMNS`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from harness.bench.result import Comparison, OccupancyInfo, Result
from harness.report.width import NAME, TEXT, WIDTH, Fitted, fit_table, fit_text


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    value: Callable[[Result], Any]
    only_when_present: bool = False
    """Shown only when some row has a value (power, % ceiling, notes)."""
    shown_if: Callable[[Sequence[Result]], bool] | None = None
    """Shown only when this says so of the rows (the regime: when some launch was isolated)."""


def _t(result: Result):
    return result.timing


def _b(result: Result):
    return result.baseline.timing if result.baseline else None


def _smem(r: Result) -> str:
    if r.resources is None:
        return ""
    dynamic = r.launch.dynamic_smem_bytes if r.launch else None
    return f"{r.resources.static_smem_bytes}/{'' if dynamic is None else dynamic}"


def _spills(r: Result) -> str:
    if r.resources is None:
        return ""
    return f"{r.resources.spill_store_bytes}/{r.resources.spill_load_bytes}"


def _occ(attr: str):
    return lambda r: getattr(r.occupancy, attr) if r.occupancy else None


RUN_COLUMNS: tuple[Column, ...] = (
    Column("kernel", "kernel", lambda r: r.kernel.name),
    Column("size", "size", lambda r: "x".join(map(str, r.size))),
    Column("precision", "prec", lambda r: r.kernel.computes),
    Column("c_type", "C", lambda r: r.kernel.c_type if r.kernel.c_type != "fp32" else None,
           only_when_present=True),
    Column("gflops", "GFLOP/s", lambda r: r.gflops),
    Column("cublas_gflops", "cuBLAS GFLOP/s", lambda r: r.baseline_gflops),
    Column("pct_cublas", "% cuBLAS", lambda r: r.pct_baseline),
    Column("baseline", "baseline", lambda r: r.baseline.library if r.baseline else None,
           shown_if=lambda rows: baseline_word(rows) == "baseline"),
    Column("pct_peak", "% peak", lambda r: r.pct_peak),
    Column("pct_ceiling", "% ceiling", lambda r: r.pct_ceiling, only_when_present=True),
    Column("sm_clock_mhz", "SM MHz", lambda r: _t(r).sm_clock_mhz if _t(r) else None),
    Column("power_w", "board W", lambda r: _t(r).power_w if _t(r) else None,
           only_when_present=True),
    Column("pj_per_flop", "pJ/FLOP", lambda r: r.pj_per_flop(_t(r)), only_when_present=True),
    Column("cublas_pj_per_flop", "cuBLAS pJ/FLOP", lambda r: r.pj_per_flop(_b(r)),
           only_when_present=True),
    Column("clock_limits", "clock held by", lambda r: _t(r).clock_limits if _t(r) else None,
           only_when_present=True),
    Column("regime", "launches", lambda r: _t(r).regime if _t(r) else None,
           shown_if=lambda rows: any(r.timing and r.timing.regime != "sustained"
                                     for r in rows)),
    Column("registers", "regs", lambda r: r.resources.registers if r.resources else None),
    Column("smem", "smem s/d B", _smem),
    Column("spills", "spill st/ld B", _spills),
    Column("blocks_per_sm", "blocks/SM", _occ("driver_blocks_per_sm")),
    Column("occupancy_pct", "occ %", _occ("occupancy_pct")),
    Column("limiter", "limiter", _occ("limiter")),
    Column("max_rel_err", "max rel err", lambda r: r.checks.max_rel_err if r.checks else None),
    Column("fp32_multiple", "x FP32 err",
           lambda r: r.checks.fp32_multiple if r.checks else None, only_when_present=True),
    Column("timed_checked", "timed kept",
           lambda r: r.checks.timed_checked or None if r.checks else None,
           only_when_present=True),
    Column("status", "status", lambda r: r.status),
    Column("notes", "notes", lambda r: "; ".join(r.checks.notes) if r.checks else None,
           only_when_present=True),
)
_FORMATS = {"max_rel_err": "{:.1e}", "pct_cublas": "{:.1f}", "pct_baseline": "{:.1f}",
            "pct_peak": "{:.1f}",
            "pct_ceiling": "{:.1f}", "occupancy_pct": "{:.1f}", "pj_per_flop": "{:.2f}",
            "cublas_pj_per_flop": "{:.2f}", "fp32_multiple": "{:.1f}x"}


def cell(key: str, value) -> str:
    """A figure as tables show it: floats by their column's format (whole numbers by default),
    nothing for a missing or non-finite one."""
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        return _FORMATS.get(key, "{:.0f}").format(value)
    return value


def _present(value) -> bool:
    return value not in (None, "") and not (isinstance(value, float) and math.isnan(value))


def baselines(results: Sequence[Result]) -> list[str]:
    """The baselines ``results`` were measured against (``baseline.library``), in order."""
    return list(dict.fromkeys(r.baseline.library for r in results if r.baseline))


NAMED = "cuBLAS"
"""The word in RUN_COLUMNS' titles that stands for the rows' baseline."""


def baseline_word(results: Sequence[Result], default: str = NAMED) -> str:
    """What a table's titles call the rows' baseline: its library's name (the first word of
    ``baseline.library``: cuBLAS, cuBLASLt, CUB, ...) where they share one, ``baseline``
    where they differ (a ``baseline`` column names each), ``default`` where none was
    timed."""
    found = {name.split(" ")[0].rstrip(",:;") for name in baselines(results)}
    return found.pop() if len(found) == 1 else "baseline" if found else default


def _titled(results: Sequence[Result], shown: Sequence[Column],
            default: str = NAMED) -> list[Column]:
    """``shown`` with the baseline named in their titles (:func:`baseline_word`)."""
    word = baseline_word(results, default)
    if word == NAMED:
        return list(shown)
    return [dataclasses.replace(c, title=c.title.replace(NAMED, word)) for c in shown]


def _shown(results: Sequence[Result], columns: Sequence[Column]) -> list[Column]:
    return _titled(results, [
        c for c in columns
        if (not c.only_when_present or any(_present(c.value(r)) for r in results))
        and (c.shown_if is None or c.shown_if(results))])


def table(results: Sequence[Result], columns: Sequence[Column] = RUN_COLUMNS,
          fmt: str = "simple") -> str:
    """Every column of ``columns`` that has something to show, at full width (the markdown
    reports' table, and the terminal's with ``--wide``)."""
    shown = _shown(results, columns)
    return tabulate([[cell(c.key, c.value(r)) for c in shown] for r in results],
                    headers=[c.title for c in shown], tablefmt=fmt, disable_numparse=True)


NARROW_KEYS = ("kernel", "size", "precision", "c_type", "gflops", "pct_cublas", "pct_peak",
               "pct_ceiling", "pj_per_flop", "registers", "occupancy_pct", "fp32_multiple",
               "status")
"""The columns a terminal of WIDTH columns shows of a run: what it did and how fast; the rest
(clocks, power, shared memory, spills, limiter, error) are in the JSON and behind ``--wide``."""
_NARROW_TITLES = {"pct_cublas": "% of\ncuBLAS", "pct_baseline": "% of\nbaseline",
                  "pct_peak": "% of\npeak",
                  "pct_ceiling": "% of\nceiling", "pj_per_flop": "pJ/\nFLOP",
                  "occupancy_pct": "occ\n%", "blocks_per_sm": "blocks\n/SM",
                  "max_rel_err": "max rel\nerr", "fp32_multiple": "err x\nFP32"}
WIDE_HINT = "--wide: every column (the JSON has them all)"


def short_size(size: Sequence[int]) -> str:
    """``4096`` for a cube (as --size takes it), else ``MxNxK``."""
    m, n, k = size
    return str(m) if m == n == k else f"{m}x{n}x{k}"


_DROP_FIRST = ("c_type", "registers", "occupancy_pct", "blocks_per_sm", "pj_per_flop",
               "pct_ceiling", "max_rel_err", "precision", "fp32_multiple")
"""The narrow table's columns left out, in this order, where wrapping names is not enough."""


def _narrow(results: Sequence[Result], shown: Sequence[Column], width: int | None,
            fmt: str = "simple") -> Fitted:
    rows = [[short_size(r.size) if c.key == "size" else cell(c.key, c.value(r)) for c in shown]
            for r in results]
    keys = [c.key for c in shown]
    word = baseline_word(results)
    return fit_table([_NARROW_TITLES.get(c.key, c.title).replace(NAMED, word) for c in shown],
                     rows, {0: (NAME, 16)},
                     width, fmt, drop=[keys.index(k) for k in _DROP_FIRST if k in keys])


def notes_lines(results: Sequence[Result]) -> list[str]:
    """The check notes of ``results`` (findings that are not failures), one line per kernel
    and note with the sizes it holds at."""
    sizes: dict[tuple[str, str], list[str]] = {}
    for r in results:
        if r.checks and r.checks.notes:
            sizes.setdefault((r.kernel.name, "; ".join(r.checks.notes)), []).append(
                short_size(r.size))
    return [f"- {name} at {', '.join(at)}: {note}" for (name, note), at in sizes.items()]


def console_table(results: Sequence[Result], columns: Sequence[Column] = RUN_COLUMNS,
                  wide: bool = False, keys: Sequence[str] = NARROW_KEYS,
                  width: int = WIDTH) -> str:
    """A run's results as the terminal shows them: the columns in ``keys`` with kernel names
    wrapped, to fit ``width``, then each kernel's check notes, and which columns ``--wide``
    adds. ``wide``: every column at full width (:func:`table`)."""
    if wide:
        return table(results, columns)
    every = _shown(results, columns)
    fitted = _narrow(results, [c for c in every if c.key in keys], width)
    notes = notes_lines(results)
    lines = [fitted.text, *(["notes:", *notes] if notes else [])]
    more = [*fitted.dropped, *(c.title for c in every if c.key not in keys and c.key != "notes")]
    if more:
        lines.append(f"(--wide adds {', '.join(more)})")
    return "\n".join([fitted.text, fit_text("\n".join(lines[1:]), width)]
                     if len(lines) > 1 else lines)


def columns_without(*keys: str) -> tuple[Column, ...]:
    return tuple(c for c in RUN_COLUMNS if c.key not in keys)


_CHECK_KEYS = ("kernel", "size", "precision", "c_type", "registers", "blocks_per_sm",
               "max_rel_err", "status", "notes")


_CHECKS = Column("checks", "checks passed",
                 lambda r: f"{r.checks.passed}/{r.checks.total}" if r.checks else None)


def check_table(results: Sequence[Result], fmt: str = "simple",
                width: int | None = None) -> str:
    """``harness check``: the checks of each kernel and size, no timing; ``width``: kernel
    names wrapped to fit it, the notes under the table."""
    columns = [c for c in RUN_COLUMNS if c.key in _CHECK_KEYS]
    columns.insert(columns.index(next(c for c in columns if c.key == "status")), _CHECKS)
    if width is None:
        return table(results, columns, fmt)
    fitted = _narrow(results, [c for c in _shown(results, columns) if c.key != "notes"],
                     width, fmt)
    notes = notes_lines(results)
    return fitted.text + (("\n" + fit_text("\n".join(["notes:", *notes]), width))
                          if notes else "")


def failures(results: Sequence[Result], width: int | None = None) -> str:
    """The message of every result that did not pass, one block each; ``width``: its lines
    wrapped to fit."""
    return fit_text("\n".join(f"- {r.kernel.name} {'x'.join(map(str, r.size))}: {r.status}: "
                              f"{r.message}" for r in results if r.status != "pass"), width)


BUILD_COLUMNS = (
    ("kernel", "kernel"), ("arch", "arch"), ("registers", "regs"),
    ("static_smem_bytes", "static smem B"), ("spills", "spill st/ld B"),
    ("block_threads", "threads"), ("dynamic_smem_bytes", "dyn smem B"),
    ("blocks_per_sm", "blocks/SM"), ("occupancy_pct", "occ %"), ("limiter", "limiter"),
)


def build_table(rows: Sequence[dict], fmt: str = "simple", width: int | None = None) -> str:
    """Offline build rows (harness.compiler.offline); ``width``: shared memory and occupancy in
    one column each, names wrapped, to fit it."""
    def value(row: dict, key: str):
        if key == "spills":
            return (f"{row['spill_store_bytes']}/{row['spill_load_bytes']}"
                    if "spill_store_bytes" in row else "")
        return cell(key, row.get(key))

    cells = [[value(r, key) for key, _ in BUILD_COLUMNS] for r in rows]
    if width is None:
        return tabulate(cells, headers=[title for _, title in BUILD_COLUMNS], tablefmt=fmt,
                        disable_numparse=True)

    def both(row: dict, first: str, second: str, form: str) -> str:
        a, b = value(row, first), value(row, second)
        return form.format(a, b) if a != "" or b != "" else ""

    narrow = [[r.get("kernel", ""), value(r, "arch"), value(r, "registers"),
               both(r, "static_smem_bytes", "dynamic_smem_bytes", "{}/{}"), value(r, "spills"),
               value(r, "block_threads"), both(r, "blocks_per_sm", "occupancy_pct", "{} ({}%)"),
               # the limiter in the short words of the titles
               str(value(r, "limiter")).replace("registers", "regs").replace("shared memory",
                                                                             "smem")]
              for r in rows]
    headers = ["kernel", "arch", "regs", "smem B\ns/d", "spill B\nst/ld", "threads",
               "blocks/SM\n(occ)", "limiter"]
    return fit_table(headers, narrow, {0: (NAME, 16), 7: (TEXT, 11)}, width, fmt,
                     drop=[5, 1]).text


COMPARE_SASS = ("FFMA", "LDS", "LDS.128", "LDSM", "HMMA", "HGMMA", "QGMMA", "LDGSTS", "BAR",
                "LDL", "STL")


def _verdict(r: Result) -> str:
    c = r.comparison
    if c is None:
        return ""
    if r.kernel.name == c.compared_to:
        return "reference"
    if c.within_noise:
        return "within noise"
    return "faster" if c.speedup > 1 else "slower"


def _speedup(c: Comparison | None) -> str:
    if c is None:
        return ""
    return f"{c.speedup:.3f} ({c.speedup_p20:.3f}-{c.speedup_p80:.3f})"


def _occupancy(occ: OccupancyInfo | None) -> str:
    if occ is None:
        return ""
    return f"{occ.driver_blocks_per_sm} / {cell('', occ.occupancy_pct)}% ({occ.limiter})"


def compare_table(results: Sequence[Result], fmt: str = "github",
                  width: int | None = None) -> str:
    """``harness compare`` results: speed, speedup over the first with its spread, resources,
    occupancy and the SASS mix; ``width``: two-line titles, names and the longer cells
    wrapped, to fit it."""
    out = []
    ceiling = any(r.pct_ceiling is not None for r in results)
    for r in results:
        size = "x".join(map(str, r.size)) if width is None else short_size(r.size)
        if r.status != "pass":
            out.append([r.kernel.name, size, r.status, *[""] * (7 + ceiling)])
            continue
        mix = r.sass or {}
        out.append([
            r.kernel.name, size, cell("gflops", r.gflops), _speedup(r.comparison), _verdict(r),
            cell("pct_cublas", r.pct_baseline),
            *([cell("pct_ceiling", r.pct_ceiling)] if ceiling else []),
            r.resources.registers if r.resources else "", _smem(r), _occupancy(r.occupancy),
            " ".join(f"{k}:{mix[k]}" for k in COMPARE_SASS if mix.get(k)),
        ])
    word = baseline_word(results)
    headers = ["kernel", "size", "GFLOP/s", "speedup vs first (p20-p80)", "verdict",
               f"% {word}", *(["% ceiling"] if ceiling else []), "regs", "smem s/d B",
               "blocks/SM / occ (limiter)", "SASS mix"]
    if width is None:
        return tabulate(out, headers=headers, tablefmt=fmt, disable_numparse=True)
    narrow = {"speedup vs first (p20-p80)": "speedup vs first\n(p20-p80)",
              f"% {word}": f"% of\n{word}", "% ceiling": "% of\nceiling",
              "smem s/d B": "smem\ns/d B", "blocks/SM / occ (limiter)": "blocks/SM\n/ occ"}
    last = len(headers) - 1
    fitted = fit_table([narrow.get(h, h) for h in headers], out,
                       {3: (TEXT, 13), last - 1: (TEXT, 12), 0: (NAME, 16)}, width, fmt,
                       drop=[last, last - 2, last - 1])
    return fitted.text + (f"\n(--wide adds {', '.join(fitted.dropped)})" if fitted.dropped
                          else "")


def ceiling_table(rows: Sequence[dict], fmt: str = "simple") -> str:
    """``harness ceiling`` rows: the rate, its share of the dense peak at the measured clock,
    and how it was launched."""
    def c(r, key):
        return cell(key, r.get(key))

    out = [[r["precision"], r["instruction"], c(r, "gflops"), c(r, "pct_peak"),
            c(r, "peak_gflops_at_clock"), c(r, "sm_clock_mhz"), c(r, "power_w"),
            c(r, "pj_per_flop"), r.get("clock_limits", ""),
            f"{r['blocks']} x {r['block_threads']}", r["iterations"],
            f"{r['median_ms']:.3f} ({r['p20_ms']:.3f}-{r['p80_ms']:.3f})", r["reps"]]
           for r in rows]
    return tabulate(out, headers=["prec", "instruction", "GFLOP/s", "% peak",
                                  "peak GFLOP/s at clock", "SM MHz", "board W", "pJ/FLOP",
                                  "clock held by", "blocks x threads",
                                  "iterations", "median ms (p20-p80)", "reps"],
                    tablefmt=fmt, disable_numparse=True)
