"""The buffers kind (notes/buffers_kind.md): its spec, its draw, its references and bounds,
and on the GPU its checks (every planted defect found and named), its timing and its ceiling."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.errors import SpecError
from harness.kernels.registry import discover, load_registry
from harness.kernels.spec import parse_spec, read_spec
from harness.kinds.buffers import references
from harness.kinds.buffers.draw import as_float64, drawn

ROOT = Path(__file__).resolve().parents[1]
WRONG = ROOT / "tests" / "kernels" / "wrong_memory"
LADDERS = sorted((ROOT / "cu" / "memory").glob("*.cu")) + sorted(
    (ROOT / "ptx" / "memory").glob("*.ptx"))

HEAD = """/* harness
kind = "buffers"
entry = "k"
summary = "a test kernel"
min_arch = "sm_80"
dims = ["N"]
sizes = ["1<<20"]
args = ["x", "out", "N"]
block = ["256"]
grid = ["cdiv(N, 256)"]
reference = "copy"
bytes = "8*N"
{extra}
[buffers.x]
dtype = "f32"
shape = ["N"]
role = "in"
[buffers.out]
dtype = "f32"
shape = ["N"]
role = "out"
{buffers}*/
extern "C" __global__ void k(const float* x, float* out, int N) {{}}
"""


def test_a_buffers_spec_declares_its_parameters():
    spec = parse_spec(HEAD.format(extra="", buffers=""), Path("k.cu"))
    assert spec.kind == "buffers" and spec.buffers.dims == ("N",)
    assert spec.launch_parameters == (("x u64", 8), ("out u64", 8), ("N i32", 4))
    assert spec.buffers.default_sizes() == [(1 << 20,)]
    assert [b.name for b in spec.buffers.inputs] == ["x"]
    assert [b.name for b in spec.buffers.outputs] == ["out"]


@pytest.mark.parametrize("change, says", [
    ({'args = ["x", "out", "N"]': 'args = ["x", "y", "N"]'}, "neither a buffer"),
    ({'args = ["x", "out", "N"]': 'args = ["x", "N"]'}, "not passed"),
    ({'reference = "copy"': 'reference = "median"'}, "reference must be one of"),
    ({'sizes = ["1<<20"]': 'sizes = ["4096x1024"]'}, "gives 2 value(s) for the 1 dim"),
    ({'role = "out"': 'role = "in"'}, "nothing the kernel writes"),
    ({'dims = ["N"]': 'dims = []'}, "dims must list"),
    ({'bytes = "8*N"\n': 'bytes = "8*N"\ntolerance = "exact"\n'}, "tolerance is for py:"),
    ({'bytes = "8*N"\n': 'bytes = "8*M"\n'}, "M"),
    ({'reference = "copy"': 'reference = "sum"'}, "sums its one input"),
])
def test_a_wrong_buffers_spec_says_what_is_wrong(change, says):
    text = HEAD.format(extra="", buffers="")
    for old, new in change.items():
        assert old in text
        text = text.replace(old, new, 1)
    with pytest.raises(SpecError) as info:
        parse_spec(text, Path("k.cu"))
    assert says in str(info.value)


def test_every_buffers_file_in_the_project_parses():
    files = [*LADDERS, *sorted(WRONG.glob("*.cu")), ROOT / "examples" / "vector_add.cu"]
    assert len(files) >= 8
    for path in files:
        spec = read_spec(path)
        assert spec.kind == "buffers", path
        assert spec.buffers.default_sizes(), path


def test_the_gemm_commands_never_see_buffers_kernels():
    gemms = discover([ROOT / "cu"])
    assert gemms and all(k.spec.kind == "gemm" for k in gemms)
    assert any(k.spec.kind == "buffers" for k in discover([ROOT / "cu"], kind=None))


def test_the_draw_is_in_range_and_changes_its_mean_with_the_content():
    a = drawn(5, 6, 1, 0, 1 << 16, "f32", -1.0, 2.0)
    b = drawn(5, 6, 2, 0, 1 << 16, "f32", -1.0, 2.0)
    assert a.dtype == np.float32 and -1.0 <= a.min() and a.max() < 1.5
    assert not np.array_equal(a, b)
    assert np.array_equal(a, drawn(5, 6, 1, 0, 1 << 16, "f32", -1.0, 2.0))
    # the shift (up to a quarter of the span) gives every content its own mean
    means = [drawn(5, 6, c, 0, 4096, "f32", 0.0, 1.0).mean() for c in range(8)]
    assert max(means) - min(means) > 0.02
    half = drawn(5, 6, 1, 0, 1000, "bf16", -128.0, 256.0)
    assert half.dtype == np.uint16
    values = as_float64(half, "bf16")
    assert np.all(np.abs(values - as_float64(drawn(5, 6, 1, 0, 1000, "f32", -128.0, 256.0),
                                             "f32")) <= 2.0**-8 * np.abs(values) + 1e-30)


def _sum_spec():
    text = HEAD.format(extra="", buffers="").replace('reference = "copy"', 'reference = "sum"')
    text = text.replace('[buffers.out]\ndtype = "f32"\nshape = ["N"]',
                        '[buffers.out]\ndtype = "f32"\nshape = ["1"]')
    return parse_spec(text, Path("k.cu")).buffers


def test_the_sum_bound_holds_float32_sums_and_fails_a_dropped_tail():
    spec = _sum_spec()
    for n in (257, 4099, 1 << 20):
        x = as_float64(drawn(1, 2, 3, 0, n, "f32", -1.0, 2.0), "f32")
        want = references.expected(spec, {"x": x}, {"N": n})["out"]
        # sequential float32 accumulation: the worst order an honest kernel might take
        honest = np.array([np.cumsum(x.astype(np.float32), dtype=np.float32)[-1]])
        assert references.judge(honest.astype(np.float32), "f32", want).ok
        if n % 256:  # the battery's sizes are not block multiples: a dropped tail shows
            dropped = np.array([x[: n - n % 256].sum()], dtype=np.float32)
            judged = references.judge(dropped, "f32", want)
            assert not judged.ok and judged.outside == 1


def test_the_softmax_bound_holds_float32_and_catches_overflow():
    text = HEAD.format(extra="", buffers="").replace('reference = "copy"',
                                                     'reference = "softmax"')
    text = text.replace('dims = ["N"]', 'dims = ["ROWS", "COLS"]').replace(
        'shape = ["N"]', 'shape = ["ROWS", "COLS"]').replace(
        'args = ["x", "out", "N"]', 'args = ["x", "out", "ROWS", "COLS"]').replace(
        'sizes = ["1<<20"]', 'sizes = ["64x1000"]').replace('"cdiv(N, 256)"', '"ROWS"').replace(
        '"8*N"', '"8*ROWS*COLS"')
    spec = parse_spec(text, Path("k.cu")).buffers
    x = as_float64(drawn(1, 2, 3, 0, 17 * 4099, "f32", -128.0, 256.0), "f32").reshape(17, 4099)
    want = references.expected(spec, {"x": x}, {"ROWS": 17, "COLS": 4099})["out"]
    x32 = x.astype(np.float32)
    e = np.exp(x32 - x32.max(axis=1, keepdims=True))
    good = (e / e.sum(axis=1, keepdims=True, dtype=np.float32)).astype(np.float32)
    assert references.judge(good, "f32", want).ok
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x32)
        no_max = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    judged = references.judge(no_max, "f32", want)
    assert not judged.ok and judged.nonfinite > 0


def test_a_sentinel_left_in_an_output_is_unwritten():
    want = references.Expected(np.zeros(4), None, "exact")
    raw = np.zeros(4, dtype=np.float32)
    raw.view(np.uint32)[2] = references.SENTINEL["f32"][0]
    judged = references.judge(raw, "f32", want)
    assert (judged.unwritten, judged.outside, judged.first) == (1, 0, 2)
    assert references.judge(np.zeros(4, dtype=np.float32), "f32", want).ok


def test_a_py_reference_runs_in_a_child_process(tmp_path):
    kernel = tmp_path / "k.cu"
    kernel.write_text("")
    (tmp_path / "k.py").write_text("import os\n"
                                   "def reference(x, N):\n"
                                   "    return {'out': x * 2 + os.getpid() * 0}\n"
                                   "def pid(x, N):\n"
                                   "    return {'out': x * 0 + os.getpid()}\n")
    text = HEAD.format(extra="", buffers="").replace('reference = "copy"',
                                                     'reference = "py:pid"')
    spec = parse_spec(text, Path("k.cu")).buffers
    runner = references.PyReference(kernel, spec)
    try:
        got = references.expected(spec, {"x": np.ones(3)}, {"N": 3}, runner)["out"]
        import os

        assert got.value[0] != os.getpid() and got.bound is None
    finally:
        runner.close()


# --- on the GPU -----------------------------------------------------------------------------

FINDINGS = {
    "sum_drops_tail": {"wrong"},
    "sum_first_launch_only": {"keeps state between launches"},
    "sum_cached": {"replays an earlier result"},
    "softmax_no_max": {"overflows on wide inputs"},
    "softmax_row_race": {"race", "nondeterministic (undeclared)"},
    "sum_atomic_undeclared": {"nondeterministic (undeclared)"},
    "sum_unwritten": {"unwritten"},
}


@pytest.fixture(scope="module")
def bench(device):
    from harness.bench.session import BenchSession
    from harness.gpu.timing import TimingOptions
    from harness.kinds.buffers.roofline import measure_ceiling

    with BenchSession(TimingOptions(budget_ms=30, min_ms=5, warmup_ms=5)) as session:
        yield session, measure_ceiling(session.device, session.stream, session.timer.options)


@pytest.fixture(scope="module")
def checking(device):
    from harness.bench.session import BenchSession

    with BenchSession() as session:
        yield session, None


def _measure(bench, path: Path, sizes, timed: bool = True):
    from harness.kinds.buffers.timed import measure_kernel

    session, ceiling = bench
    (kernel,) = load_registry([], kind="buffers").select([str(path)])[:1]
    return list(measure_kernel(session, kernel, sizes, ceiling, lambda *a, **k: None, timed))


@pytest.mark.gpu
@pytest.mark.gpu_shared
@pytest.mark.parametrize("name", sorted(FINDINGS))
def test_a_wrong_buffers_kernel_fails_with_its_cause(checking, name):
    """The battery alone (nothing timed: beside other workers' checks) finds each defect."""
    path = WRONG / f"{name}.cu"
    sizes = [(1 << 16,)] if "sum" in name else [(64, 1024)]
    (res,) = _measure(checking, path, sizes, timed=False)
    assert res.status == "FAIL", (res.status, res.message)
    assert res.checks.finding in FINDINGS[name], (res.checks.finding, res.checks.failure)


@pytest.mark.gpu
def test_the_ceiling_is_below_the_dram_peak(bench):
    _, ceiling = bench
    assert 0.5 * ceiling.dram_peak_gbps < ceiling.copy_gbps <= 1.02 * ceiling.dram_peak_gbps
    assert ceiling.gbps <= 1.03 * ceiling.dram_peak_gbps


@pytest.mark.gpu
@pytest.mark.parametrize("path", [*LADDERS, ROOT / "examples" / "vector_add.cu"],
                         ids=lambda p: p.stem)
def test_a_ladder_kernel_passes_and_stays_under_the_ceiling(bench, path):
    spec = read_spec(path)
    sizes = [(1 << 22,)] if len(spec.buffers.dims) == 1 else [(512, 4096)]
    (res,) = _measure(bench, path, sizes)
    assert res.status == "pass", (res.status, res.message)
    assert res.checks.timed_checked >= 2
    assert 0 < res.gbps <= 1.03 * bench[1].gbps
    assert math.isfinite(res.pct_copy)


def _harness(*args: str):
    import subprocess
    import sys

    from tests.conftest import harness_env

    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=ROOT, env=harness_env(gpu=False), timeout=300)


