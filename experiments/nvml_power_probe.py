"""How often NVML's power readings change on this GPU, and which one a timing window can use.

    python3 experiments/nvml_power_probe.py [KERNEL] [--size 4096] [--busy-s 3]

Keeps the GPU busy with one GEMM kernel (checked first) for ``--busy-s`` seconds, then idle
for half a second, while the host polls NVML every millisecond for: the total-energy counter
(mJ), ``nvmlDeviceGetPowerUsage`` (mW) and the POWER_INSTANT and POWER_AVERAGE field values
(mW, with the driver's own timestamp). For each source: how often its value changed (median
interval), and the mean power it gives over the busy time; then every 300 ms window of the
busy time (the harness's default budget) measured two ways, energy-counter delta over wall
time and the mean of the instant samples, against the energy counter over the whole busy time.
Writes reports/<gpu>/nvml-power-probe-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, discover, select
from harness.run.runner import parse_size

POLL_S = 0.001
WINDOW_S = 0.3
IDLE_S = 0.5
CHUNK, AHEAD = 20, 8  # launches per chunk; chunks queued ahead of the GPU


def poll(nvml, handle) -> dict:
    """One reading of every source, with the host time it was taken."""
    fields = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_POWER_INSTANT,
                                                    nvml.NVML_FI_DEV_POWER_AVERAGE])
    row = {"t": time.perf_counter(),
           "energy_mj": float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle)),
           "usage_mw": float(nvml.nvmlDeviceGetPowerUsage(handle))}
    for name, f in zip(("instant", "average"), fields, strict=True):
        ok = f.nvmlReturn == nvml.NVML_SUCCESS
        row[f"{name}_mw"] = float(f.value.uiVal) if ok else None
        row[f"{name}_stamp_us"] = int(f.timestamp) if ok else None
    return row


def change_intervals_ms(rows: list[dict], key: str) -> list[float]:
    """Host-time gaps between the readings where ``key`` changed value."""
    times = [r["t"] for prev, r in zip(rows, rows[1:], strict=False) if r[key] != prev[key]]
    return [1e3 * (b - a) for a, b in zip(times, times[1:], strict=False)]


def measure(name: str, size: str, busy_s: float) -> dict:
    from harness.gpu.driver import Event
    from harness.kinds.gemm.checks import check_one
    from harness.kinds.gemm.launches import launcher
    from harness.kinds.gemm.session import GemmSession

    m, n, k = parse_size(size)
    (kernel,) = select(discover(), [name])
    with GemmSession.open() as session:
        clocks, stream = session.clocks, session.stream
        if clocks.nvml is None:
            raise HarnessError(clocks.reason)
        nvml, handle = clocks.nvml, clocks.handle
        gemm = session.load(kernel)
        kernel = gemm.kernel
        failed = [r.message for r in check_one(gemm, stream, m, n, k, seed=3) if not r.passed]
        if failed:
            raise HarnessError(f"{kernel.name} fails the check: {failed[0]}")
        ops = session.operands(kernel, m, n, k, seed=3)
        ops.poison_c(stream)
        run = launcher(gemm, ops, session)
        start, end = Event(), Event()
        start.record(stream)
        for _ in range(20):
            run()
        end.record(stream)
        stream.synchronize("estimate")
        launch_ms = end.elapsed_ms(start) / 20
        time.sleep(IDLE_S)
        # launches go in chunks, a few chunks ahead of the GPU, so that the host polls the
        # whole time instead of blocking on a full launch queue
        chunks = max(1, int(busy_s * 1e3 / launch_ms / CHUNK))
        count = chunks * CHUNK
        rows = [poll(nvml, handle)]
        start.record(stream)
        marks: list = []
        while len(marks) < chunks or not end.done():
            if len(marks) < chunks and sum(not e.done() for e in marks[-AHEAD:]) < AHEAD:
                for _ in range(CHUNK):
                    run()
                marks.append(Event())
                marks[-1].record(stream)
                if len(marks) == chunks:
                    end.record(stream)
            rows.append(poll(nvml, handle))
            time.sleep(POLL_S)
        t_done = time.perf_counter()
        while time.perf_counter() < t_done + IDLE_S:
            rows.append(poll(nvml, handle))
            time.sleep(POLL_S)
        gpu_s = end.elapsed_ms(start) / 1e3
        ops.close()
        facts = session.facts()
    # the busy time as the host saw it: from the first reading to the last launch's end
    busy = [r for r in rows if r["t"] <= t_done]
    t0, t1 = busy[0]["t"], busy[-1]["t"]
    whole_w = (busy[-1]["energy_mj"] - busy[0]["energy_mj"]) / 1e3 / (t1 - t0)
    sources = {}
    for key in ("energy_mj", "usage_mw", "instant_mw", "average_mw"):
        gaps = change_intervals_ms(busy, key)
        sources[key] = {"changes": len(gaps) + 1 if gaps else 0,
                        "median_interval_ms": statistics.median(gaps) if gaps else None}
    for key in ("usage_mw", "instant_mw", "average_mw"):
        values = [r[key] for r in busy if r[key] is not None]
        sources[key]["mean_w"] = statistics.fmean(values) / 1e3 if values else None
    sources["energy_mj"]["mean_w"] = whole_w
    windows = []
    t = t0 + 0.5  # skip the first half second: the clock and power settle
    while t + WINDOW_S <= t1:
        inside = [r for r in busy if t <= r["t"] <= t + WINDOW_S]
        if len(inside) > 2:
            span = inside[-1]["t"] - inside[0]["t"]
            energy_w = (inside[-1]["energy_mj"] - inside[0]["energy_mj"]) / 1e3 / span
            inst = [r["instant_mw"] for r in inside if r["instant_mw"] is not None]
            windows.append({"start_s": t - t0, "energy_w": energy_w,
                            "instant_mean_w": statistics.fmean(inst) / 1e3 if inst else None})
        t += WINDOW_S
    return {"facts": facts, "source": kernel, "kernel": kernel.name, "size": f"{m}x{n}x{k}",
            "launches": count, "launch_ms": launch_ms, "gpu_busy_s": gpu_s,
            "whole_busy_energy_w": whole_w, "sources": sources, "windows": windows,
            "readings": len(rows)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", nargs="?", default="12_mma_tma_bf16:m256n128e")
    ap.add_argument("--size", default="4096")
    ap.add_argument("--busy-s", type=float, default=3.0)
    ap.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = ap.parse_args(argv)
    from tabulate import tabulate

    from harness.report import files

    try:
        result = measure(args.kernel, args.size, args.busy_s)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    facts, kernel = result.pop("facts"), result.pop("source")
    meta = files.metadata(facts, ["python3", "experiments/nvml_power_probe.py", *sys.argv[1:]],
                          {}, [parse_size(args.size)], [kernel])
    stem = (args.report_dir / files.gpu_slug(facts["name"])
            / f"nvml-power-probe-{files.run_stamp()}")
    fmt = lambda v, f: "" if v is None else format(v, f)  # noqa: E731
    src = tabulate([[key, s["changes"], fmt(s["median_interval_ms"], ".1f"),
                     fmt(s["mean_w"], ".0f")] for key, s in result["sources"].items()],
                   headers=["source", "changes while busy", "median ms between changes",
                            "mean W while busy"], tablefmt="github")
    win = tabulate([[f"{w['start_s']:.1f}", f"{w['energy_w']:.0f}",
                     fmt(w["instant_mean_w"], ".0f")] for w in result["windows"]],
                   headers=["window start s", "energy-counter W", "mean of instant W"],
                   tablefmt="github")
    body = [f"- load: {result['launches']} launches of {result['kernel']} at {result['size']} "
            f"({result['launch_ms']:.3f} ms each), {result['gpu_busy_s']:.2f} s of GPU time; "
            f"{result['readings']} readings, one every ~{POLL_S * 1e3:.0f} ms\n"
            f"- the energy counter over the whole busy time: "
            f"{result['whole_busy_energy_w']:.0f} W", "", src, "",
            f"{WINDOW_S * 1e3:.0f} ms windows of the busy time:", "", win, ""]
    files.write_table_report(meta, [result], stem, "NVML power readings under load", body)
    print("\n".join(body))
    print(f"written: {stem}.json, {stem}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
