"""What the pytest plugin (pytest_plugin.py) is asked to do in a session: its options and the
rootdir's ``[tool.harness]`` table read into the session's settings, kept with its state in the
config's stash, and the size each kernel is built and checked at."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness.errors import HarnessError
from harness.kinds import sizes as kernel_sizes
from harness.testing import DEFAULT_ARCH, DEFAULT_SIZE

if TYPE_CHECKING:
    from harness.gpu.driver import GpuStatus

_TOOL_KEYS = ("kernels", "arch", "size")


@dataclass(frozen=True)
class _Settings:
    """What the plugin was asked to do in this session."""

    kernel_dirs: tuple[Path, ...]
    arch: str
    size: tuple[int, int, int]
    """The GEMMs' size."""
    origin: str
    """Where the folders were named: ``--harness-kernels`` or the pyproject.toml table."""
    only_under: tuple[Path, ...] | None = None
    """Paths named on the command line, when the folders come from pyproject.toml: only the
    kernel files under them are collected (as pytest collects test files)."""
    size_text: str | None = None
    """The size as given (None: not given): a buffers kernel's dims where it fits them."""


@dataclass
class _State:
    gpu: tuple[GpuStatus, str] | None = None
    """(usable, name or why not, arch), probed once, by the first check test to run."""
    tests_run: int = 0
    buffers: dict[str, str] = field(default_factory=dict)
    """Registry key -> the dims its build ran at, for each buffers kernel built."""
    built: dict[str, str] = field(default_factory=dict)
    """Registry key -> the offline build's finding ("" when it passed), for the check tests."""


_SETTINGS = pytest.StashKey[_Settings]()
_STATE = pytest.StashKey[_State]()


def _settings(config: pytest.Config) -> _Settings | None:
    """The session's settings, or None when no kernel folder is named (nothing to do)."""
    table = _tool_table(config.rootpath / "pyproject.toml")
    given = config.getoption("harness_kernels")
    if given:
        base, raw_dirs, origin = config.invocation_params.dir, given, "--harness-kernels"
    elif table.get("kernels"):
        base, raw_dirs, origin = config.rootpath, table["kernels"], "[tool.harness] kernels"
    else:
        return None
    dirs = []
    for raw in raw_dirs:
        folder = (base / raw).resolve()
        if not folder.is_dir():
            found = "a file" if folder.exists() else "nothing"
            raise pytest.UsageError(f"{origin} {raw}: expected a folder of kernel files "
                                    f"(.cu, .ptx), found {found} at {folder}")
        dirs.append(folder)
    arch = config.getoption("harness_arch") or table.get("arch") or DEFAULT_ARCH
    size_given = config.getoption("harness_size") or table.get("size")
    size_text = None if size_given is None else str(size_given)
    try:
        from harness.archs import get_arch

        get_arch(arch)
        size = _gemm_size(size_text)
    except HarnessError as exc:
        raise pytest.UsageError(f"harness plugin: {exc}") from None
    only_under = None
    if not given and config.args_source == pytest.Config.ArgsSource.ARGS:
        only_under = tuple((config.invocation_params.dir / arg.split("::")[0]).resolve()
                           for arg in config.args)
    return _Settings(tuple(dirs), arch, size, origin, only_under, size_text)


def _gemm_size(text: str | None) -> tuple[int, int, int]:
    """The GEMMs' size: ``text`` as N or M,N,K; the default where ``text`` is None or only a
    buffers kernel's dims (as 1<<20 or 4096x1024); neither, a HarnessError."""
    from harness.kernels.expr import size_formulas
    from harness.run.runner import parse_size

    if text is None:
        return DEFAULT_SIZE
    try:
        return parse_size(text)
    except HarnessError as exc:
        for rank in (1, 2, 3):
            try:
                size_formulas(text.replace(",", "x"), ("D",) * rank, HarnessError, "size")
                return DEFAULT_SIZE
            except HarnessError:
                pass
        raise HarnessError(f"{exc}; nor a buffers kernel's dims, as 1<<20 or 4096x1024"
                           ) from None


def _kernel_size(kernel, settings: _Settings) -> tuple[tuple[int, int, int], str]:
    """Where ``kernel`` is built and checked, as (M, N, K) slots and as text: a GEMM at the
    size; a buffers kernel at the size read as its dims where it fits them, else at the
    smallest of its spec's sizes."""
    if not kernel_sizes.has_own_sizes(kernel):
        return settings.size, "x".join(map(str, settings.size))
    from harness.api import dims_of, smallest_dims

    dims = None
    if settings.size_text is not None:
        try:
            dims = dims_of(kernel, settings.size_text)
        except HarnessError:
            pass
    dims = dims or smallest_dims(kernel)
    return kernel_sizes.slots(kernel, dims), dims.short


def _tool_table(pyproject: Path) -> dict:
    """``[tool.harness]`` of ``pyproject`` (empty when there is none), its keys checked."""
    try:
        with pyproject.open("rb") as f:
            table = tomllib.load(f).get("tool", {}).get("harness", {})
    except (OSError, tomllib.TOMLDecodeError):
        return {}  # no file, or not ours to judge: pytest reports a bad ini file itself
    where = f"{pyproject} [tool.harness]"
    if not isinstance(table, dict):
        raise pytest.UsageError(f"{where}: expected a table with keys among "
                                f"{', '.join(_TOOL_KEYS)}, found {table!r}")
    unknown = sorted(set(table) - set(_TOOL_KEYS))
    if unknown:
        raise pytest.UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed keys: "
                                f"{', '.join(_TOOL_KEYS)}")
    kernels = table.get("kernels", [])
    if not isinstance(kernels, list) or not all(isinstance(d, str) for d in kernels):
        raise pytest.UsageError(f'{where}: kernels must be a list of folders, e.g. ["kernels/"]'
                                f", found {kernels!r}")
    for key in ("arch", "size"):
        if key in table and not isinstance(table[key], str | int):
            raise pytest.UsageError(f"{where}: {key} must be a string, found {table[key]!r}")
    return table
