"""An FP8 GEMM's declaration (harness/kernels/fp8_spec.py): what it must say, each mistake
named; the runs take per-tensor and block scales."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import SpecError
from harness.kernels.spec import parse_spec

SPEC = """/* harness
entry = "k"
summary = "an FP8 GEMM"
precision = "fp8"
min_arch = "sm_90a"
layout_b = "col"
c_type = "bf16"
block = ["128"]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
signature = ["M", "N", "K", "A", "B", "C", "scale_a", "scale_b"]
{extra}
[fp8]
a = "e4m3"
b = "e4m3"
scales = "tensor"
{fp8}*/
extern "C" __global__ void k(int M, int N, int K, const unsigned char* A,
    const unsigned char* B, void* C, const float* scale_a, const float* scale_b) {{}}
"""


def spec(extra: str = "", fp8: str = ""):
    return parse_spec(SPEC.format(extra=extra, fp8=fp8), Path("k.cu"))


def test_an_fp8_gemm_declares_its_formats_scales_and_promotion():
    s = spec()
    assert s.precision == "fp8" and s.fp8.a == "e4m3" and s.fp8.scales == "tensor"
    assert s.fp8.promote is None and s.c_type == "bf16"
    assert [(p.name, p.type) for p in s.abi][-2:] == [("scale_a", "ptr"), ("scale_b", "ptr")]
    blocked = parse_spec(SPEC.format(extra="", fp8="").replace('scales = "tensor"',
                                                               'scales = "block"'), Path("k.cu"))
    assert blocked.fp8.promote == 128


@pytest.mark.parametrize("change, says", [
    (('b = "e4m3"', 'b = "e3m4"'), "[fp8] b must be one of e4m3, e5m2"),
    (('scales = "tensor"', 'scales = "row"'), "[fp8] scales must be one of tensor, block"),
    (('scales = "tensor"', 'scales = "tensor"\npromote = 48'), "promote must be a multiple of 32"),
    (('scales = "tensor"', 'scales = "block"\npromote = 256'), "stay inside one 128-deep"),
    (('layout_b = "col"', 'layout_b = "row"'), "takes A and B K-major"),
    (('c_type = "bf16"', 'c_type = "fp16"'), "c_type 'fp16' for an FP8 GEMM: one of bf16, fp32"),
    ((', "scale_a", "scale_b"]', ']'), "declares its signature with its scales"),
    (('[fp8]\na = "e4m3"\nb = "e4m3"\nscales = "tensor"\n', ''), "needs an [fp8] table"),
    (('precision = "fp8"', 'precision = "bf16"'), '[fp8] belongs to precision = "fp8"'),
])
def test_a_wrong_fp8_declaration_says_what_is_wrong(change, says):
    text = SPEC.format(extra="", fp8="").replace(*change)
    with pytest.raises(SpecError) as err:
        parse_spec(text, Path("k.cu"))
    assert says in str(err.value), str(err.value)


def test_the_runs_take_a_block_scaled_fp8_gemm(tmp_path):
    from harness.kernels.registry import load_registry
    from harness.run.runner import screen

    path = tmp_path / "fp8_gemm.cu"
    path.write_text(SPEC.format(extra="", fp8="").replace('scales = "tensor"', 'scales = "block"'))
    (kernel,) = load_registry([], kind="gemm").select([str(path)])
    _, rows = screen(kernel, "sm_90", [(256, 256, 256)])
    assert not [r for r in rows if r.status == "skipped"], rows
