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

This module holds the device's part (the kernels, the draws, the kept slots and what reads
them back) and the comparison of one kept block with float64; kept_checks.py judges the kept
repetitions after the timing.
"""

from __future__ import annotations

import ctypes
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.bench import keyed
from harness.errors import HarnessError
from harness.gpu import own_kernels
from harness.gpu.driver import Buffer, LaunchShape, Stream
from harness.gpu.graph import on_replay
from harness.kinds.gemm import chunked, contents, numerics
from harness.kinds.gemm.fp8 import check as fp8_check
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.operands import GUARD_ELEMENTS, Operands

SLOTS = 16
"""Timed repetitions kept per timed launch: a kernel wrong in half of them passes all with
probability 2^-16."""
SLOTS_LARGE = 8
"""Kept where an output has 4M elements or more (64 MB in FP32 each)."""
THREADS = 256

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
