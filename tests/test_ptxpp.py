"""PTX macros: parameters, loops, conditions, and errors that point at the line written."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.compiler.compile import compile_kernel
from harness.errors import CompileError
from harness.kernels.ptxpp import expand
from harness.kernels.registry import kernels_in
from harness.kernels.spec import read_spec

P = Path("k.ptx")


def lines(text: str, **params) -> list[str]:
    return expand(text, params, P).text.splitlines()


def test_plain_ptx_is_unchanged():
    src = ".version 8.0\n// a comment\n  add.f32 %f1, %f2, %f3;\n"
    out = expand(src, {}, P)
    assert out.text == src and not out.changed


def test_substitution_uses_params_and_set():
    src = "#set BYTES = BM * BK * 2  # per stage\nmov.u32 %r1, ${BYTES};\nmov.u32 %r2, ${BM ^ 3};\n"
    assert lines(src, BM=128, BK=32) == ["mov.u32 %r1, 8192;", "mov.u32 %r2, 131;"]


def test_default_sets_only_what_is_not_yet_defined():
    src = "#default EPI = 0\n#default BK = 32\n#set S = 1\n#default S = 2\nx ${EPI} ${BK} ${S}\n"
    assert lines(src, BK=64) == ["x 0 64 1"]
    with pytest.raises(CompileError, match=r"k.ptx:1: expected '#default NAME = EXPR'"):
        expand("#default EPI\n", {}, P)


def test_nested_loops_unroll_with_origins():
    src = "#for i in range(2)\n#for j in range(1, 4, 2)\nadd %r${i * 10 + j};\n#endfor\n#endfor\n"
    out = expand(src, {}, P)
    assert out.text.splitlines() == ["add %r1;", "add %r3;", "add %r11;", "add %r13;"]
    assert out.origin(3).line == 3 and out.origin(3).bindings == (("i", 1), ("j", 1))
    assert out.origin(3).describe() == "line 3 (i=1, j=1)"


def test_if_elif_else_picks_one_branch():
    src = "#if S == 2\ntwo\n#elif S > 2 and S < 5\nthree-four\n#else\nother\n#endif\n"
    assert lines(src, S=2) == ["two"]
    assert lines(src, S=4) == ["three-four"]
    assert lines(src, S=7) == ["other"]


def test_directives_inside_block_comments_are_text():
    src = "/* harness\n[model]  # napkin\n*/\n#if 1\nx\n#endif\n"
    assert lines(src) == ["/* harness", "[model]  # napkin", "*/", "x"]


@pytest.mark.parametrize("src, match", [
    ("#for i in range(2)\nx\n", r"k.ptx:1: #for is never closed: add #endfor"),
    ("#endif\n", r"k.ptx:1: #endif does not close anything: nothing is open"),
    ("#for i in range(2)\n#endif\n", r"k.ptx:2: #endif does not close anything: the #for of "
                                     r"line 1 is still open"),
    ("#else\n", r"k.ptx:1: #else without an open #if"),
    ("#define X 1\n", r"k.ptx:1: unknown directive #define"),
    ("#set X 1\n", r"k.ptx:1: expected '#set NAME = EXPR'"),
    ("#for i in 0..4\n#endfor\n", r"k.ptx:1: expected '#for NAME in range"),
    ("mov ${NOPE};\n", r"k.ptx:1: .*uses 'NOPE', which is not defined"),
    ("mov ${__import__('os')};\n", r"k.ptx:1: .*unknown function"),
    ("#for i in range(3)\n#if i == 2\n#error i is ${i}, BM ${BM}\n#endif\n#endfor\n",
     r"k.ptx:3: #error i is 2, BM 64 \[BM=64, CALL=0, i=2\] \(in i=2\)"),
])
def test_bad_macros_name_file_and_line(src, match):
    with pytest.raises(CompileError, match=match):
        expand(src, {"BM": 64}, P)


KERNEL = """/* harness
entry = "k"
summary = "macro test"
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
[params]
N_ADD = 3
[variants.two]
N_ADD = 2
*/
.version 8.0
.target sm_80
.address_size 64
.visible .entry k(ABI)
{
    .reg .f32 %f<8>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    mov.f32 %f0, 0f3F800000;
#for i in range(N_ADD)
    add.f32 %f${i + 1}, %f${i}, %f0;
#endfor
    st.global.f32 [%rd1], %f${N_ADD};
    ret;
}
""".replace("ABI", ".param .u32 M, .param .u32 N, .param .u32 K, .param .f32 alpha, .param .u64 A, "
            ".param .u64 B, .param .f32 beta, .param .u64 p")  # the common GEMM ABI, C as p


def test_variants_assemble_with_their_parameters(tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(KERNEL)
    (two,) = kernels_in(read_spec(path))
    compiled = compile_kernel(two, "sm_90", use_cache=False)
    assert compiled.resources.registers > 0


def test_assembler_error_points_at_the_macro_line(tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(KERNEL.replace("add.f32 %f${i + 1}", "add.f32 %q${i + 1}"))
    (two,) = kernels_in(read_spec(path))
    with pytest.raises(CompileError) as info:
        compile_kernel(two, "sm_90", use_cache=False)
    message = str(info.value)
    assert f"{path}:23: error" in message and "(i=0)" in message
    assert "23 | add.f32 %q${i + 1}, %f${i}, %f0;" in message
    assert "expanded line 22 | add.f32 %q1, %f0, %f0;" in message


def test_cli_prints_the_expanded_variant(tmp_path, capsys):
    from harness.cli import main

    (tmp_path / "k.ptx").write_text(KERNEL)
    assert main(["--kernel-dir", str(tmp_path), "ptx", "k:two"]) == 0
    out = capsys.readouterr().out
    assert "add.f32 %f2, %f1, %f0;" in out and "%f3, %f2" not in out
    assert "st.global.f32 [%rd1], %f2;" in out


def test_cli_refuses_a_cu_kernel(capsys):
    from harness.cli import main

    assert main(["ptx", "01_naive"]) == 2
    assert "'01_naive' is CUDA C++ (cu/sgemm/01_naive.cu)" in capsys.readouterr().err


def test_include_expands_with_the_includers_constants(tmp_path):
    (tmp_path / "body.ptxh").write_text("#if F16\nmma.f16;\n#else\nmma.bf16;\n#endif\n"
                                        "add ${BM};\n")
    src = '#set F16 = 1\n#include "body.ptxh"  # the shared body\n'
    out = expand(src, {"BM": 64}, tmp_path / "k.ptx")
    assert out.text.splitlines() == ["mma.f16;", "add 64;"]
    assert out.origin(2).path == (tmp_path / "body.ptxh").resolve() and out.origin(2).line == 6


def test_errors_in_an_included_file_name_that_file(tmp_path):
    (tmp_path / "body.ptxh").write_text("x\nadd ${NOPE};\n")
    with pytest.raises(CompileError, match=r"body.ptxh:2: .*'NOPE', which is not defined"):
        expand('#include "body.ptxh"\n', {}, tmp_path / "k.ptx")
    with pytest.raises(CompileError, match=r"k.ptx:1: cannot read .*missing.ptxh"):
        expand('#include "missing.ptxh"\n', {}, tmp_path / "k.ptx")
    (tmp_path / "loop.ptxh").write_text('#include "loop.ptxh"\n')
    with pytest.raises(CompileError, match=r"includes nest deeper than 8"):
        expand('#include "loop.ptxh"\n', {}, tmp_path / "k.ptx")


def test_macros_repeat_lines_with_bound_parameters_and_unique_calls():
    src = ("#macro COPY(stage, j)\n$L${CALL}: cp [s+${stage * 1024 + j * 16}];\n#endmacro\n"
           "#for j in range(2)\n#call COPY(3, j)\n#endfor\n#call COPY(0, BM // 64)\n")
    out = expand(src, {"BM": 128}, P)
    assert out.text.splitlines() == ["$L1: cp [s+3072];", "$L2: cp [s+3088];",
                                     "$L3: cp [s+32];"]
    assert out.origin(2).line == 2 and out.origin(2).bindings == (("j", 1), ("stage", 3), ("j", 1))


@pytest.mark.parametrize("src, match", [
    ("#call NOPE(1)\n", r"k.ptx:1: no macro NOPE is defined above this line"),
    ("#macro M(a)\nx\n#endmacro\n#call M(1, 2)\n", r"k.ptx:4: macro M\(a\) takes 1 argument"),
    ("#macro M(a)\nx\n#endmacro\n#macro M(b)\n#endmacro\n", r"k.ptx:4: macro M is defined twice"),
    ("#if 1\n#macro M()\n#endmacro\n#endif\n", r"k.ptx:2: #macro inside the #if of line 1"),
    ("#macro M(1x)\n#endmacro\n", r"k.ptx:1: expected '#macro NAME\(PARAM, ...\)'"),
    ("#macro M()\nx\n", r"k.ptx:1: #macro is never closed: add #endmacro"),
])
def test_bad_macro_use_names_the_line(src, match):
    with pytest.raises(CompileError, match=match):
        expand(src, {}, P)


def test_sm_names_the_compile_target():
    src = "#if SM >= 90\nmbarrier.try_wait;\n#else\nmbarrier.test_wait;\n#endif\n"
    assert expand(src, {}, P, "sm_90a").text == "mbarrier.try_wait;\n"
    assert expand(src, {}, P, "sm_80").text == "mbarrier.test_wait;\n"
