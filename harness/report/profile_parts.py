"""What both of ``harness profile``'s reports use (report/profile.py for GEMMs,
kinds/buffers/profile.py for buffers kernels): the figures any kernel's metrics give, the
measured / predicted comparisons, a harness timing beside ncu's, cells, and the occupancy,
throughput and stalls table."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict

from tabulate import tabulate

from harness.bench.ncu import STALL_REASONS
from harness.gpu.timing import Timing

TOP_STALLS = 3
REGIMES = ("sustained", "isolated")


def _div(a, b):
    return None if a is None or b in (None, 0) or b != b else a / b


def derive_common(measured: dict) -> dict:
    """What any kernel's metrics give, GEMM or buffers: ncu's time, clock and cycles, DRAM and
    L2<->SM bytes, shared-memory wavefronts and conflicts per request, the top stalls; those
    whose metrics were not collected are left out."""
    get = measured.get
    out: dict = {}
    ns, hz = get("duration_ns"), get("sm_clock_hz")
    if ns:
        out["ncu_ms"] = ns / 1e6
    if hz:
        out["ncu_sm_clock_mhz"] = hz / 1e6
    if ns and hz:
        out["sm_cycles"] = ns * 1e-9 * hz
    if get("dram_read_bytes") is not None:
        out["dram_bytes"] = get("dram_read_bytes") + get("dram_write_bytes")
    if get("l2_read_sectors_from_sm") is not None:
        out["l2_from_sm_bytes"] = 32.0 * (get("l2_read_sectors_from_sm")
                                          + get("l2_write_sectors_from_sm"))
    for op in ("ld", "st"):
        requests = get(f"smem_{op}_requests")
        if requests is not None:
            out[f"smem_{op}_wavefronts_per_request"] = _div(get(f"smem_{op}_wavefronts"),
                                                            requests)
            out[f"smem_{op}_conflicts_per_request"] = _div(get(f"smem_{op}_conflicts"),
                                                           requests)
    stalls = [(r, get(f"stall_{r}")) for r in STALL_REASONS
              if r != "selected" and get(f"stall_{r}")]
    if stalls:
        out["top_stalls"] = sorted(stalls, key=lambda s: -s[1])[:TOP_STALLS]
    return out


def comparisons(predicted: dict, derived: dict, measured: dict, factor: float,
                table: Sequence[tuple]) -> list[dict]:
    """Measured / predicted for each of ``table`` (report/profile.py's COMPARISONS, or
    kinds/buffers/profile.py's) both sides have,
    flagged where a flagged one is off by more than ``factor`` either way; and the two
    theoretical occupancies (the harness's calculator against ncu's), flagged where they
    differ by over a point."""
    have = {**predicted, **derived, **measured}
    out = []
    for key, what, pkey, mkey, flagged, why in table:
        source = measured if key == "achieved_vs_theoretical" else predicted
        p, value = source.get(pkey), have.get(mkey)
        if p is None or value is None or not p:
            continue
        ratio = value / p
        off = flagged and not 1 / factor <= ratio <= factor
        out.append({"key": key, "what": what, "predicted": p, "measured": value,
                    "ratio": ratio, "off": off, "why": why if off else ""})
    offline, ncu = predicted.get("occupancy_pct"), measured.get("theoretical_occupancy_pct")
    if offline is not None and ncu is not None:
        off = abs(offline - ncu) > 1.0
        out.append({"key": "theoretical_occupancy", "what": "theoretical occupancy, ncu / the "
                    "harness's calculator", "predicted": offline, "measured": ncu,
                    "ratio": _div(ncu, offline), "off": off,
                    "why": "the calculators disagree: harness occupancy --sweep "
                           "compares the offline one with the driver's" if off else ""})
    return out


def timing_common(timing: Timing, derived: dict) -> dict:
    """A harness timing beside ncu's, for any kernel: the record, its time over ncu's, and
    the SM clock that ncu's cycle count implies for it."""
    out = asdict(timing)
    if derived.get("ncu_ms"):
        out["vs_ncu"] = timing.median_ms / derived["ncu_ms"]
    if derived.get("sm_cycles"):
        out["cycles_implied_clock_mhz"] = derived["sm_cycles"] / (timing.median_ms * 1e-3) / 1e6
    return out


def _g(value, scale=1.0, fmt="{:.2f}") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return fmt.format(value / scale)


def _ratio(r: dict, key: str) -> str:
    c = next((c for c in r.get("comparisons", ()) if c["key"] == key), None)
    if c is None or c["ratio"] is None:
        return ""
    ratio = c["ratio"]
    return (f"{ratio:.2f}x" if ratio >= 0.1 else f"{ratio:.2g}x") + (" !" if c["off"] else "")


def _profiled(rows: Sequence[dict], size) -> list[dict]:
    return [r for r in rows if r["status"] == "profiled" and tuple(r["size"]) == tuple(size)]


def _stalls(d: dict) -> str:
    return ", ".join(f"{name} {value:.1f}" for name, value in d.get("top_stalls", ()))


def sm_table(rows: Sequence[dict], size, fmt: str = "github") -> str:
    out = []
    for r in _profiled(rows, size):
        p, me, d = r["predicted"], r["measured"], r["derived"]
        tensor = me.get("tensor_pipe_pct") if r.get("precision") in ("bf16", "fp16", "tf32") \
            and "dims" not in r else None  # a buffers kernel issues no MMA
        out.append([r["kernel"], _g(p.get("occupancy_pct"), fmt="{:.1f}"),
                    _g(me.get("theoretical_occupancy_pct"), fmt="{:.1f}")
                    + (" !" if any(c["off"] for c in r["comparisons"]
                                   if c["key"] == "theoretical_occupancy") else ""),
                    _g(me.get("achieved_occupancy_pct"), fmt="{:.1f}"),
                    _g(me.get("sm_throughput_pct"), fmt="{:.1f}"),
                    _g(me.get("memory_throughput_pct"), fmt="{:.1f}"),
                    _g(tensor, fmt="{:.1f}"), _stalls(d)])
    return tabulate(out, headers=["kernel", "theoretical occ % (harness)", "(ncu)",
                                  "achieved occ %", "SM %", "memory %", "tensor pipe %",
                                  f"top {TOP_STALLS} stalls (warps per issue)"],
                    tablefmt=fmt, disable_numparse=True)
