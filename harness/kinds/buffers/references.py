"""What a buffers kernel's outputs should be, and how far from it they may be: the built-in
references (sum, softmax, copy) with the bound each one's arithmetic gives, a ``py:``
reference run in a child process (a kernel's .py file is input: it must not reach the
verifier), and the comparison that names what is wrong (notes/buffers_kind.md).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import HarnessError
from harness.kinds.buffers import softmax_bound, sum_bound
from harness.kinds.buffers.draw import as_float64
from harness.kinds.buffers.spec import BuffersSpec

UNIT = {"f32": 2.0**-24, "bf16": 2.0**-8, "f16": 2.0**-11}
"""Unit roundoff of each float type (half its ulp at 1)."""
SENTINEL = {"f32": (0x7FC0DEAD, 4), "bf16": (0x7FDE, 2), "f16": (0x7E5A, 2),
            "i32": (0x7EADBEEF, 4), "u32": (0x7EADBEEF, 4)}
"""The poison an output starts every launch as (a NaN for float types), and its bytes."""
NUMPY = {"f32": np.float32, "bf16": np.uint16, "f16": np.float16, "i32": np.int32,
         "u32": np.uint32}
"""How a buffer's bytes are downloaded (BF16 as its bits)."""
SMALLEST_NORMAL = 2.0**-126


@dataclass(frozen=True)
class Expected:
    """One output's reference (float64) and the bound on |output - reference| per element
    (None: bit for bit after rounding to the output's type)."""

    value: np.ndarray
    bound: np.ndarray | None
    rule: str
    rows_variance: np.ndarray | None = None
    """A softmax's sigma_r^2 per row (softmax_bound.row_variance): its rows are judged
    together too (their outputs add up to one, softmax_bound.rows_verdict); None for the
    other references."""


@dataclass(frozen=True)
class Judged:
    """How one output compares: elements unwritten (the sentinel), not finite, outside the
    bound, and the worst |error| / bound."""

    elements: int
    unwritten: int
    nonfinite: int
    outside: int
    worst: float
    first: int
    """The flat index of the first element that is wrong (-1: none)."""
    detail: str
    misnormalised: str = ""
    """A softmax whose rows add up to other than one (softmax_bound.rows_verdict)."""

    @property
    def ok(self) -> bool:
        return (self.unwritten == 0 and self.nonfinite == 0 and self.outside == 0
                and not self.misnormalised)


def expected(spec: BuffersSpec, inputs: dict[str, np.ndarray], dims: dict[str, int],
             runner: PyReference | None = None, rows: np.ndarray | None = None
             ) -> dict[str, Expected]:
    """Each checked output's reference from ``inputs`` (float64, by buffer name). ``rows``:
    for softmax, only those rows (the inputs hold just them)."""
    out = spec.outputs[0]
    if spec.reference == "sum":
        (x,) = inputs.values()
        n = x.size
        x = x.reshape(-1)
        r = np.array([x.sum(dtype=np.float64)])
        bound = np.array([sum_bound.bound(x, float(r[0]), UNIT[out.dtype])])
        return {out.name: Expected(r, bound, sum_bound.RULE.format(n=n))}
    if spec.reference == "softmax":
        (x,) = inputs.values()
        m = x.max(axis=1, keepdims=True)
        e = np.exp(x - m)
        r = e / e.sum(axis=1, keepdims=True)
        unit = UNIT[out.dtype]
        keys = softmax_bound.input_keys(x, spec.inputs[0].dtype)
        return {out.name: Expected(r, softmax_bound.element_bound(x, r, unit),
                                   softmax_bound.RULE,
                                   softmax_bound.row_variance(r, unit, keys))}
    if spec.reference == "copy":
        (x,) = inputs.values()
        return {out.name: Expected(x, None, "exact")}
    if runner is None:
        raise HarnessError("a py: reference needs its runner (PyReference)")
    values = runner(inputs, dims)
    got = {}
    for b in spec.outputs:
        if b.name not in values:
            raise HarnessError(f"{runner.where} returned no {b.name!r} (it returned "
                               f"{', '.join(values) or 'nothing'}); return a dict with every "
                               f"out/inout buffer: {', '.join(o.name for o in spec.outputs)}")
        v = np.asarray(values[b.name], dtype=np.float64)
        tol = spec.tolerance
        got[b.name] = Expected(v, None if tol.exact else tol.abs + tol.rel * np.abs(v),
                               tol.describe())
    return got


