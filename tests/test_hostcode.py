"""Issue 38: a public kernel as written. Spec parameters that do not collide with the kernel's
own names (template arguments, not macros, unless asked), host code in the file left out for
NVRTC (or a hint naming its line and the #ifndef __CUDACC_RTC__ guard), a plain C++ entry
found, and the example written that way (examples/templated_sgemm.cu)."""

from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.compile import compile_kernel
from harness.compiler.offline import build_row
from harness.errors import CompileError, SpecError
from harness.kernels.hostcode import device_part, nvrtc_hints
from harness.kernels.registry import PROJECT_ROOT, kernels_in, load_registry
from harness.kernels.spec import parse_spec, read_spec
from harness.kinds.gemm.plan import plan

EXAMPLE = PROJECT_ROOT / "examples" / "templated_sgemm.cu"
PUBLIC = FIXTURE_KERNELS / "hostcode" / "public_style.cu"
NAIVE = PROJECT_ROOT / "cu" / "sgemm" / "01_naive.cu"


def kept(part, *snippets: str) -> bool:
    return all(s in part.text for s in snippets)


def blanked(part, *snippets: str) -> bool:
    return not any(s in part.text for s in snippets)


# ---- the device part: what is left out, what is kept ----

HOST_FILE = """#include <vector>
#include <cuda_bf16.h>
#include <cute/tensor.hpp>
#define DEV __device__ __forceinline__
#define HD DEV

extern "C" __global__ void k(float* x) { x[0] = helper(1) + twice(2); }  // { unbalanced
DEV float helper(int i) { return i * 0.5f; }
HD float twice(float v) { return 2 * v; }
CUTE_HOST_DEVICE int from_a_header() { return 3; }
__host__ __device__ int both() { return 4; }
constexpr int TILES = 64;
const int STAGES = 3;
__device__ int counter;
__constant__ float table[4] = {1, 2, 3, 4};
int host_count = 0;
static float* host_buffer;
struct Plain { int a; __device__ int get() const { return a; } };
struct Schedule { std::vector<int> tiles; };

__host__ void fill(int* p) { p[0] = '}'; }
void launch(float* x) {
    const char* why = "} not a brace {";
    k<<<1, 1>>>(x);
}
template <int BM, typename T = float>
std::vector<T> reference(int n) { return std::vector<T>(n); }
int prototype(int n);
void (*callback)(int);
namespace lib {
extern "C" {
__global__ void inner(float* x) { x[0] = 2; }
void inner_launch(float* x) { inner<<<1, 1>>>(x); }
}
}  // namespace lib
using lib::inner_launch;
auto raw = R"delim(a } raw { string)delim";
"""


def test_host_code_is_blanked_and_device_code_kept():
    part = device_part(HOST_FILE)
    assert len(part.text) == len(HOST_FILE)  # line numbers kept: blanks, not deletions
    assert part.text.count("\n") == HOST_FILE.count("\n")
    assert kept(part, "#include <cuda_bf16.h>", "#include <cute/tensor.hpp>",
                'extern "C" __global__ void k', "DEV float helper", "HD float twice",
                "CUTE_HOST_DEVICE int from_a_header", "__host__ __device__ int both",
                "constexpr int TILES", "const int STAGES", "__device__ int counter",
                "__constant__ float table", "struct Plain", "__global__ void inner",
                "void (*callback)(int);")
    assert blanked(part, "#include <vector>", "int host_count", "static float* host_buffer",
                   "struct Schedule", "__host__ void fill", "void launch", "k<<<1, 1>>>",
                   "std::vector<T> reference", "int prototype", "void inner_launch",
                   "using lib::inner_launch")
    assert part.headers == ("vector",)
    whats = [piece.describe() for piece in part.left_out]
    assert "line 1 (#include <vector>)" in whats
    assert "lines 22-25 (host function launch)" in whats
    assert "line 21 (__host__ function fill)" in whats
    assert "line 36 (names inner_launch)" in whats
    assert part.note().startswith("host code left out for NVRTC (it compiles device code only): "
                                  "line 1 (#include <vector>); ")


