"""The buffers kind object (:class:`BuffersKind`): a kernel of its own parameters, named
buffers and dims (a sum, a softmax, a copy), judged in bytes (notes/buffers_kind.md)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.kinds.base import Column, Kind, percent, rate
from harness.kinds.buffers.named import BASELINE_OBJECTS
from harness.kinds.dims import Problem

SIGNATURE_PREFIX = "buffers: "
"""How a buffers kernel's signature text begins in a result (KernelInfo.signature): what
tells its rows in reports written before results named their kind."""


class BuffersKind(Kind):
    name = "buffers"
    summary = "its own parameters: named buffers and dims, a reference, compulsory bytes"
    dims = ()
    """Each kernel names its own (``dims = [...]`` in its spec)."""
    square = False
    commands = ("run", "check", "compare", "tune", "profile", "launch", "build", "occupancy")
    baselines = BASELINE_OBJECTS
    schema = 1
    compare_mode = "then the first kernel's library baseline"
    tune_baseline = "the spec's baseline, timed with every point"

    def parse_table(self, table, source, match, path, fail) -> dict[str, Any]:
        from harness.kinds.buffers.spec import buffers_kernel_spec

        fields = buffers_kernel_spec(table, source, match, path, fail)
        if Path(path).is_file():  # a spec read from disk: its py: reference must be there
            from harness.kinds.buffers.pyref_check import py_reference_problem

            problem = py_reference_problem(Path(path), fields["buffers"].reference)
            if problem:
                raise fail(problem)
        return {**fields, "kind": self.name, "kind_spec": fields.get("buffers")}

    def dims_of(self, spec: Any) -> tuple[str, ...]:
        return tuple(spec.buffers.dims)

    def read_size(self, text: str, spec: Any = None) -> Problem:
        """``--size`` as ``spec``'s dims: ``"1<<28"``, ``"4096x1024"`` or ``rows=..,cols=..``;
        a GEMM's ``M,N,K`` is refused for the dims it does not fit."""
        if spec is None:
            raise HarnessError("a buffers kernel's size is read against its spec's dims")
        from harness.kernels.expr import size_formulas
        from harness.kinds.dims import parse_dims

        dims = self.dims_of(spec)
        where = getattr(spec, "stem", "") or str(getattr(spec, "path", ""))
        if "=" in str(text):
            return parse_dims(str(text), dims, square=False, what="--size")

        def fail(message: str) -> HarnessError:
            gemm = "; M,N,K is a GEMM's size" if "," in str(text) else ""
            return HarnessError(f"{message} (the dims of {where}{gemm})")

        values = tuple(int(e({})) for e in size_formulas(str(text).replace(",", "x"), dims,
                                                          fail, "--size"))
        return Problem(tuple(zip(dims, values, strict=True)))

    def default_sizes(self, spec: Any, *, quick: bool = False) -> tuple[Problem, ...]:
        dims = self.dims_of(spec)
        return tuple(Problem(tuple(zip(dims, s, strict=True)))
                     for s in spec.buffers.default_sizes())

    def launch(self, kernel: Any, options: Any) -> Any:
        from harness.kinds.buffers.launch import launch_buffers

        return launch_buffers(kernel, tuple(options.size), options.repeats,
                              checked=not options.setting, gap_ms=options.gap_ms)

    def recognises_row(self, row: dict) -> bool:
        return "dims" in row

    def napkin(self, kernel: Any, size: tuple[int, int, int]) -> dict:
        """Its spec's ``bytes`` at its dims: compulsory and global bytes alike."""
        nbytes = int(kernel.evaluate(kernel.spec.buffers.bytes, kernel.env(*size)))
        return {"compulsory_bytes": nbytes, "global_bytes": nbytes}

    def profile_row(self, name: str, info: dict, size: tuple[int, int, int], predicted: dict,
                    measured: dict, timings: dict, factor: float, **extra) -> dict:
        from harness.kinds.buffers import profile

        info = dict(info)
        dims = info.pop("dims")
        return profile.row(name, info, size, dims, predicted, measured, timings, factor,
                           **extra)

    def profile_sections(self, rows: list[dict], fmt: str = "github") -> list[str]:
        from harness.kinds.buffers import profile

        return profile.sections(rows, fmt)

    def profile_legend(self) -> list[str]:
        from harness.kinds.buffers import profile

        return list(profile.LEGEND)

    def slots(self, spec: Any, problem: Problem) -> tuple[int, int, int]:
        """A problem as a run's (m, n, k) slots carry it: its dims in order, padded with 1."""
        return (*problem.values, 1, 1)[:3]  # type: ignore[return-value]

    def flops(self, spec: Any, problem: Problem) -> float:
        f = spec.buffers.flops
        return float(f(problem.as_dict())) if f is not None else 0.0

    def compulsory_bytes(self, spec: Any, problem: Problem) -> float:
        return float(spec.buffers.bytes(problem.as_dict()))

    def problem_of(self, result: Any) -> Problem:
        if result.memory is not None:
            return Problem(tuple(result.memory.dims.items()))
        return super().problem_of(result)

    def recognises(self, result: Any) -> bool:
        return (getattr(result, "memory", None) is not None
                or result.kernel.signature.startswith(SIGNATURE_PREFIX))

    def figures(self, result: Any) -> dict[str, float | None]:
        memory = result.memory
        if memory is None:
            return {"flops": 0.0, "gflops": None, "baseline_gflops": None, "gbps": None,
                    "baseline_gbps": None, "pct_baseline": None, "pct_peak": None,
                    "pct_copy": None}
        ms = result.timing.median_ms if result.timing else None
        base_ms = result.baseline.timing.median_ms if result.baseline else None
        gbps = rate(memory.bytes, ms) if ms is not None else None
        return {
            "flops": memory.flops,
            "gflops": rate(memory.flops, ms) if ms is not None and memory.flops else None,
            "baseline_gflops": (rate(memory.flops, base_ms)
                                if base_ms is not None and memory.flops else None),
            "gbps": gbps,
            "baseline_gbps": rate(memory.bytes, base_ms) if base_ms is not None else None,
            "pct_baseline": (percent(base_ms, ms) if ms is not None and base_ms is not None
                             else None),
            "pct_peak": percent(gbps, memory.dram_peak_gbps) if ms is not None else None,
            "pct_copy": percent(gbps, memory.ceiling_gbps) if ms is not None else None}

    def columns(self) -> tuple[Column, ...]:
        return (Column("gbps", "GB/s", 0, "GB/s"),
                Column("pct_baseline", "% of {baseline}", 1, "%"),
                Column("pct_copy", "% of copy", 1, "%"),
                Column("pct_peak", "% of DRAM", 1, "%"))

    def power_gflops(self, result: Any, ms: float) -> float:
        memory = result.memory
        return rate(memory.flops, ms) if memory is not None and memory.flops and ms > 0 \
            else math.nan

    def report_notes(self, results: list[Any]) -> list[str]:
        from harness.kinds.buffers import table

        return table.report_notes(results)

    def table(self, results: list[Any], **how) -> str:
        from harness.kinds.buffers import table

        return table.kind_table(results, **how)

    def rank(self, result: Any) -> float:
        value = self.figures(result).get("gbps")
        return value if value is not None and value == value else 0.0

    def rate_text(self, result: Any) -> str:
        return f"{self.figures(result).get('gbps') or 0.0:.0f} GB/s"

    def describe(self, result: Any) -> str | None:
        if result.memory is None or result.status != "pass" or result.timing is None:
            return None
        f = self.figures(result)
        against = (f", {f['pct_baseline']:.1f}% of its baseline ({f['baseline_gbps']:.0f} GB/s)"
                   if result.baseline else "")
        return (f"{result.kernel.name} {self.size_text(result)}: {f['gbps']:.0f} GB/s, "
                f"{f['pct_copy']:.1f}% of the memory ceiling{against}")

    def message_names_finding(self) -> bool:
        return False

    def run_kernel(self, session: Any, kernel: Any, job: Any, ctx: Any, after: Any = None,
                   before: Any = None) -> Any:
        from harness.kinds.buffers import work

        return work.run_kernel(session, kernel, job, ctx, after, before)

    def compare_kernels(self, session: Any, kernels: list[Any], job: Any, ctx: Any) -> None:
        from harness.kinds.buffers import work

        work.compare_kernels(session, kernels, job, ctx)
