"""The measurement tools' parts that need no GPU: the CLOCKREC knob assembles into every
tensor-core rung and the tool refuses a kernel without it before looking for a GPU."""

import subprocess
import sys

import pytest

from harness.build.compile import compile_kernel
from harness.kernels.registry import PROJECT_ROOT, discover

TOOL = PROJECT_ROOT / "tools" / "kernel_clock.py"
sys.path.insert(0, str(TOOL.parent))
from kernel_clock import with_clockrec  # noqa: E402

RUNGS = [k for k in discover() if "CLOCKREC" in dict(k.params)]


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
    proc = subprocess.run([sys.executable, str(TOOL), name], capture_output=True, text=True)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr


ENERGY = PROJECT_ROOT / "tools" / "kernel_energy.py"


def test_kernel_energy_points_build_with_their_knobs(tmp_path, monkeypatch):
    from kernel_energy import points

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    chosen = points("12_mma_tma_bf16:m256n128e", ["NOSTORE=1", "NOLOAD=1,NOSTORE=1"])
    assert [s for _, s in chosen] == [{}, {"NOSTORE": 1}, {"NOLOAD": 1, "NOSTORE": 1}]
    assert chosen[2][0].name == "12_mma_tma_bf16:m256n128e+NOLOAD=1,NOSTORE=1"
    for kernel, setting in chosen:
        params = dict(kernel.params)
        assert all(params[k] == v for k, v in setting.items())
        assert compile_kernel(kernel, "sm_90").resources.spill_store_bytes == 0


def test_noload_with_tma_is_refused_where_the_copies_cannot_stop(tmp_path, monkeypatch):
    from kernel_energy import points

    from harness.errors import CompileError

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    ((_, _), (kernel, _)) = points("13_mma_persist_bf16:m256n128l3g8e", ["NOLOAD=1"])
    with pytest.raises(CompileError, match="set PERSIST = 0 and CLUSTER = 1"):
        compile_kernel(kernel, "sm_90")


@pytest.mark.parametrize("args, message", [
    (["12_mma_tma_bf16:m256n128e", "--knob", "NOSTORE"], "expected NAME=INT"),
    (["12_mma_tma_bf16:m256n128e", "--knob", "NOPE=1"], "has no parameter NOPE"),
    (["no_such_kernel"], "no kernel matches 'no_such_kernel'"),
    (["12_mma_tma_bf16:m256n128e", "--seconds", "0.1"], "expected 0.5 to 60 seconds"),
])
def test_kernel_energy_refuses_bad_input_before_the_gpu(args, message):
    proc = subprocess.run([sys.executable, str(ENERGY), *args], capture_output=True, text=True)
    assert proc.returncode == 1 and message in proc.stderr, proc.stderr
