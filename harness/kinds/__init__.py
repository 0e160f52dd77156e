"""The kinds of kernel the harness knows, found by name: ``kinds.get("gemm")``.

A kind is a folder: ``harness/kinds/<name>/__init__.py`` binds ``KIND``, an instance of
:class:`harness.kinds.base.Kind` whose ``name`` is the folder's. :func:`get` imports the folder
the first time a name is asked for, so the registry names no kind and imports none at module
level (which keeps the core free of import circles through the kinds). :func:`names` lists the
folders. A spec without a ``kind`` key is of kind :data:`DEFAULT`.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from pathlib import Path

from harness.errors import HarnessError
from harness.kinds.base import Baseline, Baselines, Column, Kind, Problem, parse_dims

__all__ = ["DEFAULT", "Baseline", "Baselines", "Column", "Kind", "Problem", "all_kinds", "get",
           "names", "of", "of_result", "of_row", "parse_dims", "split",
           "split_rows"]

DEFAULT = "gemm"
"""The kind of a kernel whose spec names none."""

_HERE = Path(__file__).parent
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_FOUND: dict[str, Kind] = {}


@functools.cache
def names() -> tuple[str, ...]:
    """Every kind's name: the packages beside this module, :data:`DEFAULT` first, then the
    others sorted. Read once a process: every spec parsed asks (the worker parses one per
    kernel), and the folder scan cost the H100's main job 1.1 s of its worker's main thread
    while the checks beside it held the interpreter (reports/h100/wall-sampled-331f253.txt.gz)."""
    found = sorted(m.name for m in pkgutil.iter_modules([str(_HERE)])
                   if m.ispkg and _NAME.match(m.name))
    return tuple(sorted(found, key=lambda n: n != DEFAULT))


def get(name: str) -> Kind:
    """The kind called ``name``; HarnessError naming the kinds there are otherwise."""
    kind = _FOUND.get(name)
    if kind is not None:
        return kind
    if not isinstance(name, str) or not _NAME.match(name) or name not in names():
        raise HarnessError(f"no kind {name!r}; the kinds are {', '.join(names())}")
    module = importlib.import_module(f"{__name__}.{name}")
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, Kind) or kind.name != name:
        raise HarnessError(f"harness/kinds/{name}/__init__.py must bind KIND to a Kind "
                           f"named {name!r}, found {kind!r}")
    _FOUND[name] = kind
    return kind


def all_kinds() -> tuple[Kind, ...]:
    """Every kind, in the order of :func:`names` (the default first)."""
    return tuple(get(n) for n in names())


def of(spec) -> Kind:
    """The kind of a KernelSpec (its ``kind`` field)."""
    return get(getattr(spec, "kind", None) or DEFAULT)


def of_result(result) -> Kind:
    """The kind of a result: the one its kernel names (schema 3), else the first that
    recognises it (older reports), else :data:`DEFAULT`."""
    named = getattr(result.kernel, "kind", "")
    if named:
        return get(named)
    for kind in all_kinds():
        if kind.name != DEFAULT and kind.recognises(result):
            return kind
    return get(DEFAULT)


def of_row(row: dict) -> Kind:
    """The kind of a profile report's row (a dict): the one it names, else the first that
    recognises it, else :data:`DEFAULT`."""
    if row.get("kind"):
        return get(row["kind"])
    for kind in all_kinds():
        if kind.name != DEFAULT and kind.recognises_row(row):
            return kind
    return get(DEFAULT)


def split_rows(rows) -> list[tuple[Kind, list]]:
    """Profile rows by kind, as :func:`split` does results."""
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(of_row(r).name, []).append(r)
    return [(k, groups[k.name]) for k in all_kinds() if k.name in groups]


def split(results) -> list[tuple[Kind, list]]:
    """``results`` by kind, each kind's rows in order; the default kind first, then the others
    as :func:`names` orders them; kinds with no rows left out."""
    groups: dict[str, list] = {}
    for r in results:
        groups.setdefault(of_result(r).name, []).append(r)
    return [(get(n), groups[n]) for n in names() if n in groups]
