"""A fuzz of the report readers: real committed reports, mutated at random (keys deleted,
values of the wrong type, records turned into lists, text cut short, lines of garbage), read
and rendered by everything that reads reports (load_report, diff, the tables, the ladder, the
index, the report and diff commands). The one exception allowed out is the harness's own
HarnessError, the one-line refusal; anything else is a reader that crashes on a bad report.
Plain ``random`` with fixed seeds: the same mutations every run."""

import copy
import json
import math
import random
import traceback

import pytest

from harness import cli
from harness.bench.result import Result
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, discover
from harness.report import diff, index, ladder, tables
from harness.report.reading import RunReport
from harness.report.reading import load_report as load
from harness.report.width import WIDTH
from harness.typed_json import jsonable

H100 = PROJECT_ROOT / "reports" / "h100"
SOURCES = {
    "run-20261124-130116.json": 11,  # schema 2, every kernel of its day
    "run-20261122-132342.json": 12,  # schema 1: flat rows
    "compare-20261126-141157.json": 13,  # comparisons and SASS mixes
    "tune-09_cp_async_ptx-20261122-181718.json": 14,
    "run-20261122-230540.json": 15,  # schema 1 with power and ceilings
    "profile-20261126-142031-sustained.jsonl": 16,  # a stream
}
ROUNDS = 70
"""Mutated reports per source."""
ROWS = 6
"""Rows kept of each source: enough of every kind of row, and fast."""
WRONG = ["big", "", -1, 0, 0.0, -1e-9, 1e308, 2**70, True, False, None, [], {}, [1, 2, 3],
         {"x": 1}, [[]], "NaN", math.nan, math.inf]
"""Values of the wrong type, or of the right type and the wrong range."""


def _nodes(tree, path=()):
    """Every (parent, key) in ``tree``: where a value can be changed."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield tree, key
            yield from _nodes(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield tree, i
            yield from _nodes(value, (*path, i))


def _mutate_tree(tree, rng: random.Random) -> str:
    """One random change to ``tree`` (in place), mostly inside a row (a report's metadata has
    more values than its rows); what it was, in words."""
    rows = tree.get("rows") if isinstance(tree, dict) else tree
    if isinstance(rows, list) and rows and rng.random() < 0.7:
        tree = rng.choice(rows)
    nodes = list(_nodes(tree))
    if not nodes:
        return "nothing to change"
    parent, key = rng.choice(nodes)
    how = rng.randrange(5)
    if how == 0 and isinstance(parent, dict):
        del parent[key]
        return f"deleted {key!r}"
    if how == 1:
        parent[key] = copy.deepcopy(rng.choice(WRONG))
        return f"{key!r} = {parent[key]!r}"
    if how == 2 and isinstance(parent, dict):
        parent[f"new_{rng.randrange(100)}"] = copy.deepcopy(rng.choice(WRONG))
        return "an unknown key"
    if how == 3:
        parent[key] = [parent[key]]
        return f"{key!r} put in a list"
    other_parent, other_key = rng.choice(nodes)
    parent[key], value = copy.deepcopy(other_parent[other_key]), parent[key]
    return f"{key!r} given the value of {other_key!r} (was {type(value).__name__})"


def _mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    how = rng.randrange(4)
    lines = text.split("\n")
    if how == 0:
        cut = rng.randrange(len(text) + 1)
        return text[:cut], f"cut at {cut}"
    if how == 1:
        at = rng.randrange(len(lines) + 1)
        garbage = rng.choice(["garbage", "{", "}", "[1, 2", "null", "42", "\x00", '{"m": 1}'])
        return "\n".join(lines[:at] + [garbage] + lines[at:]), f"line {at + 1} {garbage!r}"
    if how == 2:
        at = rng.randrange(len(text) or 1)
        return text[:at] + rng.choice('{}[]",:0a') + text[at + 1:], f"character {at}"
    at = rng.randrange(len(lines))
    return "\n".join(lines[:at] + lines[at + 1:]), f"line {at + 1} removed"


def _source(name: str):
    """The source report, its rows cut to ROWS: a JSON object, or a stream's rows."""
    text = (H100 / name).read_text()
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines()[:ROWS]]
    data = json.loads(text)
    data["rows"] = data["rows"][:ROWS]
    return data


