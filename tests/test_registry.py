import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.errors import HarnessError, SpecError
from harness.kernels.registry import (
    DEFAULT_KERNEL_DIRS,
    discover,
    load_registry,
    representatives,
    select,
)


def test_project_registry_parses_and_is_ordered():
    kernels = discover()
    names = [k.name for k in kernels]
    assert len(names) == len(set(names)) and len(names) >= 6
    files = [str(k.spec.path) for k in kernels]
    assert files == sorted(files)
    for k in kernels:
        assert k.block_threads >= 1 and k.spec.summary
        assert all(d >= 1 for d in k.grid_dims(4096, 4096, 4096))


def test_variants_expand_with_their_defines():
    kernels = {k.name: k for k in discover()}
    tiled = [k for k in kernels if k.startswith("03_smem_tiled:")]
    assert sorted(tiled) == ["03_smem_tiled:t16", "03_smem_tiled:t32"]
    assert kernels["03_smem_tiled:t16"].defines == ("-DTILE=16",)
    assert kernels["03_smem_tiled:t16"].block_dims == (16, 16, 1)
    assert kernels["03_smem_tiled:t32"].grid_dims(100, 65, 7) == (3, 4, 1)


def test_select_by_name_stem_and_glob():
    kernels = discover()
    assert [k.name for k in select(kernels, ["03_smem_tiled"])] == [
        "03_smem_tiled:t16", "03_smem_tiled:t32"]
    assert [k.name for k in select(kernels, ["01_naive"])] == ["01_naive"]
    assert {k.name for k in select(kernels, ["0[12]_*"])} == {"01_naive", "02_coalesced"}
    assert select(kernels, []) == kernels
    with pytest.raises(HarnessError, match="no kernel matches 'nope'; [0-9]+ names are known"):
        select(kernels, ["nope"])
    with pytest.raises(HarnessError, match=r"no kernel matches '10_hoist'; closest: 10_hoisted"):
        select(kernels, ["10_hoist"])


def test_fixture_constraints(tmp_path):
    src = (FIXTURE_KERNELS / "isolation" / "d_good.cu").read_text()
    (tmp_path / "x.cu").write_text(src.replace('grid = ["cdiv(N, 16)", "cdiv(M, 16)"]',
                                               'grid = ["cdiv(N, 16)", "cdiv(M, 16)"]\n'
                                               'constraints = ["M % 16 == 0", "K >= 8"]'))
    (kernel,) = discover([tmp_path])
    assert kernel.shape_problems(32, 5, 8) == []
    assert kernel.shape_problems(30, 5, 4) == [
        "30x5x4 violates the kernel's constraint 'M % 16 == 0'",
        "30x5x4 violates the kernel's constraint 'K >= 8'"]


