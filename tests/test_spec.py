from pathlib import Path

import pytest

from harness.errors import HarnessError, SpecError
from harness.kernels.spec import parse_spec

BODY = 'extern "C" __global__ void k(int M, int N, int K, float alpha, const float* A, ' \
       "const float* B, float beta, float* C) {}\n"
GOOD = """/* harness
entry = "k"
summary = "A test kernel."
precision = "fp32"
min_arch = "sm_80"
block = ["TILE", "TILE"]
grid = ["cdiv(N, TILE)", "cdiv(M, TILE)"]
dynamic_smem_bytes = "2 * TILE * TILE * 4"
constraints = ["K % 4 == 0"]
[params]
TILE = 32
[variants]
t16 = { TILE = 16 }
*/
"""


def spec_of(text: str, body: str = BODY, name: str = "k.cu"):
    return parse_spec(text + body, Path(name))


def test_good_spec_parses():
    spec = spec_of(GOOD)
    assert spec.entry == "k" and spec.precision == "fp32" and spec.language == "cu"
    assert spec.params == {"TILE": 32} and spec.variants == {"t16": {"TILE": 16}}
    assert spec.dynamic_smem_bytes({"TILE": 16, "M": 1, "N": 1, "K": 1}) == 2048
    assert [c.text for c in spec.constraints] == ["K % 4 == 0"]
    assert spec.layout_b == "row" and spec.carveout_pct is None


def test_a_cu_file_including_a_kernel_file_of_its_own_names_an_entry_it_includes():
    # cu/sgemm/10_hoisted_small.cu: 10_hoisted.cu's kernel at other tiles, included whole
    spec = spec_of(GOOD, '#include "10_hoisted.cu"\n')
    assert spec.entry == "k" and spec.language == "cu"
    with pytest.raises(SpecError, match="entry symbol 'k' is not defined in the file"):
        spec_of(GOOD, "#include <cstdint>\n")


def test_ptx_entry_is_found():
    text = GOOD.replace('"TILE", "TILE"', '"32"').replace("[variants]\nt16 = { TILE = 16 }\n", "")
    spec = spec_of(text, ".visible .entry k(\n.param .u32 M\n)\n{}\n", "k.ptx")
    assert spec.language == "ptx"


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace('precision = "fp32"', 'precision = "fp32"\ncolour = "red"'),
         r"unknown key\(s\) 'colour'; allowed keys"),
        (lambda t: t.replace('entry = "k"\n', ""), r"missing required key\(s\) entry"),
        (lambda t: t.replace('entry = "k"', 'entry = "other"'),
         "entry symbol 'other' is not defined in the file"),
        (lambda t: t.replace('"cdiv(N, TILE)"', '"cdiv(N, TILE"'), "does not parse"),
        (lambda t: t.replace('"cdiv(N, TILE)"', '"cdiv(N, BM)"'), "uses BM; it may use only"),
        (lambda t: t.replace('block = ["TILE", "TILE"]', 'block = ["M", "TILE"]'),
         "uses M; it may use only TILE"),
        (lambda t: t.replace('"fp32"', '"fp64"'), "precision must be one of"),
        (lambda t: t.replace('"sm_80"', '"sm_75"'),
         r"^k\.cu: spec: min_arch 'sm_75' is not an architecture the harness knows"),
        (lambda t: t.replace("t16 = { TILE = 16 }", "t16 = { BM = 16 }"),
         "sets BM, which \\[params\\] does not declare"),
        (lambda t: t.replace("TILE = 32", "TILE = 3.5"), "TILE must be an integer"),
        (lambda t: t.replace("[variants]", "[tune]\nBM = [64]\n[variants]"),
         "tune.BM: BM is not declared in \\[params\\]"),
        (lambda t: t.replace("[variants]", "[tune]\nTILE = []\n[variants]"),
         "tune.TILE must be a non-empty list of integers"),
        (lambda t: t.replace("[variants]", "[tuned.sm_75]\nTILE = 8\n[variants]"),
         r"^k\.cu: spec: \[tuned\.sm_75\]: 'sm_75' is not an architecture"),
        (lambda t: t.replace("[params]", 'c_type = "fp16"\n[params]'),
         "c_type 'fp16' with fp32 inputs: a 16-bit C must be the inputs' own type"),
        (lambda t: t.replace("[params]", 'c_type = "fp64"\n[params]'),
         "c_type must be one of fp32, bf16, fp16"),
        (lambda t: t.replace("[params]", "blas_strict = 1\n[params]"),
         "blas_strict must be true or false"),
        (lambda t: t.replace("[params]", 'layout = "row"\n[params]'),
         r"unknown key\(s\) 'layout' \(did you mean 'layout_b'\?\)"),
        (lambda t: t.replace("[variants]", "[tuned.sm_90]\nBM = 8\n[variants]"),
         "tuned.sm_90 sets BM, which \\[params\\] does not declare"),
        (lambda t: t.replace("[variants]", "[model]\nwidth = \"4\"\n[variants]"),
         "model must be a table with keys tile_m"),
        (lambda t: t.replace('"K % 4 == 0"', '"K % 4"'), None),
        (lambda t: t.replace('dynamic_smem_bytes = "2 * TILE * TILE * 4"',
                             'dynamic_smem_bytes = "open(1)"'), "unknown function"),
        (lambda t: t.replace("[params]", "carveout_pct = 150\n[params]"),
         "carveout_pct must be an integer percent"),
        (lambda t: t.replace('block = ["TILE", "TILE"]', "block = []"),
         "block must list 1 to 3 dimensions"),
        (lambda t: t.replace('summary = "A test kernel."', "summary = [1]"),
         "summary must be a string"),
        # the block is there under another first line: said so, not "no spec block"
        (lambda t: t.replace("/* harness", "/* kernel"),
         r"^k\.cu:1: the spec block's first line must be '/\* harness' \(lower case, alone\), "
         r"found '/\* kernel'$"),
        (lambda t: t.replace("/* harness", "/* kernel").replace('entry = "k"\n', ""),
         "no spec block"),
        (lambda t: t.replace('entry = "k"', 'entry = k'),
         r"^k\.cu:2: the spec block is not valid TOML, column \d+: .*: 'entry = k'$"),
    ],
)
def test_bad_specs_are_named(edit, match):
    if match is None:  # an arithmetic constraint is accepted (non-zero means true)
        spec_of(edit(GOOD))
        return
    with pytest.raises(HarnessError, match=match):
        spec_of(edit(GOOD))


