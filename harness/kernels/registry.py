"""The kernel registry: every kernel file under the kernel folders, its variants expanded.

A kernel's registry key is its file stem; a file that declares variants gives one entry per
variant, keyed ``stem:variant``. Every file is read and validated, whatever its kind; the GEMM
commands see only ``kind = "gemm"`` kernels (the default of :func:`discover`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from harness.errors import HarnessError, SpecError
from harness.kernels.spec import KINDS, KernelSpec, read_spec

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KERNEL_DIRS = (PROJECT_ROOT / "cu", PROJECT_ROOT / "ptx")
KERNEL_SUFFIXES = (".cu", ".ptx")
OFFLINE_SM_COUNT = 132
"""SMs assumed for a grid formula that names SMS when no GPU is asked (an H100 SXM's)."""


def project_relative(path: Path) -> str:
    """``path`` relative to the project root, as reports and listings name kernel files (as
    given when it lies outside, e.g. a --kernel-dir elsewhere)."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
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

    def env(self, m: int, n: int, k: int) -> dict[str, int]:
        return {**self.param_env, "M": m, "N": n, "K": k}

    @cached_property
    def block_dims(self) -> tuple[int, int, int]:
        dims = tuple(int(e(self.param_env)) for e in self.spec.block)
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
        dims = tuple(int(e(env)) for e in self.spec.grid)
        if any(d < 1 for d in dims):
            raise SpecError(f"{self.spec.path}: grid {dims} for {self.name} at {m}x{n}x{k} has a "
                            "dimension < 1; check the grid formulas")
        return (*dims, 1, 1)[:3]

    def dynamic_smem_bytes(self, m: int, n: int, k: int) -> int:
        return int(self.spec.dynamic_smem_bytes(self.env(m, n, k)))

    def shape_problems(self, m: int, n: int, k: int) -> list[str]:
        """The declared constraints that ``m x n x k`` violates (empty when it may run)."""
        env = self.env(m, n, k)
        return [f"{m}x{n}x{k} violates the kernel's constraint {c.text!r}"
                for c in self.spec.constraints if not c(env)]

    @property
    def defines(self) -> tuple[str, ...]:
        """``-D`` options a .cu file is compiled with (its parameters)."""
        return tuple(f"-D{name}={value}" for name, value in self.params)


def kernels_in(spec: KernelSpec) -> list[Kernel]:
    """The registry entries of one kernel file."""
    if not spec.variants:
        return [Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))]
    return [
        Kernel(f"{spec.stem}:{variant}", spec, tuple(sorted({**spec.params, **values}.items())),
               variant)
        for variant, values in spec.variants.items()
    ]


def discover(kernel_dirs: Sequence[Path] = DEFAULT_KERNEL_DIRS,
             kind: str | None = "gemm") -> list[Kernel]:
    """Every kernel of ``kind`` (None: of every kind) under ``kernel_dirs`` (recursively),
    sorted by file path."""
    if kind is not None and kind not in KINDS:
        raise HarnessError(f"unknown kernel kind {kind!r}: expected one of {', '.join(KINDS)}")
    files: list[Path] = []
    for folder in kernel_dirs:
        folder = Path(folder)
        if not folder.is_dir():
            raise HarnessError(f"kernel folder {folder} does not exist; pass an existing folder "
                               "with --kernel-dir")
        files += [p for p in folder.rglob("*") if p.suffix in KERNEL_SUFFIXES]
    kernels: list[Kernel] = []
    seen: dict[str, Path] = {}
    for path in sorted(files):
        if path.stem in seen:
            raise SpecError(f"two kernel files share the stem {path.stem!r}: {seen[path.stem]} "
                            f"and {path}; the stem is the registry key, rename one")
        seen[path.stem] = path
        spec = read_spec(path)
        if kind is None or spec.kind == kind:
            kernels += kernels_in(spec)
    return kernels


def select(kernels: Iterable[Kernel], patterns: Sequence[str]) -> list[Kernel]:
    """Kernels matching any pattern: a full key, a file stem (all its variants) or a glob."""
    kernels = list(kernels)
    if not patterns:
        return kernels
    chosen: list[Kernel] = []
    for pattern in patterns:
        hits = [k for k in kernels
                if k.name == pattern or k.spec.stem == pattern or fnmatch.fnmatch(k.name, pattern)]
        if not hits:
            raise HarnessError(f"no kernel matches {pattern!r}; known kernels: "
                               f"{', '.join(k.name for k in kernels)} (see `harness list`)")
        chosen += [k for k in hits if k not in chosen]
    return chosen