@pytest.mark.parametrize("args, says", [
    (["run", "examples/vector_add.cu", "--size", "4096x3"],
     "'4096x3' gives 2 value(s) for the 1 dim(s) N"),
    (["run", "examples/vector_add.cu", "01_naive", "--size", "4096"],
     "--size with GEMMs and buffers kernels together"),
    (["compare", "examples/vector_add.cu", "01_naive"], "compare them apart"),
    (["compare", "cu/memory/sum_04_vec4.cu", "cu/memory/softmax_04_pipelined.cu"],
     "buffers kernels of the same dims"),
    (["run", "ptx/ceiling/mma_sync_bf16.ptx"], "is a 'ceiling' kernel"),
])
def test_buffers_commands_refuse_what_they_cannot_do(args, says):
    done = _harness(*args)
    assert done.returncode == 2 and says in done.stderr, (done.returncode, done.stderr)


def test_a_buffers_size_reaches_the_offline_report():
    done = _harness("run", "cu/memory/softmax_04_pipelined.cu", "--size", "64x4096")
    assert done.returncode == 3, done.stderr
    assert "at 64x4096x1" in done.stdout and "softmax_04_pipelined" in done.stdout


@pytest.mark.gpu
def test_buffers_kernels_compare_interleaved(bench):
    from harness.kinds.buffers.compare import compare_kernels

    session, ceiling = bench
    kernels = load_registry([], kind="buffers").select(
        [str(ROOT / "cu" / "memory" / "sum_04_vec4.cu"),
         str(ROOT / "cu" / "memory" / "sum_05_onepass.cu"),
         str(WRONG / "sum_drops_tail.cu")])
    rows = list(compare_kernels(session, kernels, [(1 << 22,)], ceiling,
                                lambda *a, **k: None))
    assert [r.status for r in rows] == ["pass", "pass", "FAIL"], [r.message for r in rows]
    first, second, _ = rows
    assert first.comparison.speedup == pytest.approx(1.0) and not first.comparison.within_noise
    assert second.comparison.compared_to == "sum_04_vec4"
    assert 0.5 < second.comparison.speedup < 2.0 and second.checks.timed_checked >= 2
    assert rows[2].checks.finding == "wrong"
