"""A ``py:NAME`` reference checked offline: the kernel's ``.py`` file is there and defines
``NAME`` at its top level. The file is parsed (ast), never run: a spec is read without running
the user's code."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.kernels.hostsetup import setup_path


def py_reference_problem(kernel_path: Path, reference: str) -> str | None:
    """Why the ``py:`` reference of the kernel at ``kernel_path`` cannot be called, or None."""
    if not reference.startswith("py:"):
        return None
    name, path = reference.removeprefix("py:"), setup_path(kernel_path)
    if not path.is_file():
        return (f"reference = {reference!r} lives in {path.name} beside the "
                f"kernel, which does not exist; write def {name}(...) there")
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError, OSError) as exc:
        return f"reference = {reference!r}: {path} cannot be parsed: {exc}"
    defined = [n.name for n in tree.body
               if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    defined += [t.id for n in tree.body if isinstance(n, ast.Assign)
                for t in n.targets if isinstance(t, ast.Name)]
    if name in defined:
        return None
    known = ", ".join(d for d in defined if not d.startswith("_")) or "none"
    return (f"reference = {reference!r}, but {path.name} defines no {name!r} at "
            f"its top level (its functions: {known}); define it or fix the name")
