"""The attention kind: forward attention ``O = softmax(scale Q K^T + mask) V``
(docs/attention.md)."""

from __future__ import annotations

import math

import numpy as np

from harness.kinds.attention import battery, napkin, numerics, problem
from harness.kinds.attention import spec as attention_spec
from harness.kinds.attention.baselines import BASELINES
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.base import Column, Kind, Problem, percent, rate


class AttentionKind(Kind):
    name = "attention"
    summary = ("forward attention softmax(scale QK^T + mask) V: BF16/FP16 in, FP32 "
               "accumulation, bottom-right causal mask, optional log-sum-exp")
    dims = problem.DIMS
    square = False
    baselines = BASELINES
    commands = ("plan", "build")  # run and check: the issue "Attention on the H100" wires them
    own_command = "harness check --plan"
    """What takes an attention kernel today: its battery listed (the API's ``.plan()``
    alike), its build, and ``harness run`` without a GPU (its build at each size a run
    takes); the checks on the GPU run through tests/test_attention_gpu.py."""

    def parse_table(self, table, source, match, path, fail):
        return attention_spec.parse_table(table, source, match, path, fail)

    def read_size(self, text: str, spec=None) -> AttentionProblem:
        return problem.read_size(text)

    def default_sizes(self, spec, *, quick: bool = False) -> tuple[Problem, ...]:
        sizes = problem.timed_first()
        if spec is not None and spec.kind_spec is not None:
            ks = spec.kind_spec
            sizes = tuple(p for p in sizes if (ks.causal or not p.causal))
            if ks.head_dims and 128 not in ks.head_dims:
                sizes = tuple(AttentionProblem.make(p["B"], p["H"], p["S_q"], p["S_kv"],
                                                    ks.head_dims[0], causal=p.causal)
                              for p in sizes)
        return sizes[:1] if quick else sizes

    def run_problems(self, kernel) -> tuple[AttentionProblem, ...]:
        """The sizes a run of ``kernel`` takes without ``--size``: each timed size at the
        head dim its variant launches at (its ``HEAD_DIM``, else the size's, else the first
        of the spec's head dims that fits); a size none fits stays as it is (its row says
        why it cannot launch)."""
        from harness.kinds.attention import build

        params = build.params_of(kernel.spec, kernel.variant)
        chosen = []
        for first in self.default_sizes(kernel.spec):
            heads = (params.get("HEAD_DIM"), first["D"], *kernel.spec.kind_spec.head_dims)
            fitting = [AttentionProblem.make(first["B"], first["H"], first["S_q"],
                                             first["S_kv"], d, causal=first.causal)
                       for d in dict.fromkeys(h for h in heads if h)]
            chosen.append(next((p for p in fitting if build.fits(kernel.spec, p, params)),
                               first))
        return tuple(dict.fromkeys(chosen))

    def build_row(self, kernel, arch: str, size: str | None, limit_s=None) -> dict:
        """ptxas's report and the launch at ``size`` (default: the first timed size, at the
        variant's head dim)."""
        chosen = self.read_size(size) if size else self.run_problems(kernel)[0]
        return self._row(kernel, arch, chosen, limit_s)

    def offline_rows(self, kernel, arch: str, sizes=(), limit_s=None) -> list[dict]:
        problems = tuple(map(self.read_size, sizes)) or self.run_problems(kernel)
        return [self._row(kernel, arch, p, limit_s)
                for p in sorted(problems, key=lambda p: self.flops(kernel.spec, p))]

    @staticmethod
    def _row(kernel, arch: str, chosen: AttentionProblem, limit_s) -> dict:
        from harness.kinds.attention import build

        row = build.report_row(kernel.spec, arch, chosen, kernel.variant, limit_s)
        return {**row, "kernel": kernel.name, "file": str(kernel.spec.path.name)}

    def problem_of(self, result) -> Problem:
        dims = getattr(result, "problem", None)
        if not dims:
            raise ValueError("an attention result records its problem's dims")
        return AttentionProblem.from_json(dims)

    def flops(self, spec, problem: AttentionProblem) -> float:
        return float(napkin.flops(problem))

    def compulsory_bytes(self, spec, problem: AttentionProblem) -> float:
        precision = getattr(spec, "precision", "bf16") if spec is not None else "bf16"
        lse = bool(spec is not None and spec.kind_spec is not None and spec.kind_spec.lse)
        return float(napkin.compulsory_bytes(problem, precision, lse))

    def figures(self, result) -> dict[str, float | None]:
        """FLOP/s on the exact count (causal pairs counted), the baseline's, % of it, and the
        compulsory bytes' rate; None where a time was not measured."""
        p = self.problem_of(result)
        timing = getattr(result, "timing", None)
        baseline = getattr(result, "baseline", None)
        ms = timing.median_ms if timing else None
        base_ms = baseline.timing.median_ms if baseline and baseline.timing else None
        flops = float(napkin.flops(p))
        return {"flops": flops,
                "gflops": rate(flops, ms) if ms is not None else None,
                "baseline_gflops": rate(flops, base_ms) if base_ms is not None else None,
                "pct_baseline": (percent(base_ms, ms) if ms is not None and base_ms is not None
                                 else None),
                "gbps": rate(napkin.compulsory_bytes(p), ms) if ms is not None else None}

    def columns(self) -> tuple[Column, ...]:
        return (Column("gflops", "GFLOP/s", 0, "GFLOP/s"),
                Column("pct_baseline", "% of {baseline}", 1, "%"),
                Column("gbps", "GB/s (compulsory)", 0, "GB/s"))

    def baseline_name(self, spec) -> str | None:
        chosen = getattr(getattr(spec, "kind_spec", None), "baseline", None)
        return chosen or self.baselines.default_for(spec)

    # --- the battery, on the host -------------------------------------------------------
    def cases_for(self, spec, variant: str | None = None) -> tuple[battery.Case, ...]:
        """The battery's cases at shapes a kernel of ``spec`` (its ``variant``) takes: every
        case, its head dim moved to one the kernel runs where needed; causal cases only for
        a kernel with the mask."""
        from harness.kinds.attention.build import fitted, params_of
        params = params_of(spec, variant)
        return tuple(c for c in (fitted(case, spec, params) for case in battery.CASES)
                     if c is not None)

    def plan(self, kernel) -> battery.Plan:
        """``harness check --plan``: the battery of ``kernel`` (a registry Kernel: its spec
        and parameters) at the shapes its constraints allow."""
        from harness.kinds.attention.build import fitted
        params = dict(kernel.params)
        cases = tuple(c for c in (fitted(case, kernel.spec, params) for case in battery.CASES)
                      if c is not None)
        return battery.Plan(kernel.name, cases)

    def check_outputs(self, spec, case: battery.Case, drawn: battery.Drawn, o_raw: np.ndarray,
                      lse_raw: np.ndarray | None = None, scale: float | None = None
                      ) -> numerics.Verdict:
        """Judge a launch's outputs as the device wrote them (``o_raw`` in the kernel's
        layout and storage type, ``lse_raw`` FP32), poison found bit for bit."""
        return judge_raw(spec, case, drawn, o_raw, lse_raw, scale)


