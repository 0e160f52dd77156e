"""Issue 38: a kernel whose parameters do not match what its launches pass (the declared
signature, or the common ABI and its [tma] maps) fails at build, with both lists: read from a
.ptx kernel's ``.entry``, and from the cubin's parameter records for a .cu kernel."""

import shutil
from pathlib import Path

import pytest

from harness.compiler.compile import compile_kernel
from harness.compiler.offline import build_row
from harness.errors import CompileError
from harness.kernels.compiled_params import (
    cubin_parameter_sizes,
    parameter_mismatch,
    ptx_entry_parameters,
)
from harness.kernels.registry import PROJECT_ROOT, kernels_in
from harness.kernels.spec import read_spec

pytest_plugins = ["pytester"]
NAIVE = PROJECT_ROOT / "cu" / "sgemm" / "01_naive.cu"
ABI = ("declared 8: M i32 4, N i32 4, K i32 4, alpha f32 4, A ptr 8, B ptr 8, beta f32 4, "
       "C ptr 8")


def naive_with(tmp_path: Path, old: str, new: str, name: str = "k.cu"):
    path = tmp_path / name
    text = NAIVE.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    return kernels_in(read_spec(path))[0]


def test_a_cu_kernel_without_beta_fails_at_build_with_both_lists(tmp_path):
    kernel = naive_with(tmp_path, "const float* B, float beta, float* C) {",
                        "const float* B, float* C) {\n    const float beta = 0.0f;")
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90", use_cache=False)
    message = str(info.value)
    assert message.startswith(f"{tmp_path / 'k.cu'}: the kernel's parameters do not match what "
                              "the harness passes from the common GEMM ABI (no signature "
                              "declared): parameter 7 is 8 bytes in the kernel, 4 declared "
                              "(beta f32)")
    assert f"  {ABI}\n" in message
    assert "  found    7: 4, 4, 4, 4, 8, 8, 8 (sgemm_naive in the cubin (bytes each))" in message
    assert "declare its own in order with signature = [...]" in message


def test_a_64_bit_size_where_the_abi_has_int_is_found(tmp_path):
    kernel = naive_with(tmp_path, "sgemm_naive(int M, int N,", "sgemm_naive(long long M, int N,")
    with pytest.raises(CompileError, match=r"parameter 1 is 8 bytes in the kernel, 4 declared "
                                           r"\(M i32\)"):
        compile_kernel(kernel, "sm_90", use_cache=False)


def test_a_declared_signature_is_what_is_compared(tmp_path):
    """Declaring the kernel's own list makes it build; declaring one it does not take fails,
    saying the signature is where the list came from."""
    spec_line = 'dynamic_smem_bytes = "0"\n'
    kernel = naive_with(tmp_path, spec_line, spec_line + 'signature = ["M", "N", "K", "alpha", '
                        '"A", "B", "C", { name = "lda", type = "i64" }]\n')
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90", use_cache=False)
    assert "from its signature = [...]: parameter 7 is 4 bytes in the kernel, 8 declared (C ptr)" \
        in str(info.value)
    assert ("declared 8: M i32 4, N i32 4, K i32 4, alpha f32 4, A ptr 8, B ptr 8, C ptr 8, "
            "lda i64 8") in str(info.value)


TMA_KERNEL = """/* harness
entry = "k"
summary = "takes one of its two [tma] maps"
precision = "bf16"
min_arch = "sm_90"
block = ["128"]
grid = ["1"]
[tma]
A = ["64", "64"]
B = ["64", "64"]
*/
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u32 M, .param .u32 N, .param .u32 K, .param .f32 alpha,
    .param .u64 A, .param .u64 B, .param .f32 beta, .param .u64 C,
    .param .align 64 .b8 tmap_A[128])
{
    ret;
}
"""


