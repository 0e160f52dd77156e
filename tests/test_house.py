"""The house's own rules, checked on the code: how a GPU is found and said missing, the import
graph, the docstrings' references, the size of modules."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

from harness.errors import NoGpu
from harness.gpu.driver import GpuStatus


def test_gpu_status_names_the_gpu_or_says_why_there_is_none():
    found = GpuStatus("NVIDIA H100 80GB HBM3")
    assert found.found and found.require("x") == "NVIDIA H100 80GB HBM3"
    missing = GpuStatus(reason="the CUDA driver sees no GPU")
    assert not missing.found and missing.name is None
    with pytest.raises(NoGpu, match=r"^no GPU here \(the CUDA driver sees no GPU\)$"):
        missing.require()
    with pytest.raises(NoGpu, match=r"^no GPU here \(the CUDA driver sees no GPU\): tuning "
                                    r"times kernels$"):
        missing.require("tuning times kernels")


# --- the import graph ------------------------------------------------------------------------

PACKAGE = Path(__file__).resolve().parent.parent / "harness"


def _modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def import_graph(inside_functions: bool = False) -> dict[str, set[str]]:
    """Which ``harness`` modules each module imports when it is imported (``import`` and
    ``from ... import`` at module level, in ``if``/``try``/``with`` blocks too, but not under
    ``if TYPE_CHECKING``), each edge also to the packages the import runs (``harness.run`` for
    ``harness.run.gpus``; not ``harness`` itself, whose ``__init__`` imports lazily);
    ``inside_functions``: the imports a function or method makes when it runs, as well."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        deps: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]

        def add(target: str, name=name, deps=deps) -> None:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            while target and target != "harness":
                if target != name and not name.startswith(target + "."):
                    deps.add(target)
                target = target.rpartition(".")[0]

        def visit(body, package=package) -> None:
            for node in body:
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    visit(node.orelse)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.split(".")[0] == "harness":
                            add(alias.name)
                elif isinstance(node, ast.ImportFrom):
                    base = node.module or ""
                    if node.level:
                        up = package.split(".")[:len(package.split(".")) - node.level + 1]
                        base = ".".join(up + ([node.module] if node.module else []))
                    if base.split(".")[0] == "harness":
                        for alias in node.names:
                            full = f"{base}.{alias.name}"
                            add(full if full in modules else base)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    if inside_functions or isinstance(node, ast.ClassDef):
                        visit(node.body)
                else:
                    for field in ("body", "orelse", "finalbody", "handlers"):
                        visit(getattr(node, field, None) or [])

        visit(ast.parse(path.read_text()).body)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                strong(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_graph_reader_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_imports_without_a_cycle():
    """No module of the package imports itself round a loop: not when the modules are
    imported (module level), and not through the imports functions make when they run."""
    graph = import_graph()
    assert {"harness.run.multi", "harness.run.process"} <= graph["harness.run.runner"]
    assert {"harness.run.runner", "harness.run"} <= graph["harness.commands.place"]
    assert cycles(graph) == []
    assert cycles(import_graph(inside_functions=True)) == []


def test_the_api_the_package_and_the_commands_reach_nothing_of_the_cli():
    graph = import_graph(inside_functions=True)
    for name in ("harness", "harness.api", "harness.records", *(
            m for m in graph if m.startswith("harness.commands"))):
        assert not {d for d in graph[name] if d.startswith("harness.cli")}, name


# --- module size -----------------------------------------------------------------------------

MOST_LINES = 500
OVER: dict[str, str] = {}
"""Modules allowed over MOST_LINES, each with why (none)."""


def test_no_module_is_over_500_lines():
    over = {str(path.relative_to(PACKAGE.parent)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text().splitlines())) > MOST_LINES}
    assert set(over) == set(OVER), over


# --- references in docstrings ----------------------------------------------------------------

_ROLE = re.compile(r":(mod|func|class|meth|attr|data|exc|obj):`~?([^`<>]+?)(?:\(\))?`")


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            yield node.value.value


def _resolves(role: str, target: str, module_name: str, source: str) -> bool:
    """Whether ``target`` names something: a dotted ``harness.`` path; else a name of the
    module the docstring is in (its globals, a sibling module, a class's attribute or an
    attribute its instances are given)."""
    module = importlib.import_module(module_name)
    package = module_name if hasattr(module, "__path__") else module_name.rpartition(".")[0]
    if role == "mod":
        return any(_module_exists(c) for c in (target, f"{package}.{target}"))
    first, *rest = target.split(".")
    if first == "harness":
        parts = target.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            return _attributes(obj, parts[i:], source)
        return False
    roots = [getattr(module, first)] if hasattr(module, first) else []
    if _module_exists(f"{package}.{first}"):
        roots.append(importlib.import_module(f"{package}.{first}"))
    if not rest:
        return bool(roots) or any(
            _attributes(cls, [first], source) for _, cls in inspect.getmembers(module,
                                                                              inspect.isclass)
            if cls.__module__ == module_name)
    return any(_attributes(root, rest, source) for root in roots)


def _module_exists(name: str) -> bool:
    try:
        return name.split(".")[0] == "harness" and importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent that is not a package
        return False


def _attributes(obj, names: list[str], source: str) -> bool:
    for i, name in enumerate(names):
        if hasattr(obj, name):
            obj = getattr(obj, name)
        elif name in getattr(obj, "__dataclass_fields__", {}):
            return i == len(names) - 1
        elif inspect.isclass(obj) and i == len(names) - 1:  # an attribute __init__ sets
            try:
                return re.search(rf"self\.{name}\b[^=\n]*=", inspect.getsource(obj)) is not None
            except (OSError, TypeError):
                return False
        else:
            return False
    return True


def test_every_docstring_reference_names_something():
    """Every :mod:/:func:/:class:/:meth:/:attr:/:data: target in a docstring of the package
    resolves (modules move; their references must follow)."""
    stale = []
    for name, path in sorted(_modules().items()):
        source = path.read_text()
        for doc in _docstrings(ast.parse(source)):
            for role, target in _ROLE.findall(doc):
                if not _resolves(role, target, name, source):
                    stale.append(f"{path.relative_to(PACKAGE.parent)}: :{role}:`{target}`")
    assert not stale, "\n".join(stale)


def test_the_reference_reader_finds_what_is_stale():
    assert _resolves("func", "harness.gpu.check.check", "harness.gpu.driver", "")
    assert not _resolves("func", "harness.cuda_check.check", "harness.gpu.driver", "")
    assert _resolves("mod", "harness.kernels.expr", "harness.kernels.ptxpp", "")
    assert not _resolves("mod", "harness.expr", "harness.kernels.ptxpp", "")
    assert _resolves("meth", "Timer.time_interleaved", "harness.gpu.timing.timer", "")
    assert _resolves("attr", "Operands.out", "harness.kinds.gemm.operands", "")
    assert not _resolves("attr", "Operands.nowhere", "harness.kinds.gemm.operands", "")