def judge_raw(spec, case, drawn, o_raw, lse_raw=None, scale=None) -> numerics.Verdict:
    """The verdict on raw device outputs (see AttentionKind.check_outputs)."""
    from harness.kinds.attention.reference import exact, from_layout
    ks = spec.kind_spec
    poison = numerics.BF16_POISON if spec.precision == "bf16" else numerics.FP16_POISON
    bits = np.asarray(o_raw).view(np.uint16)
    o_unwritten = from_layout(bits == poison, ks.layout)
    o = from_layout(exact(o_raw, spec.precision), ks.layout)
    lse = lse_unwritten = None
    if ks.lse and lse_raw is not None:
        lse_bits = np.asarray(lse_raw, dtype=np.float32).view(np.uint32)
        lse_unwritten = lse_bits == np.uint32(numerics.LSE_POISON)
        lse = np.asarray(lse_raw, dtype=np.float32).astype(np.float64)
    arithmetic = numerics.Arithmetic(spec.precision, ks.p_precision(spec.precision))
    scale = case.scale if scale is None else scale
    ref = numerics.reference(drawn.q, drawn.k, drawn.v, scale, case.problem.causal,
                             arithmetic)
    return numerics.judge(o, o_unwritten, ref, arithmetic, case.problem["S_kv"], lse=lse,
                          lse_unwritten=lse_unwritten,
                          suspects=battery.suspects(case, drawn, arithmetic, scale))


def softmax_scale(d: int) -> float:
    return 1.0 / math.sqrt(d)