def test_a_ptx_kernel_is_read_from_its_entry(tmp_path):
    """The [tma] maps are part of what is passed: a PTX kernel that declares [tma] A and B but
    takes one map is refused, its .entry's own declarations shown."""
    path = tmp_path / "k.ptx"
    path.write_text(TMA_KERNEL)
    kernel = kernels_in(read_spec(path))[0]
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90", use_cache=False)
    message = str(info.value)
    assert ("from the common GEMM ABI and its [tma] maps (no signature declared): the kernel "
            "ends after 9; declared next: tmap_B (from [tma])") in message
    assert ("  found    9: .u32 M 4, .u32 N 4, .u32 K 4, .f32 alpha 4, .u64 A 8, .u64 B 8, "
            ".f32 beta 4, .u64 C 8, .b8 tmap_A[128] 128 (.entry k of the PTX)") in message
    path.write_text(TMA_KERNEL.replace("tmap_A[128])", "tmap_A[128],\n"
                                       "    .param .align 64 .b8 tmap_B[128])"))
    compiled = compile_kernel(kernels_in(read_spec(path))[0], "sm_90", use_cache=False)
    assert cubin_parameter_sizes(compiled.cubin, "k") == (4, 4, 4, 4, 8, 8, 4, 8, 128, 128)


def test_every_kernel_of_the_project_passes_the_check():
    """The ladder, the examples and the fixtures take what their specs declare (the fixtures
    that fail to compile on purpose aside)."""
    from harness.kernels.registry import load_registry

    folders = [PROJECT_ROOT / d for d in ("cu", "ptx", "examples")] + [
        PROJECT_ROOT / "tests" / "kernels" / d for d in ("signatures", "hostcode", "headers")]
    seen = set()
    for kernel in load_registry(folders, kind=None).kernels:
        if kernel.spec.path in seen or kernel.spec.min_arch == "sm_100":
            continue
        seen.add(kernel.spec.path)
        compiled = compile_kernel(kernel, "sm_90")
        assert kernel.spec.parameter_problem(compiled.cubin, compiled.symbol) is None
    assert len(seen) >= 40


def test_the_cubin_records_read_as_the_parameters_sizes():
    kernel = kernels_in(read_spec(NAIVE))[0]
    compiled = compile_kernel(kernel, "sm_90")
    assert cubin_parameter_sizes(compiled.cubin, "sgemm_naive") == (4, 4, 4, 4, 8, 8, 4, 8)
    assert cubin_parameter_sizes(compiled.cubin, "other") is None
    assert cubin_parameter_sizes(b"not an ELF file", "sgemm_naive") is None
    assert cubin_parameter_sizes(compiled.cubin[:200], "sgemm_naive") is None


def test_ptx_entry_parameters_reads_types_arrays_and_alignment():
    ptx = """// .entry k(.param .u32 commented)
.visible .entry k(
    .param .u32 M, .param .f64 x,
    .param .u64 .ptr .global .align 16 A,  // a pointer
    .param .align 64 .b8 tmap[128], .param .u16 small
)
{ ret; }"""
    assert ptx_entry_parameters(ptx, "k") == (
        (".u32 M", 4), (".f64 x", 8), (".u64 A", 8), (".b8 tmap[128]", 128), (".u16 small", 2))
    assert ptx_entry_parameters(ptx, "other") is None
    assert ptx_entry_parameters(".entry k(.param M)", "k") is None
    assert ptx_entry_parameters(".entry k()\n{ ret; }", "k") == ()


@pytest.mark.parametrize(("found", "expected"), [
    ([("", 4), ("", 8)], None),
    ([("", 4)], "the kernel ends after 1; declared next: A ptr"),
    ([("", 4), ("", 8), (".u32 extra", 4)],
     "the kernel takes 1 more after the declared 2 (.u32 extra 4 bytes)"),
    ([("", 8), ("", 8)], "parameter 1 is 8 bytes in the kernel, 4 declared (M i32)"),
])
def test_parameter_mismatch_says_where_the_lists_part(found, expected):
    assert parameter_mismatch([("M i32", 4), ("A ptr", 8)], found) == expected


def test_harness_build_and_the_plugin_fail_the_mismatch(tmp_path, pytester, monkeypatch):
    from harness.compiler.compile import cache_dir

    kernel = naive_with(tmp_path, "const float* B, float beta, float* C) {",
                        "const float* B, float* C) {\n    const float beta = 0.0f;",
                        name="no_beta.cu")
    row = build_row(kernel, "sm_90")
    assert row["status"] == "compile error" and "parameter 7 is 8 bytes" in row["message"]

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache_dir()))
    shutil.copy(kernel.spec.path, pytester.path / "no_beta.cu")
    result = pytester.runpytest("--harness-kernels", ".", "-q", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*no_beta (sm_90): compile error: *no_beta.cu: the kernel's "
                                 "parameters do not match*",
                                 "FAILED no_beta.cu::no_beta::build*"])
