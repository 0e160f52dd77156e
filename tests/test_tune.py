"""Tuning without a GPU: the space, the screening reasons, and pinning into a spec."""

import shutil

import pytest
from conftest import FIXTURE_KERNELS

from harness.errors import HarnessError
from harness.kernels.registry import discover, select
from harness.kernels.spec import read_spec
from harness.run import tune


def cp_async():
    return [k for k in discover() if k.spec.stem == "09_cp_async"][0]


def test_points_cover_the_product_and_keep_other_params():
    base = cp_async()
    pts = tune.points(base, {"BM": [128, 256], "STAGES": [2, 3]})
    assert [p.name for p in pts] == [
        "09_cp_async[BM=128,STAGES=2]", "09_cp_async[BM=128,STAGES=3]",
        "09_cp_async[BM=256,STAGES=2]", "09_cp_async[BM=256,STAGES=3]"]
    assert dict(pts[3].params)["BN"] == dict(base.params)["BN"]
    with pytest.raises(HarnessError, match="has no parameter XX"):
        tune.points(base, {"XX": [1]})


def test_tuned_defaults_never_replace_a_points_own_parameters():
    """A point of a sweep is exactly what its name says, also for a kernel that has pinned
    [tuned.sm_90] defaults (they once silently replaced every point's values)."""
    base = [k for k in discover() if k.spec.stem == "10_hoisted"][0]
    assert base.spec.tuned.get("sm_90"), "the test needs a kernel with pinned defaults"
    (point,) = tune.points(base, {"BK": [64], "STAGES": [2]})
    on90 = dict(point.for_arch("sm_90").params)
    assert (on90["BK"], on90["STAGES"]) == (64, 2)
    assert dict(base.for_arch("sm_90").params)["BK"] == base.spec.tuned["sm_90"]["BK"]


def test_screening_gives_reasons():
    base = cp_async()
    bad_tile = tune.points(base, {"WM": [48]})[0]
    assert "violates the kernel's constraint 'BM % WM == 0'" in tune.why_invalid(
        bad_tile, "sm_90", [(4096, 4096, 4096)])
    too_big = tune.points(base, {"BM": [256], "BN": [256], "BK": [32], "WM": [32],
                                 "WN": [32]})[0]
    assert tune.why_invalid(too_big, "sm_90", [(4096,) * 3]) == (
        "2048 threads per block, at most 1024")
    odd = tune.points(base, {"BM": [128]})[0]
    assert "K % 4 == 0" in tune.why_invalid(odd, "sm_90", [(4096, 4096, 4095)])
    spilling = tune.points(base, {"BM": [256], "BN": [256], "BK": [16], "WM": [64],
                                  "WN": [64], "MINB": [2]})[0]
    assert tune.why_not_launchable(spilling, "sm_90", [(4096,) * 3]).startswith("spills ")
    assert tune.why_not_launchable(base, "sm_90", [(4096,) * 3]) is None


def test_best_ranks_passing_results_at_the_size():
    from harness.bench.result import KernelInfo, Result
    from harness.gpu.timing import Timing

    def result(name, size, ms, status="pass"):
        t = Timing(ms, ms, ms, ms, ms, 10, True, 1.0, 1.0, 1.0, 1.0)
        return Result.of(KernelInfo(name, "x.cu", "fp32"), *size).with_parts(
            timing=t).ended(status, "")

    results = [result("a", (8, 8, 8), 5.0), result("b", (8, 8, 8), 2.0),
               result("c", (8, 8, 8), 1.0, "FAIL"), result("d", (4, 4, 4), 1.0)]
    assert [r.kernel.name for r in tune.best(results, (8, 8, 8), 5)] == ["b", "a"]


def test_pin_writes_and_replaces_the_tuned_table(tmp_path):
    path = tmp_path / "09_cp_async.cu"
    shutil.copy(cp_async().spec.path, path)
    tune.pin(path, "sm_90", {"BM": 256, "STAGES": 4})
    assert read_spec(path).tuned == {"sm_90": {"BM": 256, "STAGES": 4}}
    tune.pin(path, "sm_90", {"BM": 128, "STAGES": 2})
    tune.pin(path, "sm_80", {"BK": 16})
    spec = read_spec(path)
    assert spec.tuned == {"sm_90": {"BM": 128, "STAGES": 2}, "sm_80": {"BK": 16}}
    (kernel,) = select(discover([tmp_path]), ["09_cp_async:s3"])
    on90 = dict(kernel.for_arch("sm_90").params)
    assert on90["BM"] == 128 and on90["STAGES"] == 3  # the variant's own value wins
    assert dict(kernel.for_arch("sm_86").params)["BM"] == spec.params["BM"]


def test_a_kernel_without_a_space_is_refused():
    (good,) = discover([FIXTURE_KERNELS / "isolation"])[3:4]
    with pytest.raises(HarnessError, match="declares no \\[tune\\] space"):
        tune.points(good, {})


def test_points_whose_grid_does_not_fit_are_skipped_before_compiling():
    (point,) = tune.points(cp_async(), {"BM": [128]})
    assert tune.why_invalid(point, "sm_90", [(4096,) * 3]) is None
    reason = tune.why_invalid(point, "sm_90", [(4096,) * 3, (100000000,) * 3])
    assert reason.startswith("grid (") and "y = 781250 exceeds 65535" in reason, reason
