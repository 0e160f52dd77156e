"""The kernel registry: every kernel file under the kernel folders, its variants expanded.

A kernel's registry key is its file stem; a file that declares variants gives one entry per
variant, keyed ``stem:variant``. Every file is read and validated, whatever its kind; the GEMM
commands see only kernels of the default kind (``harness.kinds.DEFAULT``, the default of
:func:`discover`).
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness import kinds
from harness.errors import FormulaError, HarnessError, SpecError
from harness.kernels import expr, includes
from harness.kernels.hostsetup import setup_path
from harness.kernels.kernel_path import (
    KERNEL_SUFFIXES,
    kernel_file_problem,
    real_path,
    split_variant,
)
from harness.kernels.spec import KernelSpec, read_spec

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
PROJECT_ROOT = PACKAGE_ROOT.parent
BUILTIN_KERNELS = PACKAGE_ROOT / "_kernels"
"""The project's own kernel folders as the package carries them: in a checkout (and an editable
install) ``_kernels/cu`` and ``_kernels/ptx`` are links to the top-level ``cu/`` and ``ptx/``;
``pip install .`` copies the files behind them into the installed package."""


def _builtin_dir(name: str) -> Path:
    packaged = BUILTIN_KERNELS / name
    if packaged.is_dir():
        return packaged.resolve()  # a checkout's link: the top-level folder itself
    return PROJECT_ROOT / name  # a checkout whose links were not made (git core.symlinks off)


DEFAULT_KERNEL_DIRS = (_builtin_dir("cu"), _builtin_dir("ptx"))
OFFLINE_SM_COUNT = 132
"""SMs assumed for a grid formula that names SMS when no GPU is asked (an H100 SXM's)."""


def project_relative(path: Path) -> str:
    """``path`` relative to the project root, as reports and listings name kernel files (as
    given when it lies outside, e.g. a --kernel-dir elsewhere)."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except (ValueError, RuntimeError, OSError):  # outside, or a link that cannot be followed
        return str(path)


@dataclass(frozen=True)
class Kernel:
    """One launchable kernel: a spec with its parameters bound (a variant, or the defaults)."""

    name: str
    spec: KernelSpec
    params: tuple[tuple[str, int], ...]
    variant: str | None = None
    explicit: bool = False
    """Parameters chosen one by one (a tuning point): tuned defaults never replace them."""

    def for_arch(self, arch: str) -> Kernel:
        """This kernel with the defaults tuned for ``arch`` (``[tuned.<arch>]``) applied;
        values a variant sets still win, and an explicit kernel is returned unchanged."""
        pinned = self.spec.tuned.get(arch)
        if not pinned or self.explicit:
            return self
        chosen = self.spec.variants.get(self.variant, {}) if self.variant else {}
        params = {**self.spec.params, **pinned, **chosen}
        return Kernel(self.name, self.spec, tuple(sorted(params.items())), self.variant)

    def with_params(self, overrides: Mapping[str, int], name: str) -> Kernel:
        """This kernel named ``name`` with ``overrides`` over its parameters, chosen one by one
        (explicit): a tuning point, or a measurement knob set."""
        params = {**dict(self.params), **overrides}
        return Kernel(name, self.spec, tuple(sorted(params.items())), self.variant, explicit=True)

    @cached_property
    def param_env(self) -> dict[str, int]:
        return dict(self.params)

    @cached_property
    def cluster_dims(self) -> tuple[int, int, int] | None:
        """The thread-block cluster (``cluster_dims`` or ``__cluster_dims__``) evaluated over
        the parameters, missing trailing dimensions 1; None for no cluster."""
        if not self.spec.cluster:
            return None
        dims = tuple(int(self.evaluate(e, self.param_env)) for e in self.spec.cluster)
        return (*dims, 1, 1)[:3]

    @property
    def entry_expression(self) -> str:
        """The spec's entry with [params] names in its template arguments replaced by this
        kernel's values (``gemm<BM, 64>`` -> ``gemm<128, 64>``): what NVRTC is asked to lower;
        the entry itself for a plain symbol."""
        entry = self.spec.entry
        if not self.spec.entry_is_cxx or "<" not in entry:
            return entry
        head, _, args = entry.partition("<")
        values = self.param_env
        return head + "<" + re.sub(r"\b[A-Za-z_]\w*\b",
                                   lambda m: str(values.get(m[0], m[0])), args)

    @property
    def selector(self) -> str:
        """A pattern that selects exactly this kernel in another process whatever its kernel
        folders: its file's path, with ``:variant`` for a variant (``select`` reads it)."""
        path = str(self.spec.path.resolve())
        return f"{path}:{self.variant}" if self.variant else path

    def evaluate(self, formula: expr.Expr, env: Mapping[str, int]) -> int | bool:
        """``formula`` (one of this kernel's spec formulas) at ``env``. Every spec formula of a
        kernel is evaluated here, so that a failure (a division by zero, a shift out of range, a
        name with no value) names the kernel file and the kernel: a FormulaError."""
        try:
            return formula(env)
        except SpecError as exc:
            raise FormulaError(f"{self.spec.path}: {self.name}", str(exc)) from None

    def env(self, m: int, n: int, k: int) -> dict[str, int]:
        """The formulas' variables at a size: M, N, K; a buffers kernel's dims, in order,
        from the same three slots."""
        if self.spec.buffers is not None:
            return {**self.param_env, **dict(zip(self.spec.buffers.dims, (m, n, k), strict=False))}
        return {**self.param_env, "M": m, "N": n, "K": k}

    @cached_property
    def block_dims(self) -> tuple[int, int, int]:
        dims = tuple(int(self.evaluate(e, self.param_env)) for e in self.spec.block)
        if any(d < 1 for d in dims):
            raise SpecError(f"{self.spec.path}: block {dims} for {self.name} has a dimension < 1")
        return (*dims, 1, 1)[:3]

    @property
    def block_threads(self) -> int:
        x, y, z = self.block_dims
        return x * y * z

    def grid_dims(self, m: int, n: int, k: int, sm_count: int = OFFLINE_SM_COUNT
                  ) -> tuple[int, int, int]:
        """The grid at m x n x k; ``SMS`` in a formula (persistent kernels) is ``sm_count``,
        the device's SM count at launch and :data:`OFFLINE_SM_COUNT` without a GPU."""
        env = {**self.env(m, n, k), "SMS": sm_count}
        dims = tuple(int(self.evaluate(e, env)) for e in self.spec.grid)
        if any(d < 1 for d in dims):
            raise SpecError(f"{self.spec.path}: grid {dims} for {self.name} at {m}x{n}x{k} has a "
                            "dimension < 1; check the grid formulas")
        return (*dims, 1, 1)[:3]

    def dynamic_smem_bytes(self, m: int, n: int, k: int) -> int:
        return int(self.evaluate(self.spec.dynamic_smem_bytes, self.env(m, n, k)))

    def shape_problems(self, m: int, n: int, k: int) -> list[str]:
        """The declared constraints that ``m x n x k`` violates (empty when it may run)."""
        env = self.env(m, n, k)
        at = f"{m}x{n}x{k}"
        if self.spec.buffers is not None:  # its dims by name
            at = ", ".join(f"{d} = {env[d]}" for d in self.spec.buffers.dims)
        return [f"{at} violates the kernel's constraint {c.text!r}"
                for c in self.spec.constraints if not self.evaluate(c, env)]

    def tma_box(self, operand: str) -> tuple[int, int]:
        """(inner, outer) elements of ``operand``'s TMA box ([tma])."""
        inner, outer = self.spec.tma[operand].box
        return (int(self.evaluate(inner, self.param_env)),
                int(self.evaluate(outer, self.param_env)))

    def model_values(self) -> dict[str, int]:
        """The [model] table's formulas at this kernel's parameters."""
        return {key: int(self.evaluate(e, self.param_env)) for key, e in self.spec.model.items()}

    @cached_property
    def source_sha256(self) -> str:
        """sha256 of the kernel file and of the files it includes with ``#include "..."``
        (next to it), in the order they appear: what a report records of its source."""
        return source_sha256(self.spec.path)

    @cached_property
    def mma_family(self) -> str:
        """The tensor-core instruction the kernel's source issues: ``wgmma`` when it (or a
        file it includes) has ``wgmma.mma_async``, else ``mma.sync`` (its ceiling)."""
        texts = (data for _, data in sources(self.spec.path))
        return "wgmma" if any(b"wgmma.mma_async" in data for data in texts) else "mma.sync"

    @property
    def defines(self) -> tuple[str, ...]:
        """``-D`` options a .cu file is compiled with: its parameters, but those the spec
        passes only as template arguments (:meth:`KernelSpec.passes_as_macro`)."""
        return tuple(f"-D{name}={value}" for name, value in self.params
                     if self.spec.passes_as_macro(name))


def sources(path: Path) -> Iterator[tuple[Path, bytes]]:
    """``path`` and, recursively, the quoted includes found next to it, with their bytes, in
    the order they appear (a missing include is the compiler's error to report)."""
    return ((found, data) for found, data in includes.walk(path) if data is not None)


def source_sha256(path: Path) -> str:
    """sha256 over ``path``, the files it includes and its host set-up (``<kernel>.py``)
    where it has one: an edit to any of them is an edit to the kernel."""
    digest = hashlib.sha256()
    for _, data in sources(path):
        digest.update(data)
    setup = setup_path(path)
    if Path(path).suffix != ".py" and setup.is_file():
        digest.update(setup.read_bytes())
    return digest.hexdigest()


def kernels_in(spec: KernelSpec) -> list[Kernel]:
    """The registry entries of one kernel file."""
    if not spec.variants:
        return [Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))]
    return [
        Kernel(f"{spec.stem}:{variant}", spec, tuple(sorted({**spec.params, **values}.items())),
               variant)
        for variant, values in spec.variants.items()
    ]


