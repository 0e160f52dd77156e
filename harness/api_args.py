"""What an API call's arguments become (harness/api.py): its problem sizes (N, "M,N,K" or
(M, N, K) for a GEMM, a kernel of its own dims read by its kind: ``1 << 28``,
``"4096x1024"``, ``(4096, 1024)``), which sizes its kernels run at, and its keywords as the
CLI's flags and RunOptions."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness import kinds
from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import Kernel
from harness.kinds import sizes as kernel_sizes
from harness.kinds.dims import Problem
from harness.report import files
from harness.run.runner import RunOptions, Size, parse_size

SizeLike = int | str | Sequence[int]
"""A problem size: ``N`` (square), ``"M,N,K"`` or ``(M, N, K)``; a buffers kernel's dims
(``1 << 28``, ``"4096x1024"``, ``(4096, 1024)``)."""


def _size(value: SizeLike) -> Size:
    """One problem size: N, "N", "M,N,K" or (M, N, K), checked as ``--size`` is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return parse_size(str(value))
    if isinstance(value, str):
        return parse_size(value)
    if isinstance(value, Sequence) and len(value) == 3 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return parse_size(",".join(map(str, value)))
    raise HarnessError(f"size {value!r}: expected N, 'M,N,K' or (M, N, K) with positive "
                       "integers")


def _sizes(sizes: Sequence[SizeLike] | SizeLike, read: Callable = _size,
           what: str = "N, 'M,N,K' or (M, N, K)") -> tuple:
    """Problem sizes, each as ``read`` (:func:`_size`) takes it; a lone N or "M,N,K" is one
    size."""
    if isinstance(sizes, int | str):
        sizes = [sizes]
    if not isinstance(sizes, Sequence) or not sizes:
        raise HarnessError(f"sizes {sizes!r}: expected a list of one or more sizes ({what})")
    return tuple(read(s) for s in sizes)


def dims_of(kernel: Kernel, value: SizeLike) -> Problem:
    """One size of a kernel of its own dims read by its kind, as ``--size`` is: ``1 << 28``,
    ``"1<<28"``, ``"4096x1024"`` (or ``"4096,1024"``), ``(4096, 1024)``."""
    dims = kernel_sizes.dims_of(kernel)
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    raw = (value.replace(",", "x") if isinstance(value, str) else str(value) if whole(value)
           else "x".join(str(v) for v in value) if isinstance(value, Sequence) and all(
               whole(v) for v in value) else None)
    why = (f"{kernel.name} is a {kinds.of(kernel.spec).title} kernel: its size is its dims, "
           f"{' x '.join(dims)}, not a GEMM's N or M,N,K")
    if raw is None:
        raise HarnessError(f"size {value!r}: expected an int per dim, as "
                           f"{'x'.join(['4096'] * len(dims))} ({why})")
    try:
        return kernel_sizes.read(kernel, raw)
    except HarnessError as exc:
        message = str(exc).replace("--size", f"size {value!r}", 1)
        raise HarnessError(f"{message.split(' (the dims of')[0]} ({why})") from None


def smallest_dims(kernel: Kernel) -> Problem:
    """The smallest of a kernel's own spec sizes (by elements)."""
    return min(kernel_sizes.own_problems(kernel), key=lambda p: math.prod(p.values))


# a call's sizes (a buffers kernel's dims padded with 1), whether buffers kernels run at their
# spec's instead (measure.run's own_sizes), and how many dims a size is shown with
Chosen = tuple[tuple[Size, ...], bool, int]


def _sizes_for(kernels: Sequence[Kernel], sizes, default: tuple[str, ...],
               together: bool = False) -> Chosen:
    """The sizes ``kernels`` run at: ``sizes``, else ``default`` for GEMMs and their spec's
    for buffers kernels; ``together`` (compare): buffers kernels of one set of dims only."""
    buffers = [k for k in kernels if kernel_sizes.has_own_sizes(k)]
    gemms = [k for k in kernels if not kernel_sizes.has_own_sizes(k)]
    if buffers and gemms and (together or sizes is not None):
        raise HarnessError(f"{buffers[0].name} is a buffers kernel, {gemms[0].name} a GEMM: " + (
            "compare them apart (compare times GEMMs or buffers kernels against each other)"
            if together else "a GEMM's size is N or M,N,K, a buffers kernel's its dims; give "
            "sizes to them apart (without sizes, each runs at its own)"))
    if not buffers or sizes is None and gemms:
        return _sizes(default if sizes is None else sizes), True, 3
    shapes = {kernel_sizes.dims_of(k) for k in buffers}
    if len({len(d) for d in shapes}) > 1 or (together and len(shapes) > 1):
        raise HarnessError(("compare needs buffers kernels of the same dims" if together else
                            "sizes for buffers kernels of different dims: run them apart")
                           + "; found " + ", ".join(
                               f"{k.name} ({' x '.join(kernel_sizes.dims_of(k))})"
                               for k in buffers))
    first = buffers[0]
    problems = (kernel_sizes.own_problems(first) if sizes is None else
                _sizes(sizes, lambda s: dims_of(first, s), "a buffers kernel's dims"))
    return (tuple(kernel_sizes.slots(first, p) for p in problems), sizes is None,
            kernel_sizes.rank(first))


def _flags(function: Callable, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword options of a call (its locals), as the CLI's argparse destinations: the
    names its options are built from."""
    names = [p.name for p in inspect.signature(function).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {name: given[name] for name in names}


_TIMING_KEYWORDS = ("cold_l2", "budget_ms", "min_ms", "max_rel_se", "warmup_ms", "rest",
                    "isolated", "gap_ms", "power", "power_s")


def _run_options(flags: dict[str, Any], sizes, function: Callable, **given: Any) -> RunOptions:
    """The RunOptions of a call's keywords (``flags``): its timing from ``timing=`` or from
    the timing keywords (not both), checked as the CLI checks its flags; its report folder
    checked writable."""
    if flags.get("timing") is not None:
        defaults = {p.name: p.default for p in inspect.signature(function).parameters.values()}
        mixed = [k for k in _TIMING_KEYWORDS if k in flags and flags[k] != defaults[k]]
        if mixed:
            raise HarnessError(f"timing= and {', '.join(mixed)}: pass the timing as "
                               "TimingOptions (or a dict of its fields) or as keywords, not both")
        timing = TimingOptions.of(flags["timing"])
    else:
        timing = TimingOptions.from_flags(flags)
    options = RunOptions(sizes=sizes, timing=timing, timeout_s=flags["timeout_s"],
                         strict_blas=flags["blas_strict"], seed=flags["seed"], **given)
    if flags.get("report_dir") is not None:
        files.check_writable_folder("--report-dir", Path(flags["report_dir"]))
    return options


def _call_args(chosen: Chosen, flags: dict[str, Any], function: Callable) -> str:
    """The call's sizes and the options it set, as Python (a report's command)."""
    defaults = {p.name: p.default for p in inspect.signature(function).parameters.values()}
    text = [f"sizes={['x'.join(map(str, s[:chosen[2]])) for s in chosen[0]]!r}"]
    text += [f"{name}={value!r}" for name, value in flags.items()
             if name not in ("quiet", "report_dir") and value != defaults.get(name)]
    return ", ".join(text)
