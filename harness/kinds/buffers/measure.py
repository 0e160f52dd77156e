"""A buffers kernel measured: loaded once, put through its check battery at sizes that are not
multiples of anything, then per timed size checked, timed interleaved with its baseline on
inputs drawn afresh on the device before every repetition (cold L2), a secret sample of the
timed repetitions' outputs kept and checked, and its GB/s held to the memory ceiling the
harness measured (notes/buffers_kind.md). Every Result of a buffers kernel is made here.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from harness.archs import can_run, get_arch
from harness.compiler.compile import compile_kernel
from harness.errors import LaunchError
from harness.gpu.driver import Buffer, LaunchShape, Module
from harness.kernels.registry import Kernel
from harness.kinds.buffers import bytes_moved, references
from harness.kinds.buffers.draw import Drawn, Draws, as_float64, drawn
from harness.kinds.buffers.references import NUMPY, SENTINEL, Judged, PyReference

Say = Callable[..., None]
SLOTS = 8
"""Timed repetitions' outputs kept per size (fewer where they would not fit in 4 GiB)."""
VERIFIED = 4
"""Kept outputs checked at a timed size (each against its own draw)."""
WIDE = 128.0
"""The wide draw's range, as a multiple of the declared one: exp overflows past 88."""
CHECK_SIZES = {1: [(1,), (7,), (255,), (257,), (4099,), (65537,), (1000003,)],
               2: [(1, 1), (3, 7), (5, 1000), (17, 4099), (2, 32768)],
               3: [(1, 1, 1), (3, 5, 7), (2, 17, 129)]}
"""The battery's sizes (those the kernel's constraints allow): none a multiple of a block."""


def padded(size: tuple[int, ...]) -> tuple[int, int, int]:
    """A buffers size as the run's (m, n, k) slots hold it."""
    return (*size, 1, 1)[:3]


@dataclass
class Loaded:
    """One buffers kernel compiled and loaded into the session's context."""

    kernel: Kernel
    module: Module
    function: object
    resources: object
    reference: PyReference | None

    def env(self, dims: tuple[int, ...], sm_count: int) -> dict[str, int]:
        return {**self.kernel.env(*padded(dims)), "SMS": sm_count}

    def close(self) -> None:
        if self.reference is not None:
            self.reference.close()


def load(session, kernel: Kernel) -> Loaded:
    arch = session.arch
    kernel = kernel.for_arch(arch)
    need = get_arch(kernel.spec.min_arch)
    if not can_run(need, session.device.arch):
        raise LaunchError(f"{kernel.name} needs {need.name} (min_arch); this GPU is "
                          f"{session.device.arch.name}")
    _declared_bytes(kernel, session.device.sm_count)
    compiled = compile_kernel(kernel, arch)
    problem = kernel.spec.parameter_problem(compiled.cubin, compiled.symbol)
    if problem:
        raise LaunchError(problem)
    module = Module(compiled.cubin, kernel.name)
    function = module.function(compiled.symbol)
    if kernel.spec.carveout_pct is not None:
        function.set_carveout(kernel.spec.carveout_pct)
    spec = kernel.spec.buffers
    ref = PyReference(kernel.spec.path, spec) if spec.reference.startswith("py:") else None
    return Loaded(kernel, module, function, compiled.resources, ref)


def _declared_bytes(kernel: Kernel, sm_count: int) -> None:
    """A LaunchError (every size of the kernel fails with it) where its declared bytes differ
    from its buffers' at one of its sizes or the battery's, with no reason given: before the
    battery, which skips a size whose Instance cannot be made."""
    spec = kernel.spec.buffers
    for dims in spec.default_sizes() + CHECK_SIZES[len(spec.dims)]:
        env = {**kernel.env(*padded(dims)), "SMS": sm_count}
        if not all(kernel.evaluate(c, env) for c in kernel.spec.constraints):
            continue
        nbytes = {b.name: math.prod(int(kernel.evaluate(e, env)) for e in b.shape)
                  * references.SENTINEL[b.dtype][1] for b in spec.buffers.values()}
        bytes_moved.settle(spec, int(kernel.evaluate(spec.bytes, env)),
                           bytes_moved.derived(spec, nbytes), f"{kernel.name} at {size_text(dims)}")


