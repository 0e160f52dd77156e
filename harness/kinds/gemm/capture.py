"""Timed outputs checked: operands drawn afresh on the device before every timed repetition, a
random sample of the timed repetitions' outputs kept on the device, and each compared with
float64 after the timing.

Before every repetition of a timed launch (and of its warm-up), outside its events, the
device advances a counter and draws A and B for it in place (contents.py): no two
repetitions see the same inputs, so a kernel cannot answer one from a result it kept, and the
contents follow from the run's seed, which no kernel knows. After every timed repetition (not
the warm-up), outside its events, a one-thread kernel decides by reservoir sampling, from a
secret drawn from the seed, whether this repetition's output is kept, and a copy kernel keeps
it (with the guard after it) in one of ``slots`` slots: whatever the number of repetitions,
each is equally likely to be kept, and which ones are is decided after the launch, so nothing
the kernel can see tells a kept repetition from another.

After the timing each kept output is scanned on the device (outputs still holding the
sentinel, non-finite ones, guard elements overwritten) and a random block of it (up to
:data:`SAMPLE` rows by :data:`SAMPLE` columns) is compared with the float64 product of the
same rows of A and columns of B, drawn here for that repetition's content. Every kept
repetition's A and B must still hold, right after its launch, what was drawn for it (a kernel
that writes its inputs changes them). A kernel whose output is wrong in a kept repetition is
named by what its cubin can keep or read (screen.py): keeps state between launches, adapts to
timing, or replays an earlier result when its output is the product of earlier inputs.
"""

from __future__ import annotations

import ctypes
import secrets
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from harness.bench import keyed
from harness.compiler.screen import Screen
from harness.errors import HarnessError
from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, LaunchShape, Stream
from harness.gpu.graph import on_replay
from harness.kinds.gemm import chunked, contents, numerics
from harness.kinds.gemm.fp8 import check as fp8_check
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.operands import GUARD_ELEMENTS, Operands

SAMPLE = 64
"""Rows and columns of a kept output compared with float64 (the whole output is scanned)."""
SLOTS = 16
"""Timed repetitions kept per timed launch: a kernel wrong in half of them passes all with
probability 2^-16."""
SLOTS_LARGE = 8
"""Kept where an output has 4M elements or more (64 MB in FP32 each)."""
THREADS = 256

_VERIFYING = ThreadPoolExecutor(max_workers=8, thread_name_prefix="harness-verify")
"""Where the kept repetitions of a timing are compared, side by side (their comparisons use
chunked.py's pool in turn, so this one must be another)."""

KEEPS_STATE = "keeps state between launches"
ADAPTS = "adapts to timing"
WRONG_WHEN_TIMED = "wrong when timed"
REPLAYS = "replays an earlier result"
REPLAY_WORK = 1 << 31
"""Multiply-adds of the products of earlier contents that a wrong kept repetition's output is
compared with (a 64 x 64 block each: 1,024 contents at K = 512, about a millisecond each on
the host, 128 at K = 4096; spent only on a wrong one)."""
CHANGES_INPUTS = "changes its inputs"
MEMOISES = "memoises"
WRITES_OUTSIDE = "writes outside C"
MISCOUNTED = "writes the harness's state"
KEPT_PART = 0x100
"""The part (keyed.content_key) of a timing's reservoir secret, apart from its operands'."""


FRESH_SOURCE = own_kernels.Source(contents.SOURCE.encode(), "fresh_inputs.cu",
                                  "the fresh-input kernels", ("-std=c++17",))


