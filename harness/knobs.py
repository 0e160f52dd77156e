"""Options that check themselves: a number's flag, its range and what it is, said once.

An option class declares each numeric field with :func:`knob`; its ``__post_init__`` calls
:func:`check_knobs`, which refuses a value out of range with the one line the command line
gives (``--budget-ms 0: expected more than 0 (the most GPU time per timing, in
milliseconds)``), whoever built the options: the CLI from its flags, the API from its keywords,
a script directly. :data:`FLAG_KNOBS` are ranges of flags that several commands share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from harness.errors import HarnessError


@dataclass(frozen=True)
class Knob:
    """A number's flag and the values it takes."""

    flag: str
    """The command-line flag that sets it (``--budget-ms``): what a refusal names."""
    least: float
    inclusive: bool = True
    """Whether ``least`` itself is allowed."""
    what: str = ""
    """What the number is, in the refusal (``the most GPU time per timing, in milliseconds``)."""
    most: float | None = None
    expect: str | None = None
    """The refusal's whole "expected ..." part, where the range alone does not say it."""
    off: float | None = None
    """A value always allowed, outside the range: the knob turned off (0: no power pass)."""
    dest: str | None = None
    """The flag's argparse destination and the API's keyword, where it is not the field's
    name (``--max-rel-se``: ``max_rel_se``)."""

    def check(self, value: Any) -> None:
        """Nothing, or HarnessError naming the flag, the value and what was expected."""
        if value is None or (self.off is not None and value == self.off):
            return
        below = value < self.least or (value == self.least and not self.inclusive)
        if math.isfinite(value) and not below and (self.most is None or value <= self.most):
            return
        if self.expect is None:
            bound = f"at least {self.least:g}" if self.inclusive else f"more than {self.least:g}"
            expect = f"{bound} ({self.what})"
        else:
            expect = self.expect
        raise HarnessError(f"{self.flag} {value:g}: expected {expect}")


def knob(default: Any, flag: str | Knob, least: float = 0, inclusive: bool = True,
         what: str = "", **more: Any) -> Any:
    """A dataclass field whose value ``check_knobs`` holds to ``Knob(flag, least, ...)`` (or
    to ``flag``, a Knob several options share)."""
    held = flag if isinstance(flag, Knob) else Knob(flag, least, inclusive, what, **more)
    return field(default=default, metadata={"knob": held})


def knob_of(cls: type, name: str) -> Knob:
    """The knob of field ``name`` of the option class ``cls``."""
    return next(f.metadata["knob"] for f in fields(cls) if f.name == name)


def check_knobs(options: Any) -> None:
    """Every knob field of ``options`` (a dataclass) in range, in field order."""
    for f in fields(options):
        if "knob" in f.metadata:
            f.metadata["knob"].check(getattr(options, f.name))


TIMEOUT_S = Knob("--timeout-s", 0, False, "seconds without progress before a kernel is called "
                                          "hung")
CARVEOUT = Knob("--carveout", 0, True, most=100, expect="a percent from 0 to 100 (the preferred "
                "shared-memory carve-out; leave it out for the spec's, else the driver's "
                "default)")
GAP_MS = Knob("--gap-ms", 0, True, "milliseconds between launches")
"""``--gap-ms`` as given, whether or not it is used (run and compare use it with --isolated)."""
POWER_S = Knob("--power-s", 0, False, "seconds of each power pass")
"""``--power-s`` as given, whether or not it is used (with --power)."""
REPEATS = Knob("--repeats", 1, True, "launches of each")
FLAG_KNOBS = (TIMEOUT_S, CARVEOUT, GAP_MS, POWER_S, REPEATS)
