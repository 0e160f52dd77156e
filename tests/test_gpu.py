"""GPU tests: numerics of every kernel, each failure class a check names, occupancy against the
driver, launch refusals, timing, and isolation of kernels that fault, hang or fail to compile."""

from __future__ import annotations

import time

import pytest
from conftest import FIXTURE_KERNELS

from harness.compiler.compile import compile_kernel
from harness.errors import LaunchError
from harness.gpu.driver import Buffer, Stream
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import discover, select
from harness.kinds.gemm.battery import READS_C_NOTE, kernel_checks
from harness.kinds.gemm.checks import check_one
from harness.kinds.gemm.plan import FP8_WIDE_REASON, WIDE, plan
from harness.run.runner import RunOptions, run

pytestmark = pytest.mark.gpu
KERNELS = discover()
NEAR_EXACT = {"fp32": 1e-5, "bf16": 1e-4, "fp16": 1e-4, "tf32": 2e-3,
              "fp8": 3e-3}  # FP8: the tensor core's 14-bit window (notes/fp8_accumulation.md)
# a 16-bit C adds its own rounding, about 2^-9 (bf16) or 2^-12 (fp16) of each element
NEAR_EXACT_C = {"fp32": 0.0, "bf16": 4e-3, "fp16": 5e-4}
BAD = {k.name: k for k in discover([FIXTURE_KERNELS / "bad"])}
CLASSES = FIXTURE_KERNELS / "classes"
QUICK = TimingOptions(budget_ms=20, min_ms=5, warmup_ms=5)


@pytest.fixture(scope="module")
def stream(device):
    return Stream()


def load(device, kernel, arch=None, carveout=None):
    from harness.kinds.gemm.gemm import LoadedGemm

    return LoadedGemm(device, kernel, compile_kernel(kernel, arch or device.arch.name), carveout)


@pytest.mark.gpu_shared
@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
def test_numerics(kernel, device, stream):
    """Every kernel's own battery (plan.py: every check class on shapes its constraints
    allow) passes, far under the bound: FP32 accumulation error only."""
    gemm = load(device, kernel)
    battery = plan(gemm.kernel)
    checks = kernel_checks(gemm, stream, battery)
    # an FP8 GEMM (C = scale_a scale_b A B) has no alpha or beta and its draws are wide
    fp8_skips = 3 if kernel.spec.fp8 is not None else 0
    assert len(battery.shapes) >= 5 and len(battery.skipped) == fp8_skips, battery.summary()
    assert not fp8_skips or f"{WIDE!r}: {FP8_WIDE_REASON}" in battery.skipped
    results = checks.results + check_one(gemm, stream, 512, 384, 640, seed=3, repeats=1)
    failed = [r for r in results if not r.passed]
    assert not failed, f"{len(failed)} failed; first: {failed[0]}"
    # far under the check's own bound: FP32 accumulation error only (16-bit inputs are rounded
    # before the reference is taken, and their products are exact in FP32), plus a 16-bit C's
    # own rounding
    bound = NEAR_EXACT[kernel.spec.precision] + NEAR_EXACT_C[kernel.spec.c_type]
    assert max(r.rel_err_norm for r in results) < bound
    if kernel.spec.c_type == "fp32":  # a 16-bit C's own rounding is most of its bound
        assert all(r.rel_err_norm < r.tolerance_norm / 2 for r in results if r.finding == "ok")


PERSISTENT = [k for k in KERNELS if k.param_env.get("PERSIST") == 1]


