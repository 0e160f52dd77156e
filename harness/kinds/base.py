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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from harness.errors import HarnessError
from harness.kinds.dims import Problem, parse_dims
from harness.kinds.parts import Baseline, Baselines, Column, percent, rate

__all__ = ["Baseline", "Baselines", "Column", "Kind", "Problem", "parse_dims", "percent",
           "rate"]

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

    def library_facts(self, session: Any) -> dict:
        """Its baselines' libraries opened in ``session`` and their versions, for a report's
        facts (``{"cublas_version": ...}``)."""
        return {}

    def load(self, session: Any, kernel: Any, carveout_pct: int | None = None) -> Any:
        """``kernel`` compiled and loaded in ``session`` (once per session), as the kind
        launches it; its ``function``, ``registers``, ``static_smem_bytes`` and
        ``occupancy(*size)``."""
        raise HarnessError(f"a {self.name} kernel is loaded by its own measurement")

    def build_row(self, kernel: Any, arch: str, size: str | None,
                  limit_s: float | None = None) -> dict | None:
        """``harness build``'s row for ``kernel`` (compiled for ``arch``, its launch predicted
        at ``size``, the ``--size`` text, or its own default), for a kind that builds its
        kernels itself; None: the core's build (compiler/offline.py) at the run's slots."""
        return None

    def offline_rows(self, kernel: Any, arch: str, sizes: Sequence[str] = (),
                     limit_s: float | None = None) -> list[dict] | None:
        """``harness run`` without a GPU, for a kind that builds its kernels itself: a
        :meth:`build_row` at each size the run would take (``sizes``, the ``--size`` texts, or
        the kernel's own), the largest last; None: the core's offline run at the run's slots."""
        return None

    loads_for_the_driver: bool = False
    """Whether :meth:`load` gives what ``harness occupancy`` asks the driver about (its
    ``occupancy(m, n, k)``); a kind without it is predicted offline only."""

    def session_sources(self) -> tuple[str, ...]:
        """CUDA sources of the kernels this kind's session part needs, built beside a
        session's start-up (BenchSession ``ahead``)."""
        return ()

    launches_baseline: bool = False
    """Whether ``harness launch`` (and ``profile``) launches the baseline beside a kernel of
    this kind under the profiler (else the kernel alone)."""

    def launch_size(self, spec: Any) -> Problem:
        """The size ``harness launch`` uses without ``--size``: the largest of the spec's own
        sizes by default."""
        own = self.default_sizes(spec)
        if not own:
            raise HarnessError(f"a {self.name} kernel needs --size (its dims: "
                               f"{', '.join(self.dims_of(spec))})")
        return own[-1]

    def launch(self, kernel: Any, options: Any) -> Any:
        """``harness launch``: ``kernel`` checked, then launched ``options.repeats`` times
        between cuProfilerStart and cuProfilerStop (``options``: commands/launch.py's
        LaunchOptions, its ``size`` this kind's dims in order)."""
        raise HarnessError(f"a {self.name} kernel is not launched for a profiler; "
                           f"{self.runs_it()} runs it")

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
    # ``ctx`` is the worker's context: ``progress(name, problem=None)`` (a ``say``), ``emit``,
    # ``rows()`` (an in-order row queue: ``add``, ``wait``), ``ended_well(ran)``,
    # ``kind_of(kernel)``, and the ``beside`` and ``prefetch`` executors. A "ran" is
    # ``(kernel name, rows)``; None tells the worker to end (a failed check or a fault).
    def open_for(self, session: Any, job: Any) -> None:
        """What a job of this kind opens in the session before its first kernel."""
        return None

    def run_kernel(self, session: Any, kernel: Any, job: Any, ctx: Any, after: Any = None,
                   before: Any = None) -> Any:
        """Every size of ``kernel`` (``job.problems(kernel)``: the run's sizes as its dims, by
        name), its rows emitted in order; ``before`` (the kernel before's ran) is waited for with
        ``ctx.ended_well(before)`` before this kernel's first launch."""
        raise HarnessError(f"a {self.name} kernel is not measured by the worker; "
                           f"{self.runs_it()} runs it")

    def compare_kernels(self, session: Any, kernels: list[Any], job: Any, ctx: Any) -> None:
        """``harness compare``: ``kernels`` (all of this kind) timed interleaved."""
        raise HarnessError(f"{self.name} kernels cannot be compared")

    def draw_ahead(self, kernel: Any, job: Any, problems: Any, session: Any, ctx: Any) -> None:
        """On ``ctx.prefetch``, beside other work: the inputs ``kernel`` will need first, at
        ``problems`` (its dims by name)."""
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

    def recognises_row(self, row: dict) -> bool:
        """Whether a profile row (a dict) that does not name its kind is of this kind."""
        return False

    def napkin(self, kernel: Any, size: tuple[int, int, int]) -> dict:
        """``harness profile``'s prediction of a kernel at the run's slots ``size``: its
        napkin model's figures (compulsory and global bytes, ...); none by default."""
        return {}

    def profile_sections(self, rows: list[dict], fmt: str = "github") -> list[str]:
        """A profile report's tables of this kind's rows (markdown lines)."""
        return []

    def profile_row(self, name: str, info: dict, size: tuple[int, int, int], predicted: dict,
                    measured: dict, timings: dict, factor: float, **extra) -> dict:
        """One profiled kernel's report row (commands/profile.py): its napkin ``predicted``
        beside ncu's ``measured`` and the harness's ``timings`` per regime."""
        raise HarnessError(f"a {self.name} kernel is not profiled")

    def profile_legend(self) -> list[str]:
        """What this kind's profile tables' columns mean, beside the common legend."""
        return []

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