def test_with_default_device_only_what_cannot_be_device_code_goes():
    """NVRTC's -default-device (a file that includes <cuda.h>) makes unannotated functions and
    variables device ones: only those that launch, call the runtime or the driver, or use the
    standard library are host code then."""
    source = ("int counter = 0;\n"
              "int rotate(int n, int x) { return n - 1 - x; }\n"
              "void run(float* x) { cudaMalloc(&x, 4); }\n"
              "CUtensorMap make(void* p) { CUtensorMap m; cuTensorMapEncodeTiled(&m); return m; }\n"
              "__device__ float2 z(float2 a) { return cuCaddf(a, a); }\n")
    part = device_part(source, default_device=True)
    assert kept(part, "int counter = 0;", "int rotate", "__device__ float2 z")
    assert blanked(part, "void run", "CUtensorMap make")


def test_a_header_nvrtc_finds_is_kept():
    part = device_part("#include <vector>\n#include <cmath>\n",
                       header_found=lambda header: header == "cmath")
    assert blanked(part, "<vector>") and kept(part, "#include <cmath>")


def test_a_generated_file_past_the_scan_limit_is_left_as_it_is(monkeypatch):
    import harness.kernels.hostcode as hostcode

    monkeypatch.setattr(hostcode, "MAX_SCAN_CHARS", 100)
    part = device_part(HOST_FILE)
    assert part.text == HOST_FILE and part.left_out == ()


def test_a_file_without_host_code_is_left_as_it_is():
    source = NAIVE.read_text()
    part = device_part(source)
    assert part.text == source and part.left_out == () and part.note() == ""


# ---- the build: compiled as written, else its device part ----

def test_the_public_style_fixture_builds_unmodified():
    """A file shaped like fast.cu's matmul_12 (a template kernel in a namespace, a __host__
    tensor-map builder, host globals, a std::vector schedule, a launcher, a using-declaration,
    <cuda.h>): its template parameters are [params] names, and no line of it was edited."""
    kernel = kernels_in(read_spec(PUBLIC))[0]
    assert kernel.defines == ()  # BM, BN, BK, QSIZE reach it as template arguments only
    assert kernel.entry_expression == "P12::gemm_tma<128, 128, 64, 3>"
    compiled = compile_kernel(kernel, "sm_90", use_cache=False)
    assert compiled.symbol.startswith("_ZN3P128gemm_tmaILi128ELi128ELi64ELi3EEEviiif")
    note = compiled.log.splitlines()[0]
    assert note.startswith("host code left out for NVRTC")
    for piece in ("#include <vector>", "__host__ function make_tensor_map",
                  "host function build_schedule", "host function run_gemm_tma",
                  "names run_gemm_tma"):
        assert piece in note, note
    assert "rotate" not in note  # plain integer code: a device function under -default-device


def test_macros_that_rewrite_the_kernels_own_names_get_a_hint(tmp_path):
    """macros = true passes BM as -DBM=128: 'template <int BM, ...>' no longer compiles, and the
    failure says which line the macro rewrote and what to do."""
    path = tmp_path / PUBLIC.name
    path.write_text(PUBLIC.read_text().replace("\n[params]\n", "\nmacros = true\n[params]\n", 1))
    kernel = kernels_in(read_spec(path))[0]
    assert "-DBM=128" in kernel.defines
    with pytest.raises(CompileError) as info:
        compile_kernel(kernel, "sm_90", use_cache=False)
    message = str(info.value)
    assert (f"hint: {path}:36: [params] BK, BM, BN, QSIZE arrive as macros (-DBK=64 -DBM=128 "
            "-DBN=128 -DQSIZE=3) and rewrite the names this line declares ('template <int BM, "
            "int BN, int BK, int QSIZE>'): pass them as template arguments instead (name them in "
            "the entry, entry = \"kernel<BK, BM, BN, QSIZE>\", and leave them out of the spec's "
            "macros: macros = false, or a list without them)") in message, message
    assert message.count("hint: ") == 1


