"""``harness profile``'s report: the napkin model beside Nsight Compute's counters (pure Python).

Per kernel and size, from the metrics of one profile (``bench/ncu.py``, one value per call):

- global traffic: the napkin's implied bytes (each block's tiles, report/napkin.py) beside the
  bytes the SMs moved to and from L2 (what the tiling alone decides) and the DRAM bytes (what
  is left after L1 and L2 have caught the reuse between blocks), and the compulsory bytes (A,
  B and C once: DRAM's floor); arithmetic intensity from the napkin's bytes and from DRAM's;
- shared memory: wavefronts per request, predicted by the layout's bank arithmetic (the spec's
  optional [model] wavefront keys) and measured, bank conflicts per request, shared loads per
  FMA (napkin: source loads per FMA; measured: LDS instructions per warp-wide FFMA);
- occupancy: theoretical from the harness's calculator and from ncu, achieved;
- SM, memory and tensor-pipe throughput, % of peak; the top warp stall reasons;
- time: ncu's ``gpu__time_duration`` and SM clock beside the harness's CUDA-event timing in the
  sustained and the isolated regime (gpu/timing/), each with the clock NVML saw, and the
  clock the sustained time implies for the cycles ncu counted.

Every comparison is measured / predicted; one off by more than the stated factor is flagged.
Buffers kernels' rows (a ``dims`` key) have tables of their own, kinds/buffers/profile.py's:
the spec's bytes beside DRAM's, GB/s, no GEMM figure; what both use is report/profile_parts.py.
"""

from __future__ import annotations

import gzip
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate

from harness import kinds
from harness.archs import get_arch
from harness.bench.ncu import CACHE_CONTROL, CLOCK_CONTROL
from harness.bench.result import KernelInfo
from harness.gpu.timing import Timing, TimingOptions
from harness.report import files, plots
from harness.report.profile_parts import (
    REGIMES,
    _div,
    _g,
    _profiled,
    _ratio,
    comparisons,
    derive_common,
    sm_table,
    timing_common,
)
from harness.stats import gflops

DEFAULT_FLAG_FACTOR = 2.0


def derive(measured: dict, m: int, n: int, k: int, precision: str = "fp32") -> dict:
    """Figures derived from one GEMM call's metrics (keys of bench/ncu.py METRICS): the common
    ones (:func:`derive_common`) and those of 2MNK FLOPs."""
    get = measured.get
    flops = 2.0 * m * n * k
    common = derive_common(measured)
    out: dict = {"flops": flops}
    if "ncu_ms" in common:
        out |= {"ncu_ms": common["ncu_ms"], "ncu_gflops": gflops(m, n, k, common["ncu_ms"])}
    out |= {key: common[key] for key in ("ncu_sm_clock_mhz", "sm_cycles") if key in common}
    if "dram_bytes" in common:
        out |= {"dram_bytes": common["dram_bytes"],
                "intensity_dram": _div(flops, common["dram_bytes"])}
    out |= {key: value for key, value in common.items() if key not in out
            and key != "top_stalls"}
    if get("smem_ld_requests") is not None and precision == "fp32":
        # per warp-wide FMA instruction (32 FMAs): shared-load instructions (the napkin's
        # per-thread loads per FMA, as the SASS issues them) and their wavefronts (what the
        # napkin's shared roof spends: one 128-byte wavefront per clock per SM)
        out["smem_loads_per_fma"] = get("smem_ld_requests") / (m * n * k / 32)
        out["smem_ld_wavefronts_per_fma"] = get("smem_ld_wavefronts") / (m * n * k / 32)
    if "top_stalls" in common:
        out["top_stalls"] = common["top_stalls"]
    return out


