"""Tables and prose that fit a terminal of :data:`WIDTH` columns (the CLI's default; ``--wide``
prints every column at its full width instead).

A table is narrowed by wrapping the columns that can wrap, in the order given: prose at its
spaces, names (kernels, reports) after their punctuation, so that a name still reads as one;
each down to a least width. Where that is not enough, the columns its caller names as the least
needed are left out, one at a time, and named (``--wide`` shows them). Numbers never wrap.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import NamedTuple

from tabulate import tabulate

WIDTH = 100
"""Columns of the terminal the CLI's tables and prose fit by default."""
NAME, TEXT = "name", "text"
"""How a column wraps: a name after its punctuation, text at its spaces."""
_BREAKS = re.compile(r"[^,:;\[\]+_/ -]*(?:[,:;\[\]+_/ -]+|$)")


def wrap_name(name: str, width: int) -> str:
    """``name`` in lines of at most ``width``, broken after ``, : ; [ ] + _ / -`` or a
    space where it can, and anywhere where a piece alone is longer."""
    if len(name) <= width or width < 1:
        return name
    lines, line = [], ""
    for piece in (p for p in _BREAKS.findall(name) if p):
        # a space a line would end on does not count
        while len(piece.rstrip()) > width:  # a piece longer than a line: cut it
            room = width - len(line)
            lines.append(line + piece[:room])
            line, piece = "", piece[room:]
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    line = line.rstrip()
    return "\n".join([*lines, line] if line else lines)


def wrap_text(text: str, width: int) -> str:
    """``text`` wrapped at its spaces to ``width`` (words longer than that cut)."""
    if len(text) <= width or width < 1:
        return text
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _width(cells: Sequence[str]) -> int:
    return max((len(line) for c in cells for line in str(c).split("\n")), default=0)


def widest(text: str) -> int:
    """The longest line of ``text``."""
    return max(map(len, text.split("\n")), default=0)


class Fitted(NamedTuple):
    text: str
    dropped: tuple[str, ...] = ()
    """The titles of the columns left out to fit (``--wide`` shows them)."""


def fit_table(headers: Sequence[str], rows: Sequence[Sequence], wrap: dict[int, tuple[str, int]],
              width: int | None = WIDTH, fmt: str = "simple", drop: Sequence[int] = ()
              ) -> Fitted:
    """``rows`` under ``headers`` (tabulate, numbers as written), no line wider than ``width``
    where wrapping and leaving columns out can make it so. The columns in ``wrap`` ({index:
    (NAME or TEXT, least width)}) are narrowed in their order there, each down to its least
    width; where that is not enough, the columns in ``drop`` are left out in their order, one
    at a time, each time from the unwrapped cells. ``width`` None: as it is (``--wide``)."""
    cells = [["" if c is None else str(c) for c in row] for row in rows]
    keep, dropped = list(range(len(headers))), []
    for attempt in range(len(drop) + 1):
        text = _wrapped([headers[i] for i in keep], [[r[i] for i in keep] for r in cells],
                        {keep.index(i): how for i, how in wrap.items() if i in keep},
                        width, fmt)
        if width is None or widest(text) <= width or attempt == len(drop):
            break
        keep.remove(drop[attempt])
        dropped.append(" ".join(headers[drop[attempt]].split()))
    return Fitted(text, tuple(dropped))


def simple(headers: Sequence[str], cells: Sequence[Sequence[str]], gap: int = 2) -> str:
    """tabulate's "simple" layout without its padding of titles: each column as wide as its
    widest line (title or cell), ``gap`` spaces apart, cells and titles of several lines
    top-aligned, no trailing spaces."""
    split_headers = [str(h).split("\n") for h in headers]
    split_rows = [[str(c).split("\n") for c in row] for row in cells]
    widths = [max([len(x) for x in split_headers[i]]
                  + [len(x) for row in split_rows for x in row[i]]) for i in range(len(headers))]
    sep = " " * gap

    def block(parts: list[list[str]]) -> list[str]:
        depth = max((len(p) for p in parts), default=1)
        return [sep.join(f"{(p[j] if j < len(p) else ''):<{w}}" for p, w in zip(
            parts, widths, strict=True)).rstrip() for j in range(depth)]

    lines = block(split_headers) + [sep.join("-" * w for w in widths)]
    for row in split_rows:
        lines += block(row)
    return "\n".join(lines)


def _wrapped(headers: list[str], cells: list[list[str]], wrap: dict[int, tuple[str, int]],
             width: int | None, fmt: str) -> str:
    def render() -> str:
        if fmt == "simple" and width is not None:
            return simple(headers, cells)
        return tabulate(cells, headers=headers, tablefmt=fmt, disable_numparse=True)

    text = render()
    if width is None:
        return text
    for column, (kind, least) in wrap.items():
        excess = widest(text) - width
        if excess <= 0:
            break
        title = _width([headers[column]])
        now = max(_width([r[column] for r in cells]), title)
        target = max(least, now - excess, title)
        if target >= now:
            continue
        wrapper = wrap_name if kind == NAME else wrap_text
        for r in cells:
            r[column] = wrapper(r[column], target)
        text = render()
    return text


def fit_text(text: str, width: int | None = WIDTH, indent: str = "  ") -> str:
    """Every line of ``text`` longer than ``width`` wrapped at its spaces, its continuation
    lines indented by ``indent`` more than its own; words are never cut (a long path stays
    whole). ``width`` None: as it is."""
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=lead + indent,
                             break_long_words=False, break_on_hyphens=False) or [line]
    return "\n".join(out)


def column_groups(columns: list[str], rows: list[list], width: int | None) -> str:
    """A table of many numeric columns within ``width``: as many columns as fit beside the
    first (the kernel), then the next ones under it, each group a table of its own."""
    if width is None:
        return tabulate(rows, headers=columns)
    groups: list[list[int]] = []
    for i in range(1, len(columns)):
        trial = [*(groups[-1] if groups else []), i]
        text = tabulate([[r[0], *(r[j] for j in trial)] for r in rows],
                        headers=[columns[0], *(columns[j] for j in trial)])
        if groups and max(map(len, text.splitlines())) <= width:
            groups[-1] = trial
        else:
            groups.append([i])
    return "\n\n".join(tabulate([[r[0], *(r[j] for j in g)] for r in rows],
                                headers=[columns[0], *(columns[j] for j in g)])
                       for g in groups)

