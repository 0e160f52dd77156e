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


def import_graph(inside_functions: bool = False,
                 type_checking: bool = False) -> dict[str, set[str]]:
    """Which ``harness`` modules each module imports when it is imported (``import`` and
    ``from ... import`` at module level, in ``if``/``try``/``with`` blocks too, but not under
    ``if TYPE_CHECKING``), each edge also to the packages the import runs (``harness.run`` for
    ``harness.run.gpus``; not ``harness`` itself, whose ``__init__`` imports lazily);
    ``inside_functions``: the imports a function or method makes when it runs, as well;
    ``type_checking``: those under ``if TYPE_CHECKING`` too."""
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
                if (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
                        and not type_checking):
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
    assert cycles(import_graph(inside_functions=True, type_checking=True)) == []


def test_the_api_the_package_and_the_commands_reach_nothing_of_the_cli():
    graph = import_graph(inside_functions=True)
    for name in ("harness", "harness.api", "harness.records", *(
            m for m in graph if m.startswith("harness.commands"))):
        assert not {d for d in graph[name] if d.startswith("harness.cli")}, name


def outside_imports(package: Path) -> dict[str, list[str]]:
    """Each module under ``package`` -> the modules of the checkout's other top-level folders
    (experiments, tests) it imports, anywhere in its text (a function's import too)."""
    found: dict[str, list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and not n.level]
        bad = sorted(n for n in names if n.split(".")[0] in ("experiments", "tests"))
        if bad:
            found[str(path.relative_to(package.parent))] = bad
    return found


def test_the_package_stands_alone(tmp_path):
    """An installed package holds harness/ only: nothing in it may import experiments/ or
    tests/ (a worker that did ran from a checkout alone)."""
    assert outside_imports(PACKAGE) == {}
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("def f():\n    from experiments.x import y\n")
    assert outside_imports(tmp_path / "pkg") == {"pkg/m.py": ["experiments.x"]}


# --- module size -----------------------------------------------------------------------------

MOST_LINES = 400
OVER: dict[str, str] = {}
"""Modules allowed over MOST_LINES, each with why: a module not listed may not pass it, and a
listed one that no longer does must leave the list."""


def test_no_module_is_over_400_lines():
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


# --- kinds: a kind is a folder ---------------------------------------------------------------

KIND_NAMES = frozenset({"gemm", "buffers", "ceiling", "attention"})
"""The kinds there are and the one on its way (issue 60): names the core may not test."""
KINDS = PACKAGE / "kinds"
OWN_COMMANDS: dict[str, str] = {
    "harness": "``harness.Plan``: the public name of a GEMM's check battery (the API's .plan())",
    "harness.commands.ceiling": "``harness ceiling``: the ceiling kind's own command",
    "harness.commands.energy": "``harness energy``: energy per FLOP of GEMM kernels",
}
"""Modules outside harness/kinds/ that import a kind's package, each with why: commands that
exist for one kind only."""


