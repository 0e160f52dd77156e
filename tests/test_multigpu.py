"""Runs spread over several GPUs (run/multi.py, run/gpus.py) and over a Dask cluster
(run/cluster.py): scheduling, merging and failure handling on the CPU with stand-in worker
processes that speak the worker protocol; on a GPU, two workers on one device against one."""

from __future__ import annotations

import dataclasses
import functools
import importlib.machinery
import json
import multiprocessing
import re
import socket
import sys
import threading
import time
from types import ModuleType, SimpleNamespace

import pytest

from harness.bench.result import Result
from harness.errors import HarnessError
from harness.kernels.registry import discover, select
from harness.run import gpus as gpu_choice
from harness.run import process, runner
from harness.run.gpus import GpuSlot, VisibleGpu

# A stand-in worker: the protocol of run/worker.py, with what each kernel does taken from
# FAKE_PLAN (kernel name -> pass, fail, fault, hang, sleep:SECONDS; fail-late and fault-late: the
# failure said once the next kernel has started; fail-late-fault: and that kernel faulted;
# "@start:<CUDA_VISIBLE_DEVICES>" -> die, hang: the worker on that GPU never gets ready). Every
# row names the GPU it was pinned to.
FAKE_WORKER = r'''
import json, math, os, sys, time, zlib
from harness.bench.result import KernelInfo, Result
from harness.gpu.timing import Timing

plan = json.loads(os.environ.get("FAKE_PLAN", "{}"))
gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "all")
job = json.loads(sys.stdin.readline())


def emit(event, **fields):
    print("HARNESS-EVENT " + json.dumps({"event": event, **fields}), flush=True)


start = plan.get("@start:" + gpu)
if start == "die":
    print("no GPU for you", file=sys.stderr)
    sys.exit(5)
if start == "hang":
    time.sleep(60)
emit("device", name="Fake GPU", uuid="GPU-fake-" + gpu, host="fakehost", pci_bus_id=gpu,
     clocks={"max_sm_clock_mhz": 1000})


def kernel(ref, after=None):
    name = ref["name"]
    action = plan.get(name, "pass")
    emit("kernel_start", kernel=name)
    for i, size in enumerate(job["sizes"]):
        if action == "fault-late" and i == 1:  # a comparison's error found once the next
            # kernel's battery has begun (worker._run_kernel)
            emit("kernel_start", kernel=after["name"])
            emit("retire", kernel=name, error=True)
            emit("error", kind="ValueError", message="a bug in a comparison")
            sys.exit(1)
        emit("progress", kernel=name, stage="timing", size=size, show=False)
        if action == "hang":
            time.sleep(60)
        if action == "fault":
            emit("error", kind="CudaError",
                 message="cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS")
            sys.exit(3)
        if action.startswith("sleep:"):
            time.sleep(float(action.split(":")[1]))
        status = "FAIL" if action.startswith("fail") else "pass"
        row = Result.of(KernelInfo(name, ref["file"], "fp32", dict(ref["params"])), *size)
        if status == "pass":  # a time that depends on the kernel only: the same on any GPU
            ms = 0.1 + zlib.crc32(name.encode()) % 1000 / 100
            row = row.with_parts(timing=Timing(ms, ms, ms, ms, ms, 10, True, *[math.nan] * 4))
        emit("result", result=row.ended(status, "on " + gpu).to_json())
    if action in ("fail", "fail-late", "fail-late-fault"):
        if action != "fail" and after is not None:  # the next kernel's battery ran beside
            # this one's last comparisons (worker._run_kernel)
            emit("kernel_start", kernel=after["name"])
            emit("progress", kernel=after["name"], stage="checking: 26 checks")
        emit("retire", kernel=name)
        if action == "fail-late-fault" and after is not None:  # and faulted there
            emit("error", kind="CudaError", message="CUDA_ERROR_ILLEGAL_ADDRESS")
            sys.exit(3)
        return False
    return True


if job.get("feed"):
    while True:
        emit("ready")
        line = sys.stdin.readline()
        if not line.strip() or not kernel(json.loads(line)):
            break
else:
    for i, ref in enumerate(job["kernels"]):
        if not kernel(ref, (job["kernels"][i + 1:] or [None])[0]):
            break
emit("phases", seconds={"timing": 0.5})
'''

SIZES = ((128,) * 3, (256,) * 3)
NAMES = ["01_naive", "02_coalesced", "03_smem_tiled:t32", "05_blocktile_1d", "06_blocktile_2d",
         "07_vectorized"]


