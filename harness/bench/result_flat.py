"""Flat rows of schema 1: reports written before the schema had a version, read into the
nested form of this schema (:func:`nested_from_flat`) for
:func:`harness.bench.result.result_from_json`."""

from __future__ import annotations

from typing import Any

from harness.errors import ReportError
from harness.typed_json import value_of


def need(row: dict, key: str):
    """A flat row's ``key``; ReportError naming it when it is not there."""
    if key not in row:
        raise ReportError(f"{key} is missing (a flat row of schema 1)")
    return row[key]


def _timing_from_flat(row: dict, prefix: str, m, n, k) -> dict[str, Any]:
    power_gflops = row.get(f"{prefix}power_gflops")
    ms = None
    if power_gflops:
        power = value_of(float, power_gflops, f"{prefix}power_gflops")
        sizes = [value_of(int, v, name) for v, name in ((m, "m"), (n, "n"), (k, "k"))]
        if power > 0:
            ms = 2.0 * sizes[0] * sizes[1] * sizes[2] / (power * 1e9) * 1e3
    return {"median_ms": need(row, f"{prefix}median_ms"), "p20_ms": need(row, f"{prefix}p20_ms"),
            "p80_ms": need(row, f"{prefix}p80_ms"), "min_ms": None, "max_ms": None,
            "reps": need(row, f"{prefix}reps"), "cold_l2": row.get("cold_l2", True),
            "sm_clock_mhz": row.get(f"{prefix}sm_clock_mhz"),
            "sm_clock_min_mhz": row.get(f"{prefix}sm_clock_min_mhz"),
            "sm_clock_max_mhz": row.get(f"{prefix}sm_clock_max_mhz"),
            "queue_ahead_ms": row.get(f"{prefix}queue_ahead_ms"),
            "clock_limits": row.get(f"{prefix}clock_limits") or "",
            "power_w": row.get(f"{prefix}power_w"),
            "power_span_s": row.get(f"{prefix}power_span_s") or 0.0,
            "power_ms_per_launch": ms}


def nested_from_flat(row: dict) -> dict[str, Any]:
    """A flat row of schema 1 (reports written before the schema had a version) in the nested
    form of this schema."""
    m, n, k = need(row, "m"), need(row, "n"), need(row, "k")
    nested: dict[str, Any] = {
        "kernel": {"name": row["kernel"], "file": row.get("file", ""),
                   "precision": row.get("precision", ""), "params": row.get("params") or {}},
        "m": m, "n": n, "k": k, "status": row.get("status", ""), "message": row.get("message", "")}
    if "registers" in row:
        nested["resources"] = {"registers": row["registers"],
                               "static_smem_bytes": row.get("static_smem_bytes", 0),
                               "spill_store_bytes": row.get("spill_store_bytes", 0),
                               "spill_load_bytes": row.get("spill_load_bytes", 0)}
    if "block_threads" in row:
        nested["launch"] = {"block_threads": row["block_threads"], "grid": row.get("grid") or None,
                            "dynamic_smem_bytes": row.get("dynamic_smem_bytes")}
    if "blocks_per_sm_offline" in row:
        nested["occupancy"] = {
            "driver_blocks_per_sm": need(row, "blocks_per_sm"),
            "offline_blocks_per_sm": row["blocks_per_sm_offline"],
            "occupancy_pct": need(row, "occupancy_pct"), "limiter": need(row, "limiter"),
            "waves_per_sm": row.get("waves_per_sm")}
    if "checks_total" in row:
        nested["checks"] = {"passed": need(row, "checks_passed"), "total": row["checks_total"],
                            "max_rel_err": row.get("max_rel_err"),
                            "skipped": row.get("check_skips") or ()}
    if "median_ms" in row:
        nested["timing"] = _timing_from_flat(row, "", m, n, k)
        nested["peak_gflops_at_clock"] = row.get("peak_gflops_at_clock")
    if "cublas_median_ms" in row:
        nested["baseline"] = {"compute": row.get("cublas_compute", ""),
                              "timing": _timing_from_flat(row, "cublas_", m, n, k)}
    if row.get("ceiling_gflops") is not None:
        nested["ceiling"] = {"gflops": row["ceiling_gflops"],
                             "instruction": need(row, "ceiling_instruction"),
                             "sm_clock_mhz": row.get("ceiling_sm_clock_mhz")}
    if "speedup" in row:
        within = row.get("within_noise")
        nested["comparison"] = {"compared_to": need(row, "compared_to"),
                                "speedup": row["speedup"], "speedup_p20": need(row, "speedup_p20"),
                                "speedup_p80": need(row, "speedup_p80"),
                                "within_noise": bool(within) if within in (None, 0, 1) else within}
    if "sass" in row:
        nested["sass"] = row["sass"]
    return nested
