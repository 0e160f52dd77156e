"""Nsight Compute (``ncu``) as the harness runs it: the one table of the metrics it reads, where
``ncu`` is found, which of those metrics this ncu has on this GPU, and a kernel profiled through
``harness launch`` (checked first, then launched between cuProfilerStart/Stop).

ncu is a separate program: it runs here as a subprocess, never through cuda.bindings. Metric
names change across ncu versions and architectures, so every name lives in :data:`METRICS`
and nowhere else; :func:`check_metrics` compares them with ``ncu --query-metrics`` before
anything is profiled, and the parser (ncu_csv.py) refuses output that lacks one, so a renamed
metric fails with its name instead of reading as zero.

Why CSV: ``ncu --csv --page raw --print-units base`` prints one row per launch with a column
per metric, in base units; it is plain text, so the parser is tested on committed output with
no GPU. Nsight Compute's ``ncu_report`` module reads the binary ``.ncu-rep`` instead, but it
ships inside each ncu install (not on sys.path, tied to that version) and needs a report file
per run; ``nsight-python`` profiles decorated Python functions in its own process and adds
pandas and ncu_report to the dependencies, while here each kernel must go through the
harness's own launch command (checked first, one process per kernel) on hosts with no package
registry.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT


@dataclass(frozen=True)
class Metric:
    """One quantity the profile reads, and the name this ncu gives it."""

    key: str
    """The harness's name for it (the JSON's keys)."""
    name: str
    """ncu's name with its roll-up and suffix, as ``--metrics`` takes it and the CSV heads its
    column."""
    kind: str
    """What its unit measures (ncu_csv.UNITS): bytes, sectors, count, percent, ns, hz, ratio."""
    group: str
    """The ``--metrics`` set it belongs to (:data:`GROUPS`)."""
    what: str
    section: str = ""
    """Collected by ``--section SECTION`` (a section's own metric, not in --query-metrics)."""
    only_archs: tuple[str, ...] = ()
    """The architectures that have it (empty: every one)."""

    @property
    def base(self) -> str:
        """The name --query-metrics lists: without the roll-up and suffix."""
        return self.name.split(".", 1)[0]


STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss",
                 "lg_throttle", "long_scoreboard", "math_pipe_throttle", "membar",
                 "mio_throttle", "misc", "no_instruction", "not_selected", "selected",
                 "short_scoreboard", "sleeping", "tex_throttle", "wait")
"""ncu's warp stall reasons (WarpStateStats); ``selected`` is the issuing warp, not a stall."""