@dataclass(frozen=True)
class BrokenFile:
    """A kernel file the registry could not read (bad spec, not UTF-8, a shared stem)."""

    path: Path
    error: str


@dataclass
class Registry:
    """The kernels under the kernel folders, and the files among them that are broken: one bad
    file is reported in its own row (``harness list``) and does not stop the others."""

    kernels: list[Kernel]
    broken: list[BrokenFile]
    kind: str | None = kinds.DEFAULT

    def select(self, patterns: Sequence[str]) -> list[Kernel]:
        """Kernels matching any pattern: a registry key, a file stem (all its variants), a glob,
        or the path of a kernel file anywhere (``my.cu``, ``my.cu:variant``)."""
        if not patterns:
            return list(self.kernels)
        chosen: list[Kernel] = []
        for pattern in patterns:
            hits = self._by_path(pattern)
            if hits is None:
                hits = [k for k in self.kernels if k.name == pattern or k.spec.stem == pattern
                        or fnmatch.fnmatch(k.name, pattern)]
            if not hits:
                for bad in self.broken:
                    if bad.path.stem == split_variant(pattern)[0]:
                        raise SpecError(bad.error)
                raise HarnessError(self._no_match(pattern))
            chosen += [k for k in hits if k not in chosen]
        return chosen

    def _by_path(self, pattern: str) -> list[Kernel] | None:
        """The kernels of the file ``pattern`` names (None when it names no file)."""
        text, variant = split_variant(pattern)
        path = Path(text)
        if path.suffix not in KERNEL_SUFFIXES and not ("/" in text or os.path.lexists(text)):
            return None
        problem = kernel_file_problem(text)
        if problem:
            raise HarnessError(problem)
        if path.suffix not in KERNEL_SUFFIXES:
            raise HarnessError(f"{text}: a kernel file ends in .cu or .ptx, found "
                               f"{path.suffix or 'no suffix'!r}")
        spec = read_spec(path)
        if self.kind is not None and spec.kind != self.kind:
            what = kinds.of(spec).runs_it()
            raise HarnessError(f"{text} is a {spec.kind!r} kernel; this command takes "
                               f"{self.kind!r} kernels ({what} runs it)")
        kernels = kernels_in(spec)
        known = {(k.spec.path.resolve(), k.name): k for k in self.kernels}
        kernels = [known.get((k.spec.path.resolve(), k.name), k) for k in kernels]
        if variant:
            kernels = [k for k in kernels if k.variant == variant]
            if not kernels:
                raise HarnessError(f"{text} has no variant {variant!r}; its variants: "
                                   f"{', '.join(spec.variants) or 'none'}")
        return kernels

    def _no_match(self, pattern: str) -> str:
        stem, _, variant = pattern.partition(":")
        variants = [k.variant for k in self.kernels if k.spec.stem == stem]
        if variant and variants:
            return (f"{stem} has no variant {variant!r}; its variants: "
                    f"{', '.join(v for v in variants if v) or 'none (name it by its stem)'}")
        names = sorted({k.name for k in self.kernels} | {k.spec.stem for k in self.kernels})
        close = difflib.get_close_matches(pattern, names, n=5, cutoff=0.5)
        hint = (f"closest: {', '.join(close)}" if close
                else f"{len(names)} names are known")
        return (f"no kernel matches {pattern!r}; {hint} (see `harness list`; a path to a .cu "
                "or .ptx file is a kernel too)")


