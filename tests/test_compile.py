"""Every kernel compiles to a cubin for every arch, with no GPU, and errors point at lines."""

from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.archs import can_run, get_arch
from harness.compiler.compile import compile_kernel, target_arch
from harness.errors import CompileError
from harness.kernels.registry import discover, select

ARCH_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90")
KERNELS = discover()


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("arch", ARCH_TARGETS)
@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_every_kernel_compiles_without_spills(kernel, arch):
    if not can_run(get_arch(kernel.spec.min_arch), get_arch(arch)):
        pytest.skip(f"{kernel.name} needs {kernel.spec.min_arch}")
    target = target_arch(kernel, arch)  # sm_90a for a kernel whose min_arch is sm_90a
    compiled = compile_kernel(kernel, arch)
    assert compiled.cubin[:4] == b"\x7fELF"
    res = compiled.resources
    assert 0 < res.registers <= 255
    assert res.spill_store_bytes == 0 and res.spill_load_bytes == 0
    assert f"for '{target}'" in compiled.log


def test_cache_keeps_the_resource_report():
    (kernel,) = select(KERNELS, ["01_naive"])
    first = compile_kernel(kernel, "sm_90")
    again = compile_kernel(kernel, "sm_90")
    assert not first.cached and again.cached
    assert again.resources == first.resources and again.cubin == first.cubin
    assert not compile_kernel(kernel, "sm_80").cached  # the target is part of the key


def test_cache_is_keyed_by_defines():
    tiled = [k for k in KERNELS if k.name.startswith("03_smem_tiled:")]
    a, b = (compile_kernel(k, "sm_90") for k in tiled)
    assert a.resources.static_smem_bytes != b.resources.static_smem_bytes


def test_cu_error_names_file_line_and_shows_source():
    (broken,) = [k for k in discover([FIXTURE_KERNELS / "isolation"]) if k.name == "c_broken"]
    with pytest.raises(CompileError) as info:
        compile_kernel(broken, "sm_90")
    message = str(info.value)
    assert "c_broken.cu:10: error: expected an expression" in message
    assert "10 | const float* B, float beta, float* C) { int x = ; }" in message


def test_ptx_error_names_file_line_and_shows_source(tmp_path):
    ptx = tmp_path / "bad.ptx"
    ptx.write_text("""/* harness
entry = "bad"
summary = "broken on purpose"
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
*/
.version 8.0
.target sm_80
.address_size 64
.visible .entry bad()
{
    mov.u32 %r1, 7;
    ret;
}
""")
    (kernel,) = discover([tmp_path])
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90")
    message = str(info.value)
    assert f"{ptx}:14: error" in message
    assert "14 | mov.u32 %r1, 7;" in message


def test_unknown_arch_is_refused_before_compiling():
    with pytest.raises(Exception, match="unknown architecture 'sm_75'"):
        compile_kernel(select(KERNELS, ["01_naive"])[0], "sm_75")


def test_relinking_keeps_the_ptxas_report():
    """nvJitLink 13.0 answered a repeated link from its disk cache with no ptxas report;
    the harness links with -no-cache so every compile carries one."""
    (ptx,) = [k for k in KERNELS if k.spec.language == "ptx"][:1]
    for _ in range(2):
        compiled = compile_kernel(ptx, "sm_90", use_cache=False)
        assert "ptxas info" in compiled.log and compiled.resources.registers > 0


PTX_HEAD = """/* harness
entry = "k"
summary = "header test"
precision = "fp32"
min_arch = "sm_80"
block = ["32"]
grid = ["1"]
*/
.version {version}
.target {target}
.address_size 64
.visible .entry k(.param .u32 M, .param .u32 N, .param .u32 K, .param .f32 alpha,
    .param .u64 A, .param .u64 B, .param .f32 beta, .param .u64 C)
{{
    ret;
}}
"""


@pytest.mark.parametrize(
    ("version", "target", "arch", "match"),
    [("9.9", "sm_80", "sm_90", r"\.version 9\.9 needs a CUDA newer than any known here to "
                               r"assemble; this nvJitLink is \d+\.\d+: lower \.version"),
     ("8.0", "sm_100", "sm_90", r"\.target sm_100 cannot run on sm_90 .*lower \.target to "
                                r"sm_90 or older"),
     ("8.0", "sm_90a", "sm_90", r"\.target sm_90a assembles only for sm_90a.*declare "
                                r"min_arch = \"sm_90a\""),
     ("8.0", "sm_75", "sm_90", r"\.target sm_75 is not an architecture the harness knows")],
)
def test_ptx_header_is_refused_before_assembling(tmp_path, version, target, arch, match):
    (tmp_path / "k.ptx").write_text(PTX_HEAD.format(version=version, target=target))
    (kernel,) = discover([tmp_path])
    with pytest.raises(CompileError, match=match):
        compile_kernel(kernel, arch, use_cache=False)


