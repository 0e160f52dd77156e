import sys
import time

import pytest

from harness.errors import HarnessError
from harness.run.process import failure as _failure
from harness.run.runner import parse_size


def test_parse_size():
    assert parse_size("4096") == (4096, 4096, 4096)
    assert parse_size("128,256,64") == (128, 256, 64)
    assert parse_size("128x256x64") == (128, 256, 64)
    for bad in ("0", "1,2", "a", "1,2,3,4", "-5"):
        with pytest.raises(HarnessError, match="is not N or M,N,K"):
            parse_size(bad)


def test_failures_are_classified():
    status, message = _failure({"kind": "CudaError", "message": "cuStreamSynchronize failed: "
                                "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access"},
                               False, 3, "", 60)
    assert status == "fault" and "CUDA context is lost" in message
    assert _failure(None, True, -9, "", 60)[0] == "timeout"
    assert "no progress for 60 s" in _failure(None, True, -9, "", 60)[1]
    assert _failure({"kind": "LaunchError", "message": "needs 240 KB"}, False, 3, "", 60) == (
        "launch error", "needs 240 KB")
    assert _failure(None, False, -11, "Segmentation fault", 60)[0] == "fault"
    status, message = _failure(None, False, 1, "Traceback: boom", 60)
    assert status == "error" and "boom" in message


def test_sizes_the_abi_cannot_pass_are_bad_input():
    assert parse_size(f"{2**31 - 1},1,1") == (2**31 - 1, 1, 1)
    with pytest.raises(HarnessError, match=r"size '3000000000': M = 3000000000 exceeds "
                                           r"2147483647: the GEMM ABI passes M, N and K as int"):
        parse_size("3000000000")


def test_a_kernel_refused_offline_at_every_size_gets_rows_and_no_worker(tmp_path, monkeypatch):
    """Grid limits are checked before any launch: a kernel that cannot launch at any size asked
    is never released to a worker (no GPU is needed to see that)."""
    import io

    from harness.kernels.registry import discover, select
    from harness.run import runner

    class Worker:  # takes the gated job: every line it is sent must be a skip
        def __init__(self, *args, **kwargs):
            pass

        def run(self, started=None, gate=None):
            lines = io.StringIO()
            lines.close = lambda: None
            gate.start(lines)
            gate.join()
            assert lines.getvalue() == "skip\n", lines.getvalue()
            return set()

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(runner, "WorkerProcess", Worker)
    (t16,) = select(discover(), ["03_smem_tiled:t16"])
    sizes = ((100000000,) * 3, (2000000, 2000000, 64))
    record = runner.run([t16], "sm_90", runner.RunOptions(sizes=sizes), tmp_path / "r.jsonl",
                        lambda line: None)
    assert [(r.status, r.size) for r in record.results] == [("launch error", s) for s in sizes]
    assert ("03_smem_tiled:t16 at 100000000x100000000x100000000 cannot launch: grid (6250000, "
            "6250000, 1) at 100000000x100000000x100000000: y = 6250000 exceeds 65535"
            in record.results[0].message)
    assert "y = 125000 exceeds 65535" in record.results[1].message
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 2


def test_a_loaded_kernel_refuses_a_grid_over_the_limits_before_launching():
    """The GPU side's last check (every launch goes through LoadedGemm.prepare), exercised on
    the CPU with a stand-in device: the same offline limits, with the device's SM count."""
    from types import SimpleNamespace

    from harness.archs import get_arch
    from harness.errors import LaunchError
    from harness.kernels.registry import discover, select
    from harness.kinds.gemm.gemm import LoadedGemm

    (t16,) = select(discover(), ["03_smem_tiled:t16"])
    gemm = object.__new__(LoadedGemm)
    gemm.device = SimpleNamespace(arch=get_arch("sm_90"), sm_count=132)
    gemm.kernel, gemm.registers, gemm.static_smem_bytes = t16, 32, 2048
    gemm._dynamic_limit = 48 * 1024
    assert gemm.prepare(4096, 4096, 4096).grid == (256, 256, 1)
    with pytest.raises(LaunchError, match=r"03_smem_tiled:t16 at 100000000x100000000x100000000 "
                                          r"cannot launch: grid \(6250000, 6250000, 1\) .*y = "
                                          r"6250000 exceeds 65535"):
        gemm.prepare(100000000, 100000000, 100000000)


