"""The check battery derived from a kernel's spec (no GPU): every check class for every kernel,
on shapes its constraints allow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.kernels.registry import discover, kernels_in
from harness.kernels.spec import parse_spec
from harness.kinds.gemm.plan import (
    DEEP,
    READS_C,
    STALE_C,
    VALUES,
    WIDE,
    grows_with_problem,
    plan,
)

ADVERSARIAL = FIXTURE_KERNELS / "adversarial"
BODY = '\nextern "C" __global__ void k(int M, int N, int K, float alpha, const float* A, ' \
       'const float* B, float beta, float* C) {}\n'


def kernel_with(constraints: list[str], grid: str = '["cdiv(N, 16)", "cdiv(M, 16)"]',
                params: str = ""):
    source = ("/* harness\nentry = \"k\"\nsummary = \"s\"\nprecision = \"fp32\"\n"
              f"min_arch = \"sm_80\"\nblock = [\"256\"]\ngrid = {grid}\n"
              f"constraints = {json.dumps(constraints)}\n{params}*/" + BODY)
    (kernel,) = kernels_in(parse_spec(source, Path("k.cu")))
    return kernel


def _classes(p):
    return {"beta": any(c.beta != 0 for c in p.checks),
            "alpha": any(c.alpha != 1 for c in p.checks),
            "alpha alone": any(c.alpha != 1 and c.beta == 0 for c in p.checks),
            "repeats": any(c.repeats for c in p.checks),
            "reads C": any(c.kind == READS_C for c in p.checks),
            "stale C": any(c.kind == STALE_C for c in p.checks),
            "deep": any(c.kind == DEEP and c.k >= 2048 for c in p.checks),
            "wide": any(c.kind == WIDE for c in p.checks),
            "seeds": len({c.seed for c in p.checks if c.kind == VALUES}) >= 2}


def test_a_constrained_kernel_gets_every_check_class_on_shapes_that_satisfy_them():
    kernel = kernel_with(["M % 128 == 0", "N % 128 == 0", "K % 16 == 0"])
    p = plan(kernel)
    assert all(_classes(p).values()), _classes(p)
    assert len(p.shapes) >= 5
    for m, n, k in p.shapes:
        assert m % 128 == 0 and n % 128 == 0 and k % 16 == 0
    # edges where the constraints allow them: K is not always a multiple of a 32-deep tile
    assert any(k % 32 for _, _, k in p.shapes)
    assert p.rounding == {"M": 128, "N": 128, "K": 16}
    assert not p.skipped


def test_an_unconstrained_kernel_keeps_odd_shapes():
    p = plan(kernel_with([]))
    assert (37, 45, 29) in p.shapes and all(_classes(p).values())
    assert all(c.m % 2 for c in p.checks if c.kind != DEEP)


def test_the_deep_check_is_aligned_and_deep_whatever_the_constraints():
    """BF16 parts used only on aligned shapes with a deep K still meet a check: M and N
    multiples of 256, K of 2048, within what the constraints allow."""
    for constraints in ([], ["M % 128 == 0", "N % 128 == 0", "K % 64 == 0"], ["K >= 4096"]):
        (deep,) = [c for c in plan(kernel_with(constraints)).checks if c.kind == DEEP]
        assert deep.m % 256 == 0 and deep.n % 256 == 0 and deep.k % 2048 == 0, deep
        assert not kernel_with(constraints).shape_problems(*deep.shape)


@pytest.mark.parametrize("kernel", discover(),
                         ids=lambda k: k.name)
def test_every_builtin_kernel_gets_every_check_class(kernel):
    """Every class, except what an FP8 GEMM's signature and draws rule out, each skip said."""
    p = plan(kernel)
    missing = {name for name, has in _classes(p).items() if not has}
    if kernel.spec.fp8 is not None:  # C = scale_a scale_b A B: no alpha, no beta, drawn wide
        assert missing == {"beta", "alpha", "alpha alone", "reads C", "wide"}, missing
        assert len(p.skipped) == 3, p.skipped
        missing = set()
    assert not missing, (kernel.name, _classes(p))
    assert all(not kernel.shape_problems(*s) for s in p.shapes)
    assert len(p.shapes) >= 5


