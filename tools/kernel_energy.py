"""Board energy per FLOP of a kernel and of its measurement knobs: where a capped card's watts go.

    python3 tools/kernel_energy.py 12_mma_tma_bf16:m256n128e --knob NOSTORE=1 \
        --knob NOLOAD=1 --knob NOLOAD=1,NOSTORE=1 [--size 4096] [--seconds 2] [--rounds 2]

The points are the kernel as built and the kernel with each ``--knob`` setting (any spec
parameter). Every point is checked against the float64 reference at the size first: it must
pass, except that a point setting NOSTORE or NOLOAD must fail, since those knobs skip work by
design (ptx/hgemm/mma_sync_gemm.ptxh: NOSTORE skips the epilogue, NOLOAD 1 with TMA stops the
copies after the first STAGES tiles); each row says which. Then, round by
round so that the card's heating touches every point alike, each point runs back to back for
``--seconds`` with warm L2 (``Timer.power``): the board's mean power from NVML's energy counter,
the GPU time per launch, TFLOP/s, energy per FLOP and NVML's SM clock. On a card held by its
power cap the sustained rate is the cap over the energy per FLOP, so the differences between
points say what each part of the kernel costs. Writes reports/<gpu>/kernel-energy-<date>.*.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.errors import HarnessError  # noqa: E402
from harness.kernels.registry import Kernel, discover, select  # noqa: E402
from harness.run.runner import parse_size  # noqa: E402

WRONG_BY_DESIGN = {"NOLOAD", "NOSTORE"}  # knobs that skip work: their results must be wrong


def parse_knob(text: str) -> dict[str, int]:
    """``"NOLOAD=1,NOSTORE=1"`` -> {"NOLOAD": 1, "NOSTORE": 1}."""
    knobs = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            knobs[name.strip()] = int(value)
        except ValueError:
            raise HarnessError(f"--knob {text!r}: expected NAME=INT[,NAME=INT...], e.g. "
                               "NOSTORE=1 or NOLOAD=1,NOSTORE=1") from None
    return knobs


def points(name: str, knobs: list[str]) -> list[tuple[Kernel, dict[str, int]]]:
    """The kernel as built, then one point per knob setting; unknown knobs fail here."""
    (base,) = select(discover(), [name])
    out = [(base, {})]
    for text in knobs:
        setting = parse_knob(text)
        unknown = sorted(set(setting) - set(dict(base.params)))
        if unknown:
            raise HarnessError(f"{base.name} has no parameter {', '.join(unknown)}; its "
                               f"parameters: {', '.join(sorted(dict(base.params)))}")
        label = ",".join(f"{k}={v}" for k, v in setting.items())
        out.append((base.with_params(setting, f"{base.name}+{label}"), setting))
    return out


def measure(chosen: list[tuple[Kernel, dict[str, int]]], size: str, seconds: float,
            rounds: int) -> dict:
    from harness.bench.gemm import LoadedGemm
    from harness.build.compile import compile_kernel
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.driver import Device, Stream
    from harness.gpu.timing import Timer
    from harness.run.worker import Operands, check_one

    m, n, k = parse_size(size)
    flop = 2.0 * m * n * k
    with Device(0) as device:
        stream = Stream()
        clocks = ClockSampler(device.pci_bus_id)
        timer = Timer(stream, device.l2_bytes, clocks)
        runs, rows = [], []
        ops = None
        for kernel, setting in chosen:
            kernel = kernel.for_arch(device.arch.name)
            gemm = LoadedGemm(device, kernel, compile_kernel(kernel, device.arch.name))
            checks = check_one(gemm, stream, m, n, k, seed=11)
            failed = [r.message for r in checks if not r.passed]
            checked = f"passed ({len(checks)} checks)"
            if failed and set(setting) & WRONG_BY_DESIGN:
                checked = "fails, as its measurement knob must"
            elif failed:
                raise HarnessError(f"{kernel.name} fails the check: {failed[0]}")
            elif set(setting) & WRONG_BY_DESIGN:
                raise HarnessError(f"{kernel.name} passes the check, but its knob should make "
                                   "it wrong: the knob is not reaching the kernel")
            if ops is None:
                ops = Operands(stream, m, n, k, kernel.spec.precision, kernel.spec.layout_b,
                               seed=11)
            runs.append((kernel, checked, gemm.launcher(m, n, k, 1.0, ops.a.address,
                                                        ops.b.address, 0.0, ops.c.address,
                                                        stream)))
        for r in range(rounds):
            for kernel, checked, run in runs:
                p = timer.power(run, seconds)
                rows.append({"kernel": kernel.name, "round": r, "checked": checked,
                             "size": f"{m}x{n}x{k}", "power_w": p.power_w,
                             "power_span_s": p.span_s, "ms_per_launch": p.ms_per_launch,
                             "launches": p.launches, "tflops": flop / p.ms_per_launch / 1e9,
                             "pj_per_flop": 1e12 * p.energy_j / flop,
                             "nvml_sm_mhz": p.sm_clock_mhz, "clock_limits": p.clock_limits})
                print(f"round {r} {kernel.name}: {p.power_w:.0f} W, "
                      f"{flop / p.ms_per_launch / 1e9:.1f} TFLOP/s, "
                      f"{rows[-1]['pj_per_flop']:.3f} pJ/FLOP", file=sys.stderr)
        ops.close()
        return {"gpu": device.name, "clocks": clocks.info(), "rows": rows}


def summary(rows: list[dict]) -> list[list]:
    """Per point: medians over the rounds, and the range of pJ/FLOP."""
    out = []
    for name in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r for r in rows if r["kernel"] == name]
        pj = [r["pj_per_flop"] for r in mine]
        out.append([name, mine[0]["checked"], len(mine),
                    f"{statistics.median(r['power_w'] for r in mine):.0f}",
                    f"{statistics.median(r['tflops'] for r in mine):.1f}",
                    f"{statistics.median(r['nvml_sm_mhz'] for r in mine):.0f}",
                    f"{statistics.median(pj):.3f} ({min(pj):.3f}-{max(pj):.3f})",
                    ", ".join(sorted({r["clock_limits"] for r in mine}))])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", metavar="KERNEL")
    ap.add_argument("--knob", action="append", default=[], metavar="NAME=V[,NAME=V]")
    ap.add_argument("--size", default="4096")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--report-dir", type=Path, default=ROOT / "reports")
    args = ap.parse_args(argv)
    from tabulate import tabulate

    from harness.report import files as report

    try:
        if not 0.5 <= args.seconds <= 60 or args.rounds < 1:
            raise HarnessError(f"--seconds {args.seconds:g} --rounds {args.rounds}: expected "
                               "0.5 to 60 seconds (NVML's power moves every ~100 ms) and at "
                               "least one round")
        chosen = points(args.kernel, args.knob)  # bad names fail before the GPU is opened
        result = measure(chosen, args.size, args.seconds, args.rounds)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stem = report.write_tool_json(result, "tools/kernel_energy.py", sys.argv[1:], "kernel-energy",
                                  args.report_dir)
    table = tabulate(summary(result["rows"]),
                     headers=["point", "checked", "rounds", "board W", "TFLOP/s", "NVML MHz",
                              "pJ/FLOP median (range)", "clock held by"], tablefmt="github")
    text = (f"# Board energy per FLOP: {result['gpu']}\n\n"
            f"- date (UTC): {result['date']}\n- command: `{result['command']}`\n"
            f"- clocks: {result['clocks']}\n"
            f"- method: each point run back to back for {args.seconds:g} s with warm L2, "
            f"{args.rounds} rounds in turn; board power from NVML's energy counter between its "
            "first and last move in the pass; pJ/FLOP = W x GPU time per launch / FLOP\n\n"
            f"{table}\n")
    report.finish_tool_report(stem, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