@pytest.fixture
def kernels():
    return select(discover(), NAMES)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """The stand-in worker in place of the real one; returns a setter for its plan. Kernels are
    not compiled (the worker would find no cubin to use anyway)."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    monkeypatch.setattr(process, "WORKER_COMMAND", (sys.executable, str(script)))
    monkeypatch.setattr(runner, "screen", lambda kernel, arch, sizes: (kernel, []))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def plan(**actions):
        monkeypatch.setenv("FAKE_PLAN", json.dumps(actions))
    plan()
    return plan


def _run(kernels, tmp_path, gpus=None, timeout_s=None, name="r"):
    lines = []
    options = runner.RunOptions(sizes=SIZES, timeout_s=timeout_s)
    slots = None if gpus is None else [gpu_choice.slot(i) for i in gpus]
    record = runner.run(kernels, "sm_90", options, tmp_path / f"{name}.jsonl", lines.append,
                        gpus=slots)
    return record, lines


def _rows(record):
    return [(r.kernel.name, r.size, r.status) for r in record.results]


# --- --gpus ------------------------------------------------------------------------------

SHOWN = [VisibleGpu(0, "GPU-a", "NVIDIA H100 80GB HBM3", "sm_90"),
         VisibleGpu(1, "GPU-b", "NVIDIA H100 80GB HBM3", "sm_90")]


def test_gpus_all_is_every_gpu_shown_and_a_list_keeps_its_order():
    assert gpu_choice.choose_gpus("all", SHOWN) == (0, 1)
    assert gpu_choice.choose_gpus("1,0", SHOWN) == (1, 0)
    assert gpu_choice.choose_gpus(" 1 ", SHOWN) == (1,)


@pytest.mark.parametrize(("text", "said"), [
    ("x", r"--gpus 'x': expected all, or GPU indices separated by commas \(0 or 0,2\)"),
    ("", r"--gpus '': expected all, or GPU indices"),
    ("0,,1", r"--gpus '0,,1': expected all, or GPU indices"),
    ("-1", r"got -1, which is negative"),
    ("0,0", r"GPU 0 is named twice; expected each GPU once"),
])
def test_bad_gpus_are_refused_before_any_gpu_is_asked(text, said):
    with pytest.raises(HarnessError, match=said):
        gpu_choice.parse_gpus(text)


def test_a_gpu_the_host_does_not_have_is_refused_naming_those_it_has():
    with pytest.raises(HarnessError, match=r"--gpus 7: there is no GPU 7; expected indices from "
                                           r"0 to 1: this host shows 2 \(0: NVIDIA H100 80GB "
                                           r"HBM3; 1: NVIDIA H100 80GB HBM3\)"):
        gpu_choice.choose_gpus("7", SHOWN)
    with pytest.raises(HarnessError, match=r"there is no GPU 2.*shows 2"):
        gpu_choice.choose_gpus("0,2", SHOWN)


def test_a_worker_is_pinned_through_the_harnesss_own_visible_devices():
    assert gpu_choice.slot(1, {}) == GpuSlot(1, "1")
    assert gpu_choice.slot(1, {"CUDA_VISIBLE_DEVICES": "3,5"}) == GpuSlot(1, "5")
    assert gpu_choice.slot(0, {"CUDA_VISIBLE_DEVICES": "GPU-abc"}).env({}) == {
        "CUDA_VISIBLE_DEVICES": "GPU-abc"}


def test_workers_of_one_host_share_its_cores_for_their_references():
    """Several workers on one host each get an equal share of its cores for their BLAS pools
    (float64 references), unless the harness's own environment sets the pools; a worker fed by
    Dask does not inherit what the nanny set for the Dask worker (one thread, a malloc trim
    threshold)."""
    assert gpu_choice.host_share(1, cores=32) == 32
    assert gpu_choice.host_share(2, cores=32) == 16
    assert gpu_choice.host_share(8, cores=4) == 1
    two = gpu_choice.slot(1, {}, host_threads=16)
    assert two.env({"HOME": "/h"}) == {
        "HOME": "/h", "CUDA_VISIBLE_DEVICES": "1", "OMP_NUM_THREADS": "16",
        "OPENBLAS_NUM_THREADS": "16", "MKL_NUM_THREADS": "16"}
    assert two.env({"OMP_NUM_THREADS": "4"}) == {
        "OMP_NUM_THREADS": "4", "CUDA_VISIBLE_DEVICES": "1", "OPENBLAS_NUM_THREADS": "16",
        "MKL_NUM_THREADS": "16"}
    assert gpu_choice.slot(0, {}).env({}) == {"CUDA_VISIBLE_DEVICES": "0"}
    nanny = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
             "MALLOC_TRIM_THRESHOLD_": "65536", "HOME": "/h"}
    fed = dataclasses.replace(two, drop=("MALLOC_TRIM_THRESHOLD_", "OMP_NUM_THREADS",
                                         "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"))
    assert fed.env(nanny) == {"HOME": "/h", "CUDA_VISIBLE_DEVICES": "1",
                              "OMP_NUM_THREADS": "16", "OPENBLAS_NUM_THREADS": "16",
                              "MKL_NUM_THREADS": "16"}


def test_a_dask_fed_worker_drops_what_the_nanny_set():
    pytest.importorskip("distributed", reason="Dask distributed is not installed")
    from harness.run import cluster

    assert {"OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_"} <= set(cluster.nanny_environ())
    gpu = {"index": 1, "uuid": "GPU-1", "name": "NVIDIA H200", "arch": "sm_90", "host": "vm",
           "host_gpus": 2}
    fed = cluster._fed(gpu, runner.RunOptions(sizes=((64, 64, 64),)), False, "run")
    try:
        env = fed.gpu.env({"OMP_NUM_THREADS": "1", "MALLOC_TRIM_THRESHOLD_": "65536"})
        assert "MALLOC_TRIM_THRESHOLD_" not in env and env["CUDA_VISIBLE_DEVICES"] == "1"
        assert env["OMP_NUM_THREADS"] == str(gpu_choice.host_share(2))
    finally:
        cluster.release_worker()


def test_gpus_of_several_models_are_refused_where_results_are_ranked():
    mixed = [*SHOWN, VisibleGpu(2, "GPU-c", "NVIDIA A100-SXM4-80GB", "sm_80")]
    gpu_choice.one_model((0, 1), mixed, "tune")
    with pytest.raises(HarnessError, match=r"tune: expected GPUs of one model, got NVIDIA "
                                           r"A100-SXM4-80GB, NVIDIA H100 80GB HBM3"):
        gpu_choice.one_model((0, 2), mixed, "tune")


def test_uuid_is_written_as_nvidia_smi_writes_it():
    from harness.gpu.driver import uuid_text

    assert uuid_text(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


# --- scheduling over stand-in workers --------------------------------------------------------

def test_two_gpus_give_the_rows_one_gpu_gives_in_the_same_order(kernels, fake, tmp_path):
    one, _ = _run(kernels, tmp_path, name="one")
    two, lines = _run(kernels, tmp_path, gpus=(0, 1), name="two")
    assert _rows(two) == _rows(one)
    assert _rows(one) == [(k.name, s, "pass") for k in kernels for s in SIZES]
    assert {r.gpu.index for r in two.results} == {0, 1}
    assert all(r.message == f"on {r.gpu.index}" for r in two.results), "pinned by its env"
    assert {r.gpu.uuid for r in two.results} == {"GPU-fake-0", "GPU-fake-1"}
    assert {r.gpu.index for r in one.results} == {0} and one.results[0].gpu.uuid == "GPU-fake-all"
    assert sorted(d["index"] for d in two.devices) == [0, 1]
    assert two.phases["timing"] == pytest.approx(1.0), "each worker's phases, summed"
    assert any("over 2 GPUs (0, 1)" in line for line in lines)
    # each GPU's worker says how long it took to get ready (where a slow start would show)
    assert {re.fullmatch(r" *GPU (\d): its worker ready in \d+\.\d s", line).group(1)
            for line in lines if "ready in" in line} == {"0", "1"}
    streamed = (tmp_path / "two.jsonl").read_text().splitlines()
    assert len(streamed) == len(two.results)


def test_results_arriving_out_of_order_are_put_in_one_workers_order(kernels, fake, tmp_path):
    # GPU 0 is busy with the first while 1 goes on (3 s: worker start-up on a loaded host
    # took longer than the 0.4 s this was at, under xdist on the GPU host)
    fake(**{kernels[0].name: "sleep:3"})
    record, _ = _run(kernels, tmp_path, gpus=(0, 1))
    streamed = [json.loads(line)["kernel"]["name"]
                for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert streamed[0] != kernels[0].name, "the stream keeps the arrival order"
    assert _rows(record) == [(k.name, s, "pass") for k in kernels for s in SIZES]


def test_a_fault_and_a_failed_check_end_only_their_gpus_worker(kernels, fake, tmp_path):
    fake(**{kernels[1].name: "fault", kernels[3].name: "fail"})
    one, _ = _run(kernels, tmp_path, name="one")
    two, _ = _run(kernels, tmp_path, gpus=(0, 1), name="two")
    assert _rows(two) == _rows(one)
    by_kernel = {}
    for name, _, status in _rows(two):
        by_kernel.setdefault(name, []).append(status)
    assert by_kernel[kernels[1].name] == ["fault", "skipped"]
    assert by_kernel[kernels[3].name] == ["FAIL", "FAIL"]
    assert all(by_kernel[k.name] == ["pass", "pass"] for k in kernels if k not in
               (kernels[1], kernels[3]))
    fault = next(r for r in two.results if r.status == "fault")
    assert "CUDA context is lost" in fault.message and fault.gpu is not None


def test_a_failure_said_after_the_next_kernel_began_reruns_that_kernel(kernels, fake,
                                                                      tmp_path):
    """The worker checks a kernel while the host still compares the last sizes of the one
    before (worker._run_kernel): a failure found then retires the worker, and the next kernel,
    begun there, starts again in a fresh one with nothing lost or doubled; an error in a
    comparison is blamed on its own kernel."""
    fake(**{kernels[1].name: "fault-late", kernels[3].name: "fail-late",
            kernels[4].name: "fail-late-fault"})
    record, lines = _run(kernels, tmp_path, name="late")
    by_kernel = {}
    for name, _, status in _rows(record):
        by_kernel.setdefault(name, []).append(status)
    assert by_kernel[kernels[1].name] == ["pass", "error"], by_kernel
    assert by_kernel[kernels[3].name] == ["FAIL", "FAIL"]
    # a fault in the battery of the kernel after a failed one is not that kernel's: it runs
    # again in a fresh worker
    assert by_kernel[kernels[4].name] == ["FAIL", "FAIL"]
    assert all(by_kernel[k.name] == ["pass", "pass"] for k in kernels if k not in
               (kernels[1], kernels[3], kernels[4]))
    assert len(_rows(record)) == len(kernels) * len(SIZES)
    assert "a bug in a comparison" in record.results[3].message
    assert sum(f"{kernels[3].name} failed its checks" in line for line in lines) == 1


def test_a_hang_takes_only_its_kernel_and_the_others_go_on(kernels, fake, tmp_path):
    # 4 s of no progress: short, yet long enough for a stand-in worker on a host busy with
    # the rest of the suite (1 s timed every kernel out under pytest-xdist on the GPU host)
    fake(**{kernels[0].name: "hang"})
    t0 = time.monotonic()
    record, _ = _run(kernels, tmp_path, gpus=(0, 1), timeout_s=4.0)
    assert time.monotonic() - t0 < 60
    assert _rows(record)[:2] == [(kernels[0].name, SIZES[0], "timeout"),
                                 (kernels[0].name, SIZES[1], "skipped")]
    assert [s for _, _, s in _rows(record)[2:]] == ["pass"] * (2 * len(kernels) - 2)
    assert "no progress for 4 s while timing" in record.results[0].message


def test_a_gpu_whose_worker_cannot_start_drops_out_and_loses_nothing(kernels, fake, tmp_path):
    fake(**{"@start:1": "die"})
    record, lines = _run(kernels, tmp_path, gpus=(0, 1))
    assert _rows(record) == [(k.name, s, "pass") for k in kernels for s in SIZES]
    assert {r.gpu.index for r in record.results} == {0}
    assert any("GPU 1: its worker could not start (error: worker exited with code 5: no GPU "
               "for you)" in line for line in lines), lines


def test_when_no_gpu_can_start_a_worker_every_kernel_says_why(kernels, fake, tmp_path):
    fake(**{"@start:0": "die", "@start:1": "hang"})
    record, _ = _run(kernels[:2], tmp_path, gpus=(0, 1), timeout_s=1.0)
    assert [(name, size) for name, size, _ in _rows(record)] == [
        (k.name, s) for k in kernels[:2] for s in SIZES]
    assert {r.status for r in record.results} <= {"error", "timeout"}
    assert all(r.message.startswith("no GPU could start a worker: ") for r in record.results)


def test_check_mode_spreads_too_and_compare_refuses_several_gpus(kernels, fake, tmp_path):
    options = runner.RunOptions(sizes=SIZES)
    record = runner.run(kernels[:3], "sm_90", options, tmp_path / "c.jsonl", lambda _: None,
                        mode="check", gpus=[gpu_choice.slot(0), gpu_choice.slot(1)])
    assert _rows(record) == [(k.name, s, "pass") for k in kernels[:3] for s in SIZES]
    with pytest.raises(HarnessError, match="compare times its kernels interleaved on one GPU; "
                                           "expected one GPU, got 2"):
        runner.run(kernels[:2], "sm_90", options, tmp_path / "x.jsonl", lambda _: None,
                   mode="compare", gpus=[gpu_choice.slot(0), gpu_choice.slot(1)])


def test_one_gpu_named_pins_the_one_worker(kernels, fake, tmp_path):
    record, _ = _run(kernels[:2], tmp_path, gpus=(1,))
    assert {(r.gpu.index, r.message) for r in record.results} == {(1, "on 1")}


def test_a_worker_rebuilds_tune_points_and_variants_with_the_parameters_sent():
    """The worker applies the device's [tuned.<arch>] defaults again: a tuning point (explicit)
    and a variant must keep their own parameters there, on any GPU a run is spread to."""
    from harness.kernels.registry import Kernel
    from harness.run import tune
    from harness.run.protocol import Job, KernelRef
    from harness.run.worker import _kernel

    spec = select(discover(), ["09_cp_async"])[0].spec
    assert spec.tuned.get("sm_90"), "needs a kernel file with [tuned.sm_90]"
    base = Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))
    point = tune.points(base, {"STAGES": [2], "BK": [8]})[0]
    variants = select(discover(), ["09_cp_async:s2", "09_cp_async:s3"])
    for kernel in [point, *variants]:
        sent = kernel.for_arch("sm_90")
        (ref,) = Job.from_json(Job((KernelRef.of(sent),), ((64, 64, 64),)).to_json()).kernels
        assert _kernel(ref).for_arch("sm_90").params == sent.params, kernel.name


# --- Dask distributed ----------------------------------------------------------------------

def _stand_in_gpus(script: str, uuids: list[str]) -> None:
    """In a Dask worker process: the stand-in worker, GPUs that are not there, no compiling."""
    import sys as worker_sys

    from harness.run import gpus, process, runner

    process.WORKER_COMMAND = (worker_sys.executable, script)
    runner.screen = lambda kernel, arch, sizes: (kernel, [])
    gpus.visible_gpus = lambda: [gpus.VisibleGpu(i, u, "Fake GPU", "sm_90")
                                 for i, u in enumerate(uuids)]


def test_a_gpu_is_held_by_one_dask_worker_of_its_host(monkeypatch):
    from harness.run import cluster

    tag = f"GPU-test-{time.time_ns()}"
    shown = [VisibleGpu(0, f"{tag}-a", "Fake GPU", "sm_90"),
             VisibleGpu(1, f"{tag}-b", "Fake GPU", "sm_90")]
    monkeypatch.setattr(gpu_choice, "visible_gpus", lambda: shown)
    monkeypatch.setattr(cluster, "_HELD", {})
    locks = []
    try:
        for expected in (0, 1):  # each claim stands for another worker process of the host
            assert cluster.hold_gpu()["index"] == expected
            locks.append(cluster._HELD.pop("lock"))
            del cluster._HELD["gpu"]
        with pytest.raises(HarnessError, match=r"all 2 GPUs here are held by other workers; "
                                               r"expected one worker per GPU \(--nworkers 2\)"):
            cluster.hold_gpu()
    finally:
        for lock in locks:
            lock.close()
    for gpu in shown:
        (cluster.claims_folder() / f"{gpu.uuid}.lock").unlink(missing_ok=True)


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:1", "local"])
def test_without_dask_the_cluster_option_names_the_install(monkeypatch, address):
    """Said at once, also for a local cluster, which imports Dask in the thread it starts in."""
    from harness.run import cluster

    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(HarnessError, match=r"--cluster needs Dask distributed, which is not "
                                           r"installed .*pip install -e '\.\[cluster\]'"):
        cluster.Engine(address, lambda _: None)


def test_a_local_dask_cluster_of_two_workers_gives_one_workers_rows(kernels, fake, tmp_path):
    distributed = pytest.importorskip(
        "distributed", reason="Dask distributed is not installed (pip install -e '.[cluster]')")
    import cloudpickle

    from harness.run import cluster

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    fake(**{kernels[0].name: "sleep:0.5", kernels[2].name: "fault", kernels[4].name: "hang"})
    one, _ = _run(kernels, tmp_path, timeout_s=1.0, name="one")
    tag = f"GPU-dask-{time.time_ns()}"
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        with distributed.Client(local.scheduler_address) as client:
            client.run(_stand_in_gpus, str(process.WORKER_COMMAND[1]), [f"{tag}-0", f"{tag}-1"])
        lines = []
        with cluster.Engine(local.scheduler_address, lines.append) as engine:
            assert sorted(g["index"] for g in engine.gpus.values()) == [0, 1]
            assert "2 Dask workers on 1 host(s)" in engine.describe()
            options = runner.RunOptions(sizes=SIZES, timeout_s=1.0)
            record = engine.run(kernels, options, tmp_path / "dask.jsonl", lines.append)
    assert _rows(record) == _rows(one)
    assert [s for _, _, s in _rows(record)] == ["pass", "pass", "pass", "pass", "fault",
                                                "skipped", "pass", "pass", "timeout",
                                                "skipped", "pass", "pass"]
    assert {r.gpu.uuid for r in record.results if r.gpu} == {"GPU-fake-0", "GPU-fake-1"}
    streamed = (tmp_path / "dask.jsonl").read_text().splitlines()
    assert len(streamed) == len(record.results)
    assert json.loads(streamed[0])["kernel"]["name"] != kernels[0].name, "streamed as done"
    assert sorted(d["index"] for d in record.devices) == [0, 1]
    # every fed worker a task started (the first on each GPU, and one after the fault and
    # after the hang) says how long it took and how long the task's screening took
    started = [re.fullmatch(r" *GPU (\d) of \S+ \(Dask worker\): its worker ready in "
                            r"\d+\.\d s; the task screened its kernel in \d+\.\d s", line)
               for line in lines if "ready in" in line and "Dask worker" in line]
    assert all(started) and {m.group(1) for m in started} == {"0", "1"} and len(started) >= 3
    for lock in cluster.claims_folder().glob(f"{tag}-*.lock"):
        lock.unlink()


class _FakeDask(ModuleType):
    """Dask distributed as the engine imports and uses it (CI has no Dask): a LocalCluster
    whose start waits for ``go``, a Client whose workers answer ``answers`` (or that cannot
    reach the scheduler: ``refused``); what was closed, in order, in ``closed``."""

    def __init__(self, answers, refused=None):
        super().__init__("distributed")
        self.__spec__ = importlib.machinery.ModuleSpec("distributed", None)
        self.answers, self.refused = answers, refused
        self.go, self.closed = threading.Event(), []

    def LocalCluster(self, n_workers, **_):
        assert self.go.wait(30), "the test never let the cluster start"
        return SimpleNamespace(scheduler_address="tcp://fake:1",
                               close=lambda: self.closed.append("cluster"))

    def Client(self, address, timeout):
        if self.refused:
            raise self.refused
        return SimpleNamespace(run=lambda fn, on_error: self.answers, cancel=lambda _: None,
                               scheduler=SimpleNamespace(address=address),
                               close=lambda: self.closed.append("client"))

    @staticmethod
    def as_completed(futures):
        return iter(futures)


def _facts(index, name="Fake GPU"):
    return {"index": index, "uuid": f"GPU-{index}", "name": name, "arch": "sm_90",
            "host": "fakehost", "host_gpus": 2}


@pytest.fixture
def fake_dask(monkeypatch):
    """A host of two stand-in GPUs whose local cluster is a _FakeDask; returns a setter."""
    monkeypatch.setattr(gpu_choice, "visible_gpus", lambda: SHOWN)

    def use(answers, refused=None):
        dask = _FakeDask(answers, refused)
        monkeypatch.setitem(sys.modules, "distributed", dask)
        return dask
    return use


def _said(lines, pattern):
    """The seconds in the one line of ``lines`` that matches ``pattern``."""
    matched = [line for line in lines if re.fullmatch(pattern, line)]
    assert len(matched) == 1, (pattern, lines)
    return [float(x) for x in re.findall(r"(\d+\.\d) s", matched[0])]


def test_a_local_clusters_start_does_not_hold_the_caller_and_run_waits_for_it(fake_dask,
                                                                             tmp_path):
    """The engine is made at once, its GPUs known from this host's view (the tune screens
    for their arch meanwhile); run waits for the cluster; the say() lines time both ends."""
    from harness.run import cluster

    dask = fake_dask({"tcp://w0": _facts(0, SHOWN[0].name), "tcp://w1": _facts(1, SHOWN[0].name)})
    lines = []
    with cluster.Engine("local", lines.append) as engine:
        assert engine.client is None and engine.local is None, "the start waits for go"
        assert engine.models == [SHOWN[0].name] and engine.known[0]["arch"] == "sm_90"
        assert engine.describe() == (f"2 Dask workers on 1 host(s) ({socket.gethostname()}): "
                                     f"2 x {SHOWN[0].name}")
        threading.Timer(0.3, dask.go.set).start()
        t0 = time.monotonic()
        engine.run([], runner.RunOptions(sizes=SIZES), tmp_path / "r.jsonl", lines.append)
        assert time.monotonic() - t0 >= 0.25
        assert sorted(engine.gpus) == ["tcp://w0", "tcp://w1"]
        assert engine.describe() == f"2 Dask workers on 1 host(s) (fakehost): 2 x {SHOWN[0].name}"
    ready_s, overlapped_s, waited_s = _said(
        lines, r"Dask: local cluster of 2 workers and their GPUs ready in \d+\.\d s \(\d+\.\d s "
               r"of it overlapped with this process's work, \d+\.\d s waited for\)")
    assert waited_s >= 0.2 and overlapped_s == pytest.approx(ready_s - waited_s, abs=0.11)
    _said(lines, r"Dask: local cluster closed in \d+\.\d s")
    assert dask.closed == ["client", "cluster"]


@pytest.mark.parametrize(("answers", "refused", "said", "closed"), [
    ({}, None, r"the Dask scheduler at tcp://fake:1 has no workers; expected one per GPU: "
               r"start one with `dask scheduler`", ["client", "cluster"]),
    ({"tcp://w0": _facts(0), "tcp://w1": HarnessError("Dask worker on b: expected a GPU, the "
                                                      "CUDA driver shows none")}, None,
     r"1 of 2 Dask workers hold no GPU \(the first, tcp://w1: Dask worker on b: expected a "
     r"GPU, the CUDA driver shows none\); expected one worker per GPU", ["client", "cluster"]),
    ({}, OSError("connection refused"), r"--cluster tcp://fake:1: expected a Dask scheduler "
     r"there, could not reach one \(connection refused\)", ["cluster"]),
])
def test_a_local_clusters_failed_start_is_raised_where_it_is_waited_for_and_closed(
        fake_dask, tmp_path, answers, refused, said, closed):
    from harness.run import cluster

    dask = fake_dask(answers, refused)
    dask.go.set()
    lines = []
    with cluster.Engine("local", lines.append) as engine:
        with pytest.raises(HarnessError, match=said):
            engine.run([], runner.RunOptions(sizes=SIZES), tmp_path / "r.jsonl", lines.append)
        assert dask.closed == closed, "closed by the start, before the engine is"
    assert dask.closed == closed and lines == []


def test_a_local_clusters_workers_must_hold_the_gpus_the_caller_was_told_of(fake_dask,
                                                                           tmp_path):
    """What the tune screened and ranked for (this host's GPU model) is checked against the
    workers' answers before any work is handed out."""
    from harness.run import cluster

    dask = fake_dask({"tcp://w0": _facts(0, "NVIDIA H200"), "tcp://w1": _facts(1, "NVIDIA A100")})
    dask.go.set()
    with cluster.Engine("local", lambda _: None) as engine:
        assert engine.models == [SHOWN[0].name]
        with pytest.raises(HarnessError, match=r"--cluster local: expected the workers to hold "
                                               r"GPUs of this host's models \(NVIDIA H100 80GB "
                                               r"HBM3\), they hold NVIDIA H200, NVIDIA A100"):
            engine.run([], runner.RunOptions(sizes=SIZES), tmp_path / "r.jsonl", lambda _: None)
    assert dask.closed == ["client", "cluster"]


# --- the command line ----------------------------------------------------------------------

def _harness(capsys, *argv):
    from harness.cli import main

    status = main(list(argv))
    return status, capsys.readouterr().err


@pytest.mark.parametrize("argv", [["run", "01_naive", "--gpus", "x"],
                                  ["tune", "09_cp_async", "--gpus", "0,x"],
                                  ["compare", "01_naive", "02_coalesced", "--gpus", "zero"]])
def test_a_bad_gpus_is_bad_input_in_one_line_with_or_without_a_gpu(capsys, argv):
    status, err = _harness(capsys, *argv)
    assert status == 2
    assert err.strip().startswith("harness: error: --gpus ") and len(err.strip().splitlines()) == 1
    assert "expected all, or GPU indices separated by commas" in err


@pytest.mark.parametrize("gpus", ["0,1", "all"])
def test_compare_stays_on_one_gpu_and_says_so(capsys, gpus):
    status, err = _harness(capsys, "compare", "01_naive", "02_coalesced", "--gpus", gpus)
    assert status == 2
    assert (f"harness: error: --gpus {gpus}: compare times its kernels interleaved, round by "
            "round, on one GPU; expected one GPU index (--gpus 1); to spread kernels over "
            "several GPUs use harness run --gpus") in err


def test_gpus_and_cluster_are_one_or_the_other():
    from harness.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "01_naive", "--gpus", "0", "--cluster", "local"])
    assert exit_.value.code == 2


