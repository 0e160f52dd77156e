"""The check battery a kernel gets, derived from its spec alone (pure Python, no GPU).

Every kernel gets every check class, whatever it declares: constraints change the shapes,
never the checks. The shapes start from targets that are multiples of no tile (37 x 45 x 29,
127 x 253 x 61, ...) and are rounded up, per dimension, to the smallest granularity the
kernel's constraints accept (``M % 128 == 0`` rounds M to multiples of 128; ``K % 8 == 0``
rounds K to multiples of 8), so they keep every edge the constraints allow. A kernel whose
grid does not grow with the problem (persistent: its grid names ``SMS``, or is fixed) also
gets a shape with far more C tiles than blocks.

At every shape: two seeds at beta = 0 and one check of alpha and beta (alpha = 0.75, beta =
-0.5). On the first two shapes the first seed runs three times (identical runs must agree
bit for bit: a race, or a kernel that keeps state between launches). Once: alpha alone
(alpha = -1.5, beta = 0), a launch with NaN in C at beta = 0 (reads C when beta = 0), and a
launch on new inputs with C still holding the result of the previous ones (a kernel whose
work depends on what C held). Then accuracy where it shows: a deep check on an aligned shape
with K >= 2048 (:data:`DEEP_TARGET`; the error also as a multiple of FP32 accumulation's, at
most 2x for an FP32 claim: a kernel that computes in BF16 parts only on aligned, deep shapes
is seen), and inputs with exponents spread wide (a TF32 kernel given unrounded FP32 values;
a kernel computing in a narrower type overflows). At each timed size, :mod:`measure` adds a
check on the timed operands (held to FP32's error too) and checks a random sample of the
timed launches themselves (capture.py).

The seeds here are offsets: a run draws its inputs from its own seed and these
(``contents.derive``) under its secret (keyed.py), so no kernel can know them in advance.

A declared signature without beta (it computes beta = 0 and never reads C) gets no beta check
and no reads-C probe; one without alpha (alpha = 1) gets no alpha check, and its beta check
runs at alpha = 1. The plan's ``skipped`` says so, with the reason.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

from tabulate import tabulate

from harness.errors import SpecError
from harness.kernels.registry import Kernel
from harness.report.width import WIDTH, fit_text

TARGETS = ((37, 45, 29), (127, 253, 61), (257, 129, 300), (131, 196, 68), (515, 260, 132),
           (133, 264, 104), (517, 392, 200))
"""Check shapes before rounding: multiples of no tile, odd where nothing forbids it."""
MANY_TILES = (1999, 4201, 203)
"""A shape with hundreds of 128 x 256 tiles (more than twice an H100's 132 SMs) for kernels
whose grid does not grow with the problem: every block walks several tiles."""
MAX_DIM = 16384
"""The largest dimension the search tries before saying no shape satisfies the constraints."""
_GRANULARITIES = tuple(1 << i for i in range(12))
SEEDS = (11, 12)
BETA_CHECK = (0.75, -0.5)
"""alpha, beta of the check that tests the beta path (C's start values are random)."""
ALPHA_CHECK = (-1.5, 0.0)
REPEATS = 2
NO_ALPHA_REASON = "its signature has no alpha: it computes alpha = 1"
"""Why the alpha checks are skipped for a kernel whose declared signature has no alpha."""
"""Extra runs of a check on the same inputs, compared bit for bit with the first."""

FP8_WIDE_REASON = ("an FP8 GEMM's inputs are drawn over its formats' exponents on every "
                   "check, with scales that are powers of two")
DEEP_TARGET = (256, 256, 2048)
"""The deep check's shape before rounding: M and N multiples of 256, K of 2048."""
VALUES, REPEAT, READS_C, STALE_C = "values", "identical runs", "reads C at beta = 0", "stale C"
DEEP, WIDE = "deep", "wide exponents"
WHAT = {VALUES: "fresh inputs, C poisoned, compared with float64",
        DEEP: "an aligned shape with K >= 2048: the error also as a multiple of FP32 "
              "accumulation's on the same inputs (an FP32 claim: at most 2x)",
        WIDE: "inputs with exponents spread over +-20 (+-2 for FP16); TF32 given unrounded "
              "FP32 values: a narrower type overflows",
        REPEAT: "the same launch run again on the same inputs: outputs must agree bit for bit",
        READS_C: "NaN in C at beta = 0: NaN out means the kernel computes beta * C",
        STALE_C: "new inputs in the same buffers with C still holding the last result: "
                 "a kernel that skips work where C looks computed keeps the old values"}


@dataclass(frozen=True)
class PlannedCheck:
    """One launch configuration of the battery."""

    m: int
    n: int
    k: int
    seed: int
    alpha: float = 1.0
    beta: float = 0.0
    repeats: int = 0
    """Extra identical runs after the first (compared bit for bit)."""
    kind: str = VALUES
    """``values``, ``deep``, ``wide exponents``, ``reads C at beta = 0`` or ``stale C`` (see
    WHAT)."""

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.m, self.n, self.k


@dataclass(frozen=True)
class Plan:
    """The battery of one kernel: its checks, what was left out and why."""

    kernel: str
    checks: tuple[PlannedCheck, ...]
    skipped: tuple[str, ...] = ()
    """What the battery could not include, each with its reason."""
    rounding: dict[str, int] = field(default_factory=dict)
    """Per dimension, the multiple the constraints round check shapes to (1: any size)."""
    constraints: tuple[str, ...] = ()

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        return list(dict.fromkeys(c.shape for c in self.checks))

    def summary(self) -> str:
        """One line: how much the battery covers, and what it skipped."""
        text = (f"{len(self.checks)} checks at {len(self.shapes)} shapes"
                + (f" (M, N, K rounded to multiples of {self.rounding['M']}, "
                   f"{self.rounding['N']}, {self.rounding['K']} by the constraints)"
                   if set(self.rounding.values()) - {1} else ""))
        if not any(c.repeats for c in self.checks) and self.checks:
            text += "; no identical re-run"
        if self.skipped:
            text += "; skipped: " + "; ".join(self.skipped)
        return text

    def table(self, width: int | None = 100) -> str:
        """``harness check --plan``'s table of this battery (report.py)."""
        return plan_table(self, width)

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "constraints": list(self.constraints),
                "rounding": self.rounding,
                "checks": [{**asdict(c), "what": WHAT[c.kind]} for c in self.checks],
                "skipped": list(self.skipped), "summary": self.summary()}


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _fits(kernel: Kernel, shape: tuple[int, int, int]) -> bool:
    return not kernel.shape_problems(*shape)


def _shape_free_problems(kernel: Kernel) -> list[str]:
    """Constraints on the parameters alone that fail: no shape can help."""
    env = kernel.param_env
    return [c.text for c in kernel.spec.constraints
            if not c.names & {"M", "N", "K"} and not kernel.evaluate(c, env)]


def _rounding(kernel: Kernel) -> tuple[int, int, int] | None:
    """The smallest multiples (per dimension, powers of two up to 2048) to which every target
    can be rounded and satisfy the constraints: each dimension on its own first (the others
    at a multiple of 4096), then jointly when the constraints couple the dimensions."""
    friendly = 4096
    alone = []
    for d in range(3):
        for g in _GRANULARITIES:
            if all(_fits(kernel, tuple(_round_up(t[d], g) if i == d else friendly
                                       for i in range(3))) for t in TARGETS):
                alone.append(g)
                break
        else:
            break
    if len(alone) == 3 and all(_fits(kernel, _rounded(t, alone)) for t in TARGETS):
        return tuple(alone)
    best = None
    for gs in itertools.product(_GRANULARITIES, repeat=3):
        if _fits(kernel, _rounded(TARGETS[1], gs)):
            cost = (math.prod(gs), sum(gs))
            if best is None or cost < best[0]:
                best = (cost, gs)
    return best[1] if best else None


def _rounded(target, rounding) -> tuple[int, int, int]:
    return tuple(_round_up(t, g) for t, g in zip(target, rounding, strict=True))


def _grow(kernel: Kernel, target: tuple[int, int, int], rounding) -> tuple[int, int, int] | None:
    """The target rounded to ``rounding``, grown by doubling when the constraints also bound
    the size (``K >= 256``), or None within MAX_DIM."""
    for scale in (1, 2, 4, 8, 16, 32, 64, 128):
        shape = _rounded([t * scale for t in target], rounding)
        if max(shape) > MAX_DIM:
            return None
        if _fits(kernel, shape):
            return shape
    return None


def _square(kernel: Kernel, target: tuple[int, int, int]) -> tuple[int, int, int] | None:
    """For constraints that tie the dimensions together (``M == N``): the smallest square
    shape from the target's largest dimension that satisfies them."""
    for g in _GRANULARITIES:
        side = _round_up(max(target), g)
        if side <= MAX_DIM and _fits(kernel, (side, side, side)):
            return side, side, side
    return None


def grows_with_problem(kernel: Kernel) -> bool:
    """Whether the kernel's grid has more blocks for a larger C (False for persistent
    kernels, whose grid is the SM count or fixed)."""
    try:
        small = kernel.grid_dims(8192, 8192, 256)
        large = kernel.grid_dims(16384, 16384, 256)
    except SpecError:  # a grid formula that needs constraints met: judge by its text
        return not any("SMS" in e.names for e in kernel.spec.grid)
    return math.prod(large) > math.prod(small)


def check_shapes(kernel: Kernel) -> tuple[list[tuple[int, int, int]], dict[str, int], list[str]]:
    """The battery's shapes, the rounding the constraints impose, and what was left out."""
    bad = _shape_free_problems(kernel)
    if bad:
        return [], {}, [f"every shape: the parameters break the constraint(s) "
                        f"{', '.join(map(repr, bad))}"]
    rounding = _rounding(kernel) or (1, 1, 1)
    skipped: list[str] = []
    shapes: list[tuple[int, int, int]] = []
    for target in TARGETS:
        shape = _grow(kernel, target, rounding)
        if shape is not None and shape not in shapes:
            shapes.append(shape)
    squares = list(dict.fromkeys(s for t in TARGETS if (s := _square(kernel, t))))
    if len(shapes) < 3 and len(squares) > len(shapes):
        # constraints that tie the dimensions together (M == N): square shapes
        shapes, rounding = squares, (1, 1, 1)
        skipped.append("non-square shapes: the constraints tie M, N and K together")
    if not shapes:
        return [], {}, [f"every shape: no M, N, K up to {MAX_DIM} satisfies the constraints "
                        f"{', '.join(c.text for c in kernel.spec.constraints)}"]
    if not grows_with_problem(kernel):
        big = _grow(kernel, MANY_TILES, rounding) or _square(kernel, MANY_TILES)
        if big is None:
            skipped.append("many tiles per block: no shape near 2000 x 4200 satisfies the "
                           "constraints")
        elif big not in shapes:
            shapes.append(big)
    if len(shapes) < 3:
        skipped.append(f"only {len(shapes)} distinct shape(s) satisfy the constraints")
    return shapes, dict(zip("MNK", rounding, strict=True)), skipped


def _deep_rounding(rounding: dict[str, int]) -> tuple[int, int, int]:
    """The deep shape's rounding: the constraints', and M, N at least multiples of 256 (the
    aligned shapes a kernel may treat apart), K of 2048."""
    if not rounding:
        return 256, 256, 2048
    return (max(rounding["M"], 256), max(rounding["N"], 256), max(rounding["K"], 2048))


def plan(kernel: Kernel) -> Plan:
    """The battery ``kernel`` gets before any timing."""
    shapes, rounding, skipped = check_shapes(kernel)
    constraints = tuple(c.text for c in kernel.spec.constraints)
    spec = kernel.spec
    has_alpha, has_beta = spec.has_alpha, spec.has_beta
    # the beta check's alpha where the kernel has no alpha to set (it computes alpha = 1)
    beta_check = (BETA_CHECK[0] if has_alpha else 1.0, BETA_CHECK[1])
    checks: list[PlannedCheck] = []
    for i, (m, n, k) in enumerate(shapes):
        base = 100 * (i + 1)
        checks.append(PlannedCheck(m, n, k, base + SEEDS[0], repeats=REPEATS if i < 2 else 0))
        checks.append(PlannedCheck(m, n, k, base + SEEDS[1]))
        if has_beta:
            checks.append(PlannedCheck(m, n, k, base + 7, *beta_check))
    if shapes:
        first, other = shapes[0], shapes[min(1, len(shapes) - 1)]
        if has_alpha:
            checks.append(PlannedCheck(*other, 51, *ALPHA_CHECK))
        if has_beta:
            checks.append(PlannedCheck(*first, 52, kind=READS_C))
        checks.append(PlannedCheck(*other, 53, kind=STALE_C))
        deep = (_grow(kernel, DEEP_TARGET, _deep_rounding(rounding))
                or _square(kernel, DEEP_TARGET))
        if deep is None:
            skipped.append(f"the deep check: no shape near {DEEP_TARGET} satisfies the "
                           "constraints")
        else:
            checks.append(PlannedCheck(*deep, 54, kind=DEEP))
        if getattr(spec, "fp8", None) is None:
            checks.append(PlannedCheck(*other, 55, kind=WIDE))
        else:
            skipped.append(f"{WIDE!r}: {FP8_WIDE_REASON}")
    if not has_beta:
        skipped.append(f"beta checks and {READS_C!r}: {spec.no_beta_reason}")
    if not has_alpha:
        skipped.append(f"alpha checks: {NO_ALPHA_REASON}")
    return Plan(kernel.name, tuple(checks), tuple(skipped), rounding, constraints)


def plan_table(plan, width: int | None = WIDTH) -> str:
    """``harness check --plan``: a kernel's battery, a row per launch configuration; its prose
    wrapped to ``width`` (None: not)."""
    rows = [["x".join(map(str, c.shape)), c.alpha, c.beta, c.seed, c.repeats, c.kind]
            for c in plan.checks]
    lines = [f"{plan.kernel}: {plan.summary()}"]
    if plan.constraints:
        lines.append(f"constraints: {', '.join(plan.constraints)}")
    if rows:
        lines.append(tabulate(rows, headers=["shape", "alpha", "beta", "seed", "repeats",
                                             "check"], disable_numparse=True))
        lines += [f"  {kind}: {what}" for kind, what in WHAT.items()
                  if any(c.kind == kind for c in plan.checks)]
    lines += [f"skipped: {why}" for why in plan.skipped]
    lines.append("at each timed size: a check on the operands drawn for it (run twice, "
                 "identical bits; an FP32 claim within 2x FP32's error from K = 256), then "
                 "every timed repetition on inputs drawn afresh with C poisoned, and a random "
                 "sample of them kept and checked after the timing")
    return fit_text("\n".join(lines), width) + "\n"