def _text(name: str, tree) -> str:
    if name.endswith(".jsonl"):
        rows = tree if isinstance(tree, list) else [tree]
        return "".join(json.dumps(r) + "\n" for r in rows)
    return json.dumps(tree, indent=1)


def _read_everything(path, folder, deep: bool, capsys) -> None:
    """Everything that reads a report, on ``path`` in ``folder``; HarnessError from any of
    them is the one-line refusal and ends the reading. ``deep``: the ladder and the report
    and diff commands too."""
    for entry in index.entries(folder):  # never raises: an odd report gets a line
        assert entry.headline
    try:
        report = load(path)
    except HarnessError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    _render(report)
    if deep:
        try:
            ladder.text(report, path, WIDTH)
        except HarnessError:
            pass
        for args in (["report", str(path)], ["diff", str(path), str(path)]):
            assert cli.main(args) in (0, 2)
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) <= 1, err


def _render(report: RunReport) -> None:
    """What diff and the tables make of a report that was read."""
    results = report.results
    result = diff.diff(report, report)
    diff.text(result, WIDTH)
    diff.text(result)
    json.dumps(jsonable(diff.to_json(result)))
    for text in (tables.console_table(results), tables.table(results),
                 tables.table(results, fmt="github"), tables.check_table(results, width=WIDTH),
                 tables.compare_table(results), tables.compare_table(results, "simple", WIDTH),
                 tables.failures(results, WIDTH)):
        assert isinstance(text, str)


def _paths(tree, path=()):
    """The path of every value in ``tree``, a record's fields before their values."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield (*path, key)
            yield from _paths(value, (*path, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield (*path, i)
            yield from _paths(value, (*path, i))


def test_every_field_of_a_row_with_every_wrong_value(tmp_path):
    """Not random: each value of one row of a schema-2 run and of a schema-1 run, replaced by
    each wrong value in turn and deleted, is read or refused in one line, and what is read
    renders."""
    for name in ("run-20261122-230540.json", "compare-20261126-141157.json"):
        data = _source(name)
        row = data["rows"][0]
        for where in list(_paths(row)):
            for value in ["big", -1, 0, True, None, [], {"x": 1}, math.nan, "delete"]:
                tree = copy.deepcopy(row)
                *parents, last = where
                node = tree
                for part in parents:
                    node = node[part]
                if value == "delete":
                    if isinstance(node, list):
                        continue
                    del node[last]
                else:
                    node[last] = copy.deepcopy(value)
                try:
                    try:  # the row reader of load_report, without the file
                        result = Result.from_json(json.loads(json.dumps(tree)))
                    except HarnessError as exc:
                        assert "\n" not in str(exc), str(exc)
                        continue
                    _render(RunReport(data["meta"], [result], path=tmp_path / name))
                except Exception as exc:  # noqa: BLE001 - name the change that broke it
                    pytest.fail(f"{name}: {'.'.join(map(str, where))} = {value!r}: "
                                f"{type(exc).__name__} escaped:\n{traceback.format_exc()}")


@pytest.fixture
def registry_once(monkeypatch):
    """The ladder looks up each kernel's default parameters in the registry: read it once."""
    kernels = discover()
    monkeypatch.setattr(ladder, "discover", lambda: kernels)


@pytest.mark.parametrize("name", list(SOURCES))
def test_mutated_reports_are_read_or_refused_in_one_line(name, tmp_path, registry_once,
                                                         capsys):
    rng = random.Random(SOURCES[name])
    source = _source(name)
    folder = tmp_path / "h100"
    folder.mkdir()
    stem = name.split(".")[0].replace("-sustained", "")
    for n in range(ROUNDS):
        tree = copy.deepcopy(source)
        said = [_mutate_tree(tree, rng) for _ in range(rng.randrange(1, 4))]
        text = _text(name, tree)
        if rng.random() < 0.3:
            text, how = _mutate_text(text, rng)
            said.append(how)
        # a name of the source's kind (the index reads by kind), new each round
        path = folder / (f"{stem}-{n}.jsonl" if name.endswith(".jsonl") else f"{stem}-{n}.json")
        path.write_text(text)
        try:
            _read_everything(path, folder, deep=n % 10 == 0, capsys=capsys)
        except Exception as exc:  # noqa: BLE001 - the point: name the mutation that broke it
            pytest.fail(f"{name}, round {n} ({'; '.join(said)}): {type(exc).__name__} "
                        f"escaped:\n{traceback.format_exc()}")
        path.unlink()
