"""The adversarial fixtures (kernels written to fool the harness, issue 20) build offline.

Each file in tests/kernels/adversarial is one kernel that is right except for the defect its
summary names (or, for thirdparty_warptile and splitk_atomic, right); the GPU checks must
reject each with its cause. Here, with no GPU: every spec parses and every kernel compiles
for sm_90 with no spills."""

from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.compile import compile_kernel
from harness.kernels.registry import kernels_in
from harness.kernels.spec import read_spec

ADVERSARIAL = FIXTURE_KERNELS / "adversarial"
FILES = sorted(ADVERSARIAL.glob("*.cu"))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


def test_the_folder_holds_the_fixtures():
    assert {p.stem for p in FILES} >= {
        "lazy_after_n", "memo_c", "ignores_beta_constrained", "fp16_hfma", "fp16_round16",
        "bf16_acc_tile", "fp16_as_bf16", "state_keeper", "jitter", "splitk_atomic",
        "first_tile_only", "thirdparty_warptile"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_adversarial_kernel_compiles_for_sm_90_without_spills(path: Path):
    spec = read_spec(path)
    assert spec.kind == "gemm" and spec.min_arch == "sm_80"
    for kernel in kernels_in(spec):
        compiled = compile_kernel(kernel, "sm_90")
        assert compiled.cubin[:4] == b"\x7fELF"
        res = compiled.resources
        assert 0 < res.registers <= 255, (kernel.name, res)
        assert res.spill_store_bytes == 0 and res.spill_load_bytes == 0, (kernel.name, res)


def test_only_the_atomic_kernel_declares_nondeterminism():
    """jitter differs between runs too but hides it; splitk_atomic says so."""
    flags = {p.stem: read_spec(p).nondeterministic for p in FILES}
    assert flags["splitk_atomic"] is True
    assert not any(v for stem, v in flags.items() if stem != "splitk_atomic")


def test_precisions_and_constraints_are_as_the_defects_need():
    specs = {p.stem: read_spec(p) for p in FILES}
    for stem in ("fp16_hfma", "fp16_round16", "fp16_as_bf16"):
        assert specs[stem].precision == "fp16" and specs[stem].c_type == "fp32"
    assert specs["bf16_acc_tile"].precision == "bf16"
    assert [c.text for c in specs["ignores_beta_constrained"].constraints] == [
        "M % 32 == 0", "N % 32 == 0", "K % 32 == 0"]
    assert [c.text for c in specs["thirdparty_warptile"].constraints] == [
        "M % 128 == 0", "N % 128 == 0", "K % 16 == 0"]
    assert not specs["thirdparty_warptile"].blas_strict
    assert "SMS" in specs["first_tile_only"].grid[0].names