def _row(name, size, gpu_name, index):
    from harness.bench.result import GpuInfo, KernelInfo, Result

    gpu = GpuInfo(index, f"GPU-{index}", gpu_name, host="a") if gpu_name else None
    return Result.of(KernelInfo(name, "f.cu", "fp32"), *size).with_parts(gpu=gpu).ended(
        "pass" if gpu else "compile error", "")


def test_rows_from_gpus_of_two_models_go_to_their_own_reports(tmp_path):
    from harness.gpu.timing import TimingOptions
    from harness.report.runs import by_model, write_run_reports

    h100, h200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
    devices = [{"name": h100, "index": 0, "uuid": "GPU-0", "host": "a"},
               {"name": h200, "index": 1, "uuid": "GPU-1", "host": "b"}]
    rows = [_row("k1", (64,) * 3, h100, 0), _row("k2", (64,) * 3, h200, 1),
            _row("k3", (64,) * 3, None, 0)]
    record = runner.RunRecord(device=devices[0], results=rows, devices=devices)
    parts = by_model(record)
    assert {slug: [r.kernel.name for r in part.results] for slug, part in parts.items()} == {
        "h100": ["k1", "k3"], "h200": ["k2"]}
    assert parts["h200"].device["name"] == h200
    stream = tmp_path / "reports" / "h100" / "run-1.jsonl"
    stream.parent.mkdir(parents=True)
    stream.write_text("")
    written = write_run_reports(record, ["harness", "run"], TimingOptions(), [(64,) * 3],
                                stream.with_suffix(""), stream, tmp_path / "reports", "run-1")
    assert [j.relative_to(tmp_path).as_posix() for j, _ in written] == [
        "reports/h100/run-1.json", "reports/h200/run-1.json"]
    assert not stream.exists()
    report = json.loads((tmp_path / "reports" / "h200" / "run-1.json").read_text())
    assert report["meta"]["gpu"] == h200 and [r["gpu"]["index"] for r in report["rows"]] == [1]
    one = runner.RunRecord(device=devices[0], results=rows[:1], devices=devices[:1])
    assert list(by_model(one)) == ["h100"]