# (key, what, predicted key, measured key, flagged, why it may be off)
COMPARISONS = (
    ("l2_vs_napkin", "bytes SMs moved to/from L2 / napkin's global bytes", "global_bytes",
     "l2_from_sm_bytes", True,
     "the napkin counts each block's tiles; L1 catches reuse inside a block that the tiling "
     "does not (the untiled kernels), and sector granularity adds to ragged accesses"),
    ("dram_vs_napkin", "DRAM bytes / napkin's global bytes", "global_bytes", "dram_bytes",
     False, ""),
    ("dram_vs_waves", "DRAM bytes / napkin's DRAM estimate by waves of blocks",
     "dram_bytes_waves", "dram_bytes", True,
     "blocks in flight at one time do not share their tiles through L2 as the wave estimate "
     "assumes (blocks of different rows out of step), or L2 keeps more than one wave's"),
    ("dram_vs_compulsory", "DRAM bytes / compulsory bytes (A, B, C once)", "compulsory_bytes",
     "dram_bytes", False, ""),
    ("smem_ld_wavefronts", "shared-load wavefronts per request",
     "smem_ld_wavefronts_per_request", "smem_ld_wavefronts_per_request", True,
     "the layout's bank arithmetic in the spec is wrong, or the compiler merged or split the "
     "loads differently (harness sass shows LDS/LDS.128)"),
    ("smem_st_wavefronts", "shared-store wavefronts per request",
     "smem_st_wavefronts_per_request", "smem_st_wavefronts_per_request", True,
     "the layout's bank arithmetic in the spec is wrong, or the compiler merged or split the "
     "stores differently"),
    ("smem_loads_per_fma", "shared loads per FMA (LDS per FFMA / source loads per FMA)",
     "smem_loads_per_fma", "smem_loads_per_fma", False, ""),
    ("smem_wavefronts_per_fma", "shared-load wavefronts per FFMA / napkin's loads per FMA "
     "(its shared roof: one 128-byte wavefront per load)", "smem_loads_per_fma",
     "smem_ld_wavefronts_per_fma", True,
     "an LDS.128 takes 2 to 4 wavefronts (more with conflicts), not the one the napkin's "
     "shared roof charges per load; or the compiler merged scalar loads"),
    ("achieved_vs_theoretical", "achieved / theoretical occupancy (ncu)",
     "theoretical_occupancy_pct", "achieved_occupancy_pct", False, ""),
)


def timing_view(timing: Timing | None, m: int, n: int, k: int, derived: dict) -> dict | None:
    """A harness timing as the profile shows it: the record, its GFLOP/s, its time over ncu's,
    and the SM clock that ncu's cycle count implies for it."""
    if timing is None:
        return None
    return timing_common(timing, derived) | {"gflops": gflops(m, n, k, timing.median_ms)}


def row(name: str, role: str, info: dict, size: tuple[int, int, int], predicted: dict,
        measured: dict, timings: dict[str, Timing | None], factor: float, **extra) -> dict:
    """One kernel (``role`` "kernel") or baseline ("baseline") at one size, everything the
    report shows."""
    m, n, k = size
    derived = derive(measured, m, n, k, info.get("precision", "fp32"))
    return {"kernel": name, "role": role, **info, "size": list(size), "status": "profiled",
            "predicted": predicted, "measured": measured, "derived": derived,
            "comparisons": comparisons(predicted, derived, measured, factor, COMPARISONS),
            "timing": {regime: timing_view(t, m, n, k, derived)
                       for regime, t in timings.items()}, **extra}


def failed_row(name: str, info: dict, size: tuple[int, int, int], status: str,
               message: str) -> dict:
    return {"kernel": name, "role": "kernel", **info, "size": list(size), "status": status,
            "message": message}


# --- rendering ----------------------------------------------------------------------------

def traffic_table(rows: Sequence[dict], size, fmt: str = "github") -> str:
    out = []
    for r in _profiled(rows, size):
        p, d, me = r["predicted"], r["derived"], r["measured"]
        out.append([r["kernel"], _g(p.get("global_bytes"), 1e9),
                    _g(d.get("l2_from_sm_bytes"), 1e9), _ratio(r, "l2_vs_napkin"),
                    _g(me.get("dram_read_bytes"), 1e9, "{:.3f}"),
                    _g(me.get("dram_write_bytes"), 1e9, "{:.3f}"), _ratio(r, "dram_vs_napkin"),
                    _g(p.get("dram_bytes_waves"), 1e9, "{:.3f}"), _ratio(r, "dram_vs_waves"),
                    _g(p.get("compulsory_bytes"), 1e9, "{:.3f}"),
                    _ratio(r, "dram_vs_compulsory"), _g(me.get("l2_hit_pct"), fmt="{:.1f}"),
                    _g(p.get("intensity_flop_per_byte"), fmt="{:.1f}"),
                    _g(d.get("intensity_dram"), fmt="{:.0f}")])
    return tabulate(out, headers=["kernel", "napkin GB", "L2<->SM GB", "x napkin",
                                  "DRAM read GB", "DRAM write GB", "x napkin", "waves GB",
                                  "x waves", "compulsory GB", "x compulsory", "L2 hit %",
                                  "FLOP/B napkin", "FLOP/B DRAM"], tablefmt=fmt,
                    disable_numparse=True)