METRICS: tuple[Metric, ...] = (
    Metric("duration_ns", "gpu__time_duration.sum", "ns", "time",
           "GPU time of the launch"),
    Metric("sm_clock_hz", "sm__cycles_elapsed.avg.per_second", "hz", "time",
           "SM clock during the launch"),
    Metric("dram_read_bytes", "dram__bytes_read.sum", "bytes", "dram", "bytes read from DRAM"),
    Metric("dram_write_bytes", "dram__bytes_write.sum", "bytes", "dram",
           "bytes written to DRAM"),
    Metric("l2_hit_pct", "lts__t_sector_hit_rate.pct", "percent", "dram",
           "L2 sector lookups that hit"),
    Metric("l2_read_sectors_from_sm", "lts__t_sectors_srcunit_tex_op_read.sum", "sectors", "l2",
           "32-byte sectors the SMs (L1) read from L2"),
    Metric("l2_write_sectors_from_sm", "lts__t_sectors_srcunit_tex_op_write.sum", "sectors",
           "l2", "32-byte sectors the SMs (L1) wrote to L2"),
    Metric("smem_ld_requests", "smsp__inst_executed_op_shared_ld.sum", "count", "smem",
           "shared-load instructions (warp level; LDS, not LDSM)"),
    Metric("smem_st_requests", "smsp__inst_executed_op_shared_st.sum", "count", "smem",
           "shared-store instructions (warp level)"),
    Metric("smem_ld_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
           "count", "smem", "shared-load wavefronts"),
    Metric("smem_st_wavefronts", "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
           "count", "smem", "shared-store wavefronts"),
    Metric("smem_ld_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
           "count", "smem", "shared-load bank conflicts (wavefronts beyond the ideal)"),
    Metric("smem_st_conflicts", "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
           "count", "smem", "shared-store bank conflicts"),
    Metric("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "percent", "occupancy", "achieved occupancy: active warps over the SM's maximum"),
    Metric("theoretical_occupancy_pct", "sm__maximum_warps_per_active_cycle_pct", "percent",
           "occupancy", "theoretical occupancy", section="Occupancy"),
    Metric("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "percent",
           "throughput", "SM throughput, % of peak"),
    Metric("memory_throughput_pct",
           "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "percent",
           "throughput", "memory throughput (the busiest of DRAM, L2, L1), % of peak"),
    Metric("tensor_pipe_pct",
           "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "percent",
           "throughput", "tensor pipe (HMMA, and HGMMA on sm_90) active cycles, % of peak"),
    *(Metric(f"stall_{reason}", f"smsp__average_warps_issue_stalled_{reason}_per_issue_active"
             ".ratio", "ratio", "stalls", f"warps stalled on {reason} per issued instruction",
             only_archs=("sm_90", "sm_90a") if reason == "gmma" else ())
      for reason in STALL_REASONS),
)
"""Every ncu metric the harness reads: the one place their names are written."""

GROUPS = ("time", "dram", "l2", "smem", "occupancy", "throughput", "stalls")
"""``--metrics`` sets; ``time`` is always collected (the duration and the clock)."""


def select(groups: Sequence[str], arch: str = "") -> tuple[Metric, ...]:
    """The metrics of ``groups`` (``all`` for every one) that ``arch`` has, ``time`` always."""
    wanted = set(GROUPS) if "all" in groups else {"time", *groups}
    unknown = sorted(wanted - set(GROUPS))
    if unknown:
        raise HarnessError(f"--metrics {','.join(groups)}: unknown set(s) "
                           f"{', '.join(unknown)}; expected all or a comma list of "
                           f"{', '.join(GROUPS)}")
    return tuple(m for m in METRICS if m.group in wanted
                 and (not arch or not m.only_archs or arch in m.only_archs))


def by_key(key: str) -> Metric:
    return next(m for m in METRICS if m.key == key)


# --- finding ncu --------------------------------------------------------------------------

NCU_PLACES = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda*/bin/ncu",
              "/usr/local/cuda*/nsight-compute*/ncu", "/opt/nvidia/nsight-compute*/ncu")
"""Where NVIDIA's packages install ncu, searched after PATH."""
INSTALL_HINT = ("install Nsight Compute (NVIDIA's `nsight-compute` package, e.g. apt install "
                "nsight-compute-2025.3.1, or the CUDA toolkit's), put ncu on PATH, or pass "
                "--ncu PATH")


def _version_key(path: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def find_ncu(explicit: str | None = None, places: Sequence[str] = NCU_PLACES) -> str:
    """The ncu to run: ``explicit`` (--ncu), else the one on PATH, else the newest in
    ``places``; a HarnessError that says what to install when there is none."""
    if explicit:
        if shutil.which(explicit) is None:
            raise HarnessError(f"--ncu {explicit}: no such executable; {INSTALL_HINT}")
        return shutil.which(explicit)
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted((p for pattern in places for p in glob.glob(pattern)
                         if os.access(p, os.X_OK)), key=_version_key)
    if candidates:
        return candidates[-1]
    raise HarnessError(f"Nsight Compute's ncu is not on PATH nor in {', '.join(places)}: "
                       f"{INSTALL_HINT}")


def _run(cmd: Sequence[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s,
                              env=_env())
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{what} took more than {timeout_s:g} s and was stopped: "
                           f"{' '.join(cmd)}") from None
    except OSError as exc:
        raise HarnessError(f"cannot run {cmd[0]} ({exc.strerror}): {INSTALL_HINT}") from None


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def version(ncu: str) -> str:
    """``ncu --version``'s last line (``Version 2025.3.1.0 (build ...)``)."""
    out = _run([ncu, "--version"], 60, "ncu --version")
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown"


# --- which metrics this ncu has -----------------------------------------------------------

def parse_query(text: str) -> frozenset[str]:
    """The metric names of ``ncu --query-metrics`` output (the first column of its table)."""
    names = set()
    for line in text.splitlines():
        if not line or line[0].isspace() or line.startswith(("-", "=", "Metric Name", "Chip ")):
            continue
        names.add(line.split()[0])
    if not names:
        raise HarnessError("ncu --query-metrics printed no metric names; expected its table "
                           "(Metric Name, Metric Type, ...)")
    return frozenset(names)


def available_metrics(ncu: str, chip: str | None = None) -> frozenset[str]:
    """The base metric names this ncu has for the GPU here (or for ``chip``)."""
    cmd = [ncu, "--query-metrics", *(["--chip", chip] if chip else [])]
    out = _run(cmd, 120, "ncu --query-metrics")
    if out.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} failed (exit {out.returncode}): "
                           f"{tail(out.stdout + out.stderr)}")
    return parse_query(out.stdout)


