"""The Python API (harness.api) with buffers kernels (notes/buffers_kind.md): handles, sizes read
as a kernel's dims, the command layer's own_sizes, the errors; the runner replaced on the CPU,
and one check on the GPU (``gpu``)."""

import json

import pytest

import harness
from harness import api
from harness.bench.result import (
    Baseline,
    CheckSummary,
    KernelInfo,
    LaunchInfo,
    MemoryFigures,
    Result,
)
from harness.commands.place import Target
from harness.errors import HarnessError
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT
from harness.run import runner

VECTOR_ADD = PROJECT_ROOT / "examples" / "vector_add.cu"  # dims N, sizes 1<<24, 1<<28
SOFTMAX = "softmax_02_online"  # dims ROWS x COLS
SUMS = ("sum_02_smem_tree", "sum_03_shuffle")  # dims N, the same spec sizes
CEILING = PROJECT_ROOT / "ptx" / "ceiling" / "mma_sync_fp16.ptx"
QUICK = {"budget_ms": 20, "min_ms": 5, "warmup_ms": 5, "quiet": True}


def _timing(ms: float) -> Timing:
    return Timing(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms * 1.05, 50, True, 1980.0, 1900.0,
                  1980.0, 3.0, "power cap")


def _fake_runner(calls: list):
    """A stand-in for harness.run.runner.run: records each call and returns a passing result
    per kernel and size, a buffers kernel's with its dims and memory figures (what the worker
    would have measured)."""

    def fake(kernels, arch, options, jsonl_path, say, mode="run", **kw):
        calls.append({"kernels": [k.name for k in kernels], "options": options, "mode": mode})
        record = runner.RunRecord(device={"name": "NVIDIA H100 80GB HBM3", "sm_count": 132})
        jsonl_path.parent.mkdir(parents=True, exist_ok=True)
        for kernel in kernels:
            for size in options.sizes:
                result = Result.of(KernelInfo.of(kernel), *size).with_parts(
                    launch=LaunchInfo(256, (size[0] // 256, 1, 1), 0),
                    checks=CheckSummary(9, 9, 0.0))
                buffers = kernel.spec.buffers
                if buffers is not None:
                    dims = dict(zip(buffers.dims, size, strict=False))
                    result = result.with_parts(memory=MemoryFigures(
                        dims, 12 * size[0], float(size[0]), 3000.0, 2900.0, 3350.0))
                if mode != "check":
                    result = result.with_parts(timing=_timing(0.1),
                                               baseline=Baseline("", _timing(0.09), "f32", "copy"))
                result = result.ended("pass", "")
                record.results.append(result)
                with jsonl_path.open("a") as sink:
                    sink.write(json.dumps(result.to_json()) + "\n")
        return record

    return fake


@pytest.fixture
def calls(monkeypatch) -> list:
    """The runner's calls, a GPU pretended (nothing reaches one)."""
    made: list = []
    monkeypatch.setattr(api, "_target", lambda what: Target("NVIDIA H100 80GB HBM3", "sm_90",
                                                            "NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(runner, "run", _fake_runner(made))
    return made


def test_a_buffers_kernel_is_a_handle_that_builds_at_its_dims():
    k = harness.kernel(VECTOR_ADD)
    assert k.spec.kind == "buffers" and k.names == ("vector_add",)
    (build,) = k.build(arch="sm_90")  # the smallest of its spec's sizes
    assert build.ok and build.to_dict()["size"] == [1 << 24, 1, 1]
    (build,) = k.build(arch="sm_90", size="1<<20")
    assert build.to_dict()["size"] == [1 << 20, 1, 1]
    (build,) = harness.kernel(SOFTMAX).build(arch="sm_90", size="4096x1024")
    assert build.to_dict()["size"] == [4096, 1024, 1]
    assert harness.kernel(SUMS[0]).spec.kind == "buffers"  # a registry key of cu/memory


def test_the_testing_helpers_build_a_buffers_kernel_at_its_dims():
    from harness.testing import assert_builds, build

    row = assert_builds(VECTOR_ADD, max_spill_bytes=0)
    assert row["status"] == "ok" and row["size"] == [1 << 24, 1, 1]
    assert build(SOFTMAX, size=(64, 4096))["size"] == [64, 4096, 1]
    with pytest.raises(HarnessError, match="gives 3 value"):
        build(VECTOR_ADD, size=(1024, 1024, 1024))
    with pytest.raises(HarnessError, match="'ceiling' kernel; these helpers build GEMM and "
                                           "buffers kernels"):
        build(CEILING)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: harness.kernel(VECTOR_ADD).check(sizes=["1024,1024,1024"]),
     r"size '1024,1024,1024': '1024x1024x1024' gives 3 value\(s\) for the 1 dim\(s\) N; .*"
     r"\(vector_add is a buffers kernel: its size is its dims, N, not a GEMM's N or M,N,K\)"),
    (lambda: harness.kernel(SOFTMAX).run(sizes=[1024]),
     r"size 1024: '1024' gives 1 value\(s\) for the 2 dim\(s\) ROWS x COLS; write one per dim, "
     r"as \"4096x4096\""),
    (lambda: harness.kernel(VECTOR_ADD).check(sizes=[(1024, 1024, 1024)]), "gives 3 value"),
    (lambda: harness.kernel(VECTOR_ADD).check(sizes=[1.5]), "size 1.5: expected an int per dim"),
    (lambda: harness.kernel(VECTOR_ADD).check(sizes=["0"]), "'0' is below 1"),
    (lambda: harness.kernel(VECTOR_ADD).run(sizes=[]),
     r"expected a list of one or more sizes \(a buffers kernel's dims\)"),
    (lambda: harness.kernel(VECTOR_ADD).plan(), "vector_add is a buffers kernel: its battery is"),
    (lambda: harness.compare([VECTOR_ADD, "01_naive"]),
     "vector_add is a buffers kernel, 01_naive a GEMM: compare them apart"),
    (lambda: harness.compare([VECTOR_ADD, SOFTMAX]),
     r"compare needs buffers kernels of the same dims; found vector_add \(N\), "
     r"softmax_02_online \(ROWS x COLS\)"),
    (lambda: harness.compare([VECTOR_ADD, SUMS[0]], sizes=["4096x1024"]), "gives 2 value"),
    (lambda: harness.kernel("wgmma_fp16"), "wgmma_fp16 is a 'ceiling' kernel; the API takes GEMM "
                                           r"and buffers kernels \(`harness ceiling` runs it\)"),
])
def test_bad_buffers_input_is_refused_before_a_gpu_is_looked_for(call, message):
    with pytest.raises(HarnessError, match=message) as caught:
        call()
    assert not isinstance(caught.value, harness.NoGpu)


def test_gemms_and_buffers_kernels_with_sizes_given_are_refused(calls):
    """A handle holds one file's kernels; kernels of several files meet in compare (refused
    above) and in the calls under the handles (here)."""
    gemm, buffers = harness.kernel("01_naive").kernels, harness.kernel(VECTOR_ADD).kernels
    with pytest.raises(HarnessError, match="vector_add is a buffers kernel, 01_naive a GEMM: a "
                                           "GEMM's size is N or M,N,K, a buffers kernel's its "
                                           "dims; give sizes to them apart"):
        api._check([*gemm, *buffers], [256], None, False, True)
    with pytest.raises(HarnessError, match="sizes for buffers kernels of different dims: run "
                                           "them apart"):
        api._check([*buffers, *harness.kernel(SOFTMAX).kernels], ["4096"], None, False, True)
    assert not calls  # refused before the runner


def test_check_and_run_take_the_spec_sizes_or_sizes_read_as_dims(calls, tmp_path):
    k = harness.kernel(VECTOR_ADD)
    checked = k.check(quiet=True)
    assert calls[-1]["mode"] == "check" and calls[-1]["kernels"] == ["vector_add"]
    assert calls[-1]["options"].sizes == ((1 << 24, 1, 1), (1 << 28, 1, 1))
    assert checked.mode == "check" and checked.passed and len(checked) == 2
    assert [r.memory.dims for r in checked] == [{"N": 1 << 24}, {"N": 1 << 28}]

    k.check(sizes=[1 << 20, "1<<22", (4096,)], quiet=True)
    assert calls[-1]["options"].sizes == ((1 << 20, 1, 1), (1 << 22, 1, 1), (4096, 1, 1))
    k.check(sizes="1<<20", quiet=True)  # a lone size
    assert calls[-1]["options"].sizes == ((1 << 20, 1, 1),)

    results = k.run(sizes=["1<<20"], seed=7, **QUICK)
    assert calls[-1]["mode"] == "run" and calls[-1]["options"].sizes == ((1 << 20, 1, 1),)
    (row,) = results
    assert row.memory.dims == {"N": 1 << 20} and row.gbps == pytest.approx(12 * 2**20 / 1e5)
    assert row.pct_copy == pytest.approx(100 * row.gbps / 3000.0)
    assert row.baseline.library == "copy" and row.pct_baseline == pytest.approx(90.0)

    harness.kernel(SOFTMAX).check(sizes=["4096x1024", (8, 16), "8,16"], quiet=True)
    assert calls[-1]["options"].sizes == ((4096, 1024, 1), (8, 16, 1), (8, 16, 1))

    results = k.run(sizes=[1 << 20], report_dir=tmp_path, **QUICK)
    json_path, _ = results.report
    assert json.loads(json_path.read_text())["meta"]["command"].startswith(
        f"harness.kernel({str(VECTOR_ADD)!r}).run(sizes=['1048576'], ")


def test_without_sizes_gemms_and_buffers_kernels_each_run_at_their_own(calls):
    kernels = [*harness.kernel("01_naive").kernels, *harness.kernel(VECTOR_ADD).kernels]
    results = api._check(kernels, None, None, False, True)
    gemm, buffers = calls[-2:]
    assert gemm["kernels"] == ["01_naive"] and gemm["options"].sizes == ((1024,) * 3,)
    assert buffers["kernels"] == ["vector_add"]
    assert buffers["options"].sizes == ((1 << 24, 1, 1), (1 << 28, 1, 1))
    assert [r.kernel.name for r in results] == ["01_naive", "vector_add", "vector_add"]


def test_compare_of_buffers_kernels_at_the_first_ones_sizes(calls):
    first, second = (harness.kernel(name) for name in SUMS)
    harness.compare([first, second], **QUICK)
    assert calls[-1]["mode"] == "compare" and calls[-1]["kernels"] == list(SUMS)
    assert calls[-1]["options"].sizes == tuple(
        (*d, 1, 1) for d in first.spec.buffers.default_sizes())
    harness.compare(list(SUMS), sizes=["1<<20"], **QUICK)
    assert calls[-1]["options"].sizes == ((1 << 20, 1, 1),)


def test_without_a_gpu_a_buffers_check_says_so():
    with pytest.raises(harness.NoGpu, match=r"\.check\(\) needs one"):
        harness.kernel(VECTOR_ADD).check(sizes=[1 << 20], quiet=True)


# --- the GPU path ----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.gpu_shared
def test_check_passes_vector_add():
    results = harness.kernel(VECTOR_ADD).check(sizes=[1 << 20], quiet=True)
    assert results.mode == "check" and results.passed, str(results)
    (row,) = results
    assert row.status == "pass" and row.memory.dims == {"N": 1 << 20}
    assert row.checks.finding == "ok" and row.checks.passed == row.checks.total > 0