def shared_table(rows: Sequence[dict], size, fmt: str = "github") -> str:
    out = []
    for r in _profiled(rows, size):
        if r["role"] != "kernel":
            continue
        p, d = r["predicted"], r["derived"]
        if not any(key.startswith("smem_") and value is not None
                   for key, value in {**p, **d}.items()):
            continue  # no shared-memory instruction the counters see (ldmatrix, TMA)
        out.append([r["kernel"], _g(p.get("smem_ld_wavefronts_per_request")),
                    _g(d.get("smem_ld_wavefronts_per_request")), _ratio(r, "smem_ld_wavefronts"),
                    _g(p.get("smem_st_wavefronts_per_request")),
                    _g(d.get("smem_st_wavefronts_per_request")), _ratio(r, "smem_st_wavefronts"),
                    _g(d.get("smem_ld_conflicts_per_request")),
                    _g(d.get("smem_st_conflicts_per_request")),
                    _g(p.get("smem_loads_per_fma"), fmt="{:.3g}"),
                    _g(d.get("smem_loads_per_fma"), fmt="{:.3g}"),
                    _g(d.get("smem_ld_wavefronts_per_fma"), fmt="{:.3g}"),
                    _ratio(r, "smem_wavefronts_per_fma")])
    return tabulate(out, headers=["kernel", "ld wf/req predicted", "measured", "x",
                                  "st wf/req predicted", "measured", "x", "ld conflicts/req",
                                  "st conflicts/req", "smem ld/FMA napkin", "LDS/FFMA",
                                  "ld wf/FFMA", "x napkin"],
                    tablefmt=fmt, disable_numparse=True)


def _t(r: dict, regime: str, key: str, fmt: str = "{:.3f}") -> str:
    t = (r.get("timing") or {}).get(regime)
    return "" if not t else _g(t.get(key), fmt=fmt)


def time_table(rows: Sequence[dict], size, fmt: str = "github") -> str:
    out = []
    for r in _profiled(rows, size):
        d = r["derived"]
        cells = [r["kernel"], _g(d.get("ncu_ms"), fmt="{:.4f}"),
                 _g(d.get("ncu_sm_clock_mhz"), fmt="{:.0f}"), _g(d.get("ncu_gflops"), fmt="{:.0f}")]
        for regime in REGIMES:
            t = (r.get("timing") or {}).get(regime)
            held = f" ({t['clock_limits']})" if t and t.get("clock_limits") not in ("", "none") \
                else ""
            waited = " *" if t and (t.get("queue_ahead_ms") or 0) < 0 else ""
            cells += [_t(r, regime, "median_ms", "{:.4f}") + waited, _t(r, regime, "vs_ncu"),
                      _t(r, regime, "sm_clock_mhz", "{:.0f}") + held,
                      _t(r, regime, "cycles_implied_clock_mhz", "{:.0f}")]
        out.append(cells)
    return tabulate(out, headers=["kernel", "ncu ms", "ncu SM MHz", "GFLOP/s (ncu)",
                                  "sustained ms", "x ncu", "NVML MHz", "implied MHz",
                                  "isolated ms", "x ncu", "NVML MHz", "implied MHz"],
                    tablefmt=fmt, disable_numparse=True)


def off_lines(rows: Sequence[dict], factor: float) -> list[str]:
    """One line per flagged comparison."""
    lines = []
    for r in rows:
        for c in r.get("comparisons", ()):
            if c["off"]:
                lines.append(f"- {r['kernel']} {size_label(r)}: {c['what']} "
                             f"= {c['ratio']:.3g}x ({_g(c['measured'], fmt='{:.4g}')} measured, "
                             f"{_g(c['predicted'], fmt='{:.4g}')} predicted): {c['why']}")
    return lines or [f"- none: every flagged comparison is within {factor:g}x"]