def test_bad_spec_errors_name_the_file():
    with pytest.raises(SpecError, match=r"^k\.cu: spec: "):
        spec_of(GOOD.replace('entry = "k"', 'entry = "nope"'))


def test_wrong_suffix_is_refused():
    with pytest.raises(SpecError, match="expected a .cu or .ptx kernel file"):
        spec_of(GOOD, name="k.cuh")


def test_tma_boxes_are_formulas_over_the_parameters():
    spec = spec_of(GOOD.replace("*/", '[tma]\nA = ["TILE", "2 * TILE"]\nB = ["64", "TILE"]\n'
                                      'C = { box = ["64", "TILE // 2"], swizzle = "none" }\n*/'))
    env = {"TILE": 32}
    assert [int(e(env)) for e in spec.tma["A"].box] == [32, 64]
    assert [int(e(env)) for e in spec.tma["B"].box] == [64, 32]
    assert [int(e(env)) for e in spec.tma["C"].box] == [64, 16]
    assert [spec.tma[o].swizzle for o in "ABC"] == ["128B", "128B", "none"]
    assert spec_of(GOOD).tma == {}


@pytest.mark.parametrize("table, match", [
    ('[tma]\nD = ["1", "1"]\n', r"tma must be a table with keys among A, B, C"),
    ('[tma]\nA = ["TILE"]\n', r"tma.A must be \[inner, outer\]"),
    ('[tma]\nA = ["TILE", "M"]\n', r"tma.A: formula 'M' uses M; it may use only TILE"),
    ('[tma]\nC = { box = ["64", "TILE"], swizzle = "256B" }\n',
     r"tma.C.swizzle must be one of '128B', '64B', '32B', 'none', found '256B'"),
    ('[tma]\nC = { swizzle = "none" }\n',
     r"tma.C as a table takes box = \[inner, outer\] and optionally swizzle; found keys swizzle"),
    ('[tma]\nC = { box = ["64", "TILE"], mode = 1 }\n', r"found keys box, mode"),
])
def test_bad_tma_tables_are_refused(table, match):
    with pytest.raises(SpecError, match=match):
        spec_of(GOOD.replace("*/", table + "*/"))


def test_a_tensor_map_box_wider_than_the_swizzle_is_refused_before_the_driver():
    from harness.gpu.tensormaps import tensor_map_2d

    with pytest.raises(HarnessError, match=r"box 128 x 64 does not fit a 128-byte swizzle "
                                           r"\(inner box at most 64 bf16 elements"):
        tensor_map_2d("bf16", 0, 4096, 4096, 128, 64, "k tensor map A")
    with pytest.raises(HarnessError, match=r"no tensor-map element type for 'int8'"):
        tensor_map_2d("int8", 0, 4096, 4096, 64, 64, "k tensor map A")
    with pytest.raises(HarnessError, match=r"box 64 x 64 does not fit a 64-byte swizzle "
                                           r"\(inner box at most 32 fp16 elements"):
        tensor_map_2d("fp16", 0, 4096, 4096, 64, 64, "k tensor map C", "64B")
    with pytest.raises(HarnessError, match=r"the inner box must be 1..256 elements and a "
                                           r"multiple of 16 bytes \(8 bf16 elements\), found "
                                           r"12 bytes"):
        tensor_map_2d("bf16", 0, 4096, 4096, 6, 64, "k tensor map C", "none")
    with pytest.raises(HarnessError, match=r"box 256 x 300: the outer box must be 1..256 rows"):
        tensor_map_2d("bf16", 0, 4096, 4096, 256, 300, "k tensor map C", "none")
    with pytest.raises(HarnessError, match=r"swizzle must be one of 128B, 64B, 32B, none, "
                                           r"found '16B'"):
        tensor_map_2d("bf16", 0, 4096, 4096, 64, 64, "k tensor map C", "16B")
