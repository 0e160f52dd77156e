"""The one place a GPU session is set up: device and context, stream, clock sampler, timer, the
crowd, and the parts each kind adds (its libraries, operands and kernels, made once).

The worker, the CLI's GPU commands (occupancy, ceiling, energy, launch) and the experiments all
open a :class:`BenchSession` instead of wiring the driver themselves. A kind's part of it (GEMM:
cuBLAS, the operands, the reference kernels; harness/kinds/gemm/session.py) is made the first
time the kind asks for it (:meth:`BenchSession.part`) and closed with the session.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from harness.bench.seeds import new_seed
from harness.gpu import own_kernels
from harness.gpu.clocks import ClockSampler
from harness.gpu.compilers import compiler_versions
from harness.gpu.crowd import SOURCE as CROWD_SOURCE
from harness.gpu.crowd import Crowd
from harness.gpu.driver import Device, Stream
from harness.gpu.timing import Primed, Timer, TimingOptions, with_before
from harness.gpu.timing.kernels import SOURCE as TIMER_SOURCE
from harness.kernels.registry import Kernel


class BenchSession:
    """A GPU opened for measuring; use as a context manager (closing releases the context).

    ``ahead``: CUDA sources of kernels the session's users will need (a kind's
    ``session_sources``), built on threads beside its start-up (own_kernels.py).
    """

    def __init__(self, timing: TimingOptions | None = None, *, carveout_pct: int | None = None,
                 ordinal: int = 0, say: Callable[[str], None] = lambda _: None,
                 run_seed: int | None = None, ahead: tuple[str, ...] = ()):
        timing = timing or TimingOptions()
        self.run_seed = new_seed() if run_seed is None else int(run_seed)
        """What every input of this session is drawn from (seeds.derive): recorded with
        the results, so a run can be replayed with ``--seed``."""
        self.timings = 0
        """Timings made in this session so far (what salts each one's inputs apart)."""
        self.device = Device(ordinal)
        own_kernels.ahead(self.device.arch.name, TIMER_SOURCE, CROWD_SOURCE,
                          *dict.fromkeys(ahead))
        self.stream = Stream()
        self.clocks = ClockSampler(self.device.pci_bus_id)
        self.timer = Timer(self.stream, self.device.l2_bytes, self.clocks, timing)
        self.carveout_pct = carveout_pct
        self.say = say
        self._parts: dict[str, Any] = {}

    def __enter__(self) -> BenchSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def part(self, key: str, make: Callable[[BenchSession], Any]) -> Any:
        """The part ``key`` of this session (a kind's libraries and operands), made by
        ``make(self)`` the first time; it is closed (its ``close()``) with the session."""
        if key not in self._parts:
            self._parts[key] = make(self)
        return self._parts[key]

    def close(self) -> None:
        for part in reversed(list(self._parts.values())):
            part.close()
        self._parts.clear()
        self.device.close()

    @property
    def arch(self) -> str:
        """The device's compile target (``sm_90``)."""
        return self.device.arch.name

    @cached_property
    def crowd(self) -> Crowd:
        """Blocks that hold part of the SMs while a check launches a kernel (gpu/crowd.py),
        compiled the first time they are needed."""
        return Crowd(self.stream, self.device.sm_count)

    def kernel(self, kernel: Kernel) -> Kernel:
        """``kernel`` with this device's tuned parameters (``[tuned.<arch>]``)."""
        return kernel.for_arch(self.arch)

    def part_facts(self) -> dict:
        """What the parts made so far add to the facts (a library's version once its handle
        is open); cheap, so the worker may ask after every kernel."""
        facts: dict = {}
        for part in self._parts.values():
            facts.update(getattr(part, "facts", dict)())
        return facts

    def facts(self) -> dict:
        """The GPU facts a report's header names."""
        device = self.device
        return {"name": device.name, "compute_capability": list(device.compute_capability),
                "arch": device.arch.name, "sm_count": device.sm_count,
                "l2_bytes": device.l2_bytes, "driver": device.driver_version,
                "pci_bus_id": device.pci_bus_id, "compilers": compiler_versions(),
                "clocks": self.clocks.info(), "memory_bytes": device.total_memory_bytes,
                **self.part_facts()}


def in_turn(launches: list[Callable[[], None]], befores: list[Callable[[], None]],
            primes: list[Callable[[], None]] | None = None,
            afters: list[Callable[[], None]] | None = None
            ) -> tuple[Callable[[], None], Callable[[], None]]:
    """A launch and its ``before`` for the timer that take the copies in turn, one per round
    (the launch alone when there is one copy). ``primes[i]`` primes launch i on its copy
    (``timing.primer_of``): its own preparation and the launch, C left as it is; by default
    the launch. ``afters[i]`` follows each timed repetition of launch i on its copy (the
    returned launch's ``after``)."""
    if len(launches) == 1:
        prime = primes[0] if primes else with_before(befores[0], launches[0])
        return Primed(launches[0], prime, afters[0] if afters else None, cycle=1), befores[0]
    turn = _InTurn(launches, befores, primes or launches, afters)
    return (Primed(turn.launch, turn.prime, turn.after if afters else None,
                   cycle=len(launches)), turn.before)


class _InTurn:
    """Launches on several copies of the operands, one copy per round: ``before`` moves to the
    next copy and prepares it, ``launch`` launches on it (the timer calls them in that
    order). Two of them over the same copies, called once each per round, stay in step: the
    kernel and cuBLAS of a round run on the same copy. ``prime``, called before ``before``,
    launches on the copy the round is about to take (``before`` then poisons its C): the SMs
    hold the launch's code and the GPU its operands' address translations, as in a loop over
    the same buffers, which an L2 flush leaves cold. (Priming on the copy of the round
    before, at 512 a compare's round of 18 pairs over 4 sets of types read cuBLAS 1-2.8% and
    the kernels 0.5-1.3% slower than runs did: compare-20261126-140622.)"""

    def __init__(self, launches: list[Callable[[], None]],
                 befores: list[Callable[[], None]], primes: list[Callable[[], None]],
                 afters: list[Callable[[], None]] | None = None):
        self.launches, self.befores, self.primes, self.turn = launches, befores, primes, 0
        self.afters = afters

    def before(self) -> None:
        self.turn = (self.turn + 1) % len(self.launches)
        self.befores[self.turn]()

    def prime(self) -> None:
        self.primes[(self.turn + 1) % len(self.primes)]()

    def launch(self) -> None:
        self.launches[self.turn]()

    def after(self) -> None:
        self.afters[self.turn]()