def size_label(r: dict) -> str:
    """A row's size as its kernel takes it: a GEMM's MxNxK, a buffers kernel's dims."""
    return "x".join(map(str, r["dims"].values() if "dims" in r else r["size"]))


def sections(rows: Sequence[dict], factor: float, fmt: str = "github") -> list[str]:
    """The report's tables, each kind's (Kind.profile_sections: a GEMM's a set per size),
    then the flags and the failures."""
    out = [line for kind, kind_rows in kinds.split_rows(rows)
           for line in kind.profile_sections(kind_rows, fmt)]
    out += [f"## Where the model is off by more than {factor:g}x", "", *off_lines(rows, factor),
            ""]
    failed = [r for r in rows if r["status"] != "profiled"]
    if failed:
        out += ["## Not profiled", "", *[f"- {r['kernel']} {size_label(r)}: "
                                         f"{r['status']}: {r['message']}" for r in failed], ""]
    return out


def gemm_sections(gemms: Sequence[dict], fmt: str = "github") -> list[str]:
    """GEMM rows' tables, a set per size (the GEMM kind's profile_sections)."""
    out = []
    for size in sorted({tuple(r["size"]) for r in gemms}):
        if not _profiled(gemms, size):
            continue
        out += [f"## {'x'.join(map(str, size))}", "",
                "### Global traffic and arithmetic intensity", "",
                traffic_table(gemms, size, fmt), "",
                "### Shared memory (wavefronts per request: 1 for a conflict-free 32-bit "
                "access; an LDS.128 takes 4, or 2 where threads pair up on addresses)", "",
                shared_table(gemms, size, fmt), "",
                "### Occupancy, throughput, stalls", "", sm_table(gemms, size, fmt), "",
                "### Time: ncu beside the harness's two regimes", "",
                time_table(gemms, size, fmt), ""]
    return out


LEGEND = [
    "- napkin GB: the global traffic the tiling implies (A once per block column, B once per "
    "block row, C once): what the SMs ask of L2; L2<->SM GB: 32-byte sectors the SMs read from "
    "and wrote to L2 (`lts__t_sectors_srcunit_tex_op_read/write`); DRAM: "
    "`dram__bytes_read/write`; waves GB: the napkin's DRAM estimate, L2 keeping the tiles "
    "the blocks in flight share and no more (A once, B once per wave of blocks per SM x SMs, "
    "C once; report/napkin.py `dram_bytes_waves`); compulsory: A, B and C once (where C fits "
    "in L2 it is written back after the kernel has ended, so its DRAM writes read near 0); "
    "FLOP/B: 2MNK over the napkin's bytes and over DRAM's",
    "- wf/req: shared-memory wavefronts per request (`l1tex__data_pipe_lsu_wavefronts_mem_"
    "shared_op_ld/st` over `smsp__inst_executed_op_shared_ld/st`), predicted from the layout's "
    "bank arithmetic in the spec's [model]; conflicts/req: ncu's bank conflicts per request; "
    "smem ld/FMA napkin: the spec's shared loads per FMA, which the napkin's shared roof "
    "charges one 128-byte wavefront each; LDS/FFMA and ld wf/FFMA: shared-load instructions "
    "and their wavefronts per warp-wide FFMA, measured",
    "- occupancy: theoretical from the harness's calculator and from ncu's Occupancy section, "
    "achieved = `sm__warps_active` over the maximum; stalls: warps stalled per issued "
    "instruction by reason (`smsp__average_warps_issue_stalled_*_per_issue_active`)",
    "- time: ncu's `gpu__time_duration` and SM clock of the profiled launches (isolated, caches "
    "flushed, clocks not locked); sustained and isolated: the harness's CUDA-event medians "
    "(gpu/timing.py), x ncu = that time over ncu's, NVML MHz = NVML's SM clock during the "
    "timing (what held it), implied MHz = ncu's SM cycles over that time: the clock the "
    "timing ran at if the kernel needs the same cycles at any clock; * = the GPU waited on "
    "the host before some launch (queue_ahead_ms < 0): that time includes launch latency",
    "- x: measured / predicted; ! = off by more than the stated factor",
]


