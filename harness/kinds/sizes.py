"""A kernel's sizes, asked of its kind: ``--size`` read once, by the kind, into a
:class:`~harness.kinds.dims.Problem`. The runner keys its rows by the run's ``(m, n, k)``
slots (a result's ``m, n, k``, schema 2's; the kind pads its dims into them); in the worker a
kind reads each size back as its own dims by name (``Job.problems``), never as slots.

Kind-neutral: the CLI, the API, the commands and the plugin call these instead of testing a
kernel's kind. Imports nothing but the registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harness import kinds
from harness.kinds.dims import Problem

Size = tuple[int, int, int]


def kind_of(kernel: Any) -> kinds.Kind:
    return kinds.of(kernel.spec)


def read(kernel: Any, text: str) -> Problem:
    """``--size`` text as ``kernel``'s problem (its kind reads it)."""
    return kind_of(kernel).read_size(str(text), kernel.spec)


def slots(kernel: Any, problem: Problem) -> Size:
    return kind_of(kernel).slots(kernel.spec, problem)


def read_slots(kernel: Any, text: str) -> Size:
    return slots(kernel, read(kernel, text))


def own_problems(kernel: Any) -> tuple[Problem, ...]:
    """The sizes ``kernel``'s spec names (a kind whose kernels carry their own); () for a
    kind whose kernels run at the command's sizes."""
    return kind_of(kernel).default_sizes(kernel.spec)


def has_own_sizes(kernel: Any) -> bool:
    return bool(own_problems(kernel))


def own_slots(kernel: Any) -> tuple[Size, ...]:
    return tuple(slots(kernel, p) for p in own_problems(kernel))


def dims_of(kernel: Any) -> tuple[str, ...]:
    return kind_of(kernel).dims_of(kernel.spec)


def rank(kernel: Any) -> int:
    """How many dims ``kernel``'s size has (how many of the slots a table shows)."""
    return len(dims_of(kernel))


def problem_at(kernel: Any, size: Sequence[int]) -> Problem:
    """The problem a run's slots ``size`` hold for ``kernel``: its dims, in order."""
    names = dims_of(kernel)
    return Problem(tuple(zip(names, tuple(size)[:len(names)], strict=True)))