def load_registry(kernel_dirs: Sequence[Path] = DEFAULT_KERNEL_DIRS,
                  kind: str | None = kinds.DEFAULT) -> Registry:
    """Every kernel of ``kind`` (None: of every kind) under ``kernel_dirs`` (recursively),
    sorted by file path; files that cannot be read are kept aside with their error."""
    if kind is not None and kind not in kinds.names():
        raise HarnessError(f"unknown kernel kind {kind!r}: expected one of "
                           f"{', '.join(kinds.names())}")
    files: dict[tuple[Path, str], Path] = {}  # (where a file really is, stem) -> found as
    registry = Registry([], [], kind)
    for folder in kernel_dirs:
        folder = Path(folder)
        _check_folder(folder)
        for path in sorted(folder.rglob("*")):
            if path.suffix not in KERNEL_SUFFIXES:
                continue
            real, problem = real_path(path)
            if problem:
                registry.broken.append(BrokenFile(path, problem))
            else:
                files.setdefault((real, path.stem), path)  # once, from a folder named twice
    seen: dict[str, Path] = {}
    builtin = [d.resolve() for d in DEFAULT_KERNEL_DIRS]
    # the project's own files first: a user's file that reuses one of their stems is the one
    # reported as broken
    found = sorted(files.items(), key=lambda item: (
        not any(item[0][0].is_relative_to(d) for d in builtin), item[1]))
    for path in (path for _, path in found):
        if path.stem in seen:
            registry.broken.append(BrokenFile(path, (
                f"{path}: its stem {path.stem!r} is already the key of {seen[path.stem]}; the "
                "stem is the registry key: rename one of them")))
            continue
        seen[path.stem] = path
        try:
            spec = read_spec(path)
        except SpecError as exc:
            registry.broken.append(BrokenFile(path, str(exc)))
            continue
        if kind is None or spec.kind == kind:
            registry.kernels += kernels_in(spec)
    return registry


