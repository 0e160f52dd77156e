"""A kernel with some of its parameters set: ``harness energy``'s measurement knobs
(``--knob NOSTORE=1``) and ``harness launch``'s ``--param``."""

from __future__ import annotations

from harness.errors import HarnessError
from harness.kernels.registry import Kernel

WRONG_BY_DESIGN = {"NOLOAD", "NOSTORE"}
"""Measurement knobs that skip work: a kernel with one set must fail its check."""


def parse_setting(text: str) -> dict[str, int]:
    """``"NOLOAD=1,NOSTORE=1"`` -> {"NOLOAD": 1, "NOSTORE": 1}."""
    setting = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            setting[name.strip()] = int(value)
        except ValueError:
            raise HarnessError(f"{text!r}: expected NAME=INT[,NAME=INT...], e.g. NOSTORE=1 or "
                               "NOLOAD=1,NOSTORE=1") from None
    return setting


def with_knobs(base: Kernel, setting: dict[str, int]) -> Kernel:
    """``base`` with ``setting`` over its parameters; unknown names fail."""
    unknown = sorted(set(setting) - set(dict(base.params)))
    if unknown:
        raise HarnessError(f"{base.name} has no parameter {', '.join(unknown)}; its "
                           f"parameters: {', '.join(sorted(dict(base.params)))}")
    label = ",".join(f"{k}={v}" for k, v in setting.items())
    return base.with_params(setting, f"{base.name}+{label}")
