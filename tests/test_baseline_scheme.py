"""Baselines in the kernel's arithmetic (issue 58, item 5): an FP32 kernel on tensor cores
(``fp32_via``) is compared with cuBLAS in the same scheme, plain SGEMM named beside it."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from harness.bench.result import Baseline, KernelInfo, Result
from harness.gpu import cublas
from harness.gpu.timing import Timing


def _timing(ms: float, findings=()) -> Timing:
    return Timing(ms, ms, ms, ms, ms, 50, True, 1980.0, 1900.0, 1980.0, 3.0, "power cap",
                  findings=tuple(findings))


@pytest.mark.parametrize(("via", "key", "name"), [
    ("", "fp32", "CUBLAS_COMPUTE_32F"),
    ("tf32", "tf32", "CUBLAS_COMPUTE_32F_FAST_TF32"),
    ("tf32x3", "tf32", "CUBLAS_COMPUTE_32F_FAST_TF32"),
    ("bf16", "fp32_fast_bf16", "CUBLAS_COMPUTE_32F_FAST_16BF"),
    ("bf16x3", "fp32_fast_bf16", "CUBLAS_COMPUTE_32F_FAST_16BF"),
    ("bf16x9", "fp32_bf16x9", "CUBLAS_COMPUTE_32F_EMULATED_16BFX9"),
])
def test_each_fp32_via_has_its_cublas_scheme(via, key, name):
    assert cublas.baseline_precision("fp32", via) == key
    assert cublas.compute_name("fp32", SimpleNamespace(fp32_via=via)) == name
    assert cublas.compute_name("fp32") == "CUBLAS_COMPUTE_32F"  # plain SGEMM, named
    assert cublas.scheme_via(via) == {"tf32x3": "tf32", "bf16x3": "bf16"}.get(via, via)


def test_every_declared_scheme_is_known():
    from harness.kernels.spec import FP32_VIA

    assert set(cublas.SCHEMES) == set(FP32_VIA)
    assert cublas.baseline_precision("bf16", "tf32") == "bf16"  # only FP32 kernels


def test_the_session_launches_cublas_in_the_kernels_scheme_and_plain_on_request():
    from harness.kinds.gemm.session import GemmSession

    calls = []
    session = GemmSession.__new__(GemmSession)
    session.__dict__["blas"] = SimpleNamespace(gemm=lambda *a, **k: calls.append(a[0]))
    spec = SimpleNamespace(precision="fp32", fp32_via="tf32", layout_b="row", c_type="fp32")
    buf = SimpleNamespace(address=0)
    ops = SimpleNamespace(m=64, n=64, k=64, a=buf, b=buf, blas_out=buf, layout_a="row",
                          layout_c="row", blas_fp8=None)
    kernel = SimpleNamespace(spec=spec)
    session.baseline_launcher(kernel, ops)()
    session.baseline_launcher(kernel, ops, plain=True)()
    assert calls == ["tf32", "fp32"]


def test_both_baselines_round_trip_through_a_rows_json():
    info = KernelInfo("tf32_mma", "tests/kernels/offclock/tf32_mma.cu", "fp32")
    res = Result.of(info, 1024, 1024, 1024).with_parts(
        timing=_timing(0.1), baseline=Baseline("CUBLAS_COMPUTE_32F_FAST_TF32", _timing(0.05)),
        baseline_fp32=Baseline("CUBLAS_COMPUTE_32F", _timing(0.3))).ended("pass", "ok")
    back = Result.from_json(res.to_json())
    assert back.baseline.compute == "CUBLAS_COMPUTE_32F_FAST_TF32"
    assert back.baseline_fp32.compute == "CUBLAS_COMPUTE_32F"
    assert back.pct_baseline == pytest.approx(50.0)


def test_a_timings_findings_round_trip_and_fail_the_row():
    from harness.kinds.gemm import measure
    found = "hides work off the clock: the GPU spent ..."
    info = KernelInfo("k", "k.cu", "fp32")
    res = Result.of(info, 64, 64, 64)
    back = Result.from_json(replace(res, timing=_timing(0.1, [found])).to_json())
    assert back.timing.findings == (found,)
    session = SimpleNamespace(device=None, limits=None)
    prep = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(fp32_via="")))
    row = measure.timed(session, prep, res, _timing(0.1, [found]), _timing(0.1))
    assert row.status == "FAIL" and row.checks.finding == "hides work off the clock"
    assert "its timing is not a figure" in row.message
    row = measure.timed(session, prep, res, _timing(0.1), _timing(0.1, [found]))
    assert row.status == "error" and row.message.startswith("cuBLAS's timing: hides work")


def test_a_block_scaled_fp8_baseline_takes_the_block_scales():
    """Issue 62, item 4: a block-scaled FP8 kernel's cuBLASLt runs with its block scales (the
    fifth field of Operands.blas_fp8), named so; a per-tensor one as before."""
    calls = []
    blas = cublas.Cublas.__new__(cublas.Cublas)
    blas._lt = SimpleNamespace(gemm_fp8=lambda *a, **k: calls.append((a, k)))
    blas.gemm("fp8", 256, 384, 512, 1.0, 1, 2, 0.0, 3, "col", "bf16",
              fp8=("e4m3", "e4m3", 10, 20, "block"))
    blas.gemm("fp8", 256, 384, 512, 1.0, 1, 2, 0.0, 3, "col", "bf16",
              fp8=("e4m3", "e5m2", 10, 20))
    assert [k["scales"] for _, k in calls] == ["block", "tensor"]
    assert calls[0][0] == (256, 384, 512, 1, 2, 3, 10, 20, "e4m3", "e4m3", "bf16")
    block = SimpleNamespace(fp8=SimpleNamespace(scales="block"))
    assert "1 x 128 / 128 x 128 block scales" in cublas.compute_name("fp8", block)
    assert cublas.compute_name("fp8", SimpleNamespace(fp8=SimpleNamespace(scales="tensor"))) \
        == "cuBLASLt FP8, CUBLAS_COMPUTE_32F"