@pytest.mark.parametrize("kernel", PERSISTENT, ids=[k.name for k in PERSISTENT])
def test_persistent_kernels_walk_several_tiles_each(kernel, device, stream):
    """More C tiles than blocks, ragged in M and N, K only a few tiles deep: every block
    computes and stores several tiles back to back, its copies running on into the next tile
    while it stores the last (the odd check shapes have fewer tiles than blocks)."""
    m, n = 2000, 4200  # K few tiles deep, the first its constraints allow (FP8: K % 16)
    k = next(k for k in (200, 208) if not kernel.shape_problems(m, n, k))
    env = kernel.param_env
    tiles = -(-m // env["BM"]) * -(-n // env["BN"])
    grid = kernel.grid_dims(m, n, k, device.sm_count)
    assert tiles > grid[0] * grid[1] * grid[2], f"{kernel.name}: {tiles} tiles, grid {grid}"
    gemm = load(device, kernel)
    results = check_one(gemm, stream, m, n, k, seed=5, repeats=2)
    if kernel.spec.has_alpha and kernel.spec.has_beta:  # an FP8 GEMM has neither
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
        assert result.finding == "unwritten" and result.unwritten_elements == 253
        assert "row 126" in result.message and "rows 126..126" in result.message
    else:
        assert result.finding == "wrong values" and result.bad_elements > 0


def _by_name(record):
    return {(r.kernel.name, r.size): r for r in record.results}


def test_each_failure_class_is_named(tmp_path):
    """Kernels written the way they are outside this project, one per finding, through the
    whole path (runner, worker, checks): each FAIL names its cause; the textbook epilogue
    passes with a note; 200 KB of dynamic shared memory passes."""
    kernels = discover([CLASSES])
    size = (256, 256, 256)
    lines: list[str] = []
    record = run(kernels, "sm_90", RunOptions(sizes=(size,), timing=QUICK, timeout_s=60),
                 tmp_path / "classes.jsonl", lines.append)
    got = {name: r for (name, _), r in _by_name(record).items()}
    assert set(got) == {k.name for k in kernels}
    assert got["reads_c"].status == "pass", got["reads_c"]
    assert got["reads_c"].checks.notes == (READS_C_NOTE,)
    assert got["smem_200k"].status == "pass", got["smem_200k"]
    expected = {"unwritten_half": "unwritten", "ignores_beta": "ignores beta", "race": "race",
                "no_bounds": "writes outside C", "ptx_syntax": None}
    for name, finding in expected.items():
        r = got[name]
        if finding is None:
            assert r.status == "compile error" and "ptx_syntax.ptx:16" in r.message, r
            continue
        assert r.status == "FAIL" and r.checks.finding == finding, (name, r.message)
        assert finding in r.message, r.message
    assert "every element of columns" in got["unwritten_half"].message
    # a kernel that failed its checks ends its worker: the next starts in a fresh one
    assert sum("starting a worker" in line for line in lines) >= 4, lines


def test_blas_strictness_fails_a_kernel_that_reads_c(tmp_path):
    (kernel,) = select(discover([CLASSES]), ["reads_c"])
    record = run([kernel], "sm_90", RunOptions(sizes=((128, 128, 128),), timing=QUICK,
                                               strict_blas=True),
                 tmp_path / "strict.jsonl", lambda _: None)
    (r,) = record.results
    assert r.status == "FAIL" and r.checks.finding == "reads C when beta = 0", r


@pytest.mark.gpu_shared  # driver queries: nothing is timed (445 cases of the suite)
@pytest.mark.parametrize("kernel", KERNELS, ids=[k.name for k in KERNELS])
@pytest.mark.parametrize("carveout", [None, 0, 25, 50, 100])
def test_occupancy_matches_driver(kernel, carveout, device):
    gemm = load(device, kernel, carveout=carveout)
    for size in (256, 4096):
        occ = gemm.occupancy(size, size, size)
        assert occ["agree"], occ


@pytest.mark.gpu_shared
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
    (first,) = select(KERNELS, ["01_naive"])
    with pytest.raises(LaunchError, match="compiled for sm_80, which cannot run on sm_90"):
        load(device, first, arch="sm_80")


def hoisted_at_1024(device, stream):
    """A launch of 10_hoisted at 1024^3 on buffers of 0.5 (what the timing tests time), and
    the buffers, which the caller keeps alive while it launches."""
    (kernel,) = select(KERNELS, ["10_hoisted"])
    gemm = load(device, kernel)
    m = n = k = 1024
    a, b, c = Buffer(m * k * 4), Buffer(k * n * 4), Buffer(m * n * 4)
    for buf in (a, b, c):
        buf.fill_u32(0x3F000000, stream)
    return gemm.launcher(m, n, k, 1.0, a.address, b.address, 0.0, c.address, stream), (a, b, c)


def test_timing_keeps_the_queue_full_and_stops_on_its_rule(device, stream):
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.timing import Timer

    launch, _buffers = hoisted_at_1024(device, stream)
    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id),
                  TimingOptions(budget_ms=200, min_ms=10, warmup_ms=10))
    t = timer.time(launch)
    assert t.reps >= 10 and t.cold_l2
    assert 0 < t.p20_ms <= t.median_ms <= t.p80_ms
    assert t.queue_ahead_ms > 0, t
    assert t.sm_clock_mhz > 100
    assert t.stop in ("converged", "budget") and t.median_rel_se_pct < 5, t
    if t.stop == "converged":
        assert t.median_rel_se_pct <= 0.5
    capped = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id),
                   TimingOptions(budget_ms=30, min_ms=5, warmup_ms=5, max_rel_se_pct=0))
    t = capped.time(launch)
    assert t.stop == "budget" and t.reps * t.median_ms < 60, t