def test_a_report_of_several_gpus_lists_them(tmp_path):
    from harness.gpu.timing import TimingOptions
    from harness.report.runs import write_run_report

    devices = [{"name": "NVIDIA H100", "index": i, "uuid": f"GPU-{i}", "host": "a",
                "clocks": {"max_sm_clock_mhz": 1980}} for i in (0, 1)]
    rows = [_row("k1", (64,) * 3, "NVIDIA H100", 0), _row("k2", (64,) * 3, "NVIDIA H100", 1),
            _row("k3", (64,) * 3, "NVIDIA H100", 1)]
    record = runner.RunRecord(device=devices[0], results=rows, devices=devices)
    json_path, md_path = write_run_report(record, ["harness", "run"], TimingOptions(),
                                          [(64,) * 3], tmp_path / "run-1", None)
    assert [g["uuid"] for g in json.loads(json_path.read_text())["meta"]["gpus"]] == [
        "GPU-0", "GPU-1"]
    md = md_path.read_text()
    assert "## GPUs" in md
    (line,) = [line for line in md.splitlines() if "| GPU-1 " in line]
    assert [cell.strip() for cell in line.strip("|").split("|")] == [
        "1", "a", "NVIDIA H100", "GPU-1", "1980", "2"]


# --- on a GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_two_workers_on_one_gpu_give_the_rows_of_one_worker(tmp_path):
    """GPU 0 twice: two fed workers side by side on one device against the one worker of a
    plain run; the same kernels, sizes and verdicts, every row naming the GPU by its UUID."""
    from harness.gpu.driver import device_arch_name
    from harness.gpu.timing import TimingOptions

    arch = device_arch_name()
    chosen = select(discover(), ["01_naive", "02_coalesced", "03_smem_tiled:t32"])
    timing = TimingOptions(warmup_ms=5.0, budget_ms=20.0, min_ms=5.0)
    options = runner.RunOptions(sizes=((256,) * 3, (384, 320, 192)), timing=timing)
    one = runner.run(chosen, arch, options, tmp_path / "one.jsonl", lambda _: None)
    lines = []
    two = runner.run(chosen, arch, options, tmp_path / "two.jsonl", lines.append,
                     gpus=[gpu_choice.slot(0), gpu_choice.slot(0)])
    assert _rows(two) == _rows(one)
    assert [s for _, _, s in _rows(one)] == ["pass"] * 6, [r.message for r in one.results]
    uuid = gpu_choice.visible_gpus()[0].uuid
    assert uuid.startswith("GPU-")
    assert {(r.gpu.index, r.gpu.uuid) for r in one.results + two.results} == {(0, uuid)}
    assert all(r.timing is not None and r.baseline is not None for r in two.results)
    assert any("over 2 GPUs (0, 0)" in line for line in lines)


