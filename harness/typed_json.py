"""Typed records from JSON, read back whole or not at all.

A row is checked field by field against the records' type hints (:func:`record_of`), so that
a report written by hand, cut short or changed reads either whole or not at all, with one line
that says where and what (a :class:`~harness.errors.ReportError`): never a Python exception from
deep inside a table. Keys this harness does not know (a newer one adds fields) are ignored
everywhere. :func:`jsonable` is the way back: strict JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from dataclasses import fields
from typing import Any

from harness.errors import ReportError


def jsonable(value):
    """``value`` with non-finite floats as None and tuples as lists: strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


HINTS: dict[type, dict[str, Any]] = {}


def hints(cls: type) -> dict[str, Any]:
    """The type of each field of ``cls``; Any (the value as written) for every field of a
    record whose annotations cannot be resolved here (a name imported for type checkers
    only)."""
    if cls not in HINTS:
        try:
            HINTS[cls] = typing.get_type_hints(cls)
        except (NameError, TypeError):
            HINTS[cls] = {f.name: Any for f in fields(cls)}
    return HINTS[cls]


AT_LEAST: dict[tuple[type, str], float] = {}
"""Fields whose values below a bound no harness writes (a size of 0; a negative time), refused
on reading rather than divided by later: ``(record class, field name) -> bound``, filled by the
modules that define the records (bench/result.py)."""


def found(value) -> str:
    """A JSON value as an error message names it: its kind and, when short, itself."""
    if value is None:
        return "null"
    kind = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
            list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    if isinstance(value, (list, dict)):
        return f"{kind} of {len(value)}"
    text = json.dumps(value)
    return f"{text if len(text) <= 40 else text[:37] + '...'} ({kind})"


def expected(hint) -> str:
    """What a type hint asks for, in words."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(expected(a) for a in args)
    if hint is type(None):
        return "null"
    if dataclasses.is_dataclass(hint):
        return f"an object ({hint.__name__})"
    if origin is tuple:
        return f"a list of {len(args)}" if args and Ellipsis not in args else "a list"
    if origin is dict:
        return f"an object of {expected(args[1]) if len(args) == 2 else 'values'}"
    return {int: "a whole number", float: "a number", str: "a string", bool: "true or false",
            list: "a list", dict: "an object"}.get(hint, getattr(hint, "__name__", str(hint)))


def wrong(where: str, value, hint) -> ReportError:
    return ReportError(f"{where} is {found(value)}; expected {expected(hint)}")


@functools.cache
def shape(hint) -> tuple[Any, tuple]:
    """A type hint's origin and arguments (``dict[str, int]``: dict, (str, int))."""
    return typing.get_origin(hint), typing.get_args(hint)


def value_of(hint, value, where: str):
    """``value`` (from JSON) as the field typed ``hint`` holds it; ReportError when it is not
    one. Lists become tuples, null a NaN in float fields, non-finite floats NaN; a hint this
    reader does not know takes the value as written."""
    origin, args = shape(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return value_of(option, value, where)
            except ReportError as exc:
                if not str(exc).startswith(f"{where} is "):
                    raise  # a field inside the value: say which
        raise wrong(where, value, hint)
    if hint in HINTS or dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise wrong(where, value, hint)
        return record_of(hint, value, where)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise wrong(where, value, hint)
    if hint is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            if abs(value) < 2**63:  # no count the harness writes is larger
                return value
            raise ReportError(f"{where} is {found(value)}; expected a whole number below 2^63")
        raise wrong(where, value, hint)
    if hint is float:
        if value is None:
            return math.nan
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = float(value)
            return value if math.isfinite(value) else math.nan
        raise wrong(where, value, hint)
    if hint is str:
        if isinstance(value, str):
            return value
        raise wrong(where, value, hint)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise wrong(where, value, hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(value_of(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args and len(value) != len(args):
            raise ReportError(f"{where} is {found(value)}; expected a list of {len(args)}")
        return tuple(value_of(a, v, f"{where}[{i}]") for i, (a, v) in
                     enumerate(zip(args or [Any] * len(value), value, strict=True)))
    if origin is dict:
        if not isinstance(value, dict):
            raise wrong(where, value, hint)
        item = args[1] if len(args) == 2 else Any
        return {k: value_of(item, v, f"{where}.{k}") for k, v in value.items()}
    if origin is list or hint is list:
        if not isinstance(value, list):
            raise wrong(where, value, hint)
        return [value_of(args[0], v, f"{where}[{i}]") if args else v for i, v in enumerate(value)]
    return value


def record_of(cls, data: dict[str, Any], where: str = ""):
    """A dataclass from a JSON object: the fields it knows, each checked against its type
    hint; a field left out, or null where it has a default, takes its default; a field with
    no default must be there (null is NaN for a float)."""
    types_of, values = hints(cls), {}
    for f in fields(cls):
        here = f"{where}.{f.name}" if where else f.name
        required = (f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING)
        if f.name not in data:
            if required:
                raise ReportError(f"{here} is missing; expected {expected(types_of[f.name])}")
            continue
        value = data[f.name]
        if value is None and not required and types_of[f.name] is not float:
            continue
        value = value_of(types_of[f.name], value, here)
        least = AT_LEAST.get((cls, f.name))
        if least is not None and value < least:
            raise ReportError(f"{here} is {found(value)}; expected at least {least:g}")
        values[f.name] = value
    return cls(**values)