@pytest.mark.parametrize(("at", "said"), [("256x256x256", "hung at 256x256x256: "),
                                          (None, "hung while its check battery ran: ")])
def test_a_hung_kernel_is_skipped_at_its_other_sizes_saying_where_it_hung(at, said):
    from harness.kernels.registry import discover, select
    from harness.run import process, runner

    (kernel,) = select(discover(), ["01_naive"])
    sizes = ((128,) * 3, (256,) * 3, (512,) * 3)
    kept = []
    worker = process.WorkerProcess([kernel], runner.RunOptions(sizes=sizes, timeout_s=5),
                            runner.RunRecord(), kept.append, lambda line: None, False, "run")
    worker.current, worker.at = kernel.name, at
    worker._record_unreported(None, True, -9, "")
    assert [r.status for r in kept] == ["timeout", "skipped", "skipped"]
    assert all(r.message.startswith(said) for r in kept[1:]), [r.message for r in kept]


FAKE_WORKER = '''
import json, sys, time
sys.stdin.read()
def emit(event, **fields):
    print("HARNESS-EVENT " + json.dumps({"event": event, **fields}), flush=True)
emit("device", name="fake")
emit("kernel_start", kernel="01_naive")
emit("progress", kernel="01_naive", stage="check values at 37x45x29", limit_s=1.5, show=False)
time.sleep(60)
'''


def test_a_hang_is_called_by_the_limit_of_the_stage_in_flight(tmp_path, monkeypatch):
    """The worker says how long each stage may go quiet (scaled with its launches' work): a
    kernel that hangs in a small check is called hung after that stage's limit, not after a
    fixed 300 s; the message names the stage."""
    from harness.kernels.registry import discover, select
    from harness.run import process, runner

    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    monkeypatch.setattr(process, "WORKER_COMMAND", (sys.executable, str(script)))
    (kernel,) = select(discover(), ["01_naive"])
    kept, lines = [], []
    t0 = time.monotonic()
    worker = process.WorkerProcess([kernel], runner.RunOptions(sizes=((128,) * 3,)),
                            runner.RunRecord(), kept.append, lines.append, False, "run")
    worker.run()
    assert time.monotonic() - t0 < 20
    (result,) = kept
    assert result.status == "timeout", result
    assert result.message.startswith("no progress for 2 s while check values at 37x45x29"), \
        result.message
    assert not any("check values" in line for line in lines)  # a heartbeat is not shown


def test_a_fixed_timeout_overrides_the_stage_limits(tmp_path, monkeypatch):
    from harness.kernels.registry import discover, select
    from harness.run import process, runner

    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER.replace("limit_s=1.5", "limit_s=600"))
    monkeypatch.setattr(process, "WORKER_COMMAND", (sys.executable, str(script)))
    (kernel,) = select(discover(), ["01_naive"])
    kept = []
    worker = process.WorkerProcess([kernel], runner.RunOptions(sizes=((128,) * 3,), timeout_s=1),
                            runner.RunRecord(), kept.append, lambda line: None, False, "run")
    worker.run()
    assert kept[0].status == "timeout" and "no progress for 1 s" in kept[0].message


