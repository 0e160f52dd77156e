"""Run, compare and tune reports read back: their ``.json``, or the ``.jsonl`` stream their rows
were appended to as they came (:func:`load_report`), and written (:func:`report_json`).

Every report the harness has written is read here: this schema's nested rows, the flat rows of
schema 1, and the JSON-lines stream a run appends its rows to as they come, each row checked
against the records' types (harness/typed_json.py).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.result import SCHEMA_VERSION, Result, result_from_json
from harness.errors import ReportError
from harness.report.names import KINDS, kind_of, report_key
from harness.typed_json import expected, found, jsonable


@dataclass(frozen=True)
class RunReport:
    """A saved run: its metadata and its results."""

    meta: dict[str, Any]
    results: list[Result]
    schema: int = SCHEMA_VERSION
    path: Path | None = None
    complete: bool = True
    """False for a stream of rows (``.jsonl``) that no finished report holds: the run was
    interrupted (or is still running), or the stream was cut mid-write."""
    notes: tuple[str, ...] = ()
    """What the reader left out or could not say, one sentence each (a torn last line)."""

    def describe_state(self) -> str:
        """"" for a complete report, else why it is not, in one sentence."""
        if self.complete:
            return ""
        return "incomplete: " + "; ".join(self.notes)


_META_FIELDS = {"gpu": str, "date_utc": str, "command": str, "git": dict, "device": dict,
                "timing": dict, "mode": str}
"""The fields of a report's ``meta`` that the readers use, with the type each must have."""
RUN_KINDS = ("run", "compare", "tune")
"""The reports ``load_report`` reads: those of harness run, compare and tune."""


def read_text(path: Path, errors: str = "strict") -> str:
    """A report file's text; a ``.gz`` one (``run-X.json.gz``, ``X.log.gz``: committed reports
    kept compressed, DEVELOPING.md) is read through gzip."""
    path = Path(path)
    if path.name.endswith(".gz"):
        return gzip.decompress(path.read_bytes()).decode("utf-8", errors=errors)
    return path.read_text(errors=errors)


def load_report(path: Path) -> RunReport:
    """The run, compare or tune report at ``path``: its ``.json``, or the ``.jsonl`` stream its
    rows were appended to as they came (read with the rows it holds; ``complete`` False where
    no finished report holds them). ReportError, in one line, for anything else."""
    path = Path(path)
    try:
        text = read_text(path)
    except (OSError, ValueError, EOFError) as exc:
        raise ReportError(f"cannot read the run report {path}: {exc}") from None
    if path.suffix == ".jsonl":
        return _load_stream(path, text)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        cut = " (cut short?)" if text.strip() and not text.rstrip().endswith("}") else ""
        raise ReportError(f"cannot read the run report {path}: not JSON{cut}: {exc}") from None
    if not isinstance(data, dict) or "rows" not in data:
        raise _not_a_run(path, data)
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise ReportError(f"{path}: schema is {found(schema)}; expected a whole number")
    if schema > SCHEMA_VERSION:
        raise ReportError(f"{path} has report schema {schema}; this harness reads up to "
                          f"{SCHEMA_VERSION}: update the harness")
    rows = data["rows"]
    if not isinstance(rows, list):
        raise ReportError(f"{path}: rows is {found(rows)}; expected a list of result rows")
    if "schema" not in data and rows and not any(isinstance(r, dict) and "m" in r
                                                  for r in rows):
        raise _not_a_run(path, data)
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise ReportError(f"{path}: meta is {found(meta)}; expected an object (the run's "
                          "date, command, GPU and timing)")
    for key, kind in _META_FIELDS.items():
        if meta.get(key) is not None and not isinstance(meta[key], kind):
            raise ReportError(f"{path}: meta.{key} is {found(meta[key])}; expected "
                              f"{expected(kind)}")
    results = [_row(path, f"row {i}", row) for i, row in enumerate(rows, 1)]
    return RunReport(meta, results, schema, path)


ROW_KEYS = ("kernel", "m", "n", "k")
"""What every result row holds (schema 1 and 2)."""


def _looks_like_row(row) -> bool:
    """Whether a stream's first line is a result row at all: a file of JSON lines with none of
    their keys (a trace, a log) is not a run's stream, and says so in one line."""
    return isinstance(row, dict) and any(key in row for key in ROW_KEYS)


def _row(path: Path, where: str, row) -> Result:
    try:
        return result_from_json(row)
    except ReportError as exc:
        raise ReportError(f"cannot read the run report {path}: {where}: {exc}") from None


def _not_a_run(path: Path, data) -> ReportError:
    """The one line for a JSON file that is not a run, compare or tune report."""
    key = report_key(path.name) or path.stem
    kind = kind_of(key)
    named = kind not in RUN_KINDS and (kind in KINDS or kind != key)
    what = (f"a report of kind '{kind}' (by its name)" if named else
            f"{found(data)} with no result rows (kernel, m, n, k)")
    return ReportError(f"{path} is not a run report: it holds {what}; harness report and "
                       "diff read the reports of harness run, compare and tune (their .json, or "
                       "the .jsonl stream of one)")


def _load_stream(path: Path, text: str) -> RunReport:
    """A run's JSON-lines stream: a row per line, as the results came. A last line with no
    newline after it that is not JSON was cut mid-write (the run was killed): the rows before
    it are kept and the report says which line. Any other line that is not JSON is left out
    and said the same way."""
    lines = text.split("\n")
    results, notes = [], []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as exc:
            if number == len(lines):
                notes.append(f"line {number} was cut mid-write (the run was stopped while "
                             "writing it) and is left out")
            else:
                notes.append(f"line {number} is not JSON ({exc}) and is left out")
            continue
        if not results and not _looks_like_row(row):  # another file of JSON lines
            raise _not_a_run(path, row)
        results.append(_row(path, f"line {number}", row))
    owner = path.with_name(f"{report_key(path.name) or path.stem}.json")
    if not notes and not owner.is_file():
        notes.append(f"a stream of {len(results)} rows with no {owner.name} beside it (the "
                     "run was interrupted, or is still running)")
    gpus = [r.gpu.name for r in results if r.gpu is not None and r.gpu.name]
    meta = {"gpu": gpus[0]} if gpus else {}
    return RunReport(meta, results, SCHEMA_VERSION, path, complete=not notes,
                     notes=tuple(notes))


def report_json(meta: dict[str, Any], results: Sequence[Result]) -> str:
    """The JSON text of a run report."""
    return json.dumps(jsonable({"schema": SCHEMA_VERSION, "meta": meta,
                                "rows": [r.to_json() for r in results]}),
                      indent=1, allow_nan=False) + "\n"