def check_metrics(metrics: Sequence[Metric], available: frozenset[str], where: str) -> None:
    """Every metric of ``metrics`` that --metrics names must be in ``available``; otherwise a
    HarnessError naming each missing one, so nothing is profiled for a name that would read
    as nothing."""
    missing = [m for m in metrics if not m.section and m.base not in available]
    if missing:
        each = "; ".join(f"{m.base} (for {m.key}: {m.what})" for m in missing)
        raise HarnessError(f"{where} has no metric {each}. The names are in METRICS in "
                           f"harness/bench/ncu.py: find this version's name in `ncu "
                           f"--query-metrics` and correct the table")


# --- profiling one kernel -----------------------------------------------------------------

CLOCK_CONTROL = "none"
"""``ncu --clock-control none``: the GPU's own clocks, as the harness times them (ncu would
otherwise lock them to base)."""
CACHE_CONTROL = "all"
"""``ncu --cache-control all``: caches flushed before every replay pass, as the harness's
cold-L2 timing."""


def command(ncu: str, metrics: Sequence[Metric], launch_args: Sequence[str]) -> list[str]:
    """The ncu command line that profiles ``harness launch`` with ``launch_args``."""
    sections = sorted({m.section for m in metrics if m.section})
    return [ncu, "--csv", "--page", "raw", "--print-units", "base",
            "--clock-control", CLOCK_CONTROL, "--cache-control", CACHE_CONTROL,
            "--profile-from-start", "off",
            *[arg for s in sections for arg in ("--section", s)],
            "--metrics", ",".join(m.name for m in metrics if not m.section),
            sys.executable, "-m", "harness", *launch_args]


def launch_args(kernel: str, size: Sequence[int], repeats: int, baseline: bool,
                kernel_dirs: Sequence[Path] = (), no_builtin: bool = False,
                dims: bool = False) -> list[str]:
    """``harness launch``'s arguments for one kernel at one size: a GEMM's M,N,K, or with
    ``dims`` a buffers kernel's dims (``size`` holds as many as the kernel has), as
    ``4096x1024``."""
    return [*[a for d in kernel_dirs for a in ("--kernel-dir", str(d))],
            *(["--no-builtin"] if no_builtin else []),
            "launch", kernel, "--size", ("x" if dims else ",").join(map(str, size)),
            "--repeats", str(repeats), *([] if baseline else ["--no-baseline"])]


def profile(cmd: Sequence[str], timeout_s: float) -> tuple[str, str]:
    """Run ``cmd`` (from :func:`command`): ncu's CSV (stdout) and the launch's stderr, or a
    HarnessError with ncu's (or the launch's) own words."""
    out = _run(cmd, timeout_s, "profiling under ncu")
    text = out.stdout + "\n" + out.stderr
    if "ERR_NVGPUCTRPERM" in text:
        raise HarnessError("ncu may not read the GPU's performance counters here "
                           "(ERR_NVGPUCTRPERM): run as root, or let users profile "
                           "(NVreg_RestrictProfilingToAdminUsers=0); see "
                           "https://developer.nvidia.com/ERR_NVGPUCTRPERM")
    if out.returncode != 0:
        raise HarnessError(f"ncu exited {out.returncode}: {tail(text)}")
    return out.stdout, out.stderr


def tail(text: str, lines: int = 6) -> str:
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(no output)"