def test_persistent_kernels_get_a_shape_with_more_tiles_than_blocks():
    persistent = kernel_with([], grid='["min(SMS, cdiv(M, 128) * cdiv(N, 256))"]')
    assert not grows_with_problem(persistent)
    big = max(plan(persistent).shapes, key=lambda s: s[0] * s[1])
    tiles = -(-big[0] // 128) * -(-big[1] // 256)
    assert tiles > 2 * 132
    assert grows_with_problem(kernel_with([]))
    assert max(s[0] * s[1] for s in plan(kernel_with([])).shapes) < 1 << 20


def test_constraints_that_tie_the_dimensions_give_square_shapes():
    p = plan(kernel_with(["M == N", "N == K"]))
    assert len(p.shapes) >= 2 and all(m == n == k for m, n, k in p.shapes)
    assert all(_classes(p).values())


def test_a_lower_bound_grows_the_shapes():
    p = plan(kernel_with(["K >= 1024", "M % 64 == 0"]))
    assert all(k >= 1024 and m % 64 == 0 for m, _, k in p.shapes)


def test_constraints_no_shape_satisfies_say_so():
    p = plan(kernel_with(["M % 2 == 0", "M % 2 == 1"]))
    assert not p.checks
    assert "no M, N, K up to" in p.skipped[0]
    bad_params = plan(kernel_with(["BM % 3 == 0"], params="[params]\nBM = 128\n"))
    assert not bad_params.checks and "BM % 3 == 0" in bad_params.skipped[0]


def test_the_plan_as_json_from_the_cli():
    """`harness check KERNEL --plan --json` needs no GPU."""
    path = ADVERSARIAL / "thirdparty_warptile.cu"
    proc = subprocess.run([sys.executable, "-m", "harness", "check", str(path), "--plan",
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (data,) = json.loads(proc.stdout)
    checks = data["checks"]
    assert len({(c["m"], c["n"], c["k"]) for c in checks}) >= 5
    assert any(c["beta"] != 0 for c in checks) and any(c["alpha"] != 1 for c in checks)
    assert any(c["repeats"] > 0 for c in checks)
    assert all(c["m"] % 128 == 0 and c["n"] % 128 == 0 and c["k"] % 16 == 0 for c in checks)
    assert all(c["what"] for c in checks)
    text = subprocess.run([sys.executable, "-m", "harness", "check", str(path), "--plan"],
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and "stale C" in text.stdout and "repeats" in text.stdout


def test_check_json_without_plan_is_bad_input():
    proc = subprocess.run([sys.executable, "-m", "harness", "check", "01_naive", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--json goes with --plan" in proc.stderr


def _signed(signature: list[str]):
    return kernel_with([], params=f"signature = {json.dumps(signature)}\n")


def test_a_signature_without_beta_gets_no_beta_checks_and_says_why():
    kernel = _signed(["A", "B", "C", "M", "N", "K"])
    p = plan(kernel)
    classes = _classes(p)
    assert not classes["beta"] and not classes["reads C"] and not classes["alpha"]
    assert classes["repeats"] and classes["stale C"] and classes["seeds"]
    assert all(c.beta == 0 and c.alpha == 1 for c in p.checks)
    assert any(kernel.spec.no_beta_reason in s for s in p.skipped)
    assert any(s.startswith("alpha checks: ") and "no alpha" in s for s in p.skipped)
    assert kernel.spec.no_beta_reason in p.summary()


def test_a_signature_with_alpha_but_no_beta_keeps_the_alpha_check():
    p = plan(_signed(["M", "N", "K", "alpha", "A", "B", "C"]))
    classes = _classes(p)
    assert classes["alpha"] and classes["alpha alone"]
    assert not classes["beta"] and not classes["reads C"]
    assert all(c.beta == 0 for c in p.checks)
    assert len(p.skipped) == 1 and "no beta" in p.skipped[0]


def test_a_signature_with_beta_but_no_alpha_checks_beta_at_alpha_one():
    p = plan(_signed(["M", "N", "K", "A", "B", "beta", "C"]))
    classes = _classes(p)
    assert classes["beta"] and classes["reads C"] and not classes["alpha"]
    assert all(c.alpha == 1 for c in p.checks)
    assert len(p.skipped) == 1 and "no alpha" in p.skipped[0]


def test_the_common_signature_declared_is_the_default_battery():
    declared = plan(_signed(["M", "N", "K", "alpha", "A", "B", "beta", "C"]))
    assert declared.checks == plan(kernel_with([])).checks and not declared.skipped


def test_a_batterys_comparisons_run_beside_its_next_launches_in_order(monkeypatch):
    """A check's launches run on the caller's thread, its comparisons on the battery's threads
    while the next check launches; the results come back in the plan's order, and the probe
    of C at beta = 0 waits for every comparison before it (it runs only when all passed)."""
    import threading
    import time
    from types import SimpleNamespace

    from harness.kinds.gemm import battery
    from harness.kinds.gemm.numerics import CheckResult
    from harness.kinds.gemm.plan import READS_C, Plan, PlannedCheck

    events = []

    def launched(gemm, stream, m, n, k, seed, *args, **kwargs):
        events.append(("launch", m, threading.current_thread().name))

        def compared():
            time.sleep(0.02 if m == 1 else 0.0)  # the first is the slowest to compare
            events.append(("compare", m, threading.current_thread().name))
            return [CheckResult(True, m, n, k, seed, 1.0, 0.0, 1e-7, 1e-7, 0, 0, 1e-6, "ok")]
        return compared

    def reads_c(gemm, stream, m, n, k, seed):
        events.append(("probe", m, threading.current_thread().name))
        return False

    monkeypatch.setattr(battery, "check_launched", launched)
    monkeypatch.setattr(battery, "reads_c_at_beta_zero", reads_c)
    plan = Plan("k", (PlannedCheck(1, 8, 8, 1), PlannedCheck(2, 8, 8, 2),
                      PlannedCheck(3, 8, 8, 3, kind=READS_C), PlannedCheck(4, 8, 8, 4)))
    gemm = SimpleNamespace(kernel=SimpleNamespace(spec=SimpleNamespace(precision="fp32")))
    out = battery.kernel_checks(gemm, None, plan)
    assert [r.m for r in out.results] == [1, 2, 4]
    order = [(what, m) for what, m, _ in events]
    assert order.index(("launch", 2)) < order.index(("compare", 1))  # beside, not after
    assert order.index(("probe", 3)) > max(order.index(("compare", 1)),
                                           order.index(("compare", 2)))
    assert all(name.startswith("harness-battery") for what, _, name in events
               if what == "compare")
    assert all(name == threading.main_thread().name for what, _, name in events
               if what != "compare")
