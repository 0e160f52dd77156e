"""GPU tests: numerics of every kernel, occupancy against the driver, launch refusals, timing,
and isolation of kernels that fault, hang or fail to compile."""

from __future__ import annotations

import pytest
from conftest import FIXTURE_KERNELS

from harness.bench.gemm import LoadedGemm
from harness.build.compile import compile_kernel
from harness.errors import LaunchError
from harness.gpu.driver import Buffer, Stream
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import discover
from harness.run.runner import RunOptions, run
from harness.run.worker import CHECK_SHAPES, check_one

pytestmark = pytest.mark.gpu
KERNELS = discover()
NEAR_EXACT = {"fp32": 1e-5, "bf16": 1e-4, "fp16": 1e-4, "tf32": 2e-3}
BAD = {k.name: k for k in discover([FIXTURE_KERNELS / "bad"])}


@pytest.fixture(scope="module")
def stream(device):
    return Stream()


def load(device, kernel, arch=None, carveout=None):
    return LoadedGemm(device, kernel, compile_kernel(kernel, arch or device.arch.name), carveout)


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_numerics(kernel, device, stream):
    gemm = load(device, kernel)
    results, skipped = [], []
    for i, shape in enumerate((*CHECK_SHAPES, (512, 384, 640))):
        if kernel.shape_problems(*shape):
            skipped += kernel.shape_problems(*shape)
            continue
        for seed in (1, 2, 3):
            results += check_one(gemm, stream, *shape, seed=seed + 10 * i, repeat=seed == 1)
        results += check_one(gemm, stream, *shape, seed=99 + i, alpha=0.75, beta=-0.5)
    for reason in skipped:
        print(f"{kernel.name}: check skipped: {reason}")
    assert results, f"{kernel.name}: every check shape was skipped: {skipped}"
    failed = [r for r in results if not r.passed]
    assert not failed, f"{len(failed)} failed; first: {failed[0]}"
    # far under the check's own bound: FP32 accumulation error only (16-bit inputs are rounded
    # before the reference is taken, and their products are exact in FP32)
    assert max(r.rel_err_norm for r in results) < NEAR_EXACT[kernel.spec.precision]


PERSISTENT = [k for k in KERNELS if k.param_env.get("PERSIST") == 1]


@pytest.mark.parametrize("kernel", PERSISTENT, ids=[k.name for k in PERSISTENT])
def test_persistent_kernels_walk_several_tiles_each(kernel, device, stream):
    """More C tiles than blocks, ragged in M and N, K only a few tiles deep: every block
    computes and stores several tiles back to back, its copies running on into the next tile
    while it stores the last (the odd check shapes have fewer tiles than blocks)."""
    m, n, k = 2000, 4200, 200
    env = kernel.param_env
    tiles = -(-m // env["BM"]) * -(-n // env["BN"])
    grid = kernel.grid_dims(m, n, k, device.sm_count)
    assert tiles > grid[0] * grid[1] * grid[2], f"{kernel.name}: {tiles} tiles, grid {grid}"
    gemm = load(device, kernel)
    results = check_one(gemm, stream, m, n, k, seed=5, repeat=True)
    results += check_one(gemm, stream, m, n, k, seed=6, alpha=0.75, beta=-0.5)
    failed = [r for r in results if not r.passed]
    assert not failed, f"{len(failed)} failed; first: {failed[0]}"


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_ptxas_report_matches_driver_attributes(kernel, device):
    gemm = load(device, kernel)
    res = gemm.compiled.resources
    assert (res.registers, res.static_smem_bytes) == (gemm.registers, gemm.static_smem_bytes)


@pytest.mark.parametrize("name", ["skips_last_row", "drops_last_k"])
def test_the_check_catches_broken_kernels(name, device, stream):
    (result,) = check_one(load(device, BAD[name]), stream, 127, 253, 61, seed=5)
    assert not result.passed
    if name == "skips_last_row":
        assert result.nan_elements == 253 and "row 126" in result.message
    else:
        assert result.nan_elements == 0 and result.bad_elements > 0


@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
@pytest.mark.parametrize("carveout", [None, 0, 25, 50, 100])
def test_occupancy_matches_driver(kernel, carveout, device):
    gemm = load(device, kernel, carveout=carveout)
    for size in (256, 4096):
        occ = gemm.occupancy(size, size, size)
        assert occ["agree"], occ


def test_occupancy_sweep_matches_driver(device):
    from harness.bench.occupancy_sweep import sweep

    rows = sweep(device)
    disagree = [r for r in rows if not r["agree"]]
    assert len(rows) > 10000
    assert not disagree, f"{len(disagree)} of {len(rows)} disagree; first: {disagree[:3]}"


def test_refuses_too_much_shared_memory(device):
    gemm = load(device, BAD["big_smem"])
    with pytest.raises(LaunchError, match=r"needs 240 KB shared memory per block .*"
                                          r"sm_90 allows 227 KB"):
        gemm.prepare(64, 64, 64)


def test_refuses_an_arch_the_gpu_lacks(device):
    with pytest.raises(LaunchError, match=r"future_arch needs sm_100 .* is sm_90"):
        load(device, BAD["future_arch"])
    with pytest.raises(LaunchError, match="compiled for sm_80, which cannot run on sm_90"):
        load(device, KERNELS[0], arch="sm_80")


def test_timing_keeps_the_queue_full(device, stream):
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.timing import Timer

    kernel = KERNELS[-1]
    gemm = load(device, kernel)
    m = n = k = 1024
    a, b, c = Buffer(m * k * 4), Buffer(k * n * 4), Buffer(m * n * 4)
    for buf in (a, b, c):
        buf.fill_u32(0x3F000000, stream)
    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id),
                  TimingOptions(budget_ms=50, warmup_ms=10))
    t = timer.time(gemm.launcher(m, n, k, 1.0, a.address, b.address, 0.0, c.address, stream))
    assert t.reps >= 10 and t.cold_l2
    assert 0 < t.p20_ms <= t.median_ms <= t.p80_ms
    assert t.queue_ahead_ms > 0, t
    assert t.sm_clock_mhz > 100


