"""The pytest plugin: one test per kernel file and variant, ``pytest --harness-kernels DIR``.

Installed with the package (a ``pytest11`` entry point); it does nothing unless asked, by
``--harness-kernels DIR`` (repeatable) or by the rootdir's ``pyproject.toml``::

    [tool.harness]
    kernels = ["kernels/"]      # folders, relative to the rootdir
    arch = "sm_90"              # optional: --harness-arch
    size = "1024"               # optional: --harness-size (N or M,N,K; or a buffers kernel's
                                # dims, as 1<<20 or 4096x1024)

Each kernel file under the folders gives two tests per variant: ``<file>::<registry
key>::build`` compiles the kernel for the target arch, reads the ptxas report, checks the
launch limits at the size and the spec's ``[budget]`` (no GPU needed), and
``<file>::<registry key>::check`` runs the check battery (``harness check``) at the size on the
GPU, or is skipped with the reason where there is none, so that a compile is never mistaken for
a check. A file whose spec cannot be read gives one test that fails with the registry's
message. A failure prints the harness's finding, not a traceback.
The ``harness_gpu`` fixture (:mod:`harness.testing`) comes with the plugin; what the plugin is
asked (its options, the table) is read in :mod:`harness.pytest_settings`.

GEMMs are built and checked at the size (default 1024; one that is not N or M,N,K, as
4096x1024, leaves them at 1024). A ``kind = "buffers"`` kernel (notes/buffers_kind.md) is built
and checked (its battery, then a check at the size, no timing) at the size read as its dims
where it fits them ("1024" fits a kernel of one dim, N), else at the smallest of its spec's
``sizes``. Ceiling kernels are skipped (``harness ceiling`` measures them).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harness import kinds
from harness.errors import HarnessError
from harness.kinds import sizes as kernel_sizes
from harness.pytest_settings import (
    _SETTINGS,
    _STATE,
    _kernel_size,
    _Settings,
    _settings,
    _State,
)
from harness.testing import DEFAULT_ARCH, DEFAULT_SIZE, budget_problems, short_message
from harness.testing import harness_gpu as harness_gpu  # registered as a fixture with the plugin

if TYPE_CHECKING:
    from harness.gpu.driver import GpuStatus


class KernelFinding(Exception):
    """A kernel test's failure: the harness's finding, shown as it is (no traceback)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("harness", "kernel harness: one test per kernel file and variant")
    group.addoption("--harness-kernels", action="append", metavar="DIR",
                    help="collect one test per kernel file (.cu, .ptx) and variant under DIR "
                         "(repeatable; default: [tool.harness] kernels in pyproject.toml, "
                         "else none)")
    group.addoption("--harness-arch", metavar="ARCH",
                    help=f"compile target of the kernel tests (default {DEFAULT_ARCH})")
    group.addoption("--harness-size", metavar="N|M,N,K",
                    help="problem size of the launch checks and of the GPU check battery "
                         f"(default {DEFAULT_SIZE[0]}); a buffers kernel's dims where it fits "
                         "them (1<<20, 4096x1024), else its smallest spec size")


def pytest_configure(config: pytest.Config) -> None:
    settings = _settings(config)
    if settings is not None:
        config.stash[_SETTINGS] = settings
        config.stash[_STATE] = _State()


def pytest_report_header(config: pytest.Config) -> str | None:
    settings = config.stash.get(_SETTINGS, None)
    if settings is None:
        return None
    buffers = (f"{settings.size_text} where it fits their dims, else " if settings.size_text
               else "") + "the smallest of their spec's sizes"
    return (f"harness: kernels under {', '.join(map(str, settings.kernel_dirs))} "
            f"({settings.origin}), built for {settings.arch} at "
            f"{'x'.join(map(str, settings.size))} (GEMMs; buffers kernels at {buffers})")


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    settings = collector.config.stash.get(_SETTINGS, None)
    if settings is not None and isinstance(collector, pytest.Session) and report.passed:
        report.result.extend(_kernel_files(collector, settings))
    return report


