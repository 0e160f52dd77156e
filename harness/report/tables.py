"""Tables of results (tabulate), for the terminal and for markdown reports.

Run results render through :data:`RUN_COLUMNS`, each a title and the figure it reads from a
:class:`~harness.bench.result.Result`; offline build rows (dicts) through :data:`BUILD_COLUMNS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from harness.bench.result import Result


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
    Column("precision", "prec", lambda r: r.kernel.precision),
    Column("c_type", "C", lambda r: r.kernel.c_type if r.kernel.c_type != "fp32" else None,
           only_when_present=True),
    Column("gflops", "GFLOP/s", lambda r: r.gflops),
    Column("cublas_gflops", "cuBLAS GFLOP/s", lambda r: r.baseline_gflops),
    Column("pct_cublas", "% cuBLAS", lambda r: r.pct_baseline),
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
    Column("status", "status", lambda r: r.status),
    Column("notes", "notes", lambda r: "; ".join(r.checks.notes) if r.checks else None,
           only_when_present=True),
)
_FORMATS = {"max_rel_err": "{:.1e}", "pct_cublas": "{:.1f}", "pct_peak": "{:.1f}",
            "pct_ceiling": "{:.1f}", "occupancy_pct": "{:.1f}", "pj_per_flop": "{:.2f}",
            "cublas_pj_per_flop": "{:.2f}"}


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


def table(results: Sequence[Result], columns: Sequence[Column] = RUN_COLUMNS,
          fmt: str = "simple") -> str:
    shown = [c for c in columns
             if (not c.only_when_present or any(_present(c.value(r)) for r in results))
             and (c.shown_if is None or c.shown_if(results))]
    return tabulate([[cell(c.key, c.value(r)) for c in shown] for r in results],
                    headers=[c.title for c in shown], tablefmt=fmt, disable_numparse=True)


def columns_without(*keys: str) -> tuple[Column, ...]:
    return tuple(c for c in RUN_COLUMNS if c.key not in keys)


_CHECK_KEYS = ("kernel", "size", "precision", "c_type", "registers", "blocks_per_sm",
               "max_rel_err", "status", "notes")


_CHECKS = Column("checks", "checks passed",
                 lambda r: f"{r.checks.passed}/{r.checks.total}" if r.checks else None)


def check_table(results: Sequence[Result], fmt: str = "simple") -> str:
    """``harness check``: the checks of each kernel and size, no timing."""
    columns = [c for c in RUN_COLUMNS if c.key in _CHECK_KEYS]
    columns.insert(columns.index(next(c for c in columns if c.key == "status")), _CHECKS)
    return table(results, columns, fmt)


def plan_table(plan) -> str:
    """``harness check --plan``: a kernel's battery, a row per launch configuration."""
    from harness.bench.plan import WHAT

    rows = [["x".join(map(str, c.shape)), c.alpha, c.beta, c.seed, c.repeats, c.kind]
            for c in plan.checks]
    lines = [f"{plan.kernel}: {plan.summary()}"]
    if plan.constraints:
        lines.append(f"constraints: {', '.join(plan.constraints)}")
    if rows:
        lines.append(tabulate(rows, headers=["shape", "alpha", "beta", "seed", "repeats",
                                             "check"], disable_numparse=True))
        lines += [f"  {kind}: {what}" for kind, what in WHAT.items()
                  if any(c.kind == kind for c in plan.checks)]
    lines += [f"skipped: {why}" for why in plan.skipped]
    lines.append("at each timed size: a check on the operands it is timed on (run twice, "
                 "identical bits), C poisoned before every timed repetition, and the timed "
                 "launches checked again after the timing")
    return "\n".join(lines) + "\n"


def failures(results: Sequence[Result]) -> str:
    """The message of every result that did not pass, one block each."""
    return "\n".join(f"- {r.kernel.name} {'x'.join(map(str, r.size))}: {r.status}: {r.message}"
                     for r in results if r.status != "pass")


BUILD_COLUMNS = (
    ("kernel", "kernel"), ("arch", "arch"), ("registers", "regs"),
    ("static_smem_bytes", "static smem B"), ("spills", "spill st/ld B"),
    ("block_threads", "threads"), ("dynamic_smem_bytes", "dyn smem B"),
    ("blocks_per_sm", "blocks/SM"), ("occupancy_pct", "occ %"), ("limiter", "limiter"),
)


def build_table(rows: Sequence[dict], fmt: str = "simple") -> str:
    """Offline build rows (harness.build.offline)."""
    def value(row: dict, key: str):
        if key == "spills":
            return (f"{row['spill_store_bytes']}/{row['spill_load_bytes']}"
                    if "spill_store_bytes" in row else "")
        return cell(key, row.get(key))

    return tabulate([[value(r, key) for key, _ in BUILD_COLUMNS] for r in rows],
                    headers=[title for _, title in BUILD_COLUMNS], tablefmt=fmt,
                    disable_numparse=True)


COMPARE_SASS = ("FFMA", "LDS", "LDS.128", "LDSM", "HMMA", "HGMMA", "LDGSTS", "BAR", "LDL", "STL")


def compare_table(results: Sequence[Result], fmt: str = "github") -> str:
    """``harness compare`` results: speed, speedup over the first with its spread, resources,
    occupancy and the SASS mix."""
    out = []
    ceiling = any(r.pct_ceiling is not None for r in results)
    for r in results:
        size = "x".join(map(str, r.size))
        if r.status != "pass":
            out.append([r.kernel.name, size, r.status, *[""] * (7 + ceiling)])
            continue
        c = r.comparison
        if r.kernel.name == c.compared_to:
            verdict = "reference"
        elif c.within_noise:
            verdict = "within noise"
        else:
            verdict = "faster" if c.speedup > 1 else "slower"
        mix = r.sass or {}
        occ = r.occupancy
        out.append([
            r.kernel.name, size, f"{r.gflops:.0f}",
            f"{c.speedup:.3f} ({c.speedup_p20:.3f}-{c.speedup_p80:.3f})", verdict,
            f"{r.pct_baseline:.1f}", *([cell("pct_ceiling", r.pct_ceiling)] if ceiling else []),
            r.resources.registers, _smem(r),
            f"{occ.driver_blocks_per_sm} / {occ.occupancy_pct:.0f}% ({occ.limiter})",
            " ".join(f"{k}:{mix[k]}" for k in COMPARE_SASS if mix.get(k)),
        ])
    return tabulate(out, headers=["kernel", "size", "GFLOP/s", "speedup vs first (p20-p80)",
                                  "verdict", "% cuBLAS", *(["% ceiling"] if ceiling else []),
                                  "regs", "smem s/d B", "blocks/SM / occ (limiter)", "SASS mix"],
                    tablefmt=fmt, disable_numparse=True)


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