@pytest.mark.gpu
def test_work_timed_alone_behind_the_gate_waits_for_a_slow_host_outside_its_events(device,
                                                                                   stream):
    """Timer.host_free_ms behind the gate (timing/gate.py): the host sleeps 20 ms between the
    start event and the 1 ms spin it times; without the gate holding the stream the events
    would read the sleep, about 21 ms. Read: the spin's 1 ms, in one try, the gate still on."""
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.timing import Timer

    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id), TimingOptions())

    def slow_then_spin() -> None:
        time.sleep(0.02)
        timer.kernels.spin(1.0)

    for _ in range(3):
        assert timer.host_free_ms(slow_then_spin) == pytest.approx(1.0, abs=0.05)
    assert timer.gate is not None


def test_a_captured_rest_spins_as_long_as_its_slot_says_when_replayed(device, stream):
    """TimerKernels.rest in a graph: captured while its slot held 0.2 ms, replayed after the
    slot was set to 2 ms (a timing's batches captured beside its warm-up, their rests written
    after the warmed launches were timed: sustained.py); its events read 2 ms."""
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.driver import Event
    from harness.gpu.graph import Graph
    from harness.gpu.timing import Timer

    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id), TimingOptions())
    kernels = timer.kernels
    kernels.set_rests([0.5, 0.2])
    start, end = Event(), Event()

    def enqueue() -> None:
        start.record(stream, in_graph=True)
        kernels.rest(1, 0.2)
        end.record(stream, in_graph=True)

    graph = Graph(stream, enqueue, "a rest")
    try:
        kernels.set_rests([0.5, 2.0])
        graph.launch(stream)
        stream.synchronize()
        assert end.elapsed_ms(start) == pytest.approx(2.0, abs=0.05)
    finally:
        graph.close()


