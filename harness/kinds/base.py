"""What every kind of kernel is to the harness: a :class:`Kind`, its :class:`Problem` (named
dims) and its :class:`Baseline` objects.

A kind (a GEMM, a buffers kernel, a ceiling probe, attention) differs from the others in its
spec, its dims, its operands, its reference and battery, its FLOPs and compulsory bytes, its
figures and table columns and its baselines. Each kind is one package under ``harness/kinds/``
whose ``__init__`` binds ``KIND``, an instance of a :class:`Kind` subclass; the registry
(:mod:`harness.kinds`) finds it by the name a spec's ``kind = "..."`` key gives. The core
(session, runner, worker, timing, reports, CLI, API, pytest plugin) asks the kind object and
never compares a kind's name: adding a kind is adding a folder.

This module is the contract between the core and the kinds; it imports nothing of the harness
but its errors, so any module may import it without closing a circle. Its names are stable:
a kind written against them keeps working as the core moves.

The objects a kind receives and returns (a ``KernelSpec``, a ``Kernel``, a bench session, a
``Result``) are the core's; they are typed ``Any`` here so that this module stays at the bottom
of the import graph. Their meaning is given in each method's documentation.

Sizes. A kind names its dims (GEMM ``M, N, K``; softmax ``rows, cols``; attention
``B, H, S, D``) and parses ``--size`` text into a :class:`Problem` once, in
:meth:`Kind.read_size`, usually through :func:`parse_dims`, which reads the three spellings a
user types: ``4096`` (one value for every dim a kind allows to be square), ``2048x1024x512``
(or ``2048,1024,512``: the dims in the kind's order) and ``B=8,H=16,S=4096,D=128`` (by name,
any order, dims left out taking the kind's defaults).

Results. A result is a common core (kernel, problem, status, checks, timing, the baseline's
timing, clocks; ``harness.bench.result.Result``) plus the figures its kind owns: GEMM's
TFLOP/s, % of baseline and % of peak; a buffers kernel's GB/s, % of copy and % of DRAM.
:meth:`Kind.figures` computes them from the core; :meth:`Kind.columns` says how a table shows
them.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.kinds.dims import Problem, parse_dims

__all__ = ["Baseline", "Baselines", "Column", "Kind", "Problem", "parse_dims", "percent",
           "rate"]

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

    ``key`` names a figure of :meth:`Kind.figures`; ``header`` is printed (it may say
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


# --- the kind --------------------------------------------------------------------------------

class Kind(ABC):
    """One kind of kernel. Subclass it in ``harness/kinds/<name>/`` and bind ``KIND``.

    Required: :attr:`name`, :attr:`dims`, :meth:`parse_table`, :meth:`flops`,
    :meth:`compulsory_bytes`, :meth:`figures`, :meth:`columns`. The rest have defaults a kind
    overrides where it differs. Methods take the core's objects (typed ``Any`` here, see the
    module's documentation) and must not keep them.
    """

    name: str = ""
    """The spec's ``kind = "..."`` value and the folder's name."""
    title: str = ""
    """How messages name the kind (``GEMM``); its :attr:`name` when empty."""
    summary: str = ""
    """One line for ``harness list`` and the docs."""
    dims: tuple[str, ...] = ()
    """The dims' names, in the order ``2048x1024x512`` gives them."""
    square: bool = True
    """Whether one value (``--size 4096``) sets every dim."""
    commands: tuple[str, ...] = ("run", "check")
    """The commands that take this kind's kernels (``run``, ``check``, ``compare``, ``tune``,
    ``profile``; the API and pytest plugin follow ``run``/``check``); another command names
    :attr:`own_command` instead."""
    own_command: str = ""
    """The command of a kind the common commands do not take (``harness ceiling``)."""
    baselines: Baselines = Baselines()
    """Its baselines by name. A kind assigns its own registry (the default, shared by every
    kind that sets none, is empty and must not be added to)."""
    schema: int = 1
    """Version of this kind's part of the result JSON (its ``figures``); bump on a change."""
    headline_against: str = "of its baseline"
    """What a report index's headline says the % of baseline is of."""
    compare_mode: str = ""
    """How ``harness compare`` times this kind's baseline, replacing the report's "followed by
    cuBLAS of its types, its baseline" ("" keeps it)."""
    tune_baseline: str = ""
    """What a tune report says the baseline is ("" keeps the core's phrase)."""

    # --- spec ---------------------------------------------------------------------------
    @abstractmethod
    def parse_table(self, table: Mapping[str, Any], source: str, match: Any, path: Any,
                    fail) -> dict[str, Any]:
        """The ``KernelSpec`` fields of a kernel file whose spec says ``kind = <name>``.

        ``table`` is its parsed TOML, ``source`` the file's text, ``match`` the spec block's
        regex match (``match.end()`` is where the code starts), ``path`` the file; ``fail(msg)``
        returns the SpecError to raise (it names the file). A kind keeps its own parsed spec
        in the ``kind_spec`` field; it must set ``kind`` to :attr:`name`.
        """

    # --- sizes --------------------------------------------------------------------------
    def read_size(self, text: str, spec: Any = None) -> Problem:
        """``--size`` text as a problem of this kind (once, here); HarnessError otherwise.
        ``spec`` (a KernelSpec, or None for the kind at large) may supply defaults or
        constraints."""
        return parse_dims(text, self.dims, square=self.square)

    def default_sizes(self, spec: Any, *, quick: bool = False) -> tuple[Problem, ...]:
        """The sizes a kernel is run at when the user gives none."""
        return ()

    def dims_of(self, spec: Any) -> tuple[str, ...]:
        """The dims of a kernel of ``spec`` (a kind whose kernels name their own overrides
        this; by default the kind's :attr:`dims`)."""
        return self.dims

    def slots(self, spec: Any, problem: Problem) -> tuple[int, int, int]:
        """A problem as a run's ``(m, n, k)`` slots carry it to the worker and into a result
        (the transport of schema 2): its first three dims, padded with 1."""
        return (*problem.values, 1, 1, 1)[:3]  # type: ignore[return-value]

    def session_sources(self) -> tuple[str, ...]:
        """CUDA sources of the kernels this kind's session part needs, built beside a
        session's start-up (BenchSession ``ahead``)."""
        return ()

    def problem_of(self, result: Any) -> Problem:
        """The problem of a result (a ``Result`` of this kind, read from a report): its
        ``problem`` dims where it records them, else its first ``len(dims)`` of (m, n, k) (the
        reports of schema 2 and before, which padded every size into (M, N, K))."""
        dims = getattr(result, "problem", None)
        if dims:
            return Problem.from_json(dims)
        return Problem(tuple(zip(self.dims, (result.m, result.n, result.k), strict=False)))

    # --- the napkin ---------------------------------------------------------------------
    @abstractmethod
    def flops(self, spec: Any, problem: Problem) -> float:
        """The floating-point operations one launch performs (0 for a copy)."""

    @abstractmethod
    def compulsory_bytes(self, spec: Any, problem: Problem) -> float:
        """The bytes one launch must move to and from DRAM at the least (each input read
        once, each output written once)."""

    # --- measuring ----------------------------------------------------------------------
    def measure(self, session: Any, kernel: Any, problems: Iterable[Problem],
                options: Any) -> Iterator[Any]:
        """Check and time ``kernel`` at each problem in ``session`` (a bench session on one
        GPU), yielding one ``Result`` each. The default says the kind cannot be measured."""
        raise HarnessError(f"kind {self.name!r} has no measurement; "
                           f"use {self.own_command or 'its own command'}")

    # --- before the worker (run/runner.py) ---------------------------------------------
    launch_checked_offline: bool = False
    """Whether the runner refuses sizes a kernel of this kind cannot launch at before a
    worker sees it (from its grid and block formulas at the run's sizes)."""

    def compile_ahead(self, kernel: Any, arch: str, pool: Any) -> None:
        """Host work (on ``pool``, an executor) the worker would otherwise wait for, for a
        kernel that compiled: a SASS read, say. Errors are the worker's to report."""
        return None

    def compiled_ahead(self, kernels: list[Any], arch: str, pool: Any) -> None:
        """After every kernel of this kind went to :meth:`compile_ahead`: work for all of
        them (kernels they are held to, compiled)."""
        return None

    # --- in the worker (run/worker.py) ---------------------------------------------------
    # ``ctx`` is the worker's context: ``progress(name, size=None)`` (a ``say``), ``emit``,
    # ``rows()`` (an in-order row queue: ``add``, ``wait``), ``ended_well(ran)``,
    # ``kind_of(kernel)``, and the ``beside`` and ``prefetch`` executors. A "ran" is
    # ``(kernel name, rows)``; None tells the worker to end (a failed check or a fault).
    def open_for(self, session: Any, job: Any) -> None:
        """What a job of this kind opens in the session before its first kernel."""
        return None

    def run_kernel(self, session: Any, kernel: Any, job: Any, ctx: Any, after: Any = None,
                   before: Any = None) -> Any:
        """Every size of ``kernel`` (``job.sizes``, the run's slots), its rows emitted in
        order; ``before`` (the kernel before's ran) is waited for with
        ``ctx.ended_well(before)`` before this kernel's first launch."""
        raise HarnessError(f"a {self.name} kernel is not measured by the worker; "
                           f"{self.runs_it()} runs it")

    def compare_kernels(self, session: Any, kernels: list[Any], job: Any, ctx: Any) -> None:
        """``harness compare``: ``kernels`` (all of this kind) timed interleaved."""
        raise HarnessError(f"{self.name} kernels cannot be compared")

    def draw_ahead(self, kernel: Any, job: Any, sizes: Any, session: Any, ctx: Any) -> None:
        """On ``ctx.prefetch``, beside other work: the inputs ``kernel`` will need first."""
        return None

    # --- reading results ----------------------------------------------------------------
    @abstractmethod
    def figures(self, result: Any) -> dict[str, float | None]:
        """The figures this kind owns, from a result's core (its problem, timing, baseline
        timing, clocks): e.g. ``{"gflops": ..., "pct_baseline": ..., "pct_peak": ...}``.
        None or NaN for a figure that was not measured."""

    @abstractmethod
    def columns(self) -> tuple[Column, ...]:
        """The columns a result table shows for this kind, after the common ones."""

    def recognises(self, result: Any) -> bool:
        """Whether a result that does not name its kind (reports before schema 3) is one of
        this kind's; the registry tries each kind, the default kind last."""
        return False

    def power_gflops(self, result: Any, ms: float) -> float:
        """GFLOP/s at ``ms`` per launch (a power pass's); NaN where the kind counts none."""
        return math.nan

    def report_notes(self, results: list[Any]) -> list[str]:
        """Markdown bullet lines a run report says about this kind's rows (what the baseline
        is, what a % is of); none by default."""
        return []

    def table(self, results: list[Any], *, mode: str = "run", fmt: str = "github",
              wide: bool = False, width: int | None = None, console: bool = False,
              drop: tuple[str, ...] = ()) -> str:
        """This kind's rows as a table: ``mode`` run, check, compare or side (a compare
        report's side-by-side); ``fmt`` a tabulate
        format (``github`` for markdown); ``console`` the terminal's narrow table unless
        ``wide``; ``drop`` column keys to leave out. The default is a plain table of the
        kernel, its size, its status and :meth:`columns`."""
        header = ["kernel", "size", "status", *(c.header.replace(
            "{baseline}", "baseline") for c in self.columns())]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in results:
            figures = self.figures(r)
            cells = [r.kernel.name, self.problem_of(r).short, r.status]
            for c in self.columns():
                value = figures.get(c.key)
                cells.append("" if value is None or value != value else f"{value:.{c.digits}f}")
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)

    def size_text(self, result: Any) -> str:
        """A result's size as tables and logs print it (``4096x4096x4096``)."""
        return self.problem_of(result).short

    def rank(self, result: Any) -> float:
        """How a result ranks among results of the same problem (higher is faster): its
        GFLOP/s by default; a kind judged in bytes, its GB/s."""
        value = self.figures(result).get("gflops")
        return value if value is not None and value == value else 0.0

    def rate_text(self, result: Any) -> str:
        """A passing, timed result's speed in words (``512.3 TFLOP/s``, ``3012 GB/s``)."""
        gflops = self.figures(result).get("gflops") or 0.0
        return f"{gflops / 1e3:.1f} TFLOP/s"

    def describe(self, result: Any) -> str | None:
        """One line for a progress log of a passing, timed result (None: the core's line)."""
        return None

    def message_names_finding(self) -> bool:
        """Whether a failed result's message begins with its finding (else the plugin says
        it first)."""
        return True

    def plan(self, kernel: Any) -> Any:
        """The check battery of ``kernel`` derived from its spec alone (``harness check
        --plan``): an object with ``checks``, ``to_json()`` and ``table(width)``. A kind
        whose battery is the same for every kernel has none (``"plan"`` not in
        :attr:`commands`)."""
        raise HarnessError(f"a {self.name} kernel's battery is the same for every one: "
                           "--plan lists the batteries of kernels that derive theirs from "
                           "their spec")

    def baseline_name(self, spec: Any) -> str | None:
        """The baseline a kernel of ``spec`` is compared with, as tables name it."""
        return self.baselines.default_for(spec)

    def takes(self, command: str) -> bool:
        """Whether ``harness <command>`` (and the API's and plugin's equivalent) takes this
        kind's kernels."""
        return command in self.commands

    def __init__(self) -> None:
        self.title = self.title or self.name

    def runs_it(self) -> str:
        """The command a user runs this kind's kernels with, for messages (``harness run or
        check``, ``harness ceiling``)."""
        if self.own_command:
            return self.own_command
        return "harness " + " or ".join(self.commands[:2]) if self.commands else "no command"

    def __repr__(self) -> str:
        return f"<kind {self.name}>"