def test_ptx_header_that_fits_assembles(tmp_path):
    (tmp_path / "k.ptx").write_text(PTX_HEAD.format(version="8.0", target="sm_80"))
    (kernel,) = discover([tmp_path])
    assert compile_kernel(kernel, "sm_90", use_cache=False).cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_the_examples_compile_without_spills(arch):
    from harness.kernels.registry import PROJECT_ROOT, load_registry

    for path in sorted((PROJECT_ROOT / "examples").glob("*.cu")):
        for kernel in load_registry([], kind=None).select([str(path)]):
            res = compile_kernel(kernel, arch).resources
            assert res.spill_store_bytes == 0 and res.registers <= 255, (path, res)


HEADERS = FIXTURE_KERNELS / "headers"


def test_cuda_and_standard_headers_are_found_without_a_toolkit():
    """NVRTC searches no folder of its own: the harness gives it the CUDA runtime headers and
    libcu++ (wheels or a toolkit) and its own <cstdint>, so a BF16 kernel may include them."""
    from harness.compiler import headers

    (kernel,) = discover([HEADERS])
    assert kernel.spec.precision == "bf16"
    compiled = compile_kernel(kernel, "sm_90", use_cache=False)
    assert compiled.cubin[:4] == b"\x7fELF" and compiled.resources.registers > 0
    search = headers.include_search()
    assert not search.missing, search
    assert search.paths[-1] == str(headers.SHIM_DIR)
    assert any((Path(p) / "cuda_bf16.h").is_file() for p in search.paths)
    assert any((Path(p) / "cuda/std/cstdint").is_file() for p in search.paths)


def test_include_paths_are_compiler_flags_and_part_of_the_cache_key(monkeypatch):
    from harness.compiler import compile as compile_mod
    from harness.compiler.compile import CompileOptions

    flags = CompileOptions(include_paths=("/a", "/b")).nvrtc_flags()
    assert "--include-path=/a" in flags and "--include-path=/b" in flags
    (kernel,) = discover([HEADERS])
    assert not compile_kernel(kernel, "sm_90").cached
    assert compile_kernel(kernel, "sm_90").cached
    paths = compile_mod.headers.include_paths()
    monkeypatch.setattr(compile_mod.headers, "include_paths", lambda: (*paths, str(HEADERS)))
    assert not compile_kernel(kernel, "sm_90").cached