@pytest.mark.gpu_shared
@pytest.mark.parametrize("layout,c_type", [("row", "fp32"), ("col", "bf16")])
def test_the_kept_outputs_blocks_gathered_on_the_device_are_the_bits_kept(device, stream,
                                                                         layout, c_type):
    """fresh_gather (TimedOutputs.blocks): each sampled block holds the bits of its own slot
    at its rows and columns, in either layout and width of C."""
    from types import SimpleNamespace

    import numpy as np

    from harness.gpu.driver import Buffer
    from harness.kinds.gemm import capture, numerics

    m, n, slots = 300, 200, 3
    word = numerics.c_bytes(c_type)
    dtype = np.uint32 if word == 4 else np.uint16
    outputs = np.random.default_rng(7).integers(0, 60000, (slots, m, n)).astype(dtype)
    stored = outputs if layout == "row" else outputs.transpose(0, 2, 1)
    stride = -(-(m * n * word) // 256) * 256 + 256
    kept = Buffer(slots * stride)
    try:
        for j in range(slots):
            kept.upload_at(np.ascontiguousarray(stored[j]), j * stride, stream)
        timed = SimpleNamespace(spec=SimpleNamespace(layout_c=layout), c_type=c_type, m=m,
                                n=n, word_bytes=word, stride=stride, kept_buffer=kept,
                                stream=stream, fresh=capture.FreshKernels(stream,
                                                                          device.sm_count))
        rng = np.random.default_rng(3)
        picks = [(j, np.sort(rng.choice(m, 64, replace=False)),
                  np.sort(rng.choice(n, 64, replace=False))) for j in (2, 0, 1)]
        for (slot, rows, cols), block in zip(picks, capture.TimedOutputs.blocks(timed, picks),
                                             strict=True):
            assert np.array_equal(block.view(dtype), outputs[slot][np.ix_(rows, cols)])
    finally:
        kept.close()


@pytest.mark.gpu
@pytest.mark.parametrize("cold", [True, False])
def test_isolated_launches_idle_between_and_wait_on_no_host(device, stream, cold):
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.timing import Timer

    launch, _buffers = hoisted_at_1024(device, stream)
    timer = Timer(stream, device.l2_bytes, ClockSampler(device.pci_bus_id),
                  TimingOptions(budget_ms=50, warmup_ms=5, isolated_gap_ms=2.0, cold_l2=cold))
    t0 = time.perf_counter()
    t = timer.time(launch)
    assert t.regime == "isolated" and t.gap_ms == 2.0 and t.cold_l2 == cold
    assert 10 <= t.reps <= 200 and 0 < t.p20_ms <= t.median_ms <= t.p80_ms
    assert t.queue_ahead_ms > 0, t  # the queued work outlasted the host's enqueueing
    assert time.perf_counter() - t0 > t.reps * 2e-3  # every repetition waited out its gap


def test_isolation_of_fault_hang_and_compile_error(tmp_path):
    """With no --timeout-s, the hang is called by the limit of the stage it hung in (a small
    check: well under 30 s)."""
    kernels = discover([FIXTURE_KERNELS / "isolation"])
    sizes = ((256, 256, 256), (512, 512, 512))
    options = RunOptions(sizes=sizes, timing=QUICK)
    lines = []
    t0 = time.monotonic()
    record = run(kernels, "sm_90", options, tmp_path / "run.jsonl", lines.append)
    assert time.monotonic() - t0 < 90, "the hang took too long to be called"
    got = _by_name(record)
    first, second = sizes
    status = {name: r.status for (name, size), r in got.items() if size == first}
    assert status == {"a_fault": "fault", "b_hang": "timeout", "c_broken": "compile error",
                      "d_good": "pass"}, record.results
    assert "ILLEGAL_ADDRESS" in got["a_fault", first].message
    assert got["b_hang", first].message.startswith("no progress for "), got["b_hang", first]
    assert int(got["b_hang", first].message.split()[3]) <= 30
    assert "c_broken.cu:10" in got["c_broken", first].message
    # a kernel that hung or faulted is not tried again at its other sizes
    assert got["b_hang", second].status == "skipped"
    # (both go wrong on their first launch, in the odd-shape checks before any size)
    assert got["b_hang", second].message.startswith(
        "hung while its check battery ran: not tried again"), got["b_hang", second]
    assert got["a_fault", second].status == "skipped"
    assert got["a_fault", second].message.startswith(
        "faulted while its check battery ran")
    good = got["d_good", first]
    assert good.gflops > 0 and good.baseline_gflops > 0 and good.status == "pass"
    assert len((tmp_path / "run.jsonl").read_text().splitlines()) == 8


def test_nothing_a_kernel_sets_reaches_the_next(device, tmp_path):
    """The carve-out and dynamic shared-memory limit are set on a kernel's own function, so a
    kernel loaded after one that raised both sees the driver's defaults and the same occupancy
    as in a fresh process; the context's persisting-L2 limit is the driver's default (the
    harness never sets it; on the H100 it is 9830400 bytes untouched)."""
    import subprocess
    import sys

    from cuda.bindings import driver as cu

    from harness.kinds.gemm.session import GemmSession

    (big,) = select(discover([CLASSES]), ["smem_200k"])
    (after,) = select(KERNELS, ["03_smem_tiled:t32"])
    attr = cu.CUfunction_attribute
    with GemmSession.open() as session:
        first = session.load(big, carveout_pct=0)
        first.prepare(64, 64, 64)  # raises its dynamic shared-memory limit to 200 KB
        assert first.function.get(attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) \
            == 200 * 1024
        gemm = session.load(after)
        seen = (gemm.function.get(attr.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
                gemm.occupancy(4096, 4096, 4096)["driver_blocks_per_sm"])
        persisting = cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)[1]
    code = ("from harness.kinds.gemm.session import GemmSession\n"
            "from harness.kernels.registry import discover, select\n"
            "from cuda.bindings import driver as cu\n"
            "(k,) = select(discover(), ['03_smem_tiled:t32'])\n"
            "with GemmSession.open() as s:\n"
            "    g = s.load(k)\n"
            "    a = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES\n"
            "    print(g.function.get(a), g.occupancy(4096, 4096, 4096)['driver_blocks_per_sm'],\n"
            "          cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE)[1])\n")
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
    assert fresh.returncode == 0, fresh.stderr
    assert (*seen, persisting) == tuple(int(x) for x in fresh.stdout.split()), fresh.stdout


def test_compare_times_interleaved_with_speedups(tmp_path):
    kernels = select(KERNELS, ["03_smem_tiled:t32", "03_smem_tiled_ptx"])
    options = RunOptions(sizes=((512, 512, 512),), timing=TimingOptions(budget_ms=30))
    record = run(kernels, "sm_90", options, tmp_path / "c.jsonl", lambda _: None,
                 mode="compare")
    rows = {r.kernel.name: r for r in record.results}
    assert set(rows) == {"03_smem_tiled:t32", "03_smem_tiled_ptx"}
    first, second = rows["03_smem_tiled:t32"], rows["03_smem_tiled_ptx"]
    assert first.status == second.status == "pass"
    assert first.comparison.speedup == 1.0
    assert second.comparison.compared_to == "03_smem_tiled:t32"
    c = second.comparison
    assert 0.5 < c.speedup_p20 <= c.speedup <= c.speedup_p80 < 2.0
    # each kernel's baseline is the cuBLAS right after it in the round: two timings of one GEMM
    assert first.baseline.timing is not second.baseline.timing
    assert 0.8 < first.baseline_gflops / second.baseline_gflops < 1.25


def test_the_last_device_close_frees_what_lives_in_the_context(device):
    """Modules, buffers and streams unloaded after the primary context's release crashed the
    interpreter (cuModuleUnload in a finalizer): the last open Device frees them first."""
    from harness.gpu.driver import Device

    inner = Device(0)  # a second retain: closing it must leave the session's resources alone
    gemm = load(device, select(KERNELS, ["01_naive"])[0])
    buf = Buffer(1024)
    inner.close()
    assert gemm.module._unload.alive and buf._free.alive
    buf.close()
    assert not buf._free.alive


def test_the_last_device_close_frees_before_releasing():
    import subprocess
    import sys

    code = ("from harness.gpu.driver import Buffer, Device\n"
            "from harness.kinds.gemm.gemm import LoadedGemm\n"
            "from harness.compiler.compile import compile_kernel\n"
            "from harness.kernels.registry import discover, select\n"
            "d = Device(0)\n"
            "(k,) = select(discover(), ['01_naive'])\n"
            "g = LoadedGemm(d, k, compile_kernel(k, d.arch.name))\n"
            "b = Buffer(64)\n"
            "d.close()\n"
            "assert not g.module._unload.alive and not b._free.alive\n"
            "del g, b\n"
            "print('freed first')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "freed first" in proc.stdout, proc.stderr


def test_a_textbook_kernel_by_path_beside_ours(tmp_path):
    """A kernel written the way lessons write it (C = alpha * acc + beta * C, no beta == 0
    branch), named by its path, compared with a built-in rung: it passes, with the note."""
    from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, load_registry

    registry = load_registry(DEFAULT_KERNEL_DIRS)
    kernels = registry.select([str(PROJECT_ROOT / "examples" / "textbook_sgemm.cu"),
                               "10_hoisted"])
    record = run(kernels, "sm_90", RunOptions(sizes=((1000, 1000, 1000),), timing=QUICK),
                 tmp_path / "c.jsonl", lambda _: None, mode="compare")
    got = {r.kernel.name: r for r in record.results}
    assert got["textbook_sgemm"].status == "pass", got["textbook_sgemm"]
    assert got["textbook_sgemm"].checks.notes == (READS_C_NOTE,)
    assert got["10_hoisted"].status == "pass" and not got["10_hoisted"].checks.notes
    assert got["10_hoisted"].comparison.compared_to == "textbook_sgemm"


def test_kernels_in_their_own_signatures_pass_beside_ours(tmp_path):
    """Issue 22: the examples in other signatures (column-major with leading dimensions,
    (A, B, C, M, N, K) with B^T and a BF16 C, a separate output D with 64-bit sizes, and a
    wgmma kernel with its own tensor maps, clusters and a host-built schedule, with and
    without multicast, clusters of 16 in the spread block order, and a C++ template named by
    its instantiation) are checked and timed by path beside a built-in rung; a kernel that
    declares D but writes C is unwritten."""
    from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, load_registry

    registry = load_registry(DEFAULT_KERNEL_DIRS)
    names = ["colmajor_sgemm", "abt_bf16", "gemm_d_fp16", "wgmma_cluster_bf16"]
    kernels = registry.select([str(PROJECT_ROOT / "examples" / f"{n}.cu") for n in names]
                              + [str(FIXTURE_KERNELS / "signatures" / "writes_c_not_d.cu"),
                                 str(FIXTURE_KERNELS / "signatures" / "cluster16_spread.cu"),
                                 str(FIXTURE_KERNELS / "signatures" / "template_sgemm.cu"),
                                 "10_hoisted"])
    record = run(kernels, "sm_90", RunOptions(sizes=((1000, 1000, 1000),), timing=QUICK),
                 tmp_path / "sig.jsonl", lambda _: None)
    got = {r.kernel.name: r for r in record.results}
    for name, res in got.items():
        if name == "writes_c_not_d":
            assert res.status == "FAIL" and "unwritten" in res.message, res
        else:
            assert res.status == "pass", (name, res.status, res.message)
            assert res.gflops > 0 and res.baseline is not None
    assert {"wgmma_cluster_bf16:mc", "wgmma_cluster_bf16:nomc"} <= set(got)
    assert "host tiles" in got["wgmma_cluster_bf16:mc"].kernel.signature
    assert got["colmajor_sgemm"].kernel.layouts == "A col, B col, C col"
    # clusters of 16 (non-portable: the launcher allowed them) in the spread order; the
    # kernel writes NaN in a cluster of any other size
    assert got["cluster16_spread"].kernel.launch_attributes == (
        "cluster 16x1x1 (spec), block order spread")
    # a C++ template in a namespace, named by its instantiation: launched by its lowered name
    assert {"template_sgemm:t16", "template_sgemm:t32"} <= set(got)


ADVERSARIAL = FIXTURE_KERNELS / "adversarial"
CAUSES = {"lazy_after_n": "keeps state between launches",
          "state_keeper": "keeps state between launches",
          "memo_c": "depends on C's contents",
          # from its 61st launch it replays the output of its 60th: named a replay when a
          # kept repetition's neighbour was that one, else by the state it keeps
          "cached_replay": ("replays an earlier result", "keeps state between launches"),
          "ignores_beta_constrained": "ignores beta",
          "fp16_hfma": "wrong values", "fp16_round16": "wrong values",
          "bf16_acc_tile": "wrong values", "fp16_as_bf16": "wrong values",
          "jitter": "nondeterministic", "first_tile_only": "unwritten"}


def test_kernels_written_to_fool_the_harness_fail_with_their_cause(tmp_path):
    """Each adversarial fixture fails, through the whole path, with the finding that names what
    it does; the two right ones (a third-party warptile kernel with constraints, a split-K
    with declared atomics) pass."""
    kernels = discover([ADVERSARIAL])
    record = run(kernels, "sm_90", RunOptions(sizes=((1024, 1024, 1024),), timing=QUICK),
                 tmp_path / "adv.jsonl", lambda _: None)
    got = {r.kernel.name: r for r in record.results}
    assert set(got) == set(CAUSES) | {"thirdparty_warptile", "splitk_atomic"}
    for name, cause in CAUSES.items():
        r, causes = got[name], cause if isinstance(cause, tuple) else (cause,)
        assert r.status == "FAIL" and r.checks.finding in causes, (name, r.status, r.message)
        assert r.checks.finding in r.message and r.gflops is None, (name, r.message)
    right = got["thirdparty_warptile"]
    assert right.status == "pass" and right.checks.notes == (READS_C_NOTE,), right
    assert right.checks.total >= 20, right.checks
    assert got["splitk_atomic"].status == "pass", got["splitk_atomic"]


ADAPTIVE = FIXTURE_KERNELS / "adaptive"
ADAPTS = {"content_memo": "memoises", "dead_mma_memo": "memoises",
          "sampled_memo": "memoises", "timer_skim": "keeps state between launches",
          # its probe of C's guard reads L2 as cold after the poisoning memset too (H100,
          # notes/verification.md), so it skims in the battery as well: a race there
          "l2_skim": ("adapts to timing", "race", "nondeterministic", "wrong values"),
          "primer_replay": "replays an earlier result",
          "bf16x3_fp32": "less accurate than FP32",
          "fp16_as_tf32": "narrower range than claimed"}


def test_kernels_that_adapt_to_the_verifier_fail_with_their_cause(tmp_path):
    """Issue 33's classes, each a kernel that is right whenever it thinks it is checked: a
    memo on the inputs' contents (with a dead tensor-core instruction too), a memo on sampled
    points, timer- and L2-aware skimming, a replay of the last result, BF16x3 on aligned deep
    shapes claiming FP32, FP16 claiming TF32. Each fails with the finding that names it and
    no figure; a kernel with honest state (an atomic work queue) passes."""
    kernels = discover([ADAPTIVE])
    record = run(kernels, "sm_90", RunOptions(sizes=((512, 512, 512),), timing=QUICK),
                 tmp_path / "adapt.jsonl", lambda _: None)
    got = {r.kernel.name: r for r in record.results}
    assert set(got) == set(ADAPTS) | {"honest_counter"}
    wrong = {name: (r.status, r.checks.finding if r.checks else None, r.message)
             for name, cause in ADAPTS.items() if (r := got[name]).status != "FAIL"
             or r.checks.finding not in (cause if isinstance(cause, tuple) else (cause,))
             or r.gflops is not None}
    assert not wrong, wrong
    honest = got["honest_counter"]
    assert honest.status == "pass", honest.message
    assert honest.checks.timed_checked == min(2 * 16, honest.timing.reps) and honest.screen
    assert honest.seed == record.seed is not None


def test_every_project_kernel_is_held_to_fp32s_error_and_checked_when_timed(tmp_path):
    """The FP32 rungs' error at a timed size is about FP32's own (the yardstick), and every
    timed run keeps and checks a sample of its timed repetitions."""
    kernels = select(KERNELS, ["01_naive", "10_hoisted", "19_wgmma_epi_bf16:s4e64"])
    record = run(kernels, "sm_90", RunOptions(sizes=((1024, 1024, 1024),), timing=QUICK),
                 tmp_path / "fp32.jsonl", lambda _: None)
    for r in record.results:
        assert r.status == "pass", (r.kernel.name, r.message)
        assert r.checks.timed_checked == min(16, r.timing.reps) > 0, r.checks
        assert r.checks.launches > r.timing.reps, r.checks
        if r.kernel.precision == "fp32":
            assert 0.3 < r.checks.fp32_multiple < 1.5, r.checks


def test_compare_gives_each_kernel_the_cublas_of_its_own_types(tmp_path):
    """A 16-bit-C kernel and an FP32-C kernel compared: each against cuBLAS writing its own C
    type, in the same rounds; a kernel that goes lazy is caught after the rounds."""
    kernels = select(KERNELS, ["17_wgmma_persist_bf16:g16", "19_wgmma_epi_bf16:s4e64"])
    kernels += select(discover([ADVERSARIAL]), ["lazy_after_n"])
    # at 1024 the rounds launch the lazy kernel past its 60th launch
    record = run(kernels, "sm_90", RunOptions(sizes=((1024, 1024, 1024),), timing=QUICK),
                 tmp_path / "c.jsonl", lambda _: None, mode="compare")
    rows = {r.kernel.name: r for r in record.results}
    fp32c, bf16c = rows["17_wgmma_persist_bf16:g16"], rows["19_wgmma_epi_bf16:s4e64"]
    assert fp32c.status == bf16c.status == "pass", (fp32c.message, bf16c.message)
    assert (fp32c.baseline.c_type, bf16c.baseline.c_type) == ("fp32", "bf16")
    assert fp32c.baseline_gflops != bf16c.baseline_gflops
    assert 0.5 < bf16c.comparison.speedup < 2.0
    lazy = rows["lazy_after_n"]
    assert lazy.status == "FAIL" and lazy.checks.finding == "keeps state between launches", lazy


def test_known_duration_kernels_read_their_duration(device, stream):
    """A %globaltimer spin of 2, 5, 20 and 200 us and a 256 MB copy read within max(2%, 0.3 us)
    of their duration in every regime (cold and hot L2, sustained from graphs, isolated)."""
    from harness.bench import known
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.timing import Timer

    kernels = known.KnownKernels(device.arch.name, stream, device.sm_count)
    clocks = ClockSampler(device.pci_bus_id)
    regimes = {"cold, sustained": TimingOptions(budget_ms=100),
               "hot, sustained": TimingOptions(budget_ms=100, cold_l2=False),
               # isolated: every repetition the cap allows (200), not the 10 that a median
               # on the timer's 32 ns steps can converge at: a 5 us spin read 0.32 us long
               # so, twice (the suites at 2feddd6 and 0b5503f)
               "cold, isolated": TimingOptions(isolated_gap_ms=2.0, max_rel_se_pct=0),
               "hot, isolated": TimingOptions(cold_l2=False, isolated_gap_ms=2.0,
                                              max_rel_se_pct=0)}
    rows = known.measure(kernels, {name: Timer(stream, device.l2_bytes, clocks, options)
                                   for name, options in regimes.items()})
    assert len(rows) == 5 * len(regimes)
    failed = [r.to_json() for r in rows if not r.passed]
    assert not failed, failed
    assert all(r.graph for r in rows if "sustained" in r.regime)
