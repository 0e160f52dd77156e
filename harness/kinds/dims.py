"""Sizes as named dims: a :class:`Problem` and :func:`parse_dims`, which reads ``--size`` text.

Part of the kinds' contract (:mod:`harness.kinds.base` re-exports both); imports nothing of the
harness but its errors.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError

# --- sizes as named dims ---------------------------------------------------------------------

_DIM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Problem:
    """One size of a kind's problem: its dims, by name, in the kind's order.

    ``Problem.of(M=4096, N=4096, K=4096)``; ``problem["M"]``; ``problem.names``;
    ``problem.text`` (``"M=4096,N=4096,K=4096"``, which :func:`parse_dims` reads back) and
    ``problem.short`` (``"4096x4096x4096"``, for tables). Immutable and hashable, so it may key
    a dict; equal problems have equal dims in the same order.
    """

    dims: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for name, value in self.dims:
            if not isinstance(name, str) or not _DIM_NAME.match(name):
                raise HarnessError(f"a dim's name must be an identifier, found {name!r}")
            if name in seen:
                raise HarnessError(f"dim {name} is named twice in {self.dims!r}")
            seen.add(name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise HarnessError(f"dim {name} must be a positive integer, found {value!r}")

    @classmethod
    def of(cls, **dims: int) -> Problem:
        """A problem from keyword dims, in the order given."""
        return cls(tuple(dims.items()))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.dims)

    @property
    def values(self) -> tuple[int, ...]:
        return tuple(value for _, value in self.dims)

    def as_dict(self) -> dict[str, int]:
        return dict(self.dims)

    def __getitem__(self, name: str) -> int:
        for key, value in self.dims:
            if key == name:
                return value
        raise KeyError(f"no dim {name!r} in {self.text} (dims: {', '.join(self.names)})")

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def get(self, name: str, default: int | None = None) -> int | None:
        return self[name] if name in self else default

    @property
    def text(self) -> str:
        """``M=4096,N=2048,K=512``: every dim by name (what ``--size`` reads back)."""
        return ",".join(f"{name}={value}" for name, value in self.dims)

    @property
    def short(self) -> str:
        """``4096x2048x512``: the values in order, for a table's size column."""
        return "x".join(str(v) for v in self.values)

    def __str__(self) -> str:
        return self.text

    def to_json(self) -> dict[str, int]:
        """An object of dim -> value, in order (JSON keeps the order of its keys)."""
        return self.as_dict()

    @classmethod
    def from_json(cls, data: Any) -> Problem:
        """From :meth:`to_json`'s object; HarnessError naming what was found otherwise."""
        if not isinstance(data, Mapping) or not data:
            raise HarnessError(f"a problem is an object of dim -> positive integer, found "
                               f"{data!r}")
        return cls(tuple((str(k), v) for k, v in data.items()))


def parse_dims(text: str, names: tuple[str, ...], *, square: bool = True,
               defaults: Mapping[str, int] | None = None, what: str = "size") -> Problem:
    """Read ``--size`` text into a :class:`Problem` with the dims ``names``, in that order.

    Three spellings: ``4096`` (every dim that value; only where ``square``), ``2048x1024x512``
    or ``2048,1024,512`` (every dim, in order), and ``B=8,H=16,S=4096,D=128`` (by name, any
    order; a dim left out takes ``defaults[name]``, and is an error without one). Names are
    matched exactly first, then without regard to case. HarnessError, saying what was expected,
    what was found and how to write it, for anything else.
    """
    if not names:
        raise HarnessError("a kind must name at least one dim")
    defaults = dict(defaults or {})
    spelled = " or ".join(
        (["N"] if square and len(names) > 1 else [])
        + ["x".join(names), ",".join(f"{n}=..." for n in names)])
    raw = text.strip().replace(" ", "")
    if not raw:
        raise HarnessError(f"{what} is empty; expected {spelled}")
    if "=" in raw:
        given: dict[str, int] = {}
        for part in raw.split(","):
            key, sep, value = part.partition("=")
            if not sep:
                raise HarnessError(f"{what} {text!r}: {part!r} has no '='; write every dim as "
                                   f"name=value ({spelled})")
            name = key if key in names else next(
                (n for n in names if n.lower() == key.lower()), None)
            if name is None:
                raise HarnessError(f"{what} {text!r}: no dim {key!r}; the dims are "
                                   f"{', '.join(names)}")
            if name in given:
                raise HarnessError(f"{what} {text!r}: {name} is given twice")
            given[name] = _positive(value, name, text, what)
        missing = [n for n in names if n not in given and n not in defaults]
        if missing:
            raise HarnessError(f"{what} {text!r}: {', '.join(missing)} not given (and no "
                               f"default); expected {spelled}")
        return Problem(tuple((n, given.get(n, defaults.get(n, 0))) for n in names))
    parts = raw.replace("x", ",").replace("X", ",").split(",")
    values = [_positive(p, names[min(i, len(names) - 1)], text, what)
              for i, p in enumerate(parts)]
    if len(values) == 1 and square:
        values *= len(names)
    if len(values) != len(names):
        raise HarnessError(f"{what} {text!r} has {len(values)} value(s); expected {spelled}")
    return Problem(tuple(zip(names, values, strict=True)))


def _positive(value: str, name: str, text: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise HarnessError(f"{what} {text!r}: {name} must be a positive integer, found "
                           f"{value!r}")
    return number
