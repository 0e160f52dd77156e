"""The GEMM kind object (:class:`GemmKind`): what the core asks a GEMM through
harness.kinds.base.Kind."""

from __future__ import annotations

import math
from typing import Any

from harness.compiler.occupancy import abi_problems
from harness.errors import HarnessError
from harness.kinds.base import Column, Kind, percent, rate
from harness.kinds.dims import Problem, parse_dims
from harness.kinds.gemm.baselines import BASELINES
from harness.kinds.gemm.limits import compulsory_bytes


class GemmKind(Kind):
    name = "gemm"
    title = "GEMM"
    summary = "C = alpha A B + beta C, the common GEMM ABI (or a declared signature)"
    dims = ("M", "N", "K")
    square = True
    commands = ("run", "check", "compare", "tune", "profile", "launch", "energy", "build",
                "occupancy", "plan")
    baselines = BASELINES
    schema = 1
    headline_against = "of cuBLAS"

    def parse_table(self, table, source, match, path, fail) -> dict[str, Any]:
        from harness.kinds.gemm_shaped import gemm_shaped_fields

        return gemm_shaped_fields(table, source, match, path, fail, kind=self.name)

    def read_size(self, text: str, spec: Any = None) -> Problem:
        """``N`` (square), ``M,N,K``, ``MxNxK`` or ``M=..,N=..,K=..``; each within the ABI's
        32-bit int. The one reading of a GEMM's size (run/options.parse_size asks it)."""
        text = str(text)
        if "=" in text:
            problem = parse_dims(text, self.dims, square=True)
        else:
            parts = text.replace("x", ",").split(",")
            try:
                values = [int(p) for p in parts]
            except ValueError:
                raise HarnessError(f"size {text!r} is not N or M,N,K with positive "
                                   "integers") from None
            if len(values) == 1:
                values *= 3
            if len(values) != 3 or any(v < 1 for v in values):
                raise HarnessError(f"size {text!r} is not N or M,N,K with positive integers")
            problem = Problem(tuple(zip(self.dims, values, strict=True)))
        too_large = abi_problems(*problem.values)
        if too_large:
            raise HarnessError(f"size {text!r}: {too_large[0]}")
        return problem

    launches_baseline = True

    def launch_size(self, spec: Any) -> Problem:
        return self.read_size("4096")

    def launch(self, kernel: Any, options: Any) -> Any:
        from harness.kinds.gemm.launch import launch_gemm

        return launch_gemm(kernel, options)

    def slots(self, spec: Any, problem: Problem) -> tuple[int, int, int]:
        return problem.values  # type: ignore[return-value]

    def flops(self, spec: Any, problem: Problem) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]

    def compulsory_bytes(self, spec: Any, problem: Problem) -> float:
        fp8 = getattr(spec, "fp8", None)
        precision = "fp8" if fp8 is not None else spec.precision
        return compulsory_bytes(problem["M"], problem["N"], problem["K"], precision,
                                spec.c_type)

    launch_checked_offline = True

    def compile_ahead(self, kernel: Any, arch: str, pool: Any) -> None:
        from harness.kinds.gemm import ahead

        pool.submit(ahead.read_sass, kernel, arch)

    def compiled_ahead(self, kernels: list[Any], arch: str, pool: Any) -> None:
        from harness.kinds.gemm import ahead

        if any(k.spec.precision != "fp32" for k in kernels):  # tensor-core rows: % ceiling
            for kernel in ahead.ceiling_kernels(arch):
                pool.submit(ahead.compiled_quietly, kernel, arch)

    def plan(self, kernel: Any) -> Any:
        from harness.kinds.gemm.plan import plan

        return plan(kernel)

    def napkin(self, kernel: Any, size: tuple[int, int, int]) -> dict:
        from harness.report import napkin

        return dict(napkin.model(kernel.spec, dict(kernel.params), *size)) \
            if kernel.spec.model else {}

    def profile_row(self, name: str, info: dict, size: tuple[int, int, int], predicted: dict,
                    measured: dict, timings: dict, factor: float, **extra) -> dict:
        from harness.report.profile import row

        return row(name, "kernel", info, size, predicted, measured, timings, factor, **extra)

    def profile_sections(self, rows: list[dict], fmt: str = "github") -> list[str]:
        from harness.report.profile import gemm_sections

        return gemm_sections(rows, fmt)

    def library_facts(self, session: Any) -> dict:
        from harness.kinds.gemm.session import gemm_session

        return {"cublas_version": gemm_session(session).blas.version}

    loads_for_the_driver = True

    def load(self, session: Any, kernel: Any, carveout_pct: int | None = None) -> Any:
        from harness.kinds.gemm.session import gemm_session

        part = gemm_session(session)
        return part.load(kernel) if carveout_pct is None else part.load(kernel, carveout_pct)

    def session_sources(self) -> tuple[str, ...]:
        from harness.kinds.gemm.session import SOURCES

        return SOURCES

    def figures(self, result: Any) -> dict[str, float | None]:
        flops = 2.0 * result.m * result.n * result.k
        ms = result.timing.median_ms if result.timing else None
        base_ms = result.baseline.timing.median_ms if result.baseline else None
        gflops = rate(flops, ms) if ms is not None else None
        base = rate(flops, base_ms) if base_ms is not None else None
        return {"flops": flops, "gflops": gflops, "baseline_gflops": base,
                "pct_baseline": (percent(gflops, base) if ms is not None and base is not None
                                 else None),
                "pct_peak": (percent(gflops, result.peak_gflops_at_clock)
                             if ms is not None else None)}

    def columns(self) -> tuple[Column, ...]:
        return (Column("gflops", "GFLOP/s", 0, "GFLOP/s"),
                Column("pct_baseline", "% of {baseline}", 1, "%"),
                Column("pct_peak", "% of peak", 1, "%"))

    def power_gflops(self, result: Any, ms: float) -> float:
        return rate(2.0 * result.m * result.n * result.k, ms) if ms > 0 else math.nan

    def report_notes(self, results: list[Any]) -> list[str]:
        from harness.kinds.gemm import report

        return report.report_notes(results)

    def table(self, results: list[Any], **how) -> str:
        from harness.kinds.gemm import report

        return report.table(results, **how)

    def describe(self, result: Any) -> str | None:
        if result.status != "pass" or result.timing is None or result.baseline is None:
            return None
        f = self.figures(result)
        return (f"{result.kernel.name} {self.size_text(result)}: {f['gflops']:.0f} GFLOP/s, "
                f"{f['pct_baseline']:.1f}% of {result.baseline.library} "
                f"({f['baseline_gflops']:.0f} GFLOP/s)")

    def run_kernel(self, session: Any, kernel: Any, job: Any, ctx: Any, after: Any = None,
                   before: Any = None) -> Any:
        from harness.kinds.gemm import work

        return work.run_kernel(session, kernel, job, ctx, after, before)

    def compare_kernels(self, session: Any, kernels: list[Any], job: Any, ctx: Any) -> None:
        from harness.kinds.gemm import work

        work.compare_kernels(session, kernels, job, ctx)

    def open_for(self, session: Any, job: Any) -> None:
        from harness.kinds.gemm import work

        work.open_for(session, job)

    def draw_ahead(self, kernel: Any, job: Any, problems: Any, session: Any, ctx: Any) -> None:
        from harness.kinds.gemm import work

        work.draw_ahead(kernel, job, problems, session, ctx)
