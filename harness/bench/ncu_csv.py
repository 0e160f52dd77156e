"""Nsight Compute's ``--csv --page raw`` output, read into one record per profiled launch (pure
Python: tested on committed ncu output).

The raw page is a header row (``"ID","Process ID",...,"Kernel Name",...`` then one column per
metric), a row of units, and a row per launch; ncu's own ``==PROF==`` and ``==WARNING==`` lines
may come before or between them. Numbers carry thousands separators (``8,393,984``). Every
value is turned into the base unit of its metric's kind (:data:`UNITS`), and a metric the
harness asked for that the output lacks is an error naming it, never a zero.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.bench.ncu import Metric
from harness.errors import HarnessError

_PREFIXES = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
UNITS: dict[str, dict[str, float]] = {
    "bytes": {f"{p}byte": f for p, f in _PREFIXES.items()},
    "sectors": {f"{p}sector": f for p, f in _PREFIXES.items()},
    "count": {**{f"{p}inst": f for p, f in _PREFIXES.items()},
              **{p: f for p, f in _PREFIXES.items()}},
    "percent": {"%": 1.0},
    "ns": {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
           "s": 1e9, "second": 1e9},
    "hz": {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/second": 1.0,
           "cycle/msecond": 1e3, "cycle/usecond": 1e6, "cycle/nsecond": 1e9},
    "ratio": {"": 1.0, "inst": 1.0, "cycle": 1.0, "warp": 1.0},
}
"""Per kind, each unit ncu may print and its factor to the kind's base unit (bytes, sectors,
instructions, %, ns, Hz, a plain ratio). --print-units base asks for the base, and the
prefixed spellings are here for output made without it."""


@dataclass(frozen=True)
class Launch:
    """One profiled launch: what ncu says it was, and its metric values in base units."""

    id: int
    kernel_name: str
    block: str
    grid: str
    values: dict[str, float] = field(default_factory=dict)
    """ncu metric name -> value (only the metrics asked for)."""


def _header_index(lines: list[str]) -> int:
    for i, line in enumerate(lines):
        if line.startswith('"ID",'):
            return i
    said = [line for line in lines if line.startswith("==")][-4:]
    raise HarnessError("ncu's output has no CSV table (no line starting with \"ID\"): expected "
                       "`ncu --csv --page raw` output; ncu said: "
                       + (" | ".join(said) or "nothing"))


def number(text: str) -> float:
    """ncu's printed number (``1,978,202,210.12``) as a float."""
    return float(text.replace(",", ""))


def parse(text: str, metrics: Sequence[Metric]) -> list[Launch]:
    """Every launch in ncu's raw CSV ``text``, with the values of ``metrics``."""
    lines = text.splitlines()
    start = _header_index(lines)
    table = [line for line in lines[start:] if line.strip() and not line.startswith("==")]
    rows = list(csv.reader(io.StringIO("\n".join(table))))
    header, units, data = rows[0], rows[1], rows[2:]
    column = {name: i for i, name in enumerate(header)}
    missing = [m for m in metrics if m.name not in column]
    if missing:
        raise HarnessError("ncu's output has no column for "
                           + "; ".join(f"{m.name} ({m.key})" for m in missing)
                           + ": this ncu did not collect it on this GPU (a name it does not "
                           "know, or one its sections do not provide); correct METRICS in "
                           "harness/bench/ncu.py")
    out = []
    for row in data:
        if len(row) != len(header):
            raise HarnessError(f"ncu's CSV row {row[:1]} has {len(row)} fields, the header "
                               f"{len(header)}: the output is cut short or mixed with other "
                               "output")
        values = {}
        for m in metrics:
            i = column[m.name]
            values[m.name] = _value(m, row[i], units[i], row[column["Kernel Name"]])
        out.append(Launch(int(number(row[column["ID"]])), row[column["Kernel Name"]],
                          row[column.get("Block Size", 0)], row[column.get("Grid Size", 0)],
                          values))
    return out


def _value(metric: Metric, text: str, unit: str, kernel: str) -> float:
    factors = UNITS[metric.kind]
    key = unit.lower() if metric.kind == "hz" else unit
    if key not in factors:
        raise HarnessError(f"ncu printed {metric.name} of {kernel} in unit {unit!r}; expected "
                           f"one of {', '.join(repr(u) for u in factors)} (a {metric.kind})")
    try:
        return number(text) * factors[key]
    except ValueError:
        raise HarnessError(f"ncu printed {metric.name} of {kernel} as {text!r}, not a number: "
                           "the metric does not apply to this launch or was not "
                           "collected") from None


def is_entry(launch: Launch, entry: str) -> bool:
    """Whether ``launch`` is of the kernel whose entry symbol is ``entry`` (ncu may append a
    parameter list to the name). A C++ entry (``ns::gemm<128, 64>``, template arguments as
    values) matches ncu's demangled name, ``void ns::gemm<128, 64>(int, ...)``."""
    name = launch.kernel_name
    if name == entry or name.startswith(entry + "("):
        return True
    if "<" not in entry and "::" not in entry:
        return False
    bare = name.removeprefix("void ").split("(", 1)[0]
    return "".join(bare.split()) == "".join(entry.lstrip(":").split())


def split(launches: Sequence[Launch], entry: str, repeats: int
          ) -> tuple[list[Launch], list[Launch]]:
    """``launches`` as the kernel's (``entry``) and everything else (the baseline's); the
    kernel must have exactly ``repeats``."""
    ours = [launch for launch in launches if is_entry(launch, entry)]
    if len(ours) != repeats:
        names = sorted({launch.kernel_name for launch in launches})
        raise HarnessError(f"expected {repeats} profiled launch(es) of {entry} in ncu's output, "
                           f"found {len(ours)} (kernels profiled: {', '.join(names) or 'none'})")
    return ours, [launch for launch in launches if not is_entry(launch, entry)]


ADDITIVE_KINDS = ("ns", "bytes", "sectors", "count")
"""Kinds that add up over the kernels of one call (time, traffic, instructions); the others
(percentages, clocks, ratios) are averaged over them, weighted by each kernel's time."""


def per_call(launches: Sequence[Launch], metrics: Sequence[Metric], calls: int
             ) -> dict[str, float]:
    """Per metric key, the median over ``calls`` calls of the value for one call, where the
    launches (in order) are ``calls`` calls of the same number of kernels each (a library
    call may run several)."""
    if calls < 1 or not launches or len(launches) % calls:
        raise HarnessError(f"{len(launches)} profiled launch(es) cannot be {calls} calls of "
                           "the same kernels: the profile is incomplete")
    size = len(launches) // calls
    duration = next(m.name for m in metrics if m.key == "duration_ns")
    out = {}
    for m in metrics:
        each = []
        for c in range(calls):
            group = launches[c * size:(c + 1) * size]
            values = [launch.values[m.name] for launch in group]
            if m.kind in ADDITIVE_KINDS or len(values) == 1:
                each.append(sum(values))
            else:
                weights = [launch.values[duration] for launch in group]
                each.append(sum(v * w for v, w in zip(values, weights, strict=True))
                            / (sum(weights) or 1.0))
        out[m.key] = statistics.median(each)
    return out
