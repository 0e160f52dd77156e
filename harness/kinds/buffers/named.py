"""The buffers kind's baselines by name (a spec's ``baseline = "..."``): the driver copy, CUB's
sum and torch's softmax, each a :class:`~harness.kinds.base.Baseline` over the library calls
of baselines.py, found in one registry instead of an if-chain."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError
from harness.gpu.driver import Stream
from harness.kinds.base import Baseline, Baselines
from harness.kinds.buffers import baselines as calls
from harness.kinds.buffers.baselines import MemoryBaseline, Operand
from harness.kinds.dims import Problem

NONE = "none"
"""A spec's ``baseline = "none"``: timed alone."""


@dataclass(frozen=True)
class MemoryOperands:
    """What a buffers baseline is prepared with: the kernel's inputs, where its output lands,
    its compulsory bytes and the stream."""

    inputs: Sequence[Operand]
    output: Operand
    nbytes: int
    stream: Stream | None


class LibraryBaseline(Baseline):
    """One library call of baselines.py as a named Baseline; :attr:`call` is what
    :meth:`prepare` made (its label says library, version and call)."""

    make = staticmethod(lambda ops: None)

    def __init__(self, spec: Any = None, problem: Problem | None = None):
        self.call: MemoryBaseline | None = None

    def version(self) -> str:
        return self.call.label if self.call is not None else ""

    def prepare(self, operands: MemoryOperands) -> None:
        self.call = type(self).make(operands)

    def launch(self) -> None:
        if self.call is None:
            raise HarnessError(f"{self.name}: launched before prepare()")
        self.call.launch()

    def close(self) -> None:
        if self.call is not None:
            self.call.close()


class DriverCopy(LibraryBaseline):
    name, compute = "driver copy", "cuMemcpyDtoDAsync"
    make = staticmethod(lambda ops: calls._copy(ops.nbytes, ops.stream))


class CubSum(LibraryBaseline):
    name, compute = "CUB sum", "DeviceReduce::Sum"
    make = staticmethod(lambda ops: calls._cub_sum(ops.inputs, ops.output, ops.stream))


class TorchSoftmax(LibraryBaseline):
    name, compute = "torch softmax", "torch.softmax"
    make = staticmethod(lambda ops: calls._torch_softmax(ops.inputs, ops.output, ops.stream))


def _choose(spec: Any) -> str | None:
    name = spec.buffers.baseline
    return None if name == NONE else name


BASELINE_OBJECTS = Baselines({"copy": DriverCopy, "cub_sum": CubSum,
                              "torch_softmax": TorchSoftmax}, choose=_choose)
"""A spec's ``baseline`` key -> its Baseline class."""
BASELINES = (*BASELINE_OBJECTS.names(), NONE)
"""Every value a spec's ``baseline`` may take."""


def make_baseline(name: str, inputs: Sequence[Operand], output: Operand, nbytes: int,
                  stream: Stream | None) -> MemoryBaseline | None:
    """The library call of baseline ``name`` (one of :data:`BASELINES`) for a kernel reading
    ``inputs`` and writing ``output`` that must move ``nbytes`` (its compulsory bytes),
    enqueued on ``stream``; None for ``none``. Raises HarnessError naming what is missing and
    what to do when the library is not there."""
    if name == NONE:
        return None
    if name not in BASELINE_OBJECTS.names():
        raise HarnessError(f"baseline {name!r}: expected one of {', '.join(BASELINES)}")
    baseline = BASELINE_OBJECTS.factory(name)()
    baseline.prepare(MemoryOperands(inputs, output, nbytes, stream))
    return baseline.call