def judge(raw: np.ndarray, dtype: str, want: Expected) -> Judged:
    """``raw`` (an output as downloaded) against ``want``."""
    raw = raw.reshape(-1)
    sentinel, _ = SENTINEL[dtype]
    bits = raw.view(np.uint16 if raw.itemsize == 2 else np.uint32)
    unwritten = bits == sentinel
    got = as_float64(raw, dtype) if dtype in UNIT else raw.astype(np.float64)
    ref = want.value.reshape(-1)
    if got.shape != ref.shape:
        raise HarnessError(f"the reference has {ref.size} elements for an output of {got.size}")
    nonfinite = ~np.isfinite(got) & ~unwritten
    bound = None
    if want.bound is None:
        rounded = softmax_bound.rounded(ref, dtype)
        outside = (rounded != got) & ~(np.isnan(rounded) & np.isnan(got))
        worst = float(np.max(np.abs(got - ref), initial=0.0, where=np.isfinite(got)))
    else:
        bound = np.broadcast_to(want.bound, want.value.shape).reshape(-1)
        error = np.abs(got - ref)
        outside = ~(error <= bound)
        ratio = np.where(np.isfinite(error), error / np.maximum(bound, 1e-300), np.inf)
        worst = float(ratio.max(initial=0.0))
    outside &= ~unwritten & ~nonfinite
    wrong = unwritten | nonfinite | outside
    first = int(np.argmax(wrong)) if wrong.any() else -1
    detail = misnormalised = ""
    if first >= 0:
        detail = (f"element {first}: got {got[first]!r}, expected {ref[first]!r}"
                  + (f" (bound {bound[first]:.3g})"
                     if want.bound is not None else " (exact)"))
    elif want.rows_variance is not None:
        shape = want.value.shape
        r = want.value.reshape(shape[0], -1)
        _, ratio, misnormalised = softmax_bound.rows_verdict(
            float(softmax_bound.row_excess(got.reshape(r.shape), r, dtype).sum()),
            float(want.rows_variance.sum()), r.shape[0])
        worst = max(worst, ratio)
        detail = misnormalised
    return Judged(ref.size, int(unwritten.sum()), int(nonfinite.sum()), int(outside.sum()),
                  worst, first, detail, misnormalised)


def _call(path: str, name: str, inputs: dict, dims: dict) -> dict:
    """In the child: load the kernel's .py and call its reference."""
    spec = importlib.util.spec_from_file_location("harness_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        raise HarnessError(f"{path} defines no function {name}()")
    result = function(**inputs, **dims)
    if isinstance(result, np.ndarray):
        return {"__single__": np.asarray(result, dtype=np.float64)}
    if not isinstance(result, dict):
        raise HarnessError(f"{path}: {name}() returned {type(result).__name__}; return a dict "
                           "of output name -> array (or one array for one output)")
    return {k: np.asarray(v, dtype=np.float64) for k, v in result.items()}


class PyReference:
    """A ``py:NAME`` reference: ``NAME`` in the kernel's .py file, called in a child process
    with the inputs (float64 arrays, by buffer name) and the dims (ints) as keywords."""

    def __init__(self, kernel_path: Path, spec: BuffersSpec):
        self.path = Path(kernel_path).with_suffix(".py")
        self.name = spec.reference.removeprefix("py:")
        self.where = f"{self.path}:{self.name}()"
        self.outputs = [b.name for b in spec.outputs]
        if not self.path.is_file():
            raise HarnessError(f"{spec.reference}: the reference lives in {self.path}, which "
                               f"does not exist; write def {self.name}(...) there, returning "
                               f"a dict with {', '.join(self.outputs)}")
        self._pool: ProcessPoolExecutor | None = None

    def __call__(self, inputs: dict[str, np.ndarray], dims: dict[str, int]) -> dict:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            values = self._pool.submit(_call, str(self.path), self.name, inputs, dims).result()
        except HarnessError:
            raise
        except Exception as exc:
            raise HarnessError(f"{self.where} failed: {type(exc).__name__}: {exc}") from None
        if "__single__" in values:
            if len(self.outputs) != 1:
                raise HarnessError(f"{self.where} returned one array for the outputs "
                                   f"{', '.join(self.outputs)}; return a dict by name")
            values = {self.outputs[0]: values["__single__"]}
        return values

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