def _check_folder(folder: Path) -> None:
    """``folder`` is a folder the registry can walk, or a HarnessError that says what it is."""
    if folder.is_file():
        raise HarnessError(f"kernel folder {folder} is a file, not a folder: pass the folder "
                           f"that holds it (--kernel-dir {folder.parent}), or name the file "
                           "itself as a KERNEL")
    if folder.is_dir():
        return
    _, problem = real_path(folder) if os.path.lexists(folder) else (folder, "")
    if problem:  # a link that cannot be followed
        raise HarnessError(f"kernel folder {problem}; pass an existing folder with --kernel-dir")
    if folder in DEFAULT_KERNEL_DIRS:
        raise HarnessError(f"the harness's own kernel folder {folder} does not exist: this "
                           "install of the harness lacks its kernels (reinstall it with `pip "
                           "install .` from the project), or leave them out with --no-builtin")
    raise HarnessError(f"kernel folder {folder} does not exist; pass an existing folder "
                       "with --kernel-dir")


def representatives(kernels: Iterable[Kernel]) -> list[Kernel]:
    """One kernel per file: the variant its spec names ``representative``, else its first
    (a file without variants is one kernel already)."""
    by_file: dict[Path, list[Kernel]] = {}
    for kernel in kernels:
        by_file.setdefault(kernel.spec.path, []).append(kernel)
    out = []
    for group in by_file.values():
        named = group[0].spec.representative
        out.append(next((k for k in group if k.variant == named), group[0]))
    return out


def discover(kernel_dirs: Sequence[Path] = DEFAULT_KERNEL_DIRS,
             kind: str | None = kinds.DEFAULT) -> list[Kernel]:
    """Every kernel of ``kind`` under ``kernel_dirs``; the first broken file is an error."""
    registry = load_registry(kernel_dirs, kind)
    if registry.broken:
        raise SpecError(registry.broken[0].error)
    return registry.kernels


def select(kernels: Iterable[Kernel], patterns: Sequence[str]) -> list[Kernel]:
    """Kernels matching any pattern: a full key, a file stem (all its variants), a glob or a
    kernel file's path."""
    return Registry(list(kernels), [], None).select(patterns)
