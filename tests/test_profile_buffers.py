"""``harness profile`` for buffers kernels (kind = "buffers"): the napkin's bytes (the spec's
``bytes``) beside Nsight Compute's DRAM bytes. Without a GPU: the rows and tables from
stand-in ncu output, the ``harness launch`` arguments a buffers kernel gets under ncu, the
command end to end with stand-ins for the GPU and ncu, and what the command refuses. With a
GPU and ncu: sum_04_vec4 profiled for real."""

import json
import subprocess
import sys

import pytest
from conftest import harness_env

from harness.bench import ncu, ncu_csv
from harness.errors import HarnessError
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT, load_registry
from harness.kinds.buffers import profile as profile_buffers
from harness.kinds.buffers.launch import default_dims, parse_dims
from harness.kinds.buffers.measure import padded
from harness.report import profile as report

SUM = PROJECT_ROOT / "cu" / "memory" / "sum_04_vec4.cu"
N = 1 << 24
NAPKIN = 4 * N + 4  # the spec's bytes = "4*N + 4"
DRAM_READ, DRAM_WRITE, NCU_NS = 67_110_912, 32, 25_000


def _kernel(path=SUM):
    (k,) = load_registry([], kind=None).select([str(path)])
    return k.for_arch("sm_90")


def _csv(name="sum_vec4", launches=1) -> str:
    """ncu's raw CSV (--metrics dram: time and DRAM) of ``launches`` launches of ``name``."""
    metrics = ncu.select(["dram"], "sm_90")
    units = {"ns": "ns", "hz": "hz", "bytes": "byte", "percent": "%"}
    values = {"duration_ns": f"{NCU_NS:,}", "sm_clock_hz": "1,980,000,000.00",
              "dram_read_bytes": f"{DRAM_READ:,}", "dram_write_bytes": f"{DRAM_WRITE}",
              "l2_hit_pct": "0.52"}
    head = ["ID", "Kernel Name", "Block Size", "Grid Size", *(m.name for m in metrics)]
    unit = ["", "", "", "", *(units[m.kind] for m in metrics)]
    rows = [[str(i), name, "(256, 1, 1)", "(1056, 1, 1)", *(values[m.key] for m in metrics)]
            for i in range(launches)]
    quoted = [",".join(f'"{cell}"' for cell in line) for line in (head, unit, *rows)]
    return "==PROF== Connected to process 1\n" + "\n".join(quoted) + "\n"


def _timing(median_ms=0.026, regime="sustained"):
    return Timing(median_ms, median_ms, median_ms, median_ms, median_ms, 10, True, 1980.0,
                  1980.0, 1980.0, 1.0, regime=regime,
                  gap_ms=5.0 if regime == "isolated" else 0.0)


def _row(factor=2.0):
    from harness.commands.profile import info, predicted

    k = _kernel()
    size = padded((N,))
    metrics = ncu.select(["dram"], "sm_90")
    ours, others = ncu_csv.split(ncu_csv.parse(_csv(), metrics), k.entry_expression, 1)
    assert others == []  # launched alone: nothing else in the range
    about = info(k, size)
    dims = about.pop("dims")
    return profile_buffers.row(k.name, about, size, dims, predicted(k, "sm_90", size),
                               ncu_csv.per_call(ours, metrics, 1),
                               {"sustained": _timing(), "isolated": _timing(0.025, "isolated")},
                               factor, ncu_kernels=["sum_vec4"], launches=1)


# --- the dims and the launch under ncu -----------------------------------------------------

def test_size_is_read_as_the_dims():
    k = _kernel()
    assert parse_dims(k, "1<<28") == (1 << 28,)
    assert default_dims(k) == (1 << 30,)  # the spec's largest size
    softmax = _kernel(PROJECT_ROOT / "cu" / "memory" / "softmax_04_pipelined.cu")
    assert parse_dims(softmax, "4096x1024") == (4096, 1024)
    with pytest.raises(HarnessError, match=r"'4096x1x1' gives 3 value\(s\) for the 1 dim\(s\) "
                                           r"N.*the dims of sum_04_vec4; M,N,K is a GEMM's"):
        parse_dims(k, "4096,1,1")


