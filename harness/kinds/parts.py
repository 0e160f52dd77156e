"""Part of the kinds' contract (:mod:`harness.kinds.base` re-exports every name here): a
kind's :class:`Baseline` objects and their registry, and the :class:`Column` and figure
helpers its tables use. Imports nothing of the harness but its errors and dims."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.kinds.dims import Problem

# --- baselines -------------------------------------------------------------------------------

class Baseline(ABC):
    """What a kernel is measured against, timed by the same code on the same operands.

    A baseline is made by its kind for one kernel (its precision, layouts) and one problem,
    then: :meth:`prepare` once with the operands (allocating any workspace, building plans),
    :meth:`launch` once per timed repetition (asynchronous, on the stream the operands name:
    the timer owns the events), :meth:`close` once (freeing what prepare took; safe to call
    twice, and after a failed prepare). It is a context manager that closes on exit.

    ``name`` is what tables print ("cuBLAS", "cuBLASLt FP8", "CUB", "torch softmax",
    "driver copy"); ``compute`` names its arithmetic exactly (``CUBLAS_COMPUTE_32F``);
    :meth:`version` the library's version, recorded with every result.
    """

    name: str = ""
    compute: str = ""

    @abstractmethod
    def version(self) -> str:
        """The library's version as it reports it (``"cuBLAS 12.8.4"``); "" if unknown."""

    def unavailable(self) -> str:
        """Why this baseline cannot run here (a library missing, an arch too old); "" when it
        can. A kind skips an unavailable baseline with this reason, never silently."""
        return ""

    @abstractmethod
    def prepare(self, operands: Any) -> None:
        """Bind the kind's operands (device buffers, dims, stream) and set up to launch."""

    @abstractmethod
    def launch(self) -> None:
        """Enqueue one run on the operands' stream; no synchronisation."""

    @abstractmethod
    def close(self) -> None:
        """Free what :meth:`prepare` took; idempotent."""

    def __enter__(self) -> Baseline:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Baselines:
    """A kind's baselines by name: name -> a factory ``(spec, problem) -> Baseline``.

    The first registered is the default unless :meth:`default_for` is overridden by the kind
    through ``choose``. Names are matched without regard to case.
    """

    def __init__(self, factories: Mapping[str, Any] | None = None, *, choose=None) -> None:
        self._factories: dict[str, Any] = {}
        self._choose = choose
        for name, factory in (factories or {}).items():
            self.add(name, factory)

    def add(self, name: str, factory) -> None:
        if not name or name.lower() in (n.lower() for n in self._factories):
            raise HarnessError(f"baseline name {name!r} is empty or taken")
        self._factories[name] = factory

    def names(self) -> tuple[str, ...]:
        return tuple(self._factories)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in (n.lower() for n in self._factories)

    def factory(self, name: str):
        for key, factory in self._factories.items():
            if key.lower() == name.lower():
                return factory
        raise HarnessError(f"no baseline {name!r}; this kind has "
                           f"{', '.join(self._factories) or 'none'}")

    def default_for(self, spec: Any) -> str | None:
        """The name of the baseline a kernel of ``spec`` is compared with (None: none)."""
        if self._choose is not None:
            return self._choose(spec)
        return next(iter(self._factories), None)

    def make(self, name: str, spec: Any, problem: Problem) -> Baseline:
        return self.factory(name)(spec, problem)


# --- figures and columns ---------------------------------------------------------------------

@dataclass(frozen=True)
class Column:
    """One column a kind adds to a result table.

    ``key`` names a figure of ``Kind.figures``; ``header`` is printed (it may say
    ``"% of {baseline}"``, filled with the baseline's name by the table); ``digits`` the
    decimals shown; ``unit`` for CSV headers and docs.
    """

    key: str
    header: str
    digits: int = 1
    unit: str = ""


def rate(amount: float, ms: float | None) -> float:
    """Giga-units per second of ``amount`` done in ``ms``; NaN for no time or one not > 0."""
    return amount / (ms * 1e6) if ms is not None and ms > 0 else math.nan


def percent(value: float | None, of: float | None) -> float:
    """``value`` in percent of ``of``; NaN where either is unknown or ``of`` is not > 0."""
    if value is None or of is None or not of > 0:
        return math.nan
    return 100.0 * value / of