def test_an_interrupt_takes_the_worker_with_it(tmp_path, monkeypatch):
    """A notebook's interrupt reaches only the Python process: the worker it started must not
    go on running on the GPU."""
    from harness.kernels.registry import discover, select
    from harness.run import process, runner

    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER.replace("limit_s=1.5", "limit_s=600"))
    monkeypatch.setattr(process, "WORKER_COMMAND", (sys.executable, str(script)))
    started = []
    real_popen = process.subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(process.subprocess, "Popen", popen)
    (kernel,) = select(discover(), ["01_naive"])

    def interrupt(line):
        raise KeyboardInterrupt

    worker = process.WorkerProcess([kernel], runner.RunOptions(sizes=((128,) * 3,)),
                            runner.RunRecord(), lambda r: None, interrupt, False, "run")
    monkeypatch.setattr(worker, "_on", lambda kind, event: interrupt(None))
    with pytest.raises(KeyboardInterrupt):
        worker.run()
    assert started and started[0].poll() is not None  # the worker was ended


def test_progress_on_a_terminal_keeps_one_status_line_and_elsewhere_every_line(monkeypatch):
    """A stage line replaces the one before it on a terminal, headed by the last counts; a
    result line stays. In a log every line stays, as it came."""
    import io

    from harness.cli.common import Progress
    from harness.run.record import time_left

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "200")
    tty = Tty()
    say = Progress(tty)
    say("[  3/120   9.8 s, ~6 min left] 01_naive 2048x2048x2048: 487 GFLOP/s")
    say("      01_naive 4096x4096x4096 computing the reference")
    say("      01_naive 4096x4096x4096 timing the kernel and cuBLAS interleaved")
    say("[  4/120  14.0 s, ~7 min left] 01_naive 4096x4096x4096: 500 GFLOP/s")
    text = tty.getvalue()
    assert text.count("computing the reference") == 1
    assert "\r\x1b[2K[3 of 120 rows, 9.8 s, ~6 min left] 01_naive 4096x4096x4096 timing" in text
    assert text.endswith("\r\x1b[2K[  4/120  14.0 s, ~7 min left] 01_naive 4096x4096x4096: "
                         "500 GFLOP/s\n")
    log = io.StringIO()
    Progress(log)("      01_naive 4096x4096x4096 computing the reference")
    assert log.getvalue() == "      01_naive 4096x4096x4096 computing the reference\n"
    assert time_left(10.0, 2, 120) == "" and time_left(10.0, 120, 120) == ""
    assert time_left(10.0, 10, 120) == ", ~110 s left"
    assert time_left(30.0, 10, 120) == ", ~6 min left"


GATED_WORKER = '''
import json, sys
job = json.loads(sys.stdin.readline())
def emit(event, **fields):
    print("HARNESS-EVENT " + json.dumps({"event": event, **fields}), flush=True)
emit("device", name="fake")
seen = []
for ref in job["kernels"]:
    emit("progress", kernel=ref["name"], stage="waiting for its compile", limit_s=60,
         show=False, gate=True)
    line = sys.stdin.readline().strip()
    seen.append([ref["name"], line])
    if line == "go":
        emit("kernel_start", kernel=ref["name"])
        emit("kernel_error", kernel=ref["name"], kind="LaunchError", message="fake: released")
with open(sys.argv[1], "w") as f:
    json.dump({"gated": job["gated"], "seen": seen, "rest": sys.stdin.read()}, f)
'''