def test_host_code_it_cannot_recognise_gets_the_guard_hint(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(NAIVE.read_text() + "\nstruct Launcher {\n    void go() { }\n};\n")
    with pytest.raises(CompileError) as info:
        compile_kernel(kernels_in(read_spec(path))[0], "sm_90", use_cache=False)
    lines = path.read_text().splitlines()
    number = lines.index("    void go() { }") + 1
    assert (f"hint: {path}:{number}: 'void go() {{ }}' is host code: NVRTC compiles device "
            "code only; guard host code with '#ifndef __CUDACC_RTC__' ... '#endif' (NVRTC "
            "defines __CUDACC_RTC__), or mark a function that runs on the GPU __device__"
            ) in str(info.value)


def test_a_plain_cxx_entry_is_found(tmp_path):
    """entry = "f" for a __global__ void f that is not extern "C": the build asks NVRTC for
    its mangled symbol (it used to fail with 'found: _Z...')."""
    path = tmp_path / "plain_naive.cu"
    path.write_text(NAIVE.read_text().replace('extern "C" __global__', "__global__"))
    compiled = compile_kernel(kernels_in(read_spec(path))[0], "sm_90", use_cache=False)
    assert compiled.symbol == "_Z11sgemm_naiveiiifPKfS0_fPf"


def test_nvrtc_hints_ignore_other_files_and_comments():
    log = ("other.h(3): error: A function without execution space annotations ...\n"
           "k.cu(2): error: expected a declaration\n")
    assert nvrtc_hints(log, "// int BM = 3;\n#define BM 4\n", "k.cu", ["-DBM=4"]) == []


# ---- the macros switch ----

HEAD = """/* harness
entry = "{entry}"
summary = "t"
precision = "fp32"
min_arch = "sm_80"
block = ["BM"]
grid = ["cdiv(M, BM)"]
{extra}[params]
BM = 64
BK = 8
*/
"""
TEMPLATE = "template <int BM> __global__ void gemm(int M) {}\n"


def spec(entry: str = "gemm<BM>", extra: str = "", body: str = TEMPLATE, name: str = "k.cu"):
    return parse_spec(HEAD.format(entry=entry, extra=extra) + body, Path(name))


@pytest.mark.parametrize(("entry", "extra", "body", "macros"), [
    # the default: a template entry's arguments are not macros, the rest still are
    ("gemm<BM>", "", TEMPLATE, {"BK"}),
    # ... unless the source tests the name in a directive: then it uses it as a macro too
    ("gemm<BM>", "", "#ifndef BM\n#define BM 32\n#endif\n" + TEMPLATE, {"BM", "BK"}),
    # a plain entry: every parameter a macro, as every kernel of cu/ has it
    ("k", "", 'extern "C" __global__ void k(int M) {}\n', {"BM", "BK"}),
    ("gemm<BM>", "macros = true\n", TEMPLATE, {"BM", "BK"}),
    ("gemm<BM>", "macros = false\n", TEMPLATE, set()),
    ("gemm<BM>", 'macros = ["BK"]\n', TEMPLATE, {"BK"}),
    ("k", "macros = []\n", 'extern "C" __global__ void k(int M) {}\n', set()),
])
def test_which_parameters_are_macros(entry, extra, body, macros):
    parsed = spec(entry, extra, body)
    assert {name for name in ("BM", "BK") if parsed.passes_as_macro(name)} == macros
    kernel = kernels_in(parsed)[0]
    assert set(kernel.defines) == {f"-D{n}={dict(kernel.params)[n]}" for n in macros}


@pytest.mark.parametrize(("extra", "name", "match"), [
    ('macros = ["TILE"]\n', "k.cu", r"macros names TILE, which \[params\] does not declare; "
                                    r"declared: BM, BK"),
    ("macros = 1\n", "k.cu", r"macros must be true, false or a list of \[params\] names, found 1"),
    ('macros = [1]\n', "k.cu", r"macros must be true, false or a list of \[params\] names"),
    ("macros = true\n", "k.ptx", r"macros is for \.cu files \(NVRTC's -D\); a \.ptx kernel's "
                                 r"\[params\] reach its PTX macros"),
])
def test_a_bad_macros_key_is_refused(extra, name, match):
    body = TEMPLATE if name == "k.cu" else ".visible .entry k()\n{ ret; }\n"
    with pytest.raises(SpecError, match=match):
        spec("k" if name == "k.ptx" else "gemm<BM>", extra, body, name)


def test_every_project_kernel_keeps_its_macros():
    """cu/, examples/ and the fixtures named by a plain entry get every parameter as -D, as
    before; the template fixture named by its instantiation gets none."""
    folders = [PROJECT_ROOT / "cu", PROJECT_ROOT / "examples", FIXTURE_KERNELS]
    for kernel in load_registry(folders, kind=None).kernels:
        if kernel.spec.language != "cu":
            continue
        expected = () if kernel.spec.entry_is_cxx else tuple(
            f"-D{n}={v}" for n, v in kernel.params)
        assert kernel.defines == expected, kernel.name


# ---- the example: examples/templated_sgemm.cu ----

def example_kernels():
    return {k.variant: k for k in kernels_in(read_spec(EXAMPLE))}


def test_the_example_builds_unmodified_offline():
    kernels = example_kernels()
    assert set(kernels) == {"b16", "b32"}
    for variant, (bm, bn, bk) in {"b16": (16, 16, 32), "b32": (32, 32, 16)}.items():
        kernel = kernels[variant]
        assert kernel.defines == ()
        assert kernel.entry_expression == f"demo::tiled_sgemm<{bm}, {bn}, {bk}>"
        compiled = compile_kernel(kernel, "sm_90")
        assert compiled.symbol.startswith(f"_ZN4demo11tiled_sgemmILi{bm}ELi{bn}ELi{bk}EEEviii")
        res = compiled.resources
        assert res.spill_store_bytes == res.spill_load_bytes == 0 and res.registers <= 64
        assert res.static_smem_bytes == 4 * (bm * (bk + 1) + bk * bn)
        row = build_row(kernel, "sm_90")
        assert row["status"] == "ok" and row["block"] == [bn, bm, 1], row
        assert row["grid"] == [4096 // bn, 4096 // bm, 1]


def test_the_example_leaves_out_its_host_code_and_says_so():
    compiled = compile_kernel(example_kernels()["b16"], "sm_90", use_cache=False)
    assert compiled.log.splitlines()[0] == (
        "host code left out for NVRTC (it compiles device code only): line 21 (#include "
        "<cstdio>); line 22 (#include <vector>); lines 60-67 (__host__ function "
        "launch_tiled_sgemm); lines 69-76 (host function reference_sgemm); lines 79-102 (host "
        "function check_tiled_sgemm); line 106 (names check_tiled_sgemm)")


def test_the_example_gets_the_whole_battery():
    checked = plan(example_kernels()["b16"])
    assert checked.checks and not checked.skipped


@pytest.mark.gpu
def test_the_example_passes_its_checks_on_the_gpu(tmp_path):
    from harness.gpu.driver import device_arch_name
    from harness.run.runner import RunOptions, run

    kernels = list(example_kernels().values())
    record = run(kernels, device_arch_name(), RunOptions(sizes=((1000, 1000, 1000),)),
                 tmp_path / "check.jsonl", lambda _: None, mode="check")
    assert {r.kernel.name for r in record.results} == {"templated_sgemm:b16",
                                                        "templated_sgemm:b32"}
    for result in record.results:
        notes = result.checks.notes if result.checks is not None else ()
        # a right GEMM, which reads C only when beta != 0 (no "reads C when beta = 0" note)
        assert result.status == "pass" and not notes, (result.status, result.message, notes)


def test_a_template_argument_the_source_also_uses_as_a_macro_gets_a_hint(tmp_path):
    """The entry names BM and BK, so neither is a -D macro by default; a helper that uses BK
    as a macro fails, with the key to add."""
    body = ("template <int TM, int TK>\n__global__ void gemm(int M, int N, int K, float alpha, "
            "const float* A, const float* B, float beta, float* C) {\n"
            "    __shared__ float tile[TK];\n    tile[0] = tile_width();\n}\n")
    helper = "__device__ int tile_width() { return BK; }\n"
    path = tmp_path / "k.cu"
    path.write_text(HEAD.format(entry="gemm<BM, BK>", extra="") + helper + body)
    with pytest.raises(CompileError) as info:
        compile_kernel(kernels_in(read_spec(path))[0], "sm_90", use_cache=False)
    assert (f"hint: {path}:12: [params] BK is not a macro (the entry's template arguments name "
            "it, so it reaches the kernel as one), and this line uses it as one: add macros = "
            '["BK"] to the spec (or macros = true) to pass -DBK=8 as well') in str(info.value)
    path.write_text(HEAD.format(entry="gemm<BM, BK>", extra='macros = ["BK"]\n') + helper + body)
    assert compile_kernel(kernels_in(read_spec(path))[0], "sm_90", use_cache=False).cubin
