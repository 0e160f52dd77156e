"""The lab runbooks in experiments/: they import only public names of the harness, and the
parts that need no GPU work (the CLOCKREC knob assembles into every tensor-core rung, and
kernel_clock refuses a kernel without it before looking for a GPU)."""

import ast
import subprocess
import sys

import pytest

from harness.compiler.compile import compile_kernel
from harness.kernels.registry import PROJECT_ROOT, discover

EXPERIMENTS = PROJECT_ROOT / "experiments"
sys.path.insert(0, str(EXPERIMENTS))
from kernel_clock import with_clockrec  # noqa: E402

RUNGS = [k for k in discover() if "CLOCKREC" in dict(k.params)]
DOCUMENTED = {"_current_frames"}
"""Underscored names the standard library documents (sys._current_frames: wall_sampler.py)."""


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.py")), ids=lambda p: p.name)
def test_experiments_use_only_public_names(path):
    tree = ast.parse(path.read_text())
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness"):
            private += [a.name for a in node.names if a.name.startswith("_")]
            private += [node.module] if any(p.startswith("_") for p in node.module.split(".")) \
                else []
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__") and node.attr not in DOCUMENTED:
            private.append(node.attr)
        elif isinstance(node, ast.Import):
            private += [a.name for a in node.names if "._" in a.name]
    assert not private, f"{path.name} reaches into private names: {private}"


def test_every_tensor_core_rung_has_the_knob():
    assert {k.spec.path.name for k in RUNGS} >= {
        f"1{r}_{kind}_{p}.ptx" for r, kind in ((1, "mma_sync"), (2, "mma_tma"),
                                                (3, "mma_persist"), (4, "mma_cluster"))
        for p in ("bf16", "fp16")}


@pytest.mark.parametrize("name", ["12_mma_tma_bf16:m256n128e", "14_mma_cluster_bf16:m256n128e",
                                  "11_mma_sync_bf16:m128n256k32s4"])
def test_clockrec_assembles_with_its_global_and_no_spills(name, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    (base,) = [k for k in RUNGS if k.name == name]
    kernel = with_clockrec(base)
    compiled = compile_kernel(kernel, "sm_90")
    plain = compile_kernel(base, "sm_90")
    assert b"clockrec" in compiled.cubin and b"clockrec" not in plain.cubin
    assert compiled.resources.spill_store_bytes == 0
    assert compiled.resources.registers <= 255


@pytest.mark.parametrize("name, message", [
    ("01_naive", "01_naive has no CLOCKREC knob"),
    ("no_such_kernel", "no kernel matches 'no_such_kernel'"),
])
def test_kernel_clock_refuses_bad_kernels_before_the_gpu(name, message):
    proc = subprocess.run([sys.executable, str(EXPERIMENTS / "kernel_clock.py"), name],
                          capture_output=True, text=True, cwd=PROJECT_ROOT)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


def test_multi_gpu_report_names_speedups_flips_and_swapped_winners(tmp_path):
    """One GPU against --gpus all: the speedup from the shell's wall times, a row that passes
    on one and fails on the other, and a file whose fastest variant changed are named."""
    import gzip
    import json

    source = PROJECT_ROOT / "reports" / "h100" / "run-20261125-115653.json.gz"
    data = json.loads(gzip.decompress(source.read_bytes()))
    for label, mutate in (("one", False), ("all", True)):
        rows = [dict(r) for r in data["rows"]]
        if mutate:
            rows[0] = {**rows[0], "status": "FAIL", "message": "made to fail"}
        folder = tmp_path / "mg" / f"run-{label}" / "h100"
        folder.mkdir(parents=True)
        (folder / "run-1.json").write_text(json.dumps({**data, "rows": rows}))
    (tmp_path / "mg" / "walls.txt").write_text("run one 300.0 0\nrun all 150.0 0\n")
    out = subprocess.run([sys.executable, str(EXPERIMENTS / "multi_gpu_report.py"),
                          str(tmp_path / "mg"), "--report-dir", str(tmp_path / "reports")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (written,) = (tmp_path / "reports" / "h100").glob("multi-gpu-*.json")
    rows = {r["label"]: r for r in json.loads(written.read_text())["rows"]}
    assert rows["one"]["speedup"] == 1.0 and rows["all"]["speedup"] == 2.0
    assert rows["one"]["pass_fail_flips"] == []
    first = data["rows"][0]
    assert rows["all"]["pass_fail_flips"] == [[first["kernel"]["name"],
                                               str(tuple(first[d] for d in "mnk"))]]
    assert "all 2.00x (meets 1.8x)" in out.stdout