def test_duplicate_stems_and_missing_folders(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for sub in ("a", "b"):
        shutil.copy(FIXTURE_KERNELS / "isolation" / "d_good.cu", tmp_path / sub / "same.cu")
    with pytest.raises(SpecError, match=r"b/same.cu: its stem 'same' is already the key of "
                                        r".*a/same.cu; the stem is the registry key"):
        discover([tmp_path])
    registry = load_registry([tmp_path])
    assert [k.name for k in registry.kernels] == ["same"] and len(registry.broken) == 1
    with pytest.raises(HarnessError, match="kernel folder .* does not exist"):
        discover([tmp_path / "missing"])


GOOD = FIXTURE_KERNELS / "isolation" / "d_good.cu"


def test_a_kernel_file_path_is_a_kernel_beside_the_built_ins(tmp_path):
    mine = tmp_path / "mine.cu"
    shutil.copy(GOOD, mine)
    registry = load_registry(DEFAULT_KERNEL_DIRS)
    chosen = registry.select([str(mine), "10_hoisted"])
    assert [k.name for k in chosen] == ["mine", "10_hoisted"]
    assert chosen[0].spec.path == mine
    (variant,) = registry.select(["cu/sgemm/03_smem_tiled.cu:t16"])
    assert variant.name == "03_smem_tiled:t16"
    assert variant in registry.kernels  # the same kernel as its registry key names
    with pytest.raises(HarnessError, match="no kernel file .*missing.cu"):
        registry.select([str(tmp_path / "missing.cu")])
    with pytest.raises(HarnessError, match="has no variant 'zz'; its variants: t16, t32"):
        registry.select(["cu/sgemm/03_smem_tiled.cu:zz"])
    with pytest.raises(HarnessError, match="is a 'ceiling' kernel; this command takes 'gemm'"):
        registry.select(["ptx/ceiling/mma_sync_bf16.ptx"])


def test_kernel_dir_adds_to_the_built_ins_and_one_bad_file_spoils_nothing(tmp_path):
    shutil.copy(GOOD, tmp_path / "mine.cu")
    (tmp_path / "broken.cu").write_text(GOOD.read_text().replace('entry = "good"', "entry = "))
    (tmp_path / "latin1.cu").write_bytes(GOOD.read_bytes().replace(b"fixture", b"fixt\xe9re"))
    registry = load_registry([*DEFAULT_KERNEL_DIRS, tmp_path])
    names = [k.name for k in registry.kernels]
    assert "mine" in names and "10_hoisted" in names
    errors = {b.path.name: b.error for b in registry.broken}
    assert set(errors) == {"broken.cu", "latin1.cu"}
    assert "broken.cu:2: the spec block is not valid TOML" in errors["broken.cu"]
    assert "latin1.cu:3: the kernel file is not UTF-8 (byte 0xe9" in errors["latin1.cu"]
    assert [k.name for k in registry.select(["mine"])] == ["mine"]
    with pytest.raises(SpecError, match="broken.cu:2"):
        registry.select(["broken"])


def test_a_file_without_a_spec_gets_one_to_paste(tmp_path):
    path = tmp_path / "theirs.cu"
    path.write_text("#include <cuda_runtime.h>\n__global__ void __launch_bounds__(256) "
                    "sgemm_v1(int M, int N) {}\n__global__ void helper(float* x) {}\n")
    registry = load_registry([])
    with pytest.raises(SpecError) as info:
        registry.select([str(path)])
    text = str(info.value)
    assert "no spec block" in text and 'entry = "sgemm_v1"' in text
    assert "found in the file: sgemm_v1, helper" in text and "extern \"C\"" in text
    assert "grid = [" in text and "block = [" in text


def test_one_representative_per_file():
    reps = representatives(discover())
    files = [k.spec.path for k in reps]
    assert len(files) == len(set(files)) == len({k.spec.path for k in discover()})
    by_stem = {k.spec.stem: k for k in reps}
    assert by_stem["01_naive"].variant is None
    for k in reps:
        if k.spec.representative:
            assert k.variant == k.spec.representative


_FORMULAS = '''/* harness
entry = "f"
summary = "Test fixture: formulas that fail only when evaluated."
precision = "fp32"
min_arch = "sm_80"
block = ["32 >> SHIFT"]
grid = ["cdiv(N, DIV)", "M // (DIV + 1)"]
dynamic_smem_bytes = "1 << (SHIFT * 40)"
constraints = ["M % DIV == 0"]
[params]
DIV = 1
SHIFT = 0
[variants]
zero = { DIV = 0 }
far = { SHIFT = 2 }
[model]
tile_m = "64 // (DIV - 1)"
tile_n = "64"
smem_loads = "1"
fmas = "1"
[tma]
A = ["64 // (DIV - 1)", "8"]
*/
extern "C" __global__ void f(int M, int N, int K, float alpha, const float* A,
                             const float* B, float beta, float* C) {}
'''


def test_a_formula_that_fails_when_evaluated_names_its_file_and_kernel(tmp_path):
    """Formulas parse when the spec is read and are evaluated later (grid, block, shared
    memory, constraints, [model], [tma]): a failure then names the file and the kernel."""
    from harness.errors import FormulaError
    from harness.report import napkin

    path = tmp_path / "formulas.cu"
    path.write_text(_FORMULAS)
    kernels = {k.name: k for k in discover([tmp_path])}
    zero, far = kernels["formulas:zero"], kernels["formulas:far"]
    where = f"{path}: formulas:zero: formula "
    with pytest.raises(FormulaError, match=re.escape(where + "'cdiv(N, DIV)' divides by zero "
                                                     "with {")) as caught:
        zero.grid_dims(64, 64, 64)
    assert caught.value.where == f"{path}: formulas:zero"
    assert caught.value.reason.startswith("formula 'cdiv(N, DIV)' divides by zero with {")
    with pytest.raises(FormulaError, match=re.escape(where + "'M % DIV == 0' divides by zero")):
        zero.shape_problems(64, 64, 64)
    with pytest.raises(FormulaError, match=re.escape(f"{path}: formulas:far: formula "
                                                     "'64 // (DIV - 1)' divides by zero")):
        far.tma_box("A")
    with pytest.raises(FormulaError, match=re.escape(
            f"{path}: formulas:far: formula '1 << (SHIFT * 40)' shifts by 80 with {{")):
        far.dynamic_smem_bytes(64, 64, 64)
    with pytest.raises(FormulaError, match=re.escape(f"{path}: formulas:far: formula "
                                                     "'32 >> SHIFT'")):
        _ = far.with_params({"SHIFT": -1}, "formulas:far").block_dims
    with pytest.raises(FormulaError, match=re.escape(f"{path}: formulas:v: formula "
                                                     "'64 // (DIV - 1)' divides by zero")):
        napkin.model(zero.spec, {"DIV": 1, "SHIFT": 0}, 64, 64, 64, "formulas:v")
    # a name with no value (a [model] evaluated at parameters a saved run lacks)
    with pytest.raises(FormulaError, match=re.escape(f"{path}: formulas: formula "
                                                     "'64 // (DIV - 1)' uses 'DIV'")):
        napkin.model(zero.spec, {}, 64, 64, 64)


def test_a_kernel_selector_finds_it_from_any_process():
    """``harness profile`` launches each kernel in a child by its selector: a file outside the
    kernel folders (no registry key) and a variant of it must come back as themselves."""
    from harness.kernels.registry import PROJECT_ROOT, load_registry

    example = PROJECT_ROOT / "examples" / "wgmma_cluster_bf16.cu"
    builtin = load_registry()
    kernels = builtin.select([str(example)])
    assert {k.name for k in kernels} == {"wgmma_cluster_bf16:mc", "wgmma_cluster_bf16:nomc"}
    elsewhere = load_registry([])
    for kernel in kernels:
        (again,) = elsewhere.select([kernel.selector])
        assert again.name == kernel.name and again.params == kernel.params
    (plain,) = builtin.select(["10_hoisted"])
    assert plain.selector.endswith("10_hoisted.cu") and ":" not in Path(plain.selector).name
    (same,) = elsewhere.select([plain.selector])
    assert same.name == "10_hoisted"


def test_links_that_cannot_be_followed_are_broken_files_not_tracebacks(tmp_path):
    shutil.copy(FIXTURE_KERNELS / "isolation" / "d_good.cu", tmp_path / "good.cu")
    (tmp_path / "x.cu").symlink_to("y.cu")  # a loop of two links
    (tmp_path / "y.cu").symlink_to("x.cu")
    (tmp_path / "gone.cu").symlink_to("missing.cu")
    (tmp_path / "here").symlink_to(".")  # a folder that contains itself: not walked into
    (tmp_path / "alias.cu").symlink_to("good.cu")  # a link under its own stem is a kernel
    registry = load_registry([tmp_path])
    assert sorted(k.name for k in registry.kernels) == ["alias", "good"]
    errors = {b.path.name: b.error for b in registry.broken}
    assert sorted(errors) == ["gone.cu", "x.cu", "y.cu"]
    assert re.search(r"x\.cu is a symbolic link that leads back to itself \(a loop\): remove "
                     "it", errors["x.cu"])
    assert "symbolic link to missing.cu, which does not exist" in errors["gone.cu"]
    with pytest.raises(SpecError, match=r"gone\.cu is a symbolic link to missing\.cu"):
        discover([tmp_path])
    # a folder named twice (as given and by another spelling) gives each file once
    twice = load_registry([tmp_path, tmp_path / "." / "here"])
    assert sorted(k.name for k in twice.kernels) == ["alias", "good"]


def test_a_kernel_folder_that_is_a_link_loop_is_named(tmp_path):
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(HarnessError, match=r"kernel folder .*loop is a symbolic link that leads "
                                           r"back to itself \(a loop\): remove it; pass an "
                                           "existing folder with --kernel-dir"):
        load_registry([tmp_path / "loop"])
    with pytest.raises(HarnessError, match=r"kernel folder .*nowhere does not exist"):
        load_registry([tmp_path / "nowhere"])


def test_a_link_loop_in_a_kernel_folder_stops_no_command(tmp_path):
    from harness.cli import main

    (tmp_path / "x.cu").symlink_to("y.cu")
    (tmp_path / "y.cu").symlink_to("x.cu")
    assert main(["--kernel-dir", str(tmp_path), "check", "--plan", "01_naive"]) == 0
    assert main(["--kernel-dir", str(tmp_path), "list"]) == 1  # the list names the broken file