def test_the_launch_a_buffers_kernel_gets_under_ncu():
    """Its dims, not the runner's padded M,N,K; no baseline; its extern "C" entry is what
    ncu's kernel name is matched against."""
    from harness.commands.profile import launch_pattern, launch_size

    k = _kernel()
    size = padded((1 << 28,))
    assert size == (1 << 28, 1, 1) and launch_size(k, size) == (1 << 28,)
    args = ncu.launch_args(launch_pattern(k, [], False), launch_size(k, size), 3, False,
                           dims=True)
    assert args[:2] == ["launch", "sum_04_vec4"]  # a built-in kernel: its registry key
    assert args[2:] == ["--size", "268435456", "--repeats", "3", "--no-baseline"]
    softmax = _kernel(PROJECT_ROOT / "cu" / "memory" / "softmax_04_pipelined.cu")
    assert ncu.launch_args("s", launch_size(softmax, (64, 4096, 1)), 1, False,
                           dims=True)[2:4] == ["--size", "64x4096"]
    assert k.entry_expression == "sum_vec4"
    launch = ncu_csv.Launch(0, "sum_vec4", "", "")
    assert ncu_csv.is_entry(launch, k.entry_expression)
    assert ncu_csv.is_entry(ncu_csv.Launch(0, "sum_vec4(const float *, float *, long)", "",
                                           ""), k.entry_expression)


# --- rows and tables ------------------------------------------------------------------------

def test_a_buffers_row_puts_the_napkins_bytes_beside_dram():
    r = _row()
    assert r["dims"] == {"N": N} and r["size"] == [N, 1, 1] and r["status"] == "profiled"
    assert r["predicted"]["compulsory_bytes"] == r["predicted"]["global_bytes"] == NAPKIN
    assert r["predicted"]["occupancy_pct"] > 0  # the harness's calculator
    d = r["derived"]
    assert d["dram_bytes"] == DRAM_READ + DRAM_WRITE
    assert d["ncu_ms"] == pytest.approx(0.025)
    assert d["napkin_gbps"] == pytest.approx(NAPKIN / 25e-6 / 1e9)
    assert d["dram_gbps"] == pytest.approx((DRAM_READ + DRAM_WRITE) / 25e-6 / 1e9)
    assert not {"flops", "ncu_gflops", "intensity_dram"} & set(d)  # no GEMM figure
    (dram,) = [c for c in r["comparisons"] if c["key"] == "dram_vs_napkin"]
    assert dram["ratio"] == pytest.approx((DRAM_READ + DRAM_WRITE) / NAPKIN)
    assert not dram["off"]
    sustained = r["timing"]["sustained"]
    assert sustained["gbps"] == pytest.approx(NAPKIN / 0.026e-3 / 1e9)
    assert sustained["vs_ncu"] == pytest.approx(0.026 / 0.025)
    assert "gflops" not in sustained
    assert r["timing"]["isolated"]["gap_ms"] == 5.0
    assert set(r) >= {"kernel", "role", "precision", "file", "params", "size", "status",
                      "predicted", "measured", "derived", "comparisons", "timing",
                      "ncu_kernels", "launches"}


def test_twice_the_napkins_bytes_is_flagged():
    r = _row()
    doubled = {**r["measured"], "dram_read_bytes": 2.5 * NAPKIN}
    derived = profile_buffers.derive(doubled, NAPKIN)
    (dram,) = [c for c in report.comparisons(r["predicted"], derived, doubled, 2.0,
                                             profile_buffers.COMPARISONS)
               if c["key"] == "dram_vs_napkin"]
    assert dram["off"] and dram["ratio"] == pytest.approx(2.5, abs=1e-3)
    assert "more than each buffer once" in dram["why"]
    line = report.off_lines([{**r, "comparisons": [dram]}], 2.0)[0]
    assert line.startswith(f"- sum_04_vec4 {N}: DRAM bytes / the napkin's bytes")