def _constants(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [c for e in node.elts for c in _constants(e)]
    return []


def kind_tags(source: str) -> list[str]:
    """Where ``source`` tests a kind by name: a comparison with a kind's name (``==``, ``!=``,
    ``in``, ``not in`` a tuple of them), a ``kind=`` argument or a ``kind`` parameter's
    default that is one; each as ``line: name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        named: list[str] = []
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                named += _constants(side)
        elif isinstance(node, ast.keyword) and node.arg == "kind":
            named += _constants(node.value)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [*node.args.posonlyargs, *node.args.args]
            pairs = [*zip(params[len(params) - len(node.args.defaults):], node.args.defaults,
                          strict=True),
                     *((a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults,
                                              strict=True) if d is not None)]
            named += [c for a, d in pairs if a.arg == "kind" for c in _constants(d)]
        found += [f"{node.lineno}: {name}" for name in named if name in KIND_NAMES]
    return found


def test_the_kind_name_reader_sees_a_tag():
    assert kind_tags('if spec.kind == "buffers":\n    pass\n') == ["1: buffers"]
    assert kind_tags('x = k.kind not in ("gemm", "other")\n') == ["1: gemm"]
    assert kind_tags('load(kind="ceiling")\n') == ["1: ceiling"]
    assert kind_tags('def f(kind="gemm"):\n    pass\n') == ["1: gemm"]
    assert kind_tags('def f(*, kind: str = "attention"):\n    pass\n') == ["1: attention"]
    assert kind_tags('if kinds.of(spec).takes("run"):\n    pass\n') == []


def test_no_kind_is_named_outside_its_folder():
    """The core (session, runner, worker, timing, reports, CLI, API, plugin) asks the kind
    object (harness.kinds) and never tests a kind's name: a kind is found by name in the
    registry, and adding one is adding a folder."""
    tagged = {str(p.relative_to(PACKAGE.parent)): hits for p in PACKAGE.rglob("*.py")
              if KINDS not in p.parents and (hits := kind_tags(p.read_text()))}
    assert tagged == {}


def test_the_core_imports_no_kind():
    """Outside harness/kinds/, no module imports a kind's package (a kind's own command
    aside, OWN_COMMANDS), at module level, in a function or for typing."""
    graph = import_graph(inside_functions=True, type_checking=True)
    kind_packages = {f"harness.kinds.{p.name}" for p in KINDS.iterdir()
                     if (p / "__init__.py").exists()}
    reach = {name: sorted(d for d in deps if d in kind_packages)
             for name, deps in graph.items() if not name.startswith("harness.kinds")}
    reach = {name: deps for name, deps in reach.items() if deps}
    assert set(reach) == set(OWN_COMMANDS), reach


# --- layers: no import runs upward -----------------------------------------------------------

LAYERS: tuple[tuple[str, ...], ...] = (
    ("harness.errors", "harness.archs", "harness.stats", "harness.typed_json", "harness.knobs",
     "harness.cache_dir", "harness.kinds", "harness.kinds.base", "harness.kinds.dims",
     "harness.kinds.parts", "harness.kinds.sizes"),
    ("harness.kernels",),
    ("harness.gpu",),
    ("harness.compiler",),
    ("harness.bench",),
    ("harness.report",),
    ("harness.kinds.",),
    ("harness.run", "harness.commands", "harness.records", "harness.report.runs"),
    ("harness.api", "harness.testing", "harness.pytest_plugin", "harness.cli",
     "harness.__main__", "harness"),
)
"""The package from the bottom up: a module imports only from its own layer and those below.
The registry and the kinds' contract sit at the bottom (anything may ask for a kind); the
kinds' folders sit above the reports (their tables use them) and below the runner, the
commands and the CLI, which find a kind by name. The most specific prefix wins."""


def layer_of(module: str) -> int:
    best = (-1, -1)
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            hit = (module.startswith(prefix) if prefix.endswith(".")
                   else module == prefix or module.startswith(prefix + "."))
            if hit and len(prefix) > best[1]:
                best = (index, len(prefix))
    if best[0] < 0:
        raise AssertionError(f"{module} is in no layer of LAYERS: add it")
    return best[0]


def test_the_layer_reader_places_modules():
    assert layer_of("harness.kinds") == 0 and layer_of("harness.kinds.gemm.measure") == 6
    assert layer_of("harness.report.runs") == 7 and layer_of("harness.report.files") == 5
    assert layer_of("harness.cli.bench") == 8


def test_no_import_runs_upward():
    """Every import, at module level, in a function or for typing, goes to the module's own
    layer or below (LAYERS); and nothing of the package imports experiments/."""
    graph = import_graph(inside_functions=True, type_checking=True)
    upward = sorted(f"{name} -> {dep}" for name, deps in graph.items() for dep in deps
                    if layer_of(dep) > layer_of(name))
    assert upward == []
    outside = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
                     if re.search(r"^\s*(from|import) experiments\b", p.read_text(), re.M))
    assert outside == []
