"""Which GPUs a run uses: ``--gpus`` read and checked against the devices the driver shows the
harness, and the ``CUDA_VISIBLE_DEVICES`` that pins a worker process to one of them (the worker
then sees it as device 0)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.errors import HarnessError

_FORM = "expected all, or GPU indices separated by commas (0 or 0,2)"


@dataclass(frozen=True)
class GpuSlot:
    """One GPU a worker process is pinned to."""

    index: int
    """The device ordinal in the harness's numbering (what ``--gpus`` names)."""
    visible: str
    """``CUDA_VISIBLE_DEVICES`` for the worker: an ordinal, or the entry of the harness's own
    ``CUDA_VISIBLE_DEVICES`` at ``index`` (a UUID or a MIG instance stays as given)."""

    host_threads: int = 0
    """The host threads its numpy (float64 references) may use: the host's cores shared
    among the workers of one host; 0 leaves them as the environment has them."""
    drop: tuple[str, ...] = ()
    """Variables of the harness's environment the worker does not inherit: under Dask, those
    the nanny set for its own worker (``distributed.nanny.pre-spawn-environ``: one BLAS
    thread, ``MALLOC_TRIM_THRESHOLD_``). Inherited (the thread count alone replaced), they
    left the harness workers' checks 23% slower and their references 72% slower than with
    ``--gpus all`` on two H200s (the phases of run-20261126-115000 against -114821,
    reports/h200/multi-gpu-20261126-115144)."""

    def env(self, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
        """The worker's whole environment: ``environ`` less ``drop``, its GPU, and its share
        of the host's cores for the BLAS thread pools unless ``environ`` sets them (several
        workers each running a pool of every core slow each other's references)."""
        out = {k: v for k, v in environ.items() if k not in self.drop}
        out["CUDA_VISIBLE_DEVICES"] = self.visible
        if self.host_threads > 0:
            out.update({var: str(self.host_threads) for var in BLAS_THREAD_VARIABLES
                        if var not in out})
        return out


BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def host_share(workers: int, cores: int | None = None) -> int:
    """Each of ``workers`` worker processes' share of this host's cores (at least 1)."""
    return max(1, (cores or os.cpu_count() or 1) // max(workers, 1))


@dataclass(frozen=True)
class VisibleGpu:
    """A device as the driver shows it to the harness."""

    index: int
    uuid: str
    name: str
    arch: str


def slot(index: int, environ: Mapping[str, str] = os.environ, host_threads: int = 0
         ) -> GpuSlot:
    """GPU ``index`` of the harness's numbering as a worker's pin. Under a
    ``CUDA_VISIBLE_DEVICES`` of the harness's own, device ``index`` is that list's entry
    ``index`` (CUDA numbers the visible devices in the list's order), not ordinal ``index``."""
    given = environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if given:
        entries = [e.strip() for e in given.split(",")]
        if index < len(entries):
            return GpuSlot(index, entries[index], host_threads)
    return GpuSlot(index, str(index), host_threads)


def parse_gpus(text: str) -> tuple[int, ...] | None:
    """``--gpus``'s indices in the order given, None for ``all``; anything else is bad input
    (before any GPU is asked)."""
    given = text.strip()
    if given == "all":
        return None
    try:
        indices = tuple(int(part) for part in given.split(","))
    except ValueError:
        raise HarnessError(f"--gpus {text!r}: {_FORM}") from None
    negative = [i for i in indices if i < 0]
    if negative:
        raise HarnessError(f"--gpus {text!r}: {_FORM}; got {negative[0]}, which is negative")
    repeated = sorted({i for i in indices if indices.count(i) > 1})
    if repeated:
        raise HarnessError(f"--gpus {text!r}: GPU {repeated[0]} is named twice; expected each "
                           "GPU once (two workers on one GPU would time each other's kernels)")
    return indices


def choose_gpus(text: str, shown: Sequence[VisibleGpu]) -> tuple[int, ...]:
    """``--gpus`` against the GPUs the driver shows: every one for ``all``, else the indices
    named, each of which must exist."""
    wanted = parse_gpus(text)
    if wanted is None:
        return tuple(g.index for g in shown)
    missing = [i for i in wanted if i >= len(shown)]
    if missing:
        have = "; ".join(f"{g.index}: {g.name}" for g in shown) or "none"
        raise HarnessError(f"--gpus {text}: there is no GPU {missing[0]}; expected indices from "
                           f"0 to {len(shown) - 1}: this host shows {len(shown)} ({have})")
    return wanted


def one_model(chosen: Sequence[int], shown: Sequence[VisibleGpu], why: str) -> None:
    """Refuse GPUs of several models where results are ranked against each other."""
    names = sorted({shown[i].name for i in chosen})
    if len(names) > 1:
        raise HarnessError(f"{why}: expected GPUs of one model, got {', '.join(names)}; pick "
                           "GPUs of one model with --gpus")


def visible_gpus() -> list[VisibleGpu]:
    """Every GPU the driver shows this process, in its order; empty where there is none."""
    from harness.gpu.driver import (
        device_arch_name,
        device_count,
        device_name,
        device_uuid,
        gpu_status,
    )

    if not gpu_status().found:
        return []
    return [VisibleGpu(i, device_uuid(i), device_name(i), device_arch_name(i))
            for i in range(device_count())]