def roofline_points(rows: Sequence[dict], size) -> list[dict]:
    out = []
    for r in _profiled(rows, size):
        d = r["derived"]
        if d.get("intensity_dram") and d.get("ncu_gflops"):
            out.append({"label": r["kernel"], "gflops": d["ncu_gflops"],
                        "measured_intensity": d["intensity_dram"],
                        "napkin_intensity": r["predicted"].get("intensity_flop_per_byte"),
                        "precision": r.get("precision", "")})
    return out


def write(meta: dict, rows: Sequence[dict], stem: Path, factor: float, roofs: dict[str, float],
          dram_bytes_per_s: float | None) -> list[Path]:
    """``stem.json`` and ``stem.md`` (files.write_table_report: the harness's provenance
    header), and a roofline PNG per size with each kernel at its napkin intensity and its
    measured one, joined by a line."""
    body = ["- method: each kernel checked, then launched under `ncu --clock-control none "
            "--cache-control all --profile-from-start off` through `harness launch` (median of "
            f"its launches); the model is flagged where off by more than {factor:g}x",
            f"- ncu: {meta.get('ncu', {}).get('version', '')}", *LEGEND,
            *(line for kind, _ in kinds.split_rows(rows) for line in kind.profile_legend()),
            "",
            *sections(rows, factor)]
    json_path, md_path = files.write_table_report(meta, rows, stem, "Profile: the napkin model "
                                                  "beside Nsight Compute", body)
    written = [json_path, md_path]
    stem = json_path.with_name(json_path.name[:-len(".json")])  # another report's name: -2
    for size in sorted({tuple(r["size"]) for r in rows}):
        points = roofline_points(rows, size)
        if not points or not roofs:
            continue
        png = stem.parent / f"{stem.name}-roofline-{'x'.join(map(str, size))}.png"
        plots.roofline_pairs(points, roofs, dram_bytes_per_s,
                             f"Napkin vs measured intensity, {'x'.join(map(str, size))}, "
                             f"{meta.get('gpu')}", png)
        written.append(png)
    files.write_atomic(md_path, md_path.read_text() + "".join(
        f"\n![roofline {p.stem}]({p.name})\n" for p in written[2:]))
    return written


def metadata(facts: dict, options, chosen, arch: str, ncu_path: str, ncu_version: str,
             metrics, command: Sequence[str]) -> dict:
    """The report's provenance (files.metadata), how each regime was timed, and ncu's part;
    ``options``: the command's ProfileOptions (commands/profile.py)."""
    meta = files.metadata(facts, command, TimingOptions(), options.sizes,
                          [KernelInfo.of(k.for_arch(arch)) for k in chosen])
    meta["timing"] = {regime: {**asdict(options.timing(regime)),
                               "method": options.timing(regime).method()}
                      for regime in options.regimes}
    meta["timing"]["l2"] = "cold (flushed before every repetition; ncu: --cache-control all)"
    meta["ncu"] = {"path": ncu_path, "version": ncu_version,
                   "clock_control": CLOCK_CONTROL, "cache_control": CACHE_CONTROL,
                   "metrics": {m.key: m.name for m in metrics}}
    meta["options"] = asdict(options)
    return meta


def save_csv(text: str, stem: Path, name: str, size) -> str:
    """ncu's CSV of one kernel, gzipped beside the report: where every number came from."""
    folder = stem.parent / f"{stem.name}-ncu"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace(':', '-')}-{'x'.join(map(str, size))}.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    return str(path.relative_to(stem.parent))


def roofs(rows: list[dict], facts: dict) -> dict[str, float]:
    """The dense peak (GFLOP/s) of each precision profiled, at the median SM clock ncu saw."""
    clocks = [r["derived"]["ncu_sm_clock_mhz"] for r in rows
              if r["status"] == "profiled" and "ncu_sm_clock_mhz" in r["derived"]]
    if not clocks:
        return {}
    arch = get_arch(facts["arch"])
    mhz = statistics.median(clocks)
    return {p.upper(): arch.fma_flops_per_clock_per_sm[p] * facts["sm_count"] * mhz / 1e3
            for p in sorted({r.get("precision") for r in rows if r.get("precision")})
            if p in arch.fma_flops_per_clock_per_sm}
