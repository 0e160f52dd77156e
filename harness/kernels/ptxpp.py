"""PTX macros: tile parameters and repetition in hand-written PTX, expanded before assembling.

ptxas reads no preprocessor directives, so a hand-written PTX kernel with variants would be a
copy per variant, and a warp tile of 32 ``mma`` instructions 32 typed-out lines. Here a line whose
first non-blank character is ``#`` (outside a ``/* */`` comment) is a directive of the harness:

    #set NAME = EXPR                         a constant for the lines below
    #default NAME = EXPR                     the same, unless NAME is already a parameter or
                                             set (a shared body's optional knob)
    #for NAME in range([START,] STOP[, STEP])  ...  #endfor
    #if EXPR  ...  #elif EXPR  ...  #else  ...  #endif
    #error TEXT                              stop with TEXT (say which parameters are wrong)
    #include "FILE"                          the lines of FILE (a path relative to this file;
                                             ``.ptxh`` files are not kernels of the registry)
    #macro NAME(P, ...)  ...  #endmacro      lines to repeat elsewhere (defined at top level)
    #call NAME(EXPR, ...)                    the macro's lines with its parameters bound, and
                                             CALL = a number unique to this call (for labels)

and ``${EXPR}`` anywhere in another line is replaced by the value of EXPR. A directive may end
with a comment after ``#`` (not ``//``, which is floor division in EXPR). EXPR is the spec
grammar of :mod:`harness.kernels.expr` (integers, names, ``+ - * // % & | ^ << >>``, cdiv, min, max;
comparisons with ``and``/``or`` in ``#if``); its names are the kernel's [params] as the variant
sets them, ``SM`` (the compile target: 80, 86, 89, 90), ``#set`` names and loop variables.
Nothing in a kernel file runs as Python.

Every output line remembers the source line and loop values it came from, so an assembler
error on expanded line 4711 is reported at the line the author wrote.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from harness.errors import CompileError, SpecError
from harness.kernels import expr

_DIRECTIVE = re.compile(r"^\s*#\s*(?P<word>[a-z]+)\b\s*(?P<rest>.*?)\s*$")
_SET = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<expr>.+)$")
_FOR = re.compile(r"^(?P<name>[A-Za-z_]\w*)\s+in\s+range\((?P<args>.*)\)$")
_SUBST = re.compile(r"\$\{(?P<expr>[^}]*)\}")
_INCLUDE = re.compile(r'^"(?P<file>[^"]+)"$')
_MACRO = re.compile(r"^(?P<name>[A-Za-z_]\w*)\((?P<args>.*)\)$")
_MAX_INCLUDE_DEPTH = 8
SYNTAX = ("#set NAME = EXPR; #default NAME = EXPR; #for NAME in range([START,] STOP[, STEP]) "
          "... #endfor; #if EXPR ... [#elif EXPR ...] [#else ...] #endif; #error TEXT; "
          "#include \"FILE\"; #macro NAME(P, ...) ... #endmacro; #call NAME(EXPR, ...); "
          "${EXPR} in a line; a directive may end with a # comment")


@dataclass(frozen=True)
class Origin:
    """Where an expanded line came from: its source line and the loop values around it."""

    line: int
    bindings: tuple[tuple[str, int], ...] = ()
    path: Path | None = None
    """The included file the line is in; None for the kernel file itself."""

    def describe(self) -> str:
        loops = ", ".join(f"{name}={value}" for name, value in self.bindings)
        return f"line {self.line}" + (f" ({loops})" if loops else "")


@dataclass(frozen=True)
class Expanded:
    """The PTX ptxas reads, with the origin of each of its lines."""

    text: str
    origins: tuple[Origin, ...]
    sources: dict[Path | None, list[str]] = field(default_factory=dict)
    """The lines as written, per file (None: the kernel file), to show where an error is."""

    def written(self, origin: Origin) -> str:
        """The line ``origin`` points at, as written, stripped."""
        lines = self.sources.get(origin.path, [])
        return lines[origin.line - 1].strip() if 0 < origin.line <= len(lines) else ""

    def origin(self, line: int) -> Origin | None:
        """The origin of expanded line ``line`` (1-based), None past the end."""
        return self.origins[line - 1] if 0 < line <= len(self.origins) else None

    @property
    def changed(self) -> bool:
        """Whether any directive or substitution was applied."""
        return any(o.line != i for i, o in enumerate(self.origins, 1)) or any(
            o.bindings for o in self.origins)


@dataclass
class _Node:
    line: int
    kind: str  # text, set, for, if, error, include, macro, call
    path: Path | None
    text: str = ""
    name: str = ""
    exprs: tuple[expr.Expr, ...] = ()
    params: tuple[str, ...] = ()  # a macro's (and its calls') parameter names
    body: list[_Node] = field(default_factory=list)
    branches: list[tuple[expr.Expr | None, list[_Node]]] = field(default_factory=list)


def expand(source: str, params: Mapping[str, int], path: Path, arch: str | None = None
           ) -> Expanded:
    """Expand the directives and ``${...}`` of ``source`` (the file at ``path``) with
    ``params`` bound, and ``SM`` the compile target's number (90 for sm_90 and sm_90a) when
    ``arch`` is given; raise CompileError naming the file and line of anything wrong."""
    if arch is not None:
        params = {**params, "SM": int(re.match(r"sm_(\d+)", arch)[1])}
    sources: dict[Path | None, list[str]] = {None: source.splitlines()}
    nodes = _parse(sources[None], Path(path), None, sources, 0, {})
    out_text: list[str] = []
    out_origin: list[Origin] = []
    _emit(nodes, {**params, "CALL": 0}, (), Path(path), out_text, out_origin, [0])
    return Expanded("\n".join(out_text) + "\n", tuple(out_origin), sources)


def _comment_state(lines: list[str]) -> list[bool]:
    """For each line, whether it starts inside a ``/* */`` comment."""
    inside, states = False, []
    for line in lines:
        states.append(inside)
        i = 0
        while i < len(line):
            if inside:
                end = line.find("*/", i)
                if end < 0:
                    break
                inside, i = False, end + 2
            else:
                slash = line.find("//", i)
                start = line.find("/*", i)
                if start < 0 or (0 <= slash < start):
                    break
                inside, i = True, start + 2
    return states


def _parse(lines: list[str], kernel_path: Path, included: Path | None,
           sources: dict[Path | None, list[str]], depth: int,
           macros: dict[str, _Node]) -> list[_Node]:
    path = included or kernel_path

    def fail(number: int, message: str) -> CompileError:
        return CompileError(f"{path}:{number}: {message}\n    {number} | "
                            f"{lines[number - 1].strip()}\nPTX macro syntax: {SYNTAX}")

    def formula(number: int, text: str, compare: bool = False) -> expr.Expr:
        try:
            return _parse_expr(text, compare)
        except SpecError as exc:
            raise fail(number, str(exc)) from None

    root: list[_Node] = []
    stack: list[tuple[_Node, list[_Node]]] = []  # open #for / #if and the list being filled
    target = root
    for number, (line, in_comment) in enumerate(zip(lines, _comment_state(lines),
                                                    strict=True), 1):
        match = None if in_comment else _DIRECTIVE.match(line)
        if match is None:
            target.append(_Node(number, "text", included, text=line))
            continue
        # a directive's comment starts with '#': '//' is floor division in EXPR
        word, rest = match["word"], match["rest"].split("#", 1)[0].strip()
        if word in ("set", "default"):
            m = _SET.match(rest)
            if not m:
                raise fail(number, f"expected '#{word} NAME = EXPR'")
            target.append(_Node(number, word, included, name=m["name"],
                                exprs=(formula(number, m["expr"]),)))
        elif word == "for":
            m = _FOR.match(rest)
            if not m:
                raise fail(number, "expected '#for NAME in range([START,] STOP[, STEP])'")
            args = _split_args(m["args"])
            if not 1 <= len(args) <= 3:
                raise fail(number, f"range() takes 1 to 3 arguments, found {len(args)}")
            node = _Node(number, "for", included, name=m["name"],
                         exprs=tuple(formula(number, a) for a in args))
            target.append(node)
            stack.append((node, target))
            target = node.body
        elif word == "if":
            node = _Node(number, "if", included)
            node.branches.append((formula(number, rest, compare=True), []))
            target.append(node)
            stack.append((node, target))
            target = node.branches[-1][1]
        elif word in ("elif", "else"):
            if not stack or stack[-1][0].kind != "if" or stack[-1][0].branches[-1][0] is None:
                raise fail(number, f"#{word} without an open #if (or after its #else)")
            cond = formula(number, rest, compare=True) if word == "elif" else None
            if word == "else" and rest:
                raise fail(number, "#else takes nothing after it")
            stack[-1][0].branches.append((cond, []))
            target = stack[-1][0].branches[-1][1]
        elif word in ("endfor", "endif", "endmacro"):
            want = word[3:]
            if not stack or stack[-1][0].kind != want:
                open_ = (f"the #{stack[-1][0].kind} of line {stack[-1][0].line} is still open"
                         if stack else "nothing is open")
                raise fail(number, f"#{word} does not close anything: {open_}")
            _, target = stack.pop()
        elif word == "error":
            target.append(_Node(number, "error", included, text=match["rest"]))
        elif word == "include":
            m = _INCLUDE.match(rest)
            if not m:
                raise fail(number, 'expected #include "FILE" (a path relative to this file)')
            if depth >= _MAX_INCLUDE_DEPTH:
                raise fail(number, f"includes nest deeper than {_MAX_INCLUDE_DEPTH}: a cycle?")
            child = (path.parent / m["file"]).resolve()
            try:
                # a byte-order mark would land mid-PTX, which nvJitLink refuses
                sources[child] = child.read_text(encoding="utf-8-sig",
                                                 errors="replace").splitlines()
            except OSError as exc:
                raise fail(number, f"cannot read {child}: {exc.strerror}") from None
            node = _Node(number, "include", included)
            node.body = _parse(sources[child], kernel_path, child, sources, depth + 1, macros)
            target.append(node)
        elif word == "macro":
            m = _MACRO.match(rest)
            if not m or not all(re.fullmatch(r"[A-Za-z_]\w*", a) for a in _split_args(m["args"])
                                if m["args"].strip()):
                raise fail(number, "expected '#macro NAME(PARAM, ...)'")
            if stack:
                raise fail(number, f"#macro inside the #{stack[-1][0].kind} of line "
                                   f"{stack[-1][0].line}: define macros at the top level")
            if m["name"] in macros:
                raise fail(number, f"macro {m['name']} is defined twice (first at line "
                                   f"{macros[m['name']].line})")
            params = tuple(a.strip() for a in _split_args(m["args"]) if a.strip())
            node = _Node(number, "macro", included, name=m["name"], params=params)
            macros[m["name"]] = node
            stack.append((node, target))
            target = node.body
        elif word == "call":
            m = _MACRO.match(rest)
            if not m:
                raise fail(number, "expected '#call NAME(EXPR, ...)'")
            macro = macros.get(m["name"])
            if macro is None:
                raise fail(number, f"no macro {m['name']} is defined above this line; known: "
                                   f"{', '.join(macros) or 'none'}")
            args = [a for a in _split_args(m["args"]) if a.strip()] if m["args"].strip() else []
            if len(args) != len(macro.params):
                raise fail(number, f"macro {m['name']}({', '.join(macro.params)}) takes "
                                   f"{len(macro.params)} argument(s), found {len(args)}")
            target.append(_Node(number, "call", included, name=m["name"],
                                exprs=tuple(formula(number, a) for a in args), body=macro.body,
                                params=macro.params))
        else:
            raise fail(number, f"unknown directive #{word}")
    if stack:
        node = stack[-1][0]
        raise fail(node.line, f"#{node.kind} is never closed: add #end{node.kind}")
    return root


def _split_args(text: str) -> list[str]:
    """The comma-separated arguments of ``range(...)``, split where parentheses allow."""
    try:
        tree = ast.parse(f"f({text})", mode="eval")
    except SyntaxError:
        return [text]
    return [ast.get_source_segment(f"f({text})", a) or "" for a in tree.body.args]


@lru_cache(maxsize=4096)
def _parse_expr(text: str, compare: bool) -> expr.Expr:
    return expr.parse(text, allow_compare=compare)


def _emit(nodes: list[_Node], env: dict[str, int], loops: tuple[tuple[str, int], ...],
          kernel_path: Path, out_text: list[str], out_origin: list[Origin],
          calls: list[int]) -> None:
    def fail(node: _Node, message: str) -> CompileError:
        return CompileError(f"{node.path or kernel_path}:{node.line}: {message}{_where(loops)}")

    def value(node: _Node, e: expr.Expr) -> int:
        try:
            return int(e(env))
        except SpecError as exc:
            raise fail(node, str(exc)) from None

    def substitute(node: _Node, text: str) -> str:
        def one(match: re.Match) -> str:
            try:
                e = _parse_expr(match["expr"], False)
            except SpecError as exc:
                raise fail(node, f"${{{match['expr']}}}: {exc}") from None
            return str(value(node, e))

        return _SUBST.sub(one, text) if "${" in text else text

    for node in nodes:
        if node.kind == "text":
            out_text.append(substitute(node, node.text))
            out_origin.append(Origin(node.line, loops, node.path))
        elif node.kind == "set":
            env[node.name] = value(node, node.exprs[0])
        elif node.kind == "default":
            if node.name not in env:
                env[node.name] = value(node, node.exprs[0])
        elif node.kind == "for":
            bounds = [value(node, e) for e in node.exprs]
            if len(bounds) == 3 and bounds[2] == 0:
                raise fail(node, "range() step is 0")
            saved = env.get(node.name)
            for i in range(*bounds):
                env[node.name] = i
                _emit(node.body, env, (*loops, (node.name, i)), kernel_path, out_text, out_origin,
                      calls)
            if saved is None:
                env.pop(node.name, None)
            else:
                env[node.name] = saved
        elif node.kind == "if":
            for cond, body in node.branches:
                if cond is None or value(node, cond):
                    _emit(body, env, loops, kernel_path, out_text, out_origin, calls)
                    break
        elif node.kind == "include":
            _emit(node.body, env, loops, kernel_path, out_text, out_origin, calls)
        elif node.kind == "call":
            values = [value(node, e) for e in node.exprs]
            calls[0] += 1
            bound = {**env, **dict(zip(node.params, values, strict=True)), "CALL": calls[0]}
            _emit(node.body, bound, (*loops, *zip(node.params, values, strict=True)), kernel_path,
                  out_text, out_origin, calls)
        elif node.kind == "error":
            params = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
            raise fail(node, f"#error {substitute(node, node.text)} [{params}]")


def _where(loops: tuple[tuple[str, int], ...]) -> str:
    return f" (in {', '.join(f'{n}={v}' for n, v in loops)})" if loops else ""