def _kernel_files(session: pytest.Session, settings: _Settings) -> list[KernelFile]:
    """One collector per kernel file under the folders (the registry's order)."""
    from harness.kernels.registry import load_registry

    registry = load_registry(settings.kernel_dirs, kind=None)
    by_file: dict[Path, list] = {}
    for kernel in registry.kernels:
        by_file.setdefault(kernel.spec.path, []).append(kernel)
    broken = {bad.path: bad.error for bad in registry.broken}
    files = []
    for path in sorted(set(by_file) | set(broken)):
        path = path.resolve()
        if settings.only_under is not None and not any(
                path == top or path.is_relative_to(top) for top in settings.only_under):
            continue
        nodeid = Path(os.path.relpath(path, session.config.rootpath)).as_posix()
        files.append(KernelFile.from_parent(session, path=path, nodeid=nodeid,
                                            kernels=by_file.get(path, []),
                                            error=broken.get(path)))
    return files


class KernelFile(pytest.File):
    """A kernel file: a collector per variant, or one failing test when its spec cannot be
    read."""

    def __init__(self, *, kernels=(), error: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.kernels = kernels
        self.error = error

    def collect(self):
        if self.error is not None:
            yield BrokenKernelTest.from_parent(self, name=self.path.stem, error=self.error)
        for kernel in self.kernels:
            yield KernelCase.from_parent(self, name=kernel.name, kernel=kernel)


class KernelCase(pytest.Collector):
    """One kernel (a file, or one variant of it): its ``build`` test (offline) and its
    ``check`` test (the GPU check battery)."""

    def __init__(self, *, kernel, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel

    def collect(self):
        from harness.archs import can_run, get_arch

        arch = self.config.stash[_SETTINGS].arch
        need = get_arch(self.kernel.spec.min_arch)
        # skips known before a compile are marks: pytest reports them at the kernel file
        skip = None
        kind = kinds.of(self.kernel.spec)
        if not kind.takes("check"):
            skip = (f"a {kind.name} kernel: `{kind.runs_it()}` measures it; the plugin tests "
                    + " and ".join(k.title for k in kinds.all_kinds() if k.takes("check"))
                    + " kernels")
        elif not can_run(need, get_arch(arch)):
            skip = f"needs {need.name} (min_arch), not built for {arch}"
        for kind in (KernelBuildTest, KernelCheckTest):
            test = kind.from_parent(self, name=kind.NAME, kernel=self.kernel)
            if skip:
                test.add_marker(pytest.mark.skip(reason=skip))
            yield test


class _HarnessTest(pytest.Item):
    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, KernelFinding | HarnessError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, 0, f"kernel {self.name}"


class BrokenKernelTest(_HarnessTest):
    """A kernel file the registry could not read: fails with the registry's message."""

    def __init__(self, *, error: str, **kwargs):
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise KernelFinding(self.error)


def _skip(reason: str) -> None:
    """Skip the running kernel test, reported at its kernel file (as a mark's skip is), not at
    a line of this module."""
    try:
        exc = pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without it: the reason is what matters
        exc = pytest.skip.Exception(reason)
    raise exc


def _offline_finding(kernel, settings: _Settings) -> str:
    """The offline build of ``kernel`` judged: "" when it compiles, can launch at its size
    (:func:`_kernel_size`) and keeps its ``[budget]``; else the finding. Raises pytest's skip
    where the build skips."""
    from harness.compiler.offline import build_row

    size, text = _kernel_size(kernel, settings)
    row = build_row(kernel, settings.arch, size)
    label = f"{row['kernel']} ({row['arch']})"
    if kernel_sizes.has_own_sizes(kernel):
        label += f" at {text}"
        if "size" in row:
            row = {**row, "size": [int(d) for d in text.split("x")]}
    if row["status"] == "skipped":
        _skip(row["message"])
    if row["status"] != "ok":
        return f"{label}: {row['status']}: {short_message(row['message'])}"
    problems = budget_problems(row, kernel.spec.budget)
    if problems:
        return f"{label} is over its [budget]: " + "; ".join(problems)
    return ""


class KernelBuildTest(_HarnessTest):
    """``::build``: the offline build, its launch limits and ``[budget]`` (no GPU)."""

    NAME = "build"

    def __init__(self, *, kernel, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel

    def reportinfo(self):
        return self.path, 0, f"kernel {self.kernel.name}: offline build"

    def runtest(self) -> None:
        settings, state = self.config.stash[_SETTINGS], self.config.stash[_STATE]
        state.tests_run += 1
        if kernel_sizes.has_own_sizes(self.kernel):
            state.buffers[self.kernel.name] = _kernel_size(self.kernel, settings)[1]
        finding = _offline_finding(self.kernel, settings)
        state.built[self.kernel.name] = finding
        if finding:
            raise KernelFinding(finding)


class KernelCheckTest(_HarnessTest):
    """``::check``: the check battery on the GPU; skipped, with the reason, without one (or
    when the offline build failed: its ``::build`` test says why)."""

    NAME = "check"

    def __init__(self, *, kernel, **kwargs):
        super().__init__(**kwargs)
        self.kernel = kernel

    def reportinfo(self):
        return self.path, 0, f"kernel {self.kernel.name}: GPU check battery"

    def runtest(self) -> None:
        settings, state = self.config.stash[_SETTINGS], self.config.stash[_STATE]
        finding = state.built.get(self.kernel.name)
        if finding is None:  # its build test did not run here (deselected, another worker)
            finding = _offline_finding(self.kernel, settings)
        if finding:
            _skip(f"not checked: the offline build failed ({self.kernel.name}::build says why)")
        if state.gpu is None:
            state.gpu = _probe_gpu()
        status, arch = state.gpu
        if not status.found:
            _skip(f"not checked: no GPU ({status.reason}); ::build compiled the kernel and "
                  "checked its limits offline, nothing ran")
        self._check_on_gpu(*_kernel_size(self.kernel, settings), arch)

    def _check_on_gpu(self, size: tuple[int, int, int], text: str, arch: str) -> None:
        """The check battery and a check at ``size`` (``text``), no timing, in a worker (a
        buffers kernel's: measure_kernel's, timed=False)."""
        from harness.bench.result import PASSED
        from harness.run.runner import RunOptions, run

        log: list[str] = []
        with tempfile.TemporaryDirectory(prefix="harness-pytest-") as folder:
            record = run([self.kernel], arch, RunOptions(sizes=(size,)),
                         Path(folder) / "check.jsonl", log.append, mode="check")
        self.add_report_section("call", "harness", "\n".join(log))
        failed = [r for r in record.results if r.status not in PASSED]
        if failed or not record.results:
            raise KernelFinding("\n".join(
                f"{r.kernel.name} at {text} on {arch}: {r.status}: {_finding(r)}"
                f"{short_message(r.message)}" for r in failed) or "the check produced no result")


def _finding(result) -> str:
    """The finding ("wrong: ") of a kind whose failure text does not say it; "" where the
    message starts with it (a GEMM's) and where there is none."""
    finding = (result.checks.finding if result.checks
               and not result.kind_of.message_names_finding() else "ok")
    return "" if finding in ("ok", "") or result.message.startswith(finding) else f"{finding}: "


def _probe_gpu() -> tuple[GpuStatus, str]:
    """The GPU, and its compile target ("" without one)."""
    from harness.gpu.driver import device_arch_name, gpu_status

    status = gpu_status()
    return status, device_arch_name() if status.found else ""


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    settings, state = config.stash.get(_SETTINGS, None), config.stash.get(_STATE, None)
    if settings is None or state is None or not state.tests_run:
        return
    status, arch = state.gpu or (None, "")
    battery = ("no kernel got as far as the check battery" if status is None
               else f"the check battery ran on {status.name} ({arch})" if status.found
               else f"no check battery (no GPU: {status.reason}): built and checked offline only, "
                    "the ::check tests skipped")
    at = ([f" at {'x'.join(map(str, settings.size))}"] if state.tests_run > len(state.buffers)
          else [])
    if state.buffers:
        named = [f"{name} {dims}" for name, dims in sorted(state.buffers.items())]
        at.append(", buffers kernels at their dims (" + ", ".join(named[:4])
                  + (", ..." if len(named) > 4 else "") + ")")
    terminalreporter.write_line(f"harness: {state.tests_run} kernel test(s) built for "
                                f"{settings.arch}{''.join(at)}; {battery}")
