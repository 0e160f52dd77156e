"""``harness profile``'s rows and tables for buffers kernels (``kind = "buffers"``,
notes/buffers_kind.md): the napkin's bytes (the spec's ``bytes``: what must cross DRAM at
least) beside Nsight Compute's DRAM bytes, and GB/s from ncu's time and from the harness's
timings. No GEMM figure: 2MNK FLOPs, GFLOP/s and arithmetic intensity mean nothing here.

A row has the GEMM row's shape (report/profile.py ``row``) plus ``dims`` (name -> value, in
the spec's order); its ``size`` holds the dims padded with 1, as the runner's rows do.
"""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from harness.gpu.timing import Timing
from harness.report.profile_parts import (
    REGIMES,
    _g,
    _profiled,
    _ratio,
    comparisons,
    derive_common,
    sm_table,
    timing_common,
)

# (key, what, predicted key, measured key, flagged, why it may be off): as report/profile.py's
# COMPARISONS, with the napkin's bytes the spec's compulsory bytes
COMPARISONS = (
    ("dram_vs_napkin", "DRAM bytes / the napkin's bytes (the spec's bytes)", "compulsory_bytes",
     "dram_bytes", True,
     "above: the kernel moves more than each buffer once (an input read twice, a scratch "
     "buffer, sectors half used); below: outputs still in L2 when the kernel ends are written "
     "back after it, or the spec's bytes count more than the kernel must move"),
    ("l2_vs_napkin", "bytes the SMs moved to/from L2 / the napkin's bytes", "global_bytes",
     "l2_from_sm_bytes", True,
     "above: the SMs ask L2 for data more than once (a second pass, re-reads L1 did not "
     "catch, partial sectors); below: the spec's bytes count more than the kernel reads"),
    ("achieved_vs_theoretical", "achieved / theoretical occupancy (ncu)",
     "theoretical_occupancy_pct", "achieved_occupancy_pct", False, ""),
)


def _gbps(nbytes, ms) -> float | None:
    return None if not nbytes or not ms else nbytes / (ms * 1e-3) / 1e9


def derive(measured: dict, nbytes: int | None) -> dict:
    """Figures derived from one call's metrics: the common ones (report/profile_parts.py
    ``derive_common``), the napkin's bytes over ncu's time and DRAM's bytes over it."""
    out = derive_common(measured)
    ms = out.get("ncu_ms")
    if _gbps(nbytes, ms) is not None:
        out["napkin_gbps"] = _gbps(nbytes, ms)
    if "dram_bytes" in out and ms:
        out["dram_gbps"] = _gbps(out["dram_bytes"], ms)
    return out


def timing_view(timing: Timing | None, nbytes: int | None, derived: dict) -> dict | None:
    """A harness timing as the profile shows it: the record, the napkin's bytes over its
    median (the run's GB/s), its time over ncu's, the SM clock ncu's cycles imply."""
    if timing is None:
        return None
    return timing_common(timing, derived) | {"gbps": _gbps(nbytes, timing.median_ms)}


def row(name: str, info: dict, size: tuple[int, int, int], dims: dict[str, int],
        predicted: dict, measured: dict, timings: dict[str, Timing | None], factor: float,
        **extra) -> dict:
    """One buffers kernel at its ``dims`` (``size``: the dims padded with 1); ``predicted``
    holds ``compulsory_bytes`` and ``global_bytes`` (both the spec's bytes at the dims)."""
    nbytes = predicted.get("compulsory_bytes")
    derived = derive(measured, nbytes)
    return {"kernel": name, "role": "kernel", **info, "size": list(size), "dims": dict(dims),
            "status": "profiled", "predicted": predicted, "measured": measured,
            "derived": derived,
            "comparisons": comparisons(predicted, derived, measured, factor, COMPARISONS),
            "timing": {regime: timing_view(t, nbytes, derived) for regime, t in timings.items()},
            **extra}


def _dims(r: dict) -> str:
    return "x".join(map(str, r["dims"].values()))


def _timed_gbps(r: dict, regime: str) -> str:
    t = (r.get("timing") or {}).get(regime)
    return "" if not t else _g(t.get("gbps"), fmt="{:.0f}")


GB = "{:.4f}"
"""Bytes in GB to 0.1 MB: a buffers kernel's sizes run from a few MB to several GB."""


def bytes_table(rows: Sequence[dict], size, fmt: str = "github") -> str:
    """Per buffers row at ``size``: the napkin's bytes beside DRAM's, and GB/s."""
    out = []
    for r in _profiled(rows, size):
        p, d, me = r["predicted"], r["derived"], r["measured"]
        out.append([r["kernel"], _dims(r), _g(p.get("compulsory_bytes"), 1e9, GB),
                    _g(me.get("dram_read_bytes"), 1e9, GB),
                    _g(me.get("dram_write_bytes"), 1e9, GB), _ratio(r, "dram_vs_napkin"),
                    _g(d.get("l2_from_sm_bytes"), 1e9, GB),
                    _g(d.get("ncu_ms"), fmt="{:.4f}"), _g(d.get("napkin_gbps"), fmt="{:.0f}"),
                    _g(d.get("dram_gbps"), fmt="{:.0f}"), _g(me.get("l2_hit_pct"), fmt="{:.1f}"),
                    *(_timed_gbps(r, regime) for regime in REGIMES)])
    return tabulate(out, headers=["kernel", "dims", "napkin GB", "DRAM read GB",
                                  "DRAM write GB", "DRAM x napkin", "L2<->SM GB", "ncu ms",
                                  "GB/s (napkin, ncu)", "DRAM GB/s", "L2 hit %",
                                  "sustained GB/s", "isolated GB/s"],
                    tablefmt=fmt, disable_numparse=True)


def sections(rows: Sequence[dict], fmt: str = "github") -> list[str]:
    """The buffers rows' tables, a set per size: bytes and GB/s, then occupancy, throughput
    and stalls (report/profile.py's table, no tensor pipe)."""
    out = []
    for size in sorted({tuple(r["size"]) for r in rows}):
        profiled = _profiled(rows, size)
        if not profiled:
            continue
        dims = profiled[0]["dims"]
        out += [f"## {' x '.join(dims)} = {_dims(profiled[0])} (buffers kernels)", "",
                "### DRAM: the napkin's bytes beside Nsight Compute's", "",
                bytes_table(rows, size, fmt), "",
                "### Occupancy, throughput, stalls", "", sm_table(rows, size, fmt), ""]
    return out


LEGEND = [
    "- buffers kernels: napkin GB = the spec's `bytes` at the dims (what must cross DRAM at "
    "least: each buffer once); DRAM read/write: `dram__bytes_read/write` (ncu flushes the "
    "caches before each pass, so the inputs come from DRAM; outputs still in L2 when the "
    "kernel ends are written back after it and may read near 0); DRAM x napkin = DRAM bytes / "
    "napkin bytes; GB/s (napkin, ncu): the napkin's bytes over ncu's `gpu__time_duration`; "
    "DRAM GB/s: DRAM's bytes over it; sustained and isolated GB/s: the napkin's bytes over "
    "the harness's CUDA-event medians (as `harness run` reports); the baseline (CUB, the "
    "driver's copy) is not launched under ncu",
]