class Instance:
    """The kernel's buffers at one size, its launch, and its draws."""

    def __init__(self, session, loaded: Loaded, draws: Draws, dims: tuple[int, ...]):
        self.session, self.loaded, self.draws, self.dims = session, loaded, draws, dims
        kernel, spec = loaded.kernel, loaded.kernel.spec.buffers
        env = loaded.env(dims, session.device.sm_count)
        problems = [f"violates its constraint {c.text!r}" for c in kernel.spec.constraints
                    if not kernel.evaluate(c, env)]
        if problems:
            raise LaunchError(f"{kernel.name} at {size_text(dims)}: " + "; ".join(problems))
        self.shapes = {b.name: tuple(int(kernel.evaluate(e, env)) for e in b.shape)
                       for b in spec.buffers.values()}
        self.counts = {n: math.prod(s) for n, s in self.shapes.items()}
        if any(c >= 2**32 for c in self.counts.values()):
            raise LaunchError(f"{kernel.name} at {size_text(dims)}: a buffer of 2^32 elements "
                              "or more (the draw indexes in 32 bits)")
        self.nbytes = {n: self.counts[n] * references.SENTINEL[b.dtype][1]
                       for n, b in spec.buffers.items()}
        self.buffers = {n: Buffer(max(16, -(-self.nbytes[n] // 16) * 16)) for n in spec.buffers}
        grid = tuple(int(kernel.evaluate(e, env)) for e in kernel.spec.grid)
        smem = int(kernel.evaluate(kernel.spec.dynamic_smem_bytes, env))
        if any(g < 1 for g in grid):
            raise LaunchError(f"{kernel.name} at {size_text(dims)}: grid {grid} has a "
                              "dimension < 1")
        if smem > session.device.arch.smem_default_per_block_bytes:
            loaded.function.set_max_dynamic_smem(smem)
        self.shape = LaunchShape((*grid, 1, 1)[:3], kernel.block_dims, smem)
        args = []
        for a in spec.args:
            if a.type == "ptr":
                args.append(ctypes.c_uint64(self.buffers[a.name].address))
            else:
                value = dict(zip(spec.dims, dims, strict=True))[a.name]
                args.append(ctypes.c_int32(value) if a.type == "i32" else ctypes.c_int64(value))
        self.args = tuple(args)
        self.spec = spec
        self.bytes, self.bytes_source = bytes_moved.settle(
            spec, int(kernel.evaluate(spec.bytes, env)),
            bytes_moved.derived(spec, self.nbytes), f"{kernel.name} at {size_text(dims)}")
        self.flops = float(kernel.evaluate(spec.flops, env)) if spec.flops else 0.0
        self.salt = 0
        self.wide = False

    def close(self) -> None:
        for b in self.buffers.values():
            b.close()

    def drawn(self) -> list[Drawn]:
        out = []
        for i, b in enumerate(self.spec.buffers.values()):
            if b.drawn:
                out.append(Drawn(self.buffers[b.name], i, b.dtype, self.counts[b.name],
                                 *_range(b.values, self.wide)))
        return out

    def draw(self, seed: int, verify: bool = False) -> None:
        for d in self.drawn():
            self.draws.fill(d, seed, self.salt, verify)

    def prepare(self) -> None:
        """Outputs and scratch poisoned (or zeroed), outside any timed events."""
        stream = self.session.stream
        for b in self.spec.buffers.values():
            if b.role in ("out", "scratch"):
                word, size = SENTINEL[b.dtype]
                word = 0 if b.init == "zero" else word
                self.buffers[b.name].fill(word, size, stream)

    def launch(self) -> None:
        self.loaded.function.launch(self.shape, self.session.stream, self.args)

    def download(self, name: str) -> np.ndarray:
        b = self.spec.buffers[name]
        return self.buffers[name].download_at(0, NUMPY[b.dtype], self.counts[name],
                                              self.session.stream)

    def inputs64(self) -> dict[str, np.ndarray]:
        return {b.name: as_float64(self.download(b.name), b.dtype).reshape(self.shapes[b.name])
                for b in self.spec.inputs}

    def host_inputs(self, seed: int, content: int) -> dict[str, np.ndarray]:
        """The inputs of ``content`` as numpy draws them (not read back from the device)."""
        return {d_name: as_float64(drawn(seed, self.salt, content, i, self.counts[d_name],
                                         b.dtype, *_range(b.values, self.wide)),
                                   b.dtype).reshape(self.shapes[d_name])
                for i, (d_name, b) in enumerate(self.spec.buffers.items()) if b.drawn}

    def changed_inputs(self, seed: int) -> int:
        """Input elements that no longer hold the current content's draw."""
        self.draws.mismatches.fill(0, 4, self.session.stream)
        self.draw(seed, verify=True)
        return int(self.draws.mismatches.download(np.uint32, (1,), self.session.stream)[0])


def _range(values: tuple[float, float], wide: bool) -> tuple[float, float]:
    lo, hi = values
    scale = WIDE if wide else 1.0
    return lo * scale, (hi - lo) * scale


def size_text(dims: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in dims)


def judge_all(inst: Instance, want: dict) -> tuple[bool, float, str, dict]:
    outs, worst, detail = {}, 0.0, ""
    ok = True
    for b in inst.spec.outputs:
        raw = inst.download(b.name)
        outs[b.name] = raw
        j: Judged = references.judge(raw, b.dtype, want[b.name])
        worst = max(worst, j.worst)
        if not j.ok and ok:
            ok = False
            what = ("unwritten" if j.unwritten else "not finite" if j.nonfinite else
                    "misnormalised" if j.misnormalised else "wrong")
            detail = (f"{b.name}: {what}: {j.unwritten} unwritten, {j.nonfinite} not finite, "
                      f"{j.outside} outside the bound of {j.elements} ({want[b.name].rule}); "
                      f"{j.detail}")
    return ok, worst, detail, outs