def test_one_worker_measures_each_kernel_as_soon_as_it_is_compiled(tmp_path, monkeypatch):
    """One worker gets every kernel in a gated job and, before each, a line from the runner:
    ``go`` once it is compiled, ``skip`` for one whose rows the runner keeps (a compile
    error); the compile phase in the breakdown is the wait for the first kernel, the rest
    runs beside the worker."""
    import json
    from pathlib import Path

    from harness.kernels.registry import discover
    from harness.run import process, runner

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    script, seen = tmp_path / "gated_worker.py", tmp_path / "seen.json"
    script.write_text(GATED_WORKER)
    monkeypatch.setattr(process, "WORKER_COMMAND", (sys.executable, str(script), str(seen)))
    kernels = discover([Path(__file__).parent / "kernels" / "isolation"])
    sizes = ((128,) * 3, (256,) * 3)
    record = runner.run(kernels, "sm_90", runner.RunOptions(sizes=sizes), tmp_path / "r.jsonl",
                        lambda line: None)
    got = json.loads(seen.read_text())
    assert got["gated"] and got["rest"] == ""  # stdin closed after the last line
    assert got["seen"] == [[k.name, "skip" if k.name == "c_broken" else "go"] for k in kernels]
    status = {(r.kernel.name, r.size): r.status for r in record.results}
    assert len(status) == len(kernels) * len(sizes) == len(record.results)
    for (name, _), value in status.items():
        assert value == ("compile error" if name == "c_broken" else "launch error"), status
    assert record.phases["compile"] >= 0 and runner.COMPILE_BESIDE in record.phases


def test_device_facts_said_again_add_cublas_version_without_a_second_gpu():
    """A worker says its device as its session opens, then again with cuBLAS's version once
    its handle is open: one GPU, its facts completed, the first values kept."""
    from harness.run.record import RunRecord

    record = RunRecord()
    first = {"name": "H100", "uuid": "GPU-1", "host": "h", "clocks": {"sm": 1980}}
    record.saw(first, 0)
    record.saw({**first, "clocks": {"sm": 345}, "cublas_version": 130100}, 0)
    assert record.device == {**first, "cublas_version": 130100}
    assert record.devices == [{**first, "cublas_version": 130100, "index": 0}]
    record.saw({"name": "H100", "uuid": "GPU-2", "host": "h", "cublas_version": 1}, 1)
    assert record.device["uuid"] == "GPU-1" and len(record.devices) == 2


def test_a_worker_started_ahead_goes_to_a_run_on_one_gpu_or_is_ended(monkeypatch):
    """`harness run` starts its worker before reading its kernels (process.start_ahead),
    where the host shows an NVIDIA driver: a run whose worker sees every GPU takes it; a run
    pinned to a GPU ends it (it would hold a context on GPU 0); none starts without a driver."""
    from harness.run import process

    made, closed = [], []

    class Fake:
        def __init__(self):
            made.append(self)

        def close(self):
            closed.append(self)

    monkeypatch.setattr(process, "Started", Fake)
    monkeypatch.setattr(process, "_AHEAD", [])
    monkeypatch.setattr(process.os.path, "exists", lambda path: False)
    process.start_ahead()
    assert not made and process.take_ahead(None) is None
    monkeypatch.setattr(process.os.path, "exists", lambda path: path == process.NVIDIA_DEVICE)
    process.start_ahead()
    process.start_ahead()  # one at a time
    assert len(made) == 1 and process.take_ahead(None) is made[0] and not closed
    assert process.take_ahead(None) is None
    process.start_ahead()
    assert process.take_ahead(object()) is None and closed == [made[1]]


def test_a_job_hands_each_kind_its_sizes_as_named_dims():
    """The worker's kinds read a job's sizes as their kernels' dims by name (Job.problems),
    never as the runner's (m, n, k) slots: a GEMM's M, N, K; a buffers kernel's own dims,
    whatever it names them, without the slots' padding; the job's JSON carries them."""
    from harness.kernels.registry import discover, select
    from harness.run.protocol import Job, KernelRef

    (gemm,) = select(discover(), ["01_naive"])
    (softmax,) = select(discover(), ["cu/memory/softmax_04_pipelined.cu"])
    job = Job.from_json(Job((KernelRef.of(gemm),), ((64, 32, 16), (4096, 1024, 1))).to_json())
    assert [p.text for p in job.problems(gemm)] == ["M=64,N=32,K=16", "M=4096,N=1024,K=1"]
    dims = softmax.spec.buffers.dims
    assert [p.names for p in job.problems(softmax)] == [tuple(dims)] * 2
    assert job.problems(softmax, job.sizes[1:])[0].values == (4096, 1024)