class FreshKernels:
    """The generator, decision, capture and scan kernels (contents.SOURCE), compiled for the
    current device once per session."""

    def __init__(self, stream: Stream, sm_count: int):
        self.module = own_kernels.module(FRESH_SOURCE, "fresh inputs")
        self.stream, self.blocks_max = stream, 8 * sm_count
        self.tick = self.module.function("fresh_tick")
        self.draw = self.module.function("fresh_draw")
        self.decide = self.module.function("fresh_decide")
        self.copy = self.module.function("fresh_capture")
        self.scan = self.module.function("fresh_scan")
        self.gather = self.module.function("fresh_gather")
        self._fill = self.module.function("keyed_fill")
        self.one = LaunchShape((1, 1, 1), (1, 1, 1), 0)
        """A launch of one thread (the counter, the decision)."""

    def fill(self, buf: Buffer, count: int, kind: str, key: int) -> None:
        """``count`` elements of the content whose key is ``key`` (contents.content_key)
        into ``buf``, as contents.draw gives them on the host: the device's draw for launches
        outside a timing."""
        self._fill.launch(self.shape(count), self.stream, (
            _u64(buf.address), _u32(count), _u32(contents.KIND[kind]), _u64(key)))

    def shape(self, count: int) -> LaunchShape:
        blocks = max(1, min(self.blocks_max, -(-count // THREADS)))
        return LaunchShape((blocks, 1, 1), (THREADS, 1, 1), 0)


def _u32(x: int) -> ctypes.c_uint32:
    return ctypes.c_uint32(x & 0xFFFFFFFF)


def _u64(x: int) -> ctypes.c_uint64:
    return ctypes.c_uint64(x)


@dataclass(frozen=True)
class Kept:
    """One kept timed repetition: its slot, its index among the timed repetitions and the
    content its inputs were drawn for."""

    slot: int
    rep: int
    content: int


class TimedOutputs:
    """Fresh inputs and kept outputs for one timed launch over ``copies`` (its placements; a
    launch on copy i draws into copy i)."""

    def __init__(self, fresh: FreshKernels, spec, copies: Sequence[Operands], seed: int,
                 salt: int, slots: int | None = None):
        first = copies[0]
        self.fresh, self.stream, self.spec = fresh, fresh.stream, spec
        self.copies, self.seed, self.salt = list(copies), seed & 0x7FFFFFFF, salt & 0xFFFFFFFF
        self.m, self.n, self.k = first.m, first.n, first.k
        if max(self.m * self.k, self.k * self.n, self.m * self.n + GUARD_ELEMENTS) >= 1 << 31:
            raise HarnessError(f"{self.m}x{self.n}x{self.k}: fresh inputs index at most 2^31 "
                               "elements per operand")
        large = self.m * self.n >= 1 << 22
        self.slots = min(slots or (SLOTS_LARGE if large else SLOTS), contents.MAX_SLOTS)
        self.kinds = first.kinds
        """A's and B's element kinds (the precision, or an FP8 GEMM's formats)."""
        self.fp8, self.scales = first.fp8, first.scales
        self.c_type = spec.c_type
        self.word_bytes = numerics.c_bytes(spec.c_type)
        self.out_bytes = (self.m * self.n + GUARD_ELEMENTS) * self.word_bytes
        self.stride = -(-self.out_bytes // 256) * 256
        self.inputs = keyed.run_secret()
        """What the fresh contents' keys come from (keyed.py): launch arguments only."""
        self.secret = contents.content_key(self.inputs, self.salt, 0, KEPT_PART) & 0xFFFFFFFF
        """The reservoir's secret (which repetitions are kept)."""
        self.keeps = 0
        """Timed repetitions made (keep calls, each replay of a captured one counted): what
        the reservoir's own count on the device must equal."""
        self.state = Buffer(contents.STATE_WORDS * 8)
        self.state.fill_u32(0, self.stream)
        self.kept_buffer = Buffer(self.slots * self.stride)
        self.counts = Buffer(16)
        self.changed = Buffer(8)
        self.changed.fill_u32(0, self.stream)
        # the primers' decoys: keys of their own under the run's secret (a stream number of
        # their own, from the operating system, never the timed one's nor a reserved one; never
        # recorded: no verdict reads a decoy), and a counter of their own
        self.decoy_salt = self.salt
        while self.decoy_salt == self.salt or self.decoy_salt >= 0xFFFFFF00:
            self.decoy_salt = secrets.randbits(32)
        self.decoy_state = Buffer(contents.STATE_WORDS * 8)
        self.decoy_state.fill_u32(0, self.stream)
        self.decoys_drawn = 0
        """Decoy contents drawn on the device, read after the timing (``gather``)."""

    def close(self) -> None:
        for buf in (self.state, self.kept_buffer, self.counts, self.changed, self.decoy_state):
            buf.close()

    # --- enqueued around every repetition ------------------------------------------------
    def _draw(self, index: int, verify: bool, decoy: bool = False) -> None:
        ops, f = self.copies[index], self.fresh
        salt, state = ((self.decoy_salt, self.decoy_state) if decoy
                       else (self.salt, self.state))
        for operand, buf, count, kind in (("A", ops.a, self.m * self.k, self.kinds[0]),
                                          ("B", ops.b, self.k * self.n, self.kinds[1])):
            f.draw.launch(f.shape(count), self.stream, (
                _u64(buf.address), _u32(count), _u32(contents.KIND[kind]),
                *map(_u32, self.inputs.words), _u32(salt),
                _u32(contents.OPERAND[operand]), _u64(state.address),
                _u32(int(verify)), _u64(self.changed.address + 4 * contents.OPERAND[operand])))

    def decoy(self, index: int) -> None:
        """Before a primer on copy ``index``: A and B drawn for a content of the decoys' own
        key (their own seed, salt and counter), so that the kernel's untimed launch never
        sees a content of the timed sequence, and the timed repetition's content is drawn
        after it (``refresh``, in its ``before``): nothing a primer computes from what it
        reads, or stashes, bears on the repetition timed next (notes/timing.md, "The
        primer"). The one place a primer's draw is made: when the unpredictable generator
        (issue 57) replaces contents.py's draw, this is the call to point at it, with a key
        of its own."""
        self.fresh.tick.launch(self.fresh.one, self.stream, (_u64(self.decoy_state.address),))
        self._draw(index, verify=False, decoy=True)

    def refresh(self, index: int) -> None:
        """Before a repetition on copy ``index``: the next content drawn into its A and B."""
        self.fresh.tick.launch(self.fresh.one, self.stream, (_u64(self.state.address),))
        self._draw(index, verify=False)

    def keep(self, index: int) -> None:
        """After a timed repetition on copy ``index``: kept or not (reservoir sampling); when
        kept, its output copied to its slot and its A and B compared with what was drawn."""
        f, out = self.fresh, self.copies[index].out
        if not on_replay(self._kept_one):
            self._kept_one()
        f.decide.launch(f.one, self.stream, (_u64(self.state.address), _u32(self.slots),
                                              _u32(self.secret)))
        f.copy.launch(f.shape(self.out_bytes // 16), self.stream, (
            _u64(out.address), _u64(self.out_bytes), _u64(self.kept_buffer.address),
            _u64(self.stride), _u64(self.state.address)))
        self._draw(index, verify=True)

    def _kept_one(self) -> None:
        self.keeps += 1

    def befores(self, befores: Sequence[Callable[[], None]]) -> list[Callable[[], None]]:
        """Each copy's ``before`` (C poisoned, workspace prepared) after its fresh draw."""
        def one(index: int, before: Callable[[], None]) -> Callable[[], None]:
            def both() -> None:
                self.refresh(index)
                before()
            return both
        return [one(i, b) for i, b in enumerate(befores)]

    def afters(self) -> list[Callable[[], None]]:
        return [lambda i=i: self.keep(i) for i in range(len(self.copies))]

    # --- after the timing ----------------------------------------------------------------
    def _state(self) -> np.ndarray:
        return self.state.download(np.uint64, (contents.STATE_WORDS,), self.stream)

    def kept(self) -> tuple[int, list[Kept]]:
        """How many timed repetitions ran, and the kept ones in the order they ran (and the
        count of decoys drawn read into ``decoys_drawn``)."""
        decoy = self.decoy_state.download(np.uint64, (contents.STATE_WORDS,), self.stream)
        self.decoys_drawn = int(decoy[contents.STATE_CONTENT])
        words = self._state()
        timed = int(words[contents.STATE_TIMED])
        kept = [Kept(j, int(words[contents.STATE_SLOT_REP + j]),
                     int(words[contents.STATE_SLOT_CONTENT + j]))
                for j in range(min(timed, self.slots))]
        return timed, sorted(kept, key=lambda x: x.rep)

    def scan(self, address: int, elements: int, guard: int) -> tuple[int, int, int]:
        """(outputs holding the sentinel, non-finite outputs, guard elements overwritten) of
        the output at ``address``."""
        self.counts.fill_u32(0, self.stream)
        f = self.fresh
        f.scan.launch(f.shape(elements + guard), self.stream, (
            _u64(address), _u32(elements), _u32(guard), _u32(self.word_bytes),
            _u32(numerics.SENTINEL[self.c_type]), _u32(contents.EXPONENT_MASK[self.c_type]),
            _u64(self.counts.address)))
        counts = self.counts.download(np.uint32, (4,), self.stream)
        return int(counts[0]), int(counts[1]), int(counts[2])

    def blocks(self, picks: Sequence[tuple[int, np.ndarray, np.ndarray]]
               ) -> list[np.ndarray]:
        """The rows x columns block of each kept output named (slot, rows, columns), in C's
        storage type: gathered on the device in one launch and read back at once (the lines
        that hold them, read for each slot, were 0.9 s of a default run's main thread, issue
        37; read one by one, 5.9 s)."""
        if not picks:
            return []
        dtype = numerics.c_dtype(self.c_type)
        by_row = self.spec.layout_c == "row"
        line = self.n if by_row else self.m
        index = np.array([[slot, 0, *(rows if by_row else cols), *(cols if by_row else rows)]
                          for slot, rows, cols in picks], dtype=np.uint32)
        lines, across = ((len(picks[0][1]), len(picks[0][2])) if by_row
                         else (len(picks[0][2]), len(picks[0][1])))
        count = len(picks) * lines * across
        where, out = Buffer(index.nbytes), Buffer(count * self.word_bytes)
        try:
            where.upload(index, self.stream)
            f = self.fresh
            f.gather.launch(f.shape(count), self.stream, (
                _u64(self.kept_buffer.address), _u64(self.stride), _u64(where.address),
                _u32(len(picks)), _u32(lines), _u32(across), _u64(line),
                _u32(self.word_bytes), _u64(out.address)))
            got = out.download(dtype, (len(picks), lines, across), self.stream)
        finally:
            where.close()
            out.close()
        return [x.copy() if by_row else np.ascontiguousarray(x.T) for x in got]

    def changed_inputs(self) -> tuple[int, int]:
        """Elements of A and of B that differed, right after a kept repetition, from what was
        drawn before it (summed over the kept repetitions)."""
        a, b = self.changed.download(np.uint32, (2,), self.stream)
        return int(a), int(b)

    def operands(self, content: int, rows: np.ndarray, cols: np.ndarray, decoy: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``rows`` of A and columns ``cols`` of B drawn for ``content`` (of the decoys'
        key with ``decoy``), as float64."""
        spec = self.spec
        salt = self.decoy_salt if decoy else self.salt
        a = contents.a_rows(self.inputs, salt, content, self.kinds[0], spec.layout_a, self.m,
                            self.k, rows)
        b = contents.b_cols(self.inputs, salt, content, self.kinds[1], spec.layout_b, self.k,
                            self.n, cols)
        return a, b

    def compare(self, out: np.ndarray, a: np.ndarray, b: np.ndarray, seed: int,
                rows: np.ndarray, cols: np.ndarray, initial: np.ndarray | None = None
                ) -> CheckResult:
        """``out``, the block ``rows`` x ``cols`` of a kept output, against the product of
        ``a`` and ``b`` (the block's rows of A and columns of B, float64, unscaled): the
        window's bound for an FP8 GEMM (its scales applied here), else the K-deep bound of the
        precision."""
        spec = self.spec
        if self.fp8 is not None:
            return fp8_check.check(out, numerics.stored(a, self.kinds[0]),
                                   numerics.stored(b, self.kinds[1]), self.fp8,
                                   fp8_check.subset(self.scales, rows, cols, self.n),
                                   spec.c_type, seed=seed, initial=initial)
        return kept_compare(spec, out, a, b, self.k, seed, initial)


def kept_compare(spec, out: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, seed: int,
                 initial: np.ndarray | None = None) -> CheckResult:
    """A kept block of a GEMM that is not FP8 against ``a @ b``, held to what the timed size's
    check holds it to: the K-deep bound, and for a kernel that claims FP32 (no ``fp32_via``)
    from numerics.TIMED_DEEP_K on, at most numerics.FP32_MULTIPLE_MAX times FP32's own error
    on the same inputs (checks.compare_to_reference's rule, issue 57)."""
    via = getattr(spec, "fp32_via", "")
    strict = (spec.precision == "fp32" and not via
              and k >= numerics.TIMED_DEEP_K and out.size >= numerics.TIMED_DEEP_OUTPUTS)
    # an fp32_via kernel rounds its FP32 inputs (TF32, BF16 parts): the bound holds that as
    # the size's own check does (checks.compare_to_reference); without it a right TF32
    # kernel failed "wrong when timed" on the H100 (the tf32_mma fixture, 2.6e-4 vs 2.3e-5)
    unit = numerics.FP32_VIA_UNIT[via] if via else 0.0
    return chunked.compare(out, a @ b, spec.precision, k=k, seed=seed, alpha=1.0,
                           beta=0.0, c_type=spec.c_type, initial=initial,
                           scale=np.abs(a).astype(np.float32) @ np.abs(b).astype(np.float32),
                           yardstick=numerics.fp32_yardstick(a, b),
                           max_multiple=numerics.FP32_MULTIPLE_MAX if strict else None,
                           input_unit=unit,
                           input_norm=numerics.product_norm(a, b) if unit else 0.0,
                           operands=(a, b))


@dataclass
class Scanned:
    """One kept repetition as the device holds it: its scan and its sampled block."""

    kept: Kept
    unwritten: int
    nonfinite: int
    moved: int
    rows: np.ndarray
    cols: np.ndarray
    out: np.ndarray


@dataclass
class Gathered:
    """What the device holds about a timing's kept repetitions, read at once (the buffers can
    then go): :func:`finish` judges it on the host, beside the next timing if need be."""

    timed: TimedOutputs
    total: int
    scanned: list[Scanned]
    changed: tuple[int, int]
    d_changes: list[tuple[int, int]]
    """A kernel that writes D: (placement, elements of C changed) where any were."""
    made: int = -1
    """Timed repetitions the host made (TimedOutputs.keeps): ``total``, the reservoir's count
    on the device, must equal it; -1: not known (the check is not made)."""


def gather(timed: TimedOutputs) -> Gathered:
    """Every kept repetition scanned and its random block read, the inputs' changes counted,
    and C scanned where the kernel writes D: the device's part of :func:`verify`."""
    total, kept = timed.kept()
    m, n = timed.m, timed.n
    rng = np.random.default_rng(contents.derive(timed.seed, timed.salt, "sample"))
    counts, picks = [], []
    for one in kept:
        base = timed.kept_buffer.address + one.slot * timed.stride
        counts.append(timed.scan(base, m * n, GUARD_ELEMENTS))
        rows = np.sort(rng.choice(m, size=min(m, SAMPLE), replace=False))
        cols = np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False))
        picks.append((one.slot, rows, cols))
    scanned = [Scanned(one, *found, rows, cols, block) for one, found, (_, rows, cols), block
               in zip(kept, counts, picks, timed.blocks(picks), strict=True)]
    d_changes = []
    if getattr(timed.spec, "has_d", False):
        for index, ops in enumerate(timed.copies):
            same, _, moved = timed.scan(ops.c.address, m * n, GUARD_ELEMENTS)
            if same != m * n or moved:
                d_changes.append((index, m * n - same + moved))
    return Gathered(timed, total, scanned, timed.changed_inputs(), d_changes, timed.keeps)


def verify(timed: TimedOutputs, initial: Operands, screen: Screen | None
           ) -> tuple[CheckResult | None, int]:
    """Every kept timed repetition checked, then the inputs: the first failure (None when all
    is right) and how many kept repetitions were checked."""
    return finish(gather(timed), initial, screen)


def finish(gathered: Gathered, initial: Operands, screen: Screen | None
           ) -> tuple[CheckResult | None, int]:
    """:func:`verify`'s host part, on what :func:`gather` read: no device work, so it may run
    on another thread while the device times the next launch."""
    timed, checked = gathered.timed, len(gathered.scanned)
    m, n, k = timed.m, timed.n, timed.k
    if gathered.made >= 0 and gathered.total != gathered.made:
        return CheckResult.finding_only(
            MISCOUNTED, m, n, k, timed.seed, 1.0, 0.0,
            f"{MISCOUNTED}: the reservoir on the device counted {gathered.total} timed "
            f"repetitions where {gathered.made} were launched: its state (device memory the "
            "kernel shares) was written by something other than the harness; a kernel that "
            "writes outside its buffers is not measured", 1), 0
    # each kept repetition on a thread of its own (numpy lets go of the GIL); the first
    # failure in the order they ran is the finding
    for found in _VERIFYING.map(lambda one: _verify_one(timed, initial, screen, one,
                                                        gathered.total), gathered.scanned):
        if found is not None:
            return found, checked
    changed_a, changed_b = gathered.changed
    if changed_a or changed_b:
        what = " and ".join(f"{count} elements of {name}" for name, count
                            in (("A", changed_a), ("B", changed_b)) if count)
        return CheckResult.finding_only(
            CHANGES_INPUTS, m, n, k, timed.seed, 1.0, 0.0,
            f"{CHANGES_INPUTS}: right after its kept timed repetitions {what} no longer held "
            "what was drawn into them before the launch: a GEMM reads A and B and never "
            "writes them; a kernel that marks or reuses its inputs is not measured on the "
            "inputs it was given", changed_a + changed_b), checked
    if gathered.d_changes:
        index, changes = gathered.d_changes[0]
        return CheckResult.finding_only(
            CHANGES_INPUTS, m, n, k, timed.seed, 1.0, 0.0,
            f"{CHANGES_INPUTS}: C, an input only for a kernel that writes D, was "
            f"changed in {changes} elements (placement {index}) during "
            "the timed repetitions", changes), checked
    return None, checked


def _verify_one(timed: TimedOutputs, initial: Operands, screen: Screen | None, scanned: Scanned,
                total: int) -> CheckResult | None:
    spec, (m, n, k) = timed.spec, (timed.m, timed.n, timed.k)
    one, unwritten, nonfinite = scanned.kept, scanned.unwritten, scanned.nonfinite
    where = (f"timed repetition {one.rep + 1} of {total} (kept at random inside the timed "
             "sequence, on inputs drawn afresh for it)")
    if scanned.moved:
        return CheckResult.finding_only(
            WRITES_OUTSIDE, m, n, k, timed.seed, 1.0, 0.0,
            f"{WRITES_OUTSIDE}: in {where} {scanned.moved} elements past the end of the {m} x "
            f"{n} C were overwritten", scanned.moved)
    rows, cols, out = scanned.rows, scanned.cols, scanned.out
    sentinel = np.full(out.shape, numerics.SENTINEL[spec.c_type],
                       dtype=np.uint32 if timed.word_bytes == 4 else np.uint16)
    result = timed.compare(out, *timed.operands(one.content, rows, cols), timed.seed, rows,
                           cols, initial=sentinel.view(out.dtype))
    if result.passed and not unwritten and not nonfinite:
        return None
    if unwritten:
        what = f"{unwritten} of {m * n} outputs were never written"
    elif nonfinite:
        what = f"{nonfinite} of {m * n} outputs are NaN or Inf"
    elif result.finding == "less accurate than FP32":
        what = f"the sampled block is {result.message}"
    else:
        what = (f"{result.bad_elements} of {out.size} sampled outputs are outside their bound "
                f"(rel error norm {result.rel_err_norm:.2e}, bound {result.tolerance_norm:.2e})")
    replayed = _replayed(timed, initial, one, out, rows, cols)
    if replayed:
        finding = REPLAYS
        cause = (f"its output is the product of {replayed}, not of the inputs it was given: it "
                 "returns a result kept from an earlier launch")
    else:
        finding = (KEEPS_STATE if screen is not None and screen.stateful else
                   ADAPTS if screen is not None and screen.clocks else WRONG_WHEN_TIMED)
        cause = ("the same kernel passed every check outside the timed sequence, so it "
                 "computes differently when timed")
    held = f"; its cubin holds {'; '.join(screen.lines())}" if screen and screen.lines() else ""
    return CheckResult.finding_only(
        finding, m, n, k, timed.seed, 1.0, 0.0,
        f"{finding}: in {where} {what}: {cause}{held}; its timing is not a figure",
        max(unwritten, nonfinite, result.bad_elements))


def _replayed(timed: TimedOutputs, initial: Operands, one: Kept, out: np.ndarray,
              rows: np.ndarray, cols: np.ndarray) -> str:
    """What earlier inputs ``out`` is the product of, if any: the repetition before, the last
    content of this placement (what its primer ran on), the timing's first launch, the
    contents drawn before its own as far back as REPLAY_WORK allows (a kernel that replays at
    every launch back to back returns what it computed after the last pause, however many
    launches before: a launch timed alone to choose its primer and rest is such a pause), or
    the inputs checked before timing."""
    candidates = [(one.content - 1, "the inputs of the repetition before it"),
                  (one.content - len(timed.copies), "the inputs its placement held before"),
                  (1, "the inputs of the timing's first launch")]
    lookback = max(64, REPLAY_WORK // (len(rows) * len(cols) * max(timed.k, 1)))
    candidates += [(one.content - back, f"the inputs drawn {back} draws before its own")
                   for back in range(2, lookback + 1)]
    tried = set()
    for content, what in candidates:
        if content < 1 or content in tried:
            continue
        tried.add(content)
        if timed.compare(out, *timed.operands(content, rows, cols), 0, rows, cols).passed:
            return what
    # the primers' decoys, the latest first: a kernel that keeps what its primer computed
    for content in range(timed.decoys_drawn, max(0, timed.decoys_drawn - lookback), -1):
        if timed.compare(out, *timed.operands(content, rows, cols, decoy=True), 0, rows,
                         cols).passed:
            return "the decoy inputs its untimed primer ran on"
    a = numerics.to_float64(initial.codes[0][rows], timed.kinds[0])
    b = numerics.to_float64(initial.codes[1][:, cols], timed.kinds[1])
    if timed.compare(out, a, b, 0, rows, cols).passed:
        return "the inputs checked before timing"
    return ""