def test_the_buffers_table_and_no_gemm_figures():
    r = _row()
    table = profile_buffers.bytes_table([r], r["size"], fmt="github")
    header, _, line = table.splitlines()
    for column in ("napkin GB", "DRAM read GB", "DRAM write GB", "DRAM x napkin", "ncu ms",
                   "GB/s (napkin, ncu)", "DRAM GB/s", "L2 hit %", "sustained GB/s"):
        assert column in header
    assert "GFLOP" not in header and "FLOP/B" not in header
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:6] == ["sum_04_vec4", str(N), "0.0671", "0.0671", "0.0000", "1.00x"]
    assert cells[7] == "0.0250" and cells[8] == f"{NAPKIN / 25e3:.0f}"
    assert cells[10] == "0.5" and cells[11] == f"{NAPKIN / 26e3:.0f}"
    text = "\n".join(report.sections([r], 2.0))
    assert f"## N = {N} (buffers kernels)" in text
    assert "### DRAM: the napkin's bytes beside Nsight Compute's" in text
    assert "### Global traffic" not in text and "GFLOP/s" not in text  # the GEMM tables
    assert "tensor pipe %" in text  # the occupancy table, its tensor cell empty


def test_gemm_tables_leave_buffers_rows_out(tmp_path):
    from test_profile import _rows

    gemm_rows, r = _rows()[:2], _row()
    failed = report.failed_row("sum_05_onepass", {"precision": "fp32", "dims": {"N": N}},
                               padded((N,)), "ncu error", "ncu exited 1: boom")
    rows = [*gemm_rows, r, failed]
    text = "\n".join(report.sections(rows, 2.0))
    gemm_part = text.split("(buffers kernels)")[0]
    assert "## 1024x1024x1024" in gemm_part and "sum_04_vec4" not in gemm_part
    assert f"- sum_05_onepass {N}: ncu error: ncu exited 1: boom" in text
    meta = {"date_utc": "2026-11-24T12:00:00+00:00", "command": "harness profile ...",
            "gpu": "NVIDIA H100 80GB HBM3", "device": {}, "ncu": {"version": "2025.3.1"}}
    json_path, md_path, *pngs = report.write(meta, [r, failed], tmp_path / "profile-b", 2.0,
                                             {"FP32": 66908.0}, 3.35e12)
    assert pngs == []  # no roofline: a buffers row has no FLOP/s
    data = json.loads(json_path.read_text())
    assert [row["dims"] for row in data["rows"]] == [{"N": N}, {"N": N}]
    md = md_path.read_text()
    assert "napkin GB = the spec's `bytes`" in md and "| sum_04_vec4 " in md


# --- the command, end to end, with stand-ins for the GPU and ncu --------------------------

FAKE_NCU = """#!{python}
import gzip, json, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)")
elif args[:1] == ["--query-metrics"]:
    print(gzip.open({query!r}, "rt").read())
else:
    with open({log!r}, "a") as f:
        f.write(json.dumps(args) + "\\n")
    launch = args[args.index("launch"):]
    if launch[launch.index("--size") + 1] != "16777216" or "--no-baseline" not in launch:
        sys.stderr.write("harness: error: unexpected launch " + " ".join(launch) + "\\n")
        sys.exit(1)
    print({csv!r})
"""