def test_wheels_script_fetches_dask_for_a_gpu_host_without_a_registry(tmp_path):
    """scripts/wheels.sh --cluster: Dask distributed's wheels, pinned, beside the usual ones
    (pip stood in for: no network)."""
    import os
    import subprocess

    from harness.kernels.registry import PROJECT_ROOT

    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text('#!/bin/sh\necho "$@" >> "$ARGS_FILE"\n')
    (fake / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}",
           "ARGS_FILE": str(tmp_path / "args"), "WHEEL_DIR": str(tmp_path / "whl")}
    for argv, notebook in ((["--cluster", "extra==1"], False),
                           (["--notebook", "--cluster"], True)):
        (tmp_path / "args").write_text("")
        proc = subprocess.run(["bash", str(PROJECT_ROOT / "scripts" / "wheels.sh"), *argv],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        download, wheel = (tmp_path / "args").read_text().splitlines()
        assert wheel.split()[:3] == ["-m", "pip", "wheel"]  # the project's own, last
        args = download.split()
        for wanted in ("--no-deps", "nvmath-python==1.0.*", "dask==2026.8.0",
                       "distributed==2026.8.0", "msgpack==1.2.4", "cloudpickle==3.1.3"):
            assert wanted in args, wanted
        assert ("nbclient==0.11.0" in args) == notebook
        assert ("extra==1" in args) == (not notebook)
        assert not any(a.startswith("--cluster") or a == "--notebook" for a in args)


def _stand_in_host(monkeypatch, count=2):
    """A host with ``count`` stand-in GPUs, as the CLI asks for them."""
    from harness.gpu import driver

    monkeypatch.setattr(driver, "gpu_status", lambda: driver.GpuStatus("Fake GPU"))
    monkeypatch.setattr(driver, "device_arch_name", lambda ordinal=0: "sm_90")
    monkeypatch.setattr(gpu_choice, "visible_gpus", lambda: [
        VisibleGpu(i, f"GPU-{i}", "Fake GPU", "sm_90") for i in range(count)])


def test_harness_run_gpus_writes_one_report_naming_each_gpu(fake, tmp_path, monkeypatch,
                                                            capsys):
    _stand_in_host(monkeypatch)
    status, err = _harness(capsys, "run", *NAMES[:4], "--gpus", "all", "--size", "128",
                           "--report-dir", str(tmp_path))
    assert status == 0, err
    assert "on 2 GPUs (0: Fake GPU; 1: Fake GPU) (sm_90)" in err
    (report,) = (tmp_path / "fake-gpu").glob("run-*.json")
    data = json.loads(report.read_text())
    assert [r["kernel"]["name"] for r in data["rows"]] == NAMES[:4]
    assert sorted(g["index"] for g in data["meta"]["gpus"]) == [0, 1]
    assert not list((tmp_path / "fake-gpu").glob("run-*.jsonl")), "the stream is in the JSON"
    assert "## GPUs" in report.with_suffix(".md").read_text()


def test_harness_tune_gpus_picks_the_winners_one_gpu_picks(fake, tmp_path, monkeypatch,
                                                            capsys):
    from harness.run import tune

    _stand_in_host(monkeypatch)
    monkeypatch.setattr(tune, "why_not_launchable", lambda kernel, arch, sizes: None)
    argv = ["tune", "09_cp_async", "--param", "BM=128", "--param", "BN=128", "--size", "256",
            "--top", "5"]
    tops = []
    for where, extra in (("one", []), ("two", ["--gpus", "0,1"])):
        status, err = _harness(capsys, *argv, "--report-dir", str(tmp_path / where), *extra)
        assert status == 0, err
        (report,) = (tmp_path / where / "fake-gpu").glob("tune-09_cp_async-*.json")
        data = json.loads(report.read_text())
        assert data["meta"]["timed"] >= 32, "a space of 32 or more points"
        results = [Result.from_json(r) for r in data["rows"]]
        tops.append([r.kernel.name for r in tune.best(results, (256,) * 3, 5)])
        indices = {r.gpu.index for r in results}
        assert indices == ({0} if where == "one" else {0, 1})
    assert tops[0] == tops[1] and len(tops[0]) == 5


def test_harness_tune_refuses_gpus_of_two_models(fake, monkeypatch, capsys):
    _stand_in_host(monkeypatch)
    monkeypatch.setattr(gpu_choice, "visible_gpus", lambda: [
        VisibleGpu(0, "GPU-0", "NVIDIA H100", "sm_90"), VisibleGpu(1, "GPU-1", "NVIDIA H200",
                                                                   "sm_90")])
    status, err = _harness(capsys, "tune", "09_cp_async", "--gpus", "all")
    assert status == 2
    assert ("tune ranks its points against each other: expected GPUs of one model, got NVIDIA "
            "H100, NVIDIA H200") in err


def _stand_in_hold(script: str, uuids: list[str]) -> dict:
    """In a Dask worker process: hold_gpu among the stand-in GPUs."""
    _stand_in_gpus(script, uuids)
    from harness.run import cluster

    return cluster.hold_gpu()


def test_harness_tune_cluster_local_screens_while_the_cluster_starts(fake, tmp_path,
                                                                    monkeypatch, capsys):
    """`harness tune --cluster local`: the points are screened before the cluster is waited
    for; the rows come from both workers' GPUs; no Dask worker process outlives the command."""
    pytest.importorskip("distributed", reason="Dask distributed is not installed "
                                              "(pip install -e '.[cluster]')")
    import cloudpickle

    from harness.run import cluster, tune

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    _stand_in_host(monkeypatch)
    monkeypatch.setattr(tune, "why_not_launchable", lambda kernel, arch, sizes: None)
    tag = f"GPU-tune-{time.time_ns()}"
    monkeypatch.setattr(cluster, "hold_gpu", functools.partial(
        _stand_in_hold, str(process.WORKER_COMMAND[1]), [f"{tag}-0", f"{tag}-1"]))
    try:
        status, err = _harness(capsys, "tune", "09_cp_async", "--param", "BM=128", "--param",
                               "BN=128", "--param", "STAGES=2", "--size", "256", "--cluster",
                               "local", "--report-dir", str(tmp_path))
    finally:
        for lock in cluster.claims_folder().glob(f"{tag}-*.lock"):
            lock.unlink()
    assert status == 0, err
    said = err.splitlines()
    where = [next(i for i, line in enumerate(said) if part in line) for part in (
        "harness tune on a Dask cluster: 2 Dask workers on 1 host(s)", "points to check",
        "Dask: local cluster of 2 workers and their GPUs ready in", "Dask: local cluster closed")]
    assert where == sorted(where), said
    (report,) = (tmp_path / "fake-gpu").glob("tune-09_cp_async-*.json")
    rows = json.loads(report.read_text())["rows"]
    assert {r["gpu"]["index"] for r in rows} == {0, 1}
    assert not [p for p in multiprocessing.active_children() if "Dask" in p.name]
