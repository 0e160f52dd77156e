"""Issue 58's fixtures: kernels and callables that move work off the clock, each caught with
its cause on the GPU (tests marked gpu); here, with no GPU, every kernel builds for sm_90."""

from __future__ import annotations

import ctypes
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.compile import compile_kernel
from harness.gpu.timing import TimingOptions, account
from harness.kernels.registry import discover, kernels_in
from harness.kernels.spec import read_spec

OFFCLOCK = FIXTURE_KERNELS / "offclock"
FILES = sorted(OFFCLOCK.glob("*.cu"))
CAUGHT = {"heavy_primer": account.HIDES_WORK, "slow_alone": account.SLOWER_ALONE}
QUICK = TimingOptions(budget_ms=20, min_ms=5, warmup_ms=5)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


def test_the_folder_holds_the_fixtures():
    assert {p.stem for p in FILES} == {"heavy_primer", "slow_alone", "tf32_mma"}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_fixture_compiles_for_sm_90_without_spills(path: Path):
    spec = read_spec(path)
    assert spec.kind == "gemm" and spec.precision == "fp32"
    for kernel in kernels_in(spec):
        compiled = compile_kernel(kernel, "sm_90")
        assert compiled.cubin[:4] == b"\x7fELF"
        res = compiled.resources
        assert res.spill_store_bytes == 0 and res.spill_load_bytes == 0, (kernel.name, res)
    assert spec.fp32_via == ("tf32" if path.stem == "tf32_mma" else "")


@pytest.mark.gpu
def test_kernels_that_work_off_the_clock_fail_with_their_cause(tmp_path):
    """A primer that spins where it is untimed leaves its gaps longer than their parts; a
    kernel slow only alone lengthens its own rest. Each fails with its finding, no figure."""
    from harness.run.runner import RunOptions, run

    kernels = [k for k in discover([OFFCLOCK]) if k.name in CAUGHT]
    record = run(kernels, "sm_90", RunOptions(sizes=((512, 512, 512),), timing=QUICK),
                 tmp_path / "offclock.jsonl", lambda _: None)
    got = {r.kernel.name: r for r in record.results}
    # slow_alone spins where its last launch ended over 1 ms before; on the H100 (d5da2d7)
    # no launch of it was that far from the one before: its time alone is taken behind the
    # gate right after its draws and flush, so its rest was never lengthened and its figure
    # is its own. It passes there, or where it does spin alone, fails with its finding.
    if got["slow_alone"].status == "pass":
        assert got["slow_alone"].timing.median_ms < 0.25  # 500 us never in a repetition
        del got["slow_alone"]
    wrong = {name: (r.status, r.checks.finding if r.checks else None, r.message)
             for name, r in got.items() if r.status != "FAIL"
             or r.checks.finding != CAUGHT[name] or r.gflops is not None}
    assert not wrong, wrong


@pytest.mark.gpu
def test_an_fp32_via_kernel_is_held_to_cublas_in_its_scheme(tmp_path):
    """The TF32 kernel's % of cuBLAS is of cuBLAS in TF32; plain SGEMM is named beside it,
    and the kernel reads a larger share of that one."""
    from harness.run.runner import RunOptions, run

    kernels = [k for k in discover([OFFCLOCK]) if k.name == "tf32_mma"]
    record = run(kernels, "sm_90", RunOptions(sizes=((1024, 1024, 1024),), timing=QUICK),
                 tmp_path / "tf32.jsonl", lambda _: None)
    (res,) = record.results
    assert res.status == "pass", res.message
    assert res.baseline.compute == "CUBLAS_COMPUTE_32F_FAST_TF32"
    assert res.baseline_fp32.compute == "CUBLAS_COMPUTE_32F"
    assert res.baseline_fp32.timing.median_ms > res.baseline.timing.median_ms


SPIN = rb"""
extern "C" __global__ void spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


@pytest.mark.gpu
def test_a_callable_that_writes_the_timers_rests_is_named(device):
    """A callable that, beside its 50 us of work, zeroes the timer's rest slots (the timer's
    state lives in the context the timed work shares): it runs at full duty where the timer
    rests it, and the timing says so."""
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.compilers import nvrtc_compile
    from harness.gpu.driver import LaunchShape, Module, Stream
    from harness.gpu.timing import Timer

    out = nvrtc_compile(SPIN, "spin.cu", [f"-arch={device.arch.name}"])
    assert out.ok, out.log
    function = Module(out.cubin, "spin").function("spin")
    one = LaunchShape((1, 1, 1), (1, 1, 1), 0)
    stream = Stream()
    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id), QUICK)

    def tampering() -> None:
        function.launch(one, stream, (ctypes.c_uint64(50_000),))
        timer.kernels._rests.fill_u32(0, stream)  # no rests, where 50 us were written

    found = timer.time(tampering).findings
    assert any(f.startswith(account.TIMER_STATE) and "rest of launch 0" in f for f in found), \
        found
