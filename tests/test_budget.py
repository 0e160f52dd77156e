"""The spec's ``[budget]`` table and the ``harness.testing`` helpers that judge a build by it
(offline: NVRTC compiles, no GPU)."""

import re
from pathlib import Path

import pytest

from harness.errors import HarnessError, SpecError
from harness.kernels.spec import BUDGET_KEYS, parse_spec
from harness.testing import assert_builds, budget_problems, build

FIXTURES = Path(__file__).resolve().parent / "kernels"
SMEM_200K = FIXTURES / "classes" / "smem_200k.cu"
BODY = ('extern "C" __global__ void k(int M, int N, int K, float alpha, const float* A, '
        "const float* B, float beta, float* C) {}\n")
SPEC = """/* harness
entry = "k"
summary = "A test kernel."
precision = "fp32"
min_arch = "sm_80"
block = ["16", "16"]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
"""
ROW = {"kernel": "k", "arch": "sm_90", "status": "ok", "registers": 168,
       "spill_store_bytes": 8, "spill_load_bytes": 12, "static_smem_bytes": 1024,
       "dynamic_smem_bytes": 49152, "size": [1024, 1024, 1024], "occupancy_pct": 12.5,
       "limiter": "registers"}


def spec_with(budget: str):
    return parse_spec(SPEC + budget + "*/\n" + BODY, Path("k.cu"))


def test_budget_table_parses():
    spec = spec_with("[budget]\nmax_registers = 128\nmax_spill_bytes = 0\n"
                     "max_smem_bytes = 49152\nmin_occupancy_pct = 25\n")
    assert spec.budget == {"max_registers": 128, "max_spill_bytes": 0,
                           "max_smem_bytes": 49152, "min_occupancy_pct": 25}
    assert spec_with("").budget == {}


@pytest.mark.parametrize(("table", "match"), [
    ("[budget]\nmax_regs = 64\n",
     r"^k\.cu: spec: budget: unknown key\(s\) 'max_regs' \(did you mean 'max_registers'\?\); "
     r"allowed keys: max_registers, max_spill_bytes, max_smem_bytes, min_occupancy_pct$"),
    ("[budget]\nmax_registers = \"128\"\n",
     r"budget\.max_registers must be a non-negative integer, found '128'"),
    ("[budget]\nmax_spill_bytes = true\n",
     r"budget\.max_spill_bytes must be a non-negative integer, found True"),
    ("[budget]\nmax_smem_bytes = -1\n", r"budget\.max_smem_bytes must be a non-negative"),
    ("[budget]\nmin_occupancy_pct = 120\n",
     r"budget\.min_occupancy_pct must be an integer percent 0\.\.100, found 120"),
    ("budget = 5\n", r"budget must be a table with keys among max_registers"),
])
def test_bad_budget_tables_are_refused(table, match):
    with pytest.raises(SpecError, match=match):
        spec_with(table)


def test_every_exceeded_budget_is_one_line():
    budget = {"max_registers": 128, "max_spill_bytes": 0, "max_smem_bytes": 32768,
              "min_occupancy_pct": 25}
    assert budget_problems(ROW, budget) == [
        "registers 168 > max_registers 128",
        "spill bytes 20 > max_spill_bytes 0 (stores 8, loads 12)",
        "smem bytes 50176 > max_smem_bytes 32768 (static 1024 + dynamic 49152 at 1024x1024x1024)",
        "occupancy 12.5% < min_occupancy_pct 25 (limited by registers)",
    ]


def test_a_build_at_its_limits_is_within_budget():
    at_limits = {"max_registers": 168, "max_spill_bytes": 20, "max_smem_bytes": 50176,
                 "min_occupancy_pct": 12}
    assert budget_problems(ROW, at_limits) == []
    assert budget_problems(ROW, {}) == []


def test_a_row_that_did_not_build_has_nothing_to_judge():
    row = {"kernel": "k", "status": "compile error", "message": "..."}
    assert budget_problems(row, {"max_registers": 1}) == []


def test_a_record_with_to_dict_is_judged_like_its_row():
    class Record:
        def to_dict(self):
            return ROW

    assert budget_problems(Record(), {"max_registers": 100}) == [
        "registers 168 > max_registers 100"]


def test_an_unknown_budget_key_is_refused():
    with pytest.raises(HarnessError, match=r"unknown key\(s\) 'max_threads'; allowed keys: "
                                           + ", ".join(BUDGET_KEYS)):
        budget_problems(ROW, {"max_threads": 256})


def test_assert_builds_returns_the_row_within_budget():
    row = assert_builds(SMEM_200K, max_registers=255, max_spill_bytes=0,
                        max_smem_bytes=200 * 1024)
    assert row["status"] == "ok" and row["dynamic_smem_bytes"] == 200 * 1024
    assert row["size"] == [1024, 1024, 1024]


def test_assert_builds_fails_with_every_exceeded_budget():
    with pytest.raises(AssertionError, match=re.escape(
            "smem_200k (sm_90) is over its budget: smem bytes 204800 > max_smem_bytes 65536 "
            "(static 0 + dynamic 204800 at 1024x1024x1024); occupancy 12.5% < "
            "min_occupancy_pct 50 (limited by shared memory)")):
        assert_builds(SMEM_200K, max_smem_bytes=65536, min_occupancy_pct=50)


def test_assert_builds_fails_where_the_kernel_cannot_launch():
    with pytest.raises(AssertionError, match=r"big_smem \(sm_90\): cannot launch: needs 240 KB "
                                             r".*sm_90 allows 227 KB"):
        assert_builds(FIXTURES / "bad" / "big_smem.cu")


def test_assert_builds_names_an_unknown_budget_keyword():
    with pytest.raises(TypeError, match=r"assert_builds: budget: unknown key\(s\) 'max_regs' "
                                        r"\(did you mean 'max_registers'\?\)"):
        assert_builds(SMEM_200K, max_regs=64)


def test_assert_builds_applies_the_spec_budget(tmp_path):
    text = SMEM_200K.read_text().replace("*/", "[budget]\nmax_registers = 1\n*/", 1)
    (tmp_path / "tight.cu").write_text(text)
    with pytest.raises(AssertionError, match=r"registers \d+ > max_registers 1$"):
        assert_builds(tmp_path / "tight.cu")
    # a keyword overrides the spec's own limit
    assert assert_builds(tmp_path / "tight.cu", max_registers=255)["status"] == "ok"


def test_build_wants_one_kernel(tmp_path):
    tiled = Path(__file__).resolve().parents[1] / "cu" / "sgemm" / "03_smem_tiled.cu"
    with pytest.raises(HarnessError, match=r"names 2 kernels \(03_smem_tiled:t16, "
                                           r"03_smem_tiled:t32\); name one variant"):
        build(tiled)
    assert build(f"{tiled}:t16")["kernel"] == "03_smem_tiled:t16"
    assert build("03_smem_tiled:t32", arch="sm_80")["arch"] == "sm_80"
    with pytest.raises(HarnessError, match="unknown architecture 'sm_75'"):
        build("03_smem_tiled:t32", arch="sm_75")