def test_isolation_of_fault_hang_and_compile_error(tmp_path):
    kernels = discover([FIXTURE_KERNELS / "isolation"])
    options = RunOptions(sizes=((256, 256, 256),),
                         timing=TimingOptions(budget_ms=20, warmup_ms=5), timeout_s=30)
    lines = []
    record = run(kernels, "sm_90", options, tmp_path / "run.jsonl", lines.append)
    status = {r["kernel"]: r["status"] for r in record.rows}
    assert status == {"a_fault": "fault", "b_hang": "timeout", "c_broken": "compile error",
                      "d_good": "pass"}, record.rows
    by_name = {r["kernel"]: r for r in record.rows}
    assert "ILLEGAL_ADDRESS" in by_name["a_fault"]["message"]
    assert "c_broken.cu:10" in by_name["c_broken"]["message"]
    assert by_name["d_good"]["gflops"] > 0 and by_name["d_good"]["cublas_gflops"] > 0
    assert len((tmp_path / "run.jsonl").read_text().splitlines()) == 4


def test_compare_times_interleaved_with_speedups(tmp_path):
    kernels = [k for k in KERNELS if k.name in ("03_smem_tiled:t32", "03_smem_tiled_ptx")]
    options = RunOptions(sizes=((512, 512, 512),), timing=TimingOptions(budget_ms=30))
    record = run(kernels, "sm_90", options, tmp_path / "c.jsonl", lambda _: None,
                 mode="compare")
    rows = {r["kernel"]: r for r in record.rows}
    assert set(rows) == {"03_smem_tiled:t32", "03_smem_tiled_ptx"}
    first, second = rows["03_smem_tiled:t32"], rows["03_smem_tiled_ptx"]
    assert first["status"] == second["status"] == "pass"
    assert first["speedup"] == 1.0 and second["compared_to"] == "03_smem_tiled:t32"
    assert 0.5 < second["speedup_p20"] <= second["speedup"] <= second["speedup_p80"] < 2.0
    assert first["cublas_gflops"] == second["cublas_gflops"]  # one cuBLAS in the rounds


def test_the_last_device_close_frees_what_lives_in_the_context(device):
    """Modules, buffers and streams unloaded after the primary context's release crashed the
    interpreter (cuModuleUnload in a finalizer): the last open Device frees them first."""
    from harness.gpu.driver import Device

    inner = Device(0)  # a second retain: closing it must leave the session's resources alone
    kernel = KERNELS[0]
    gemm = load(device, kernel)
    buf = Buffer(1024)
    inner.close()
    assert gemm.module._unload.alive and buf._free.alive
    buf.close()
    assert not buf._free.alive


def test_the_last_device_close_frees_before_releasing():
    import subprocess
    import sys

    code = ("from harness.driver import Buffer, Device\n"
            "from harness.gemm import LoadedGemm\n"
            "from harness.compile import compile_kernel\n"
            "from harness.registry import discover\n"
            "d = Device(0)\n"
            "k = discover()[0]\n"
            "g = LoadedGemm(d, k, compile_kernel(k, d.arch.name))\n"
            "b = Buffer(64)\n"
            "d.close()\n"
            "assert not g.module._unload.alive and not b._free.alive\n"
            "del g, b\n"
            "print('freed first')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "freed first" in proc.stdout, proc.stderr
