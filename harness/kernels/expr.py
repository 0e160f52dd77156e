"""Integer arithmetic from kernel specs, parsed into a tree and evaluated by walking it.

A kernel file is input: its formulas (grid, block, shared memory, constraints) are parsed with
``ast`` and only a small grammar is accepted; nothing in a spec runs as Python.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass

from harness.errors import SpecError


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_FUNCTIONS = {"cdiv": _cdiv, "min": min, "max": max, "gcd": math.gcd}
"""``gcd`` is bank arithmetic: a warp whose 32 threads store words ``s`` apart hits
``gcd(s, 32)`` times the same bank (the [model] wavefront keys use it)."""
GRAMMAR = ("integers, names, + - * // % & | ^ << >>, parentheses, cdiv(a, b), min(a, b), "
           "max(a, b), gcd(a, b)")


@dataclass(frozen=True)
class Expr:
    """One parsed spec formula; ``names`` are the variables it reads."""

    text: str
    tree: ast.expression
    names: frozenset[str]

    def __call__(self, env: Mapping[str, int]) -> int | bool:
        return _eval(self.tree.body, env, self.text)


def parse(text: str | int, *, allow_compare: bool = False) -> Expr:
    """Parse ``text`` (a formula, or a plain integer) or raise SpecError saying what is wrong."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise SpecError(f"expected a formula string or an integer, found {text!r}")
    text = str(text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise SpecError(f"formula {text!r} does not parse: {exc.msg}; allowed: {GRAMMAR}") from None
    names: set[str] = set()
    for node in ast.walk(tree):
        _check_node(node, text, allow_compare, names)
    return Expr(text, tree, frozenset(names))


def parse_using(raw, names: frozenset[str], fail, key: str, compare: bool = False) -> Expr:
    """``raw`` parsed as a formula that may read only ``names`` (``compare``: a condition,
    comparisons allowed); a problem raises ``fail(...)`` (the caller's error, naming its
    file) prefixed with ``key``. The one reading of a spec's formulas."""
    try:
        e = parse(raw, allow_compare=compare)
    except SpecError as exc:
        raise fail(f"{key}: {exc}") from None
    if e.names - names:
        raise fail(f"{key}: formula {e.text!r} uses {', '.join(sorted(e.names - names))}; it "
                   f"may use only {', '.join(sorted(names))}")
    return e


def _check_node(node: ast.AST, text: str, allow_compare: bool, names: set[str]) -> None:
    allowed: tuple[type, ...] = (
        ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Name, ast.Load,
        ast.Call, *tuple(_BINARY),
    )
    if allow_compare:
        allowed += (ast.Compare, ast.BoolOp, ast.And, ast.Or, *tuple(_COMPARE))
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int):
            raise SpecError(f"formula {text!r}: only integer constants are allowed, "
                            f"found {node.value!r}")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise SpecError(f"formula {text!r}: unknown function; allowed: "
                            f"{', '.join(_FUNCTIONS)}")
        if node.keywords or len(node.args) != 2:
            raise SpecError(f"formula {text!r}: {node.func.id}() takes exactly two arguments")
        return
    if isinstance(node, ast.Name):
        if node.id not in _FUNCTIONS:
            names.add(node.id)
        return
    if not isinstance(node, allowed):
        what = "comparison" if isinstance(node, (ast.Compare, ast.BoolOp)) else type(node).__name__
        raise SpecError(f"formula {text!r}: {what} is not allowed here; allowed: {GRAMMAR}"
                        + ("" if not allow_compare else ", comparisons, and, or"))


def _eval(node: ast.AST, env: Mapping[str, int], text: str) -> int | bool:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        try:
            return env[node.id]
        except KeyError:
            raise SpecError(f"formula {text!r} uses {node.id!r}, which is not defined; "
                            f"defined: {', '.join(sorted(env))}") from None
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env, text), _eval(node.right, env, text)
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0:
            raise SpecError(f"formula {text!r} divides by zero with {dict(env)}")
        if isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= right < 64:
            raise SpecError(f"formula {text!r} shifts by {right} with {dict(env)}; "
                            "expected a shift of 0..63")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Call):
        args = [_eval(a, env, text) for a in node.args]
        if node.func.id == "cdiv" and args[1] == 0:
            raise SpecError(f"formula {text!r} divides by zero with {dict(env)}")
        return _FUNCTIONS[node.func.id](*args)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, text)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _eval(comparator, env, text)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, env, text) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    raise SpecError(f"formula {text!r}: cannot evaluate {type(node).__name__}")


def formula_list(table: Mapping, key: str, names: frozenset[str], fail,
                 compare: bool = False) -> tuple[Expr, ...]:
    """``table[key]`` (absent: none), a list of formulas each read by :func:`parse_using`:
    a spec's ``block``, ``grid`` and ``constraints``."""
    raw = table.get(key, [])
    if not isinstance(raw, list):
        raise fail(f"{key} must be a list, found {raw!r}")
    return tuple(parse_using(item, names, fail, key, compare) for item in raw)


_SIZE_SPLIT = re.compile(r"(?<=[\d)])\s*x\s*(?=[\d(])")


def size_formulas(raw, dims: tuple[str, ...], fail, where: str) -> tuple[Expr, ...]:
    """One size of named dims: ``"1<<28"``, ``"4096x1024"`` or a list of formulas, one per
    dim (constants, each at least 1)."""
    parts = raw if isinstance(raw, list) else (_SIZE_SPLIT.split(raw) if isinstance(raw, str)
                                                else [raw])
    if len(parts) != len(dims):
        example = "x".join("4096" for _ in dims)
        raise fail(f"{where}: {raw!r} gives {len(parts)} value(s) for the {len(dims)} dim(s) "
                   f"{' x '.join(dims)}; write one per dim, as \"{example}\"")
    out = tuple(parse_using(p, frozenset(), fail, where) for p in parts)
    for e in out:
        try:
            value = int(e({}))
        except SpecError as exc:
            raise fail(f"{where}: {exc}") from None
        if value < 1:
            raise fail(f"{where}: {e.text!r} is below 1")
    return out