def test_headers_are_found_in_cuda_home_when_the_finder_finds_none(tmp_path, monkeypatch):
    from harness.compiler import headers

    (tmp_path / "include/cccl/cuda/std").mkdir(parents=True)
    (tmp_path / "include/cuda_fp16.h").write_text("")
    (tmp_path / "include/cccl/cuda/std/cstdint").write_text("")
    monkeypatch.setattr(headers, "_pathfinder", lambda libname: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    headers.include_search.cache_clear()
    try:
        search = headers.include_search()
    finally:
        headers.include_search.cache_clear()
    assert search.paths == (str(tmp_path / "include"), str(tmp_path / "include/cccl"),
                            str(headers.SHIM_DIR))
    assert not search.missing


def test_a_header_not_found_is_named_with_where_and_what_to_install(tmp_path, monkeypatch):
    from harness.compiler import headers

    nowhere = headers.IncludeSearch((str(headers.SHIM_DIR),),
                                    ("cuda.pathfinder 'cudart'", "/usr/local/cuda/include"),
                                    headers.HEADER_SETS)
    monkeypatch.setattr(headers, "include_search", lambda: nowhere)
    monkeypatch.setattr(headers, "include_paths", lambda: nowhere.paths)
    (kernel,) = discover([HEADERS])
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90")
    message = str(info.value)
    assert "header 'cuda/std/cstdint' not found" in message  # <cstdint> needs libcu++
    assert "looked in cuda.pathfinder 'cudart'; /usr/local/cuda/include" in message
    assert "install nvidia-cuda-runtime nvidia-cuda-cccl" in message
    assert "or set CUDA_HOME to a CUDA 13 toolkit" in message

    vector = tmp_path / "vector_user.cu"
    vector.write_text((HEADERS / "bf16_headers.cu").read_text()
                      .replace("#include <cstdint>", "#include <vector>")
                      .replace("bf16_headers", "vector_user"))
    (kernel,) = discover([tmp_path])
    with pytest.raises(CompileError, match=r"header 'vector' not found: NVRTC has no C\+\+ "
                                           r"standard library .* <cuda/std/vector>"):
        compile_kernel(kernel, "sm_90")


def test_driver_api_headers_compile_under_nvrtc():
    """<cuda.h> (CUtensorMap), <cudaTypedefs.h>, <cuda/barrier> and <cuda/ptx> compile: the
    harness's <stdlib.h> stands in for the C library and -default-device makes cuda.h's host
    declarations device ones; a kernel that includes none of them gets no extra flag."""
    from harness.compiler import headers

    (kernel,) = discover([FIXTURE_KERNELS / "driver_headers"])
    assert headers.extra_flags(kernel.spec.path) == (headers.DEFAULT_DEVICE,)
    compiled = compile_kernel(kernel, "sm_90", use_cache=False)
    assert compiled.cubin[:4] == b"\x7fELF"
    (plain,) = discover([HEADERS])
    assert headers.extra_flags(plain.spec.path) == ()


def test_an_edited_header_rebuilds(tmp_path):
    """The cache keys on every file the build reads: a header the kernel includes with
    ``#include "..."`` (two deep here) edited after a cached compile gives a new build."""
    from harness.kernels.registry import Kernel
    from harness.kernels.spec import read_spec

    (tmp_path / "inner.h").write_text("#define WORDS 1024\n")
    (tmp_path / "outer.h").write_text('#include "inner.h"\n')
    path = tmp_path / "uses_header.cu"
    path.write_text('/* harness\nentry = "uses_header"\nsummary = "test"\nprecision = "fp32"\n'
                    'min_arch = "sm_80"\nblock = ["32"]\ngrid = ["1"]\n*/\n'
                    '#include "outer.h"\n'
                    'extern "C" __global__ void uses_header(int M, int N, int K, float alpha, '
                    'const float* A, const float* B, float beta, float* C) {\n'
                    '    __shared__ float s[WORDS];\n'
                    '    s[threadIdx.x] = A[threadIdx.x]; __syncthreads();\n'
                    '    C[threadIdx.x] = s[(threadIdx.x + 1) % 32];\n}\n')
    kernel = Kernel("uses_header", read_spec(path), ())
    first = compile_kernel(kernel, "sm_90")
    assert first.resources.static_smem_bytes == 4096
    assert compile_kernel(kernel, "sm_90").cached
    (tmp_path / "inner.h").write_text("#define WORDS 8192\n")
    edited = compile_kernel(kernel, "sm_90")
    assert not edited.cached and edited.resources.static_smem_bytes == 32768
    # the host set-up beside a kernel is read by the build too
    path.with_suffix(".py").write_text("def setup(launch):\n    return {}\n")
    assert not compile_kernel(kernel, "sm_90").cached


def test_an_error_in_an_included_header_is_quoted_from_that_header(tmp_path):
    kernel_file = tmp_path / "with_header.cu"
    source = (FIXTURE_KERNELS / "isolation" / "d_good.cu").read_text()
    kernel_file.write_text(source.replace("*/\n", '*/\n#include "sub/helper.cuh"\n', 1)
                           .replace("float acc = 0.0f;", "float acc = zero();"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "helper.cuh").write_text(
        '#pragma once\n#include "inner.cuh"\n__device__ inline float zero() {\n'
        "    return 0.0f + ;\n}\n")
    (tmp_path / "sub" / "inner.cuh").write_text(
        "#pragma once\n// two\n// three\n__device__ inline int inner() { return nowhere; }\n")
    (kernel,) = discover([tmp_path])
    with pytest.raises(CompileError, match=r"NVRTC could not compile the kernel") as info:
        compile_kernel(kernel, "sm_90")
    message = str(info.value)
    assert (f"{tmp_path}/sub/inner.cuh:4: error: identifier \"nowhere\" is undefined\n"
            "    4 | __device__ inline int inner() { return nowhere; }") in message
    assert (f"{tmp_path}/sub/helper.cuh:4: error: expected an expression\n"
            "    4 | return 0.0f + ;") in message
    assert "4 | precision" not in message  # not the kernel file's line of the same number
