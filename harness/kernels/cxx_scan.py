"""A scanner of C++ source at namespace scope, for finding host code (hostcode.py): the text
with comments, literals and directives blanked (:func:`mask`), and the declarations in it
(:func:`declarations`), found by their braces, parentheses and semicolons. Not a C++ parser.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_CONTAINER = re.compile(r"^(?:inline\s+)?namespace\b[\w\s:]*$|^extern\s*\"[\s\w+]*\"$")
_CLASS_HEAD = re.compile(r"^(?:typedef\s+)?(?:struct|class|union|enum)\b")


@dataclass(frozen=True)
class Decl:
    """A declaration at namespace scope: its span in the text, and its head (what comes before
    its body's ``{``, or all of it) with comments, literals and directives blanked."""

    start: int
    end: int
    head: str
    kind: str
    """``function`` (a definition), ``class`` (struct, class, union, enum), ``other``."""


def declarations(masked: str, start: int, end: int) -> Iterable[Decl]:
    """The declarations between ``start`` and ``end`` at namespace scope, descending into
    namespaces and ``extern "C" { }`` blocks."""
    i = start
    while i < end:
        while i < end and masked[i].isspace():
            i += 1
        if i >= end:
            return
        if masked[i] == "}":  # the end of the enclosing block
            i += 1
            continue
        depth, j = 0, i
        while j < end:
            char = masked[j]
            if char in "([":
                depth += 1
            elif char in ")]":
                depth -= 1
            elif char == ";" and depth <= 0:
                yield Decl(i, j + 1, masked[i:j + 1], "other")
                i = j + 1
                break
            elif char == "{" and depth <= 0:
                head = masked[i:j]
                close = matching_brace(masked, j, end)
                stripped = head.strip()
                if _CONTAINER.match(stripped):
                    yield from declarations(masked, j + 1, close)
                    i = close + 1
                    break
                bare = strip_template_prefix(head).strip()
                function = (not _CLASS_HEAD.match(bare) and not has_initializer(bare)
                            and re.search(r"\)[\s\w:&*<>,()\->]*$", bare) is not None)
                if function:
                    yield Decl(i, close + 1, head, "function")
                    i = close + 1
                    break
                # a class, an initializer, a brace-init variable: up to its ';'
                k = close + 1
                while k < end and masked[k] != ";":
                    k = matching_brace(masked, k, end) + 1 if masked[k] == "{" else k + 1
                yield Decl(i, min(k + 1, end), head,
                            "class" if _CLASS_HEAD.match(bare) else "other")
                i = min(k + 1, end)
                break
            elif char == "}" and depth <= 0:  # an unbalanced close: leave the rest alone
                return
            j += 1
        else:
            return


def matching_brace(masked: str, open_at: int, end: int) -> int:
    depth = 0
    for k in range(open_at, end):
        if masked[k] == "{":
            depth += 1
        elif masked[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return end - 1


def mask(source: str) -> str:
    """``source`` with comments, string and character literals' contents and preprocessor
    directives replaced by spaces (newlines kept): what is left is code, position for
    position."""
    out = list(source)
    n, i = len(source), 0
    at_line_start = True

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        char = source[i]
        if char == "\n":
            at_line_start = True
            i += 1
            continue
        if at_line_start and char in " \t":
            i += 1
            continue
        if at_line_start and char == "#":  # a directive, with its continuation lines
            j = i
            while j < n and source[j] != "\n":
                if source.startswith("/*", j):
                    close = source.find("*/", j + 2)
                    j = n if close < 0 else close + 2
                    continue
                if source[j] == "\\" and j + 1 < n and source[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            blank(i, j)
            i = j
            continue
        at_line_start = False
        if source.startswith("//", i):
            j = source.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif char == '"':
            raw = re.search(r"(?:\b|^)(?:u8|u|U|L)?R$", source[max(0, i - 3):i])
            if raw:
                close_paren = source.find("(", i)
                delimiter = source[i + 1:close_paren] if close_paren > 0 else ""
                j = source.find(")" + delimiter + '"', close_paren)
                j = n if j < 0 else j + len(delimiter) + 2
            else:
                j = i + 1
                while j < n and source[j] not in '"\n':
                    j += 2 if source[j] == "\\" else 1
                j += 1
            blank(i + 1, j - 1)
            i = j
        elif char == "'":
            before = source[i - 1] if i else ""
            if before.isalnum() and not re.search(r"(?:\b|^)(?:u8|u|U|L)$",
                                                  source[max(0, i - 3):i]):
                i += 1  # a digit separator (1'000'000)
                continue
            j = i + 1
            while j < n and source[j] not in "'\n":
                j += 2 if source[j] == "\\" else 1
            blank(i + 1, j)
            i = j + 1
        else:
            i += 1
    return "".join(out)


def strip_template_prefix(head: str) -> str:
    """``head`` without its leading ``template <...>`` clauses (nested angle brackets)."""
    while True:
        match = re.match(r"\s*template\s*<", head)
        if not match:
            return head
        depth, i = 1, match.end()
        while i < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[i], 0)
            i += 1
        head = head[i:]


def has_initializer(head: str) -> bool:
    text = re.sub(r"operator\s*[^\s(]+", "operator", head)
    depth = 0
    for i, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif (char == "=" and depth == 0 and text[i - 1:i] not in ("=", "<", ">", "!")
              and text[i + 1:i + 2] != "="):
            return True
    return False
