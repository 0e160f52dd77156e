"""The API's records: what ``harness.kernel(...)``'s calls return, each rendering as the CLI's
table (``str()`` for a terminal, markdown and HTML for a notebook) and converting to plain
dicts: :class:`Build`/:class:`Builds` (``harness build``), :class:`Plans` (``harness check
--plan``), :class:`Results` (check, run, compare), :class:`KernelFailed`."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harness import kinds
from harness.bench.result import Result
from harness.errors import HarnessError
from harness.report import tables
from harness.report.width import WIDTH


class KernelFailed(HarnessError):
    """:meth:`Results.raise_for_status` found results that did not pass; ``results`` holds
    them all."""

    def __init__(self, message: str, results: Results):
        super().__init__(message)
        self.results = results


# --- records and their tables ----------------------------------------------------------------

class _Rendered:
    """A record or collection that renders as the CLI's table: ``str()`` for the terminal,
    markdown and HTML for notebooks."""

    def _render(self, fmt: str) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self._render("simple")

    def __repr__(self) -> str:
        return self._render("simple")

    def _repr_markdown_(self) -> str:
        return self._render("github")

    def _repr_html_(self) -> str:
        return self._render("html")


def _with_notes(table: str, notes: str, fmt: str) -> str:
    """``table`` followed by ``notes`` (the messages of what did not pass), in ``fmt``."""
    if not notes:
        return table
    if fmt == "html":
        return f"{table}\n<p>Not passed:</p>\n<pre>{html.escape(notes)}</pre>"
    gap = "\n\n" if fmt == "github" else "\n"
    return f"{table}\n\nNot passed:{gap}{notes}"


@dataclass(frozen=True)
class Build(_Rendered):
    """One kernel compiled offline for one arch (``harness build``): the ptxas report and the
    predicted occupancy at one problem size. ``status``: ok, cannot launch, compile error or
    skipped (below the kernel's min_arch), with ``message`` saying why."""

    kernel: str
    arch: str
    """The compile target: the arch asked for, or sm_90a where the kernel's min_arch says so."""
    file: str
    params: dict[str, int]
    status: str
    message: str
    registers: int | None = None
    static_smem_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_frame_bytes: int | None = None
    barriers: int | None = None
    block_threads: int | None = None
    block: tuple[int, ...] | None = None
    grid: tuple[int, ...] | None = None
    size: tuple[int, ...] | None = None
    dynamic_smem_bytes: int | None = None
    blocks_per_sm: int | None = None
    """Predicted by the offline calculator (harness.compiler.occupancy)."""
    occupancy_pct: float | None = None
    limiter: str | None = None
    compiler: str | None = None
    cached: bool | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Build:
        """A record from a row of :func:`harness.compiler.offline.build_row`."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: tuple(value) if isinstance(value, list) else value
                      for key, value in row.items() if key in known})

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The row ``harness build --json`` prints for this kernel."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self) if getattr(self, f.name) is not None}

    def _render(self, fmt: str) -> str:
        return Builds([self])._render(fmt)


class Builds(_Rendered, list[Build]):
    """The :class:`Build` of each kernel of a handle, in registry order."""

    @property
    def ok(self) -> bool:
        return all(b.status in ("ok", "skipped") for b in self)

    def to_rows(self) -> list[dict[str, Any]]:
        return [b.to_dict() for b in self]

    def _render(self, fmt: str) -> str:
        notes = "\n".join(f"- {b.kernel} ({b.arch}): {b.status}: {b.message}"
                          for b in self if b.status != "ok")
        # the terminal's str() fits 100 columns, as `harness build` prints; markdown and
        # HTML (a notebook's) keep every column
        width = WIDTH if fmt == "simple" else None
        return _with_notes(tables.build_table(self.to_rows(), fmt=fmt, width=width), notes, fmt)


class Plans(_Rendered, list[Any]):
    """The check battery (:class:`~harness.kinds.gemm.plan.Plan`) of each kernel of a handle, as
    ``harness check --plan`` prints it."""

    def to_rows(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self]

    def _render(self, fmt: str) -> str:
        text = "\n".join(p.table() for p in self)
        if fmt == "html":
            return f"<pre>{html.escape(text)}</pre>"
        return f"```text\n{text}```" if fmt == "github" else text


class Results(_Rendered, list[Result]):
    """The :class:`~harness.bench.result.Result` records of a check, run or compare (``mode``),
    as ``harness run`` writes them; ``report`` holds the (json, md) paths where a report was
    written, ``device`` the GPU's facts, ``wall_s`` the call's wall time."""

    def __init__(self, results: Iterable[Result] = (), mode: str = "run",
                 device: dict | None = None, report: tuple[Path, Path] | None = None,
                 wall_s: float = 0.0):
        super().__init__(results)
        self.mode, self.device, self.report, self.wall_s = mode, device or {}, report, wall_s

    @property
    def passed(self) -> bool:
        """Every result passed (or was skipped on purpose)."""
        return all(r.passed for r in self)

    def failures(self) -> str:
        """The message of every result that did not pass, one line each ("" when none)."""
        return tables.failures(self)

    def raise_for_status(self) -> Results:
        """These results, or :class:`KernelFailed` with the messages of those that did not
        pass (a fault, a hang, a failed check, a compile error)."""
        if not self.passed:
            raise KernelFailed(self.failures(), self)
        return self

    def to_rows(self) -> list[dict[str, Any]]:
        """Plain dicts (the JSON of each result, as in a run report)."""
        return [r.to_json() for r in self]

    def _render(self, fmt: str) -> str:
        table = "\n\n".join(kind.table(rows, mode=self.mode, fmt=fmt)
                             for kind, rows in kinds.split(self)) or tables.table([], fmt=fmt)
        return _with_notes(table, self.failures(), fmt)
