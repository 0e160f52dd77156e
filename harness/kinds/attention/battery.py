"""The battery an attention kernel faces, the suspects that name a failure's cause, and
simulated kernels (right ones summing in any order, and each named mistake) that prove the
verdicts on the host.

Every case draws fresh inputs from its own generator (one per launch, seeded per run); each
exists to expose one cause, which its name says.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from harness.kinds.attention.numerics import Arithmetic, reference
from harness.kinds.attention.problem import AttentionProblem
from harness.kinds.attention.reference import Reference, exact, stored


@dataclass(frozen=True)
class Case:
    """One check: a problem, the range inputs are drawn in, and the cause it exposes."""

    name: str
    problem: AttentionProblem
    exposes: str
    values: tuple[float, float] = (-1.0, 1.0)
    """Q and K are drawn in this range (V in [-1, 1]); a positive range makes every logit
    large."""
    pins_d: bool = False
    """The case is about its head dim: a kernel that runs another one skips it (the variant
    that runs it takes it) rather than run it at another D."""

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.problem["D"])


def _p(b, h, s_q, s_kv, d, h_kv=None, causal=False) -> AttentionProblem:
    return AttentionProblem.make(b, h, s_q, s_kv, d, h_kv, causal)


CASES = (
    Case("ragged", _p(2, 3, 77, 77, 64), "rows or keys past the last full tile (S = 77 is a "
         "multiple of no tile)"),
    Case("s_q_ne_s_kv", _p(1, 2, 100, 263, 128), "S_q and S_kv mixed up"),
    Case("causal_square", _p(1, 2, 193, 193, 64, causal=True), "causal mask off by one"),
    Case("causal_s_q_lt_s_kv", _p(1, 2, 50, 300, 128, causal=True),
         "causal mask aligned top-left instead of bottom-right"),
    Case("causal_s_q_gt_s_kv", _p(1, 2, 130, 70, 64, causal=True),
         "rows that see no key (output 0, log-sum-exp -inf)"),
    Case("grouped_query", _p(1, 8, 129, 129, 128, h_kv=2), "key/value head of a query head"),
    Case("head_dim_64", _p(1, 2, 96, 96, 64), "head dim 64", pins_d=True),
    Case("head_dim_128", _p(1, 2, 96, 96, 128), "head dim 128", pins_d=True),
    Case("head_dim_256", _p(1, 2, 96, 96, 256), "head dim 256", pins_d=True),
    Case("large_logits", _p(1, 2, 64, 200, 128), "no running maximum (logits past 88.7 "
         "overflow exp in FP32)", values=(4.0, 8.0)),
    Case("long", _p(1, 1, 64, 4096, 64), "16-bit accumulation over many keys"),
)
"""The battery; a kernel declaring constraints (head dims, no causal) gets the cases that
fit them (kind.cases_for)."""


@dataclass(frozen=True)
class Drawn:
    """One launch's inputs: stored 16-bit patterns and their exact float64 values (logical
    [B, heads, S, D])."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    q_raw: np.ndarray
    k_raw: np.ndarray
    v_raw: np.ndarray


def draw(case: Case, precision: str, rng: np.random.Generator) -> Drawn:
    """Fresh inputs for one launch of ``case``, rounded to ``precision``."""
    b, h, hkv, sq, skv, d = case.problem.values
    lo, hi = case.values
    raw = [stored(rng.uniform(lo, hi, (b, h, sq, d)), precision),
           stored(rng.uniform(lo, hi, (b, hkv, skv, d)), precision),
           stored(rng.uniform(-1.0, 1.0, (b, hkv, skv, d)), precision)]
    q, k, v = (exact(r, precision) for r in raw)
    return Drawn(q, k, v, *raw)


def suspects(case: Case, drawn: Drawn, arithmetic: Arithmetic, scale: float
             ) -> Callable[[], Iterator[tuple[str, Reference]]]:
    """The likely mistakes, each as the output it would give, for judge() to name."""
    causal = case.problem.causal

    def masked(offset: int, top_left: bool = False):
        return lambda q, k, v, s: _shifted_mask(q, k, v, s, offset, top_left, arithmetic)

    def gen() -> Iterator[tuple[str, Reference]]:
        q, k, v = drawn.q, drawn.k, drawn.v
        for cause, s in (("wrong softmax scale (log2 e applied twice: exp2 of natural-log "
                          "logits)", scale * math.log2(math.e)),
                         ("wrong softmax scale (none applied)", 1.0),
                         ("wrong softmax scale (1/D instead of 1/sqrt(D))", scale * scale)):
            yield cause, reference(q, k, v, s, causal, arithmetic)
        if causal:
            yield ("causal mask off by one (the diagonal left out)",
                   masked(-1)(q, k, v, scale))
            yield ("causal mask off by one (one key past the diagonal seen)",
                   masked(+1)(q, k, v, scale))
            if case.problem.offset:
                yield ("causal mask aligned top-left (expected bottom-right: query i sees "
                       "key j <= i + S_kv - S_q)", masked(0, True)(q, k, v, scale))
            yield "causal mask not applied", reference(q, k, v, scale, False, arithmetic)
        else:
            yield "causal mask applied where none was asked", masked(0)(q, k, v, scale)
    return gen


def _shifted_mask(q, k, v, scale, offset, top_left, arithmetic) -> Reference:
    # the reference with the diagonal moved by `offset` keys (or aligned top-left): rows are
    # computed one at a time on the keys they see
    b, h, s_q, d = q.shape
    s_kv = k.shape[2]
    diagonal = (0 if top_left else s_kv - s_q) + offset
    parts = []
    for i in range(s_q):
        seen = max(0, min(s_kv, i + diagonal + 1))
        if seen == 0:
            parts.append(None)
            continue
        parts.append(reference(q[:, :, i:i + 1], k[:, :, :seen], v[:, :, :seen], scale,
                               False, arithmetic))
    return _stack(parts, b, h, d)


def _stack(parts, b, h, d) -> Reference:
    def field(name, shape_tail, empty):
        return np.concatenate([getattr(p, name) if p is not None else
                               np.full((b, h, 1, *shape_tail), empty) for p in parts], axis=2)
    return Reference(field("o", (d,), 0.0), field("lse", (), -np.inf), field("m", (), -np.inf),
                     field("abs_pv", (d,), 0.0), field("spread_pv", (d,), 0.0),
                     field("spread_p", (), 0.0))


SEEDS = 3
"""Fresh draws per case and kernel (each from the run's one generator)."""


@dataclass(frozen=True)
class Plan:
    """A kernel's battery as its spec derives it (``harness check --plan``)."""

    kernel: str
    checks: tuple[Case, ...]
    seeds: int = SEEDS

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "seeds": self.seeds,
                "checks": [{"name": c.name, "size": c.problem.text, "exposes": c.exposes,
                            "values": list(c.values)} for c in self.checks]}

    def table(self, width: int | None = None) -> str:
        lines = [f"{self.kernel}: {len(self.checks)} checks x {self.seeds} seeds (fresh inputs "
                 "each, outputs poisoned)"]
        lines += [f"  {c.name:<20} {c.problem.short:<28} {c.exposes}" for c in self.checks]
        return "\n".join(line if width is None or len(line) <= width
                         else line[:width - 3] + "..." for line in lines)
