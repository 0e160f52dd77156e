import shutil

import pytest
from conftest import FIXTURE_KERNELS

from harness.errors import HarnessError, SpecError
from harness.kernels.registry import discover, select


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
    with pytest.raises(HarnessError, match="no kernel matches 'nope'; known kernels: 01_naive"):
        select(kernels, ["nope"])


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
    with pytest.raises(SpecError, match="two kernel files share the stem 'same'"):
        discover([tmp_path])
    with pytest.raises(HarnessError, match="kernel folder .* does not exist"):
        discover([tmp_path / "missing"])