def test_the_command_end_to_end_with_stand_ins(tmp_path, monkeypatch, capsys):
    from conftest import TESTS

    from harness.bench.result import KernelInfo, Result
    from harness.cli import main
    from harness.commands import profile as profile_command
    from harness.run.runner import RunRecord

    log = tmp_path / "ncu-args.jsonl"
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), csv=_csv(),
                                    query=str(TESTS / "data" / "ncu-query-metrics-gh100.txt.gz")))
    fake.chmod(0o755)

    class Session:
        arch = "sm_90"
        blas = type("Blas", (), {"version": 130000})()

        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def facts(self):
            return {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "sm_count": 132,
                    "l2_bytes": 50 << 20, "compute_capability": [9, 0], "clocks": {}}

    sizes = []

    def fake_run(kernels, arch, options, jsonl, say, **kw):
        sizes.append(options.sizes)
        record = RunRecord(device=Session().facts())
        for k in kernels:
            record.results.append(Result.of(KernelInfo.of(k.for_arch(arch)), *options.sizes[0])
                                  .with_parts(timing=_timing()).ended("pass", "ok"))
        return record

    monkeypatch.setattr("harness.bench.session.BenchSession", Session)
    monkeypatch.setattr("harness.cli.common.gpu", lambda: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(profile_command, "run", fake_run)
    code = main(["profile", str(SUM), "--size", "1<<24", "--metrics", "dram", "--timing",
                 "sustained", "--ncu", str(fake), "--report-dir", str(tmp_path / "reports")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert sizes == [((N, 1, 1),)]  # the runner times it at its dims padded with 1
    (args,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert args[args.index("launch"):][2:] == ["--size", "16777216", "--repeats", "1",
                                               "--no-baseline"]
    assert f"## N = {N} (buffers kernels)" in out and "DRAM x napkin" in out
    assert "ran alone under ncu" in out
    (json_path,) = (tmp_path / "reports" / "h100").glob("profile-*.json")
    (row,) = json.loads(json_path.read_text())["rows"]
    assert row["status"] == "profiled" and row["dims"] == {"N": N}
    assert row["predicted"]["compulsory_bytes"] == NAPKIN
    assert row["ncu_csv"].endswith(f"sum_04_vec4-{N}.csv.gz")


# --- what the command refuses, before it looks for a GPU ----------------------------------

def _harness(*args: str, gpu: bool = False, timeout: int = 300):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, env=harness_env(gpu=gpu),
                          timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["profile", "ptx/ceiling/mma_sync_bf16.ptx"], "is a 'ceiling' kernel; harness profile "
                                                   "takes GEMM and buffers kernels"),
    (["profile", "cu/memory/sum_04_vec4.cu", "01_naive"], "profile them apart"),
    (["profile", "cu/memory/sum_04_vec4.cu", "cu/memory/softmax_04_pipelined.cu"],
     "buffers kernels of different dims (N; ROWS x COLS)"),
    (["profile", "cu/memory/sum_04_vec4.cu", "--size", "4096x3"],
     "'4096x3' gives 2 value(s) for the 1 dim(s) N"),
    (["launch", "cu/memory/sum_04_vec4.cu", "--size", "4096,1,1"], "M,N,K is a GEMM's size"),
    (["launch", "ptx/ceiling/mma_sync_bf16.ptx"], "harness launch takes GEMM and buffers"),
])
def test_profile_and_launch_refuse_what_they_cannot_do(args, says):
    done = _harness(*args)
    assert done.returncode == 2 and says in done.stderr, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_buffers_profile_without_a_gpu_says_so():
    done = _harness("profile", "cu/memory/sum_04_vec4.cu", "--size", "1<<24")
    assert done.returncode == 3 and "no GPU here" in done.stderr, done.stderr


# --- on the GPU, under the real ncu ---------------------------------------------------------

@pytest.mark.gpu
def test_sum_04_vec4_under_ncu_moves_its_napkins_bytes(tmp_path):
    """sum_04_vec4 at 2^24: DRAM reads the 64 MiB input once (ncu flushes the caches before
    each pass), so DRAM's bytes are within 0.9-1.2x of the napkin's 4N + 4."""
    try:
        ncu.find_ncu()
    except HarnessError as exc:
        pytest.skip(f"needs Nsight Compute's ncu: {exc}")
    done = _harness("profile", "cu/memory/sum_04_vec4.cu", "--size", "1<<24", "--metrics",
                    "dram", "--timing", "sustained", "--report-dir", str(tmp_path), gpu=True,
                    timeout=900)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "### DRAM: the napkin's bytes beside Nsight Compute's" in done.stdout
    assert f"## N = {N} (buffers kernels)" in done.stdout
    (json_path,) = tmp_path.glob("*/profile-*.json")
    (row,) = json.loads(json_path.read_text())["rows"]
    assert row["status"] == "profiled" and row["dims"] == {"N": N}
    assert row["predicted"]["compulsory_bytes"] == NAPKIN
    dram = row["measured"]["dram_read_bytes"] + row["measured"]["dram_write_bytes"]
    assert 0.9 * NAPKIN <= dram <= 1.2 * NAPKIN, dram / NAPKIN
    assert row["timing"]["sustained"]["gbps"] > 0 and row["derived"]["napkin_gbps"] > 0
