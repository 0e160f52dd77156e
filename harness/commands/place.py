"""Where a command's kernels are measured: this host's GPUs (one worker on GPU 0, or one per
GPU ``--gpus`` names) or the GPUs of a Dask cluster, as a :class:`Target` that measures."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.run.gpus import GpuSlot
from harness.run.runner import RunOptions, RunRecord

if TYPE_CHECKING:
    from harness.run.cluster import Engine

Say = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """The GPUs a command measures on."""

    gpu_name: str
    """The (first) GPU's model: where its reports go (``reports/<gpu>/``)."""
    arch: str
    """The compile target of that GPU."""
    where: str
    """The GPUs in words, for progress lines."""
    slots: tuple[GpuSlot, ...] | None = None
    """The worker pins on this host (``--gpus``); None, one worker on GPU 0."""
    engine: Engine | None = None
    """A Dask cluster's client (``--cluster``), open while the command runs."""

    def measure(self, kernels: Sequence[Kernel], options: RunOptions, jsonl_path: Path,
                say: Say, mode: str = "run", reuse_baseline: bool = False) -> RunRecord:
        """``harness.run.runner.run`` here (or the cluster's): every kernel at every size,
        each result appended to ``jsonl_path`` as it comes."""
        if self.engine is not None:
            return self.engine.run(kernels, options, jsonl_path, say,
                                   reuse_baseline=reuse_baseline, mode=mode)
        from harness.run import runner

        return runner.run(kernels, self.arch, options, jsonl_path, say,
                          reuse_baseline=reuse_baseline, mode=mode,
                          gpus=list(self.slots) if self.slots is not None else None)


def gpu(needs: str = "") -> Target:
    """GPU 0 of this host, one worker; NoGpu ("no GPU here (why): ``needs``") without one."""
    from harness.gpu.driver import device_arch_name, gpu_status

    name = gpu_status().require(needs)
    return Target(name, device_arch_name(), name)


def local(gpus: str | None = None, ranked: str | None = None) -> Target:
    """This host's GPUs that ``gpus`` names (``--gpus``: all, or indices; None, one worker on
    GPU 0), each with a worker pinned to it. ``ranked``: why GPUs of several models are refused
    (the command ranks their results against each other)."""
    if gpus is None:
        return gpu()
    from harness.run import gpus as choice

    shown = choice.visible_gpus()
    chosen = choice.choose_gpus(gpus, shown)
    if ranked:
        choice.one_model(chosen, shown, ranked)
    first = shown[chosen[0]]
    where = (f"GPU {first.index}, {first.name}" if len(chosen) == 1 else
             f"{len(chosen)} GPUs (" + "; ".join(f"{i}: {shown[i].name}" for i in chosen) + ")")
    share = choice.host_share(len(chosen))
    return Target(first.name, first.arch, where,
                  tuple(choice.slot(i, host_threads=share) for i in chosen))


@contextmanager
def cluster(address: str, say: Say, ranked: str | None = None) -> Iterator[Target]:
    """The GPUs of the Dask cluster at ``address`` (``local``: one worker per GPU of this
    host), open for the block. ``ranked``: why workers with GPUs of several models are
    refused."""
    from harness.run.cluster import Engine

    with Engine(address, say) as engine:
        if ranked and len(engine.models) > 1:
            raise HarnessError(f"--cluster {address}: {ranked}, so expected Dask workers with "
                               f"GPUs of one model, got {', '.join(engine.models)}")
        facts = engine.known[0]  # for local, this host's view: screening need not wait
        yield Target(facts["name"], facts["arch"], engine.describe(), engine=engine)
