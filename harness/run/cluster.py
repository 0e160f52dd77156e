"""Kernels spread over the GPUs of a Dask cluster (``--cluster ADDRESS``, or ``local`` for a
cluster of this host's GPUs): one Dask task per kernel (with every size), each run by the same
worker process as on one GPU, on the GPU its Dask worker holds.

Each Dask worker (one thread; ``dask worker ADDRESS --nworkers G --nthreads 1`` for G GPUs, or
one ``CUDA_VISIBLE_DEVICES=i dask worker ...`` per GPU) holds one GPU of its host for as long
as it lives: the first free one, claimed by a lock file named by the GPU's UUID. A task
compiles its kernel on that host for that GPU (its own compile cache), then feeds it to a
worker process pinned to the GPU (multi.FedWorker), kept between tasks so that a run pays for
its start once per GPU; a fault or hang ends only that process. The rows come back as the task's
result and are streamed into the run's report as tasks complete. Kernel files inside the
project travel as paths relative to it (each host has its own checkout); files outside it must
lie at the same path on every host.

Dask is imported here only: ``pip install -e '.[cluster]'``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from harness.bench.result import Result
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, Kernel, project_relative
from harness.kernels.spec import read_spec
from harness.run import gpus as gpu_choice
from harness.run import runner
from harness.run.options import RunOptions
from harness.run.process import unrun
from harness.run.record import ResultStream, RunRecord

INSTALL = ("pip install -e '.[cluster]' (on a GPU host without a package registry: "
           "scripts/wheels.sh --cluster, docs/multi-gpu.md)")
START = ("start one with `dask scheduler`, then on each GPU host `dask worker ADDRESS "
         "--nworkers <its GPUs> --nthreads 1`")
Say = Callable[[str], None]


def distributed():
    """The ``distributed`` module; a HarnessError naming the install when it is missing."""
    try:
        import distributed as dist
    except ImportError as exc:
        raise _not_installed(exc) from None
    return dist


def _not_installed(why) -> HarnessError:
    return HarnessError(f"--cluster needs Dask distributed, which is not installed ({why}): "
                        f"{INSTALL}")


class Engine:
    """A client of a Dask scheduler, with the GPU each of its workers holds (``gpus``:
    worker address -> facts: index, uuid, name, arch, host). ``local``: a LocalCluster of one
    worker process per GPU of this host, closed with the engine; it starts in a thread, so
    that its start (Dask's import, the worker processes, each one's first CUDA call) overlaps
    what the caller does before it hands out work (the tune's screening). Until then, what the
    caller needs to know of the GPUs (``known``, ``models``, ``describe()``) is this host's own
    view of them; ``gpus`` and ``run`` wait for the start."""

    def __init__(self, address: str, say: Say):
        self.say, self.address = say, address
        self.local = self.client = None
        self._gpus: dict[str, dict] | None = None
        self._shown: list[dict] = []
        self._starting: Future | None = None
        self._start_s = 0.0
        if address != "local":  # a remote cluster's GPUs are known only by asking its workers
            self._gpus = self._start(address)
            say(f"Dask: scheduler at {address} and its {len(self._gpus)} workers' GPUs ready "
                f"in {self._start_s:.1f} s")
            return
        if importlib.util.find_spec("distributed") is None:  # said now, not after screening
            raise _not_installed("no module named 'distributed'")
        shown = gpu_choice.visible_gpus()
        if not shown:
            raise HarnessError("--cluster local: expected GPUs on this host for a local "
                               "cluster of one worker per GPU, found none")
        host = socket.gethostname()
        self._shown = [{"index": g.index, "uuid": g.uuid, "name": g.name, "arch": g.arch,
                        "host": host, "host_gpus": len(shown)} for g in shown]
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dask-start")
        self._starting = pool.submit(self._start, address, len(shown))
        pool.shutdown(wait=False)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self, address: str, workers: int = 0) -> dict[str, dict]:
        """Start a local cluster of ``workers`` (or reach the scheduler at ``address``) and
        have every worker claim its GPU: the workers' GPUs. What it started is closed on
        error."""
        t0 = time.perf_counter()
        dist = distributed()
        try:
            if workers:
                self.local = dist.LocalCluster(n_workers=workers, threads_per_worker=1,
                                               processes=True, dashboard_address=None)
                address = self.local.scheduler_address
            try:
                self.client = dist.Client(address, timeout=30)
            except (OSError, TimeoutError) as exc:
                raise HarnessError(f"--cluster {address}: expected a Dask scheduler there, "
                                   f"could not reach one ({exc}); {START}") from None
            gpus = self._hold_gpus()
        except BaseException:
            self._shut()
            raise
        self._start_s = time.perf_counter() - t0
        return gpus

    @property
    def gpus(self) -> dict[str, dict]:
        """Worker address -> the facts of the GPU it holds; waits for a local cluster's start."""
        return self._ready()

    def _ready(self) -> dict[str, dict]:
        """The workers' GPUs once a local cluster's start is over: its error is raised here
        (the cluster closed), and its workers' GPUs must be of the models the caller was told."""
        if self._gpus is None:
            t0 = time.perf_counter()
            gpus = self._starting.result()
            waited_s = time.perf_counter() - t0
            held = _models(gpus.values())
            if sorted(held) != sorted(self.models):
                raise HarnessError(f"--cluster local: expected the workers to hold GPUs of "
                                   f"this host's models ({', '.join(self.models)}), they hold "
                                   f"{', '.join(held)}")
            self._gpus = gpus
            self.say(f"Dask: local cluster of {len(gpus)} workers and their GPUs ready in "
                     f"{self._start_s:.1f} s ({max(0.0, self._start_s - waited_s):.1f} s of it "
                     f"overlapped with this process's work, {waited_s:.1f} s waited for)")
        return self._gpus

    def close(self) -> None:
        """Close the client, and a local cluster once its start is over (a start that failed
        closed what it had started). Without a timeout: a LocalCluster.close(timeout=...) that
        runs out leaves the cluster "closing", and Dask's exit hook then waits 10 s on it."""
        if self._starting is not None:
            self._starting.exception()  # its error, if any, is raised where the GPUs are asked
        if self.client is None and self.local is None:
            return
        t0 = time.perf_counter()
        what = "local cluster" if self.local is not None else f"client of {self.address}"
        self._shut()
        self.say(f"Dask: {what} closed in {time.perf_counter() - t0:.1f} s")

    def _shut(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.local is not None:
            self.local.close()
            self.local = None

    def _hold_gpus(self) -> dict[str, dict]:
        """Every worker claims its GPU now, so that a worker without one is said before any
        kernel is sent."""
        answers = self.client.run(hold_gpu, on_error="return")
        if not answers:
            raise HarnessError(f"the Dask scheduler at {self.client.scheduler.address} has no "
                               f"workers; expected one per GPU: {START}")
        failed = {w: a for w, a in answers.items() if isinstance(a, BaseException)}
        if failed:
            worker, error = next(iter(failed.items()))
            raise HarnessError(f"{len(failed)} of {len(answers)} Dask workers hold no GPU "
                               f"(the first, {worker}: {error}); expected one worker per GPU")
        return answers

    @property
    def known(self) -> list[dict]:
        """The workers' GPUs as known without waiting: a local cluster's are this host's own
        view of its GPUs until its workers have answered."""
        return list(self._gpus.values()) if self._gpus is not None else self._shown

    @property
    def models(self) -> list[str]:
        """The GPU models of the workers, in the order first seen."""
        return _models(self.known)

    def describe(self) -> str:
        hosts = sorted({g["host"] for g in self.known})
        return (f"{len(self.known)} Dask workers on {len(hosts)} host(s) ({', '.join(hosts)}): "
                + ", ".join(f"{sum(g['name'] == m for g in self.known)} x {m}"
                            for m in self.models))

    def run(self, kernels: Sequence[Kernel], options: RunOptions, jsonl_path: Path, say: Say,
            reuse_baseline: bool = False, mode: str = "run") -> RunRecord:
        """runner.run over the cluster: every size of every kernel, a task per kernel; each
        result appended to ``jsonl_path`` as its task completes; the record's rows in one
        worker's order at the end."""
        if mode == "compare":
            raise HarnessError("compare times its kernels interleaved on one GPU; expected a "
                               "run without --cluster")
        from harness.run.multi import in_run_order

        self._ready()  # a local cluster's start is over (or its error raised)
        dist = distributed()
        options = options.seeded()  # one seed for every host: the run is replayed whole
        record = RunRecord(seed=options.seed)
        t0 = time.perf_counter()
        jsonl_path.parent.mkdir(parents=True, exist_ok=True)
        run_id = uuid.uuid4().hex[:8]
        with jsonl_path.open("a") as sink:
            keep = ResultStream(record, sink, len(kernels) * len(options.sizes), say, t0,
                          name_gpu=True)
            futures = {self.client.submit(measure_kernel, _sent(kernel), options, reuse_baseline,
                                          mode, key=f"harness-{run_id}-{i}", pure=False): kernel
                       for i, kernel in enumerate(kernels)}
            try:
                for future in dist.as_completed(futures):
                    self._keep(future, futures[future], options, record, keep, say)
            except BaseException:
                self.client.cancel(list(futures))
                raise
            finally:
                self.client.run(release_worker, on_error="return")
        record.results = in_run_order(record.results, kernels, options.sizes)
        record.wall_s = time.perf_counter() - t0
        return record

    @staticmethod
    def _keep(future, kernel: Kernel, options: RunOptions, record: RunRecord,
              keep: Callable[[Result], None], say: Say = lambda _: None) -> None:
        try:
            out = future.result()
        except Exception as exc:  # the task itself failed (a Dask worker lost, a bug)
            for size in options.sizes:
                keep(unrun(kernel, size, "error", f"its Dask task failed: "
                            f"{type(exc).__name__}: {exc}"))
            return
        if out["device"]:
            record.saw(out["device"], out["gpu"]["index"])
        started = out.get("started")
        if started:  # the Dask worker started its fed worker for this task
            gpu = out["gpu"]
            say(f"      GPU {gpu['index']} of {gpu['host']} (Dask worker): its worker ready in "
                f"{started['worker_start_s']:.1f} s; the task screened its kernel in "
                f"{started['screen_s']:.1f} s")
        for name, seconds in out["phases"].items():
            record.phases[name] = record.phases.get(name, 0.0) + seconds
        for row in out["rows"]:
            keep(Result.from_json(row))


def _models(gpus) -> list[str]:
    return list(dict.fromkeys(g["name"] for g in gpus))


def _sent(kernel: Kernel) -> dict:
    """A kernel as a task carries it: its file relative to the project where it lies inside."""
    return {"name": kernel.name, "file": project_relative(kernel.spec.path),
            "params": kernel.params, "variant": kernel.variant, "explicit": kernel.explicit}


def _received(sent: dict) -> Kernel:
    path = Path(sent["file"])
    path = path if path.is_absolute() else PROJECT_ROOT / path
    return Kernel(sent["name"], read_spec(path), tuple(tuple(p) for p in sent["params"]),
                  sent["variant"], sent["explicit"])


# --- in a Dask worker process -------------------------------------------------------------

_HELD: dict = {}
"""This Dask worker's GPU (``gpu``, its lock file ``lock``) and its fed worker (``fed``)."""


def hold_gpu() -> dict:
    """The GPU this Dask worker holds, claimed on first use: the first of its host's GPUs no
    other worker holds (a lock file per GPU UUID, released when the process ends)."""
    if "gpu" not in _HELD:
        _HELD["gpu"] = _claim_gpu()
    return _HELD["gpu"]


def claims_folder() -> Path:
    return Path(tempfile.gettempdir()) / "kernel-harness-gpus"


def _claim_gpu() -> dict:
    import fcntl

    host = socket.gethostname()
    shown = gpu_choice.visible_gpus()
    if not shown:
        raise HarnessError(f"Dask worker on {host}: expected a GPU, the CUDA driver shows none")
    folder = claims_folder()
    folder.mkdir(parents=True, exist_ok=True)
    for gpu in shown:
        lock = (folder / f"{gpu.uuid}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        _HELD["lock"] = lock
        return {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "arch": gpu.arch,
                "host": host, "host_gpus": len(shown)}
    raise HarnessError(f"Dask worker on {host}: all {len(shown)} GPUs here are held by other "
                       f"workers; expected one worker per GPU (--nworkers {len(shown)})")


def measure_kernel(sent: dict, options: RunOptions, reuse_baseline: bool, mode: str) -> dict:
    """The Dask task: every size of one kernel on this worker's GPU. Returns the rows (JSON),
    the GPU's facts and the worker's phase seconds."""
    from harness.run.multi import WorkerStartError

    gpu = hold_gpu()
    t0 = time.perf_counter()
    kernel, rows = runner.screen(_received(sent), gpu["arch"], options.sizes)
    screen_s = time.perf_counter() - t0
    fed = _fed(gpu, options, reuse_baseline, mode)
    opens = fed.opens
    if not rows:
        fed.sink = rows.append  # this task's rows, as the worker gives them
        try:
            fed.measure(kernel)
        except WorkerStartError as exc:
            rows = [unrun(kernel, size, exc.status, f"no worker could start on GPU "
                           f"{gpu['index']} of {gpu['host']}: {exc.message}")
                    for size in options.sizes]
    phases, fed.record.phases = fed.record.phases, {}
    started = ({"screen_s": screen_s, "worker_start_s": fed.start_s}
               if fed.opens > opens else None)  # this task started the fed worker
    return {"rows": [r.to_json() for r in rows], "device": fed.record.device, "gpu": gpu,
            "phases": phases, "started": started}


def _fed(gpu: dict, options: RunOptions, reuse_baseline: bool, mode: str):
    """This Dask worker's fed worker for these options (a new run's options end the last)."""
    from harness.run.multi import FedWorker

    key = json.dumps([repr(options), reuse_baseline, mode])
    held = _HELD.get("fed")
    if held is not None and held[0] == key:
        return held[1]
    release_worker()
    share = gpu_choice.host_share(gpu.get("host_gpus", 1))
    pin = dataclasses.replace(gpu_choice.slot(gpu["index"], host_threads=share),
                              drop=nanny_environ())
    fed = FedWorker(pin, options, RunRecord(), lambda _: None, lambda _: None,
                    reuse_baseline, mode)
    _HELD["fed"] = (key, fed)
    return fed


def nanny_environ() -> tuple[str, ...]:
    """The variables a Dask nanny sets before it starts its worker (one BLAS thread, a malloc
    trim threshold), which the harness worker it feeds must not inherit."""
    import dask

    return tuple(dask.config.get("distributed.nanny.pre-spawn-environ", None) or {})


def release_worker() -> None:
    """End this Dask worker's fed worker (a run is over): its GPU memory is freed; the GPU
    stays held."""
    held = _HELD.pop("fed", None)
    if held is not None:
        held[1].close()
