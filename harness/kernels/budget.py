"""A kernel's ``[budget]``: the limits its offline build must keep (registers, spills, shared
memory, predicted occupancy), read from its spec and checked against a build."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.errors import HarnessError, SpecError
from harness.kernels.spec_text import with_nearest

BUDGET_KEYS = ("max_registers", "max_spill_bytes", "max_smem_bytes", "min_occupancy_pct")
"""Keys of the optional ``[budget]`` table: limits the offline build must stay within (registers
per thread, spill stores + loads in bytes, static + dynamic shared memory per block at the size
built for, and the least predicted occupancy in percent); the pytest plugin and
``harness.testing`` check them, and ``harness build`` (:func:`budget_problems`)."""


def parse_budget(raw, fail=SpecError) -> dict[str, int]:
    """A ``[budget]`` table (or the keyword arguments of ``harness.testing.assert_builds``)
    checked: keys among :data:`BUDGET_KEYS`, values non-negative integers (a percent at most
    100 for ``min_occupancy_pct``). ``fail(message)`` makes the exception raised."""
    if not isinstance(raw, dict):
        raise fail(f"budget must be a table with keys among {', '.join(BUDGET_KEYS)}, found "
                   f"{raw!r}")
    unknown = sorted(set(raw) - set(BUDGET_KEYS))
    if unknown:
        raise fail("budget: unknown key(s) " + ", ".join(with_nearest(k, BUDGET_KEYS)
                                                         for k in unknown)
                   + f"; allowed keys: {', '.join(BUDGET_KEYS)}")
    for key, value in raw.items():
        top = 100 if key == "min_occupancy_pct" else None
        if (isinstance(value, bool) or not isinstance(value, int) or value < 0
                or (top is not None and value > top)):
            what = "an integer percent 0..100" if top else "a non-negative integer"
            raise fail(f"budget.{key} must be {what}, found {value!r}")
    return {key: raw[key] for key in BUDGET_KEYS if key in raw}


def budget_problems(build_row: Mapping[str, Any] | Any, budget: Mapping[str, int]) -> list[str]:
    """Every limit of ``budget`` (keys of ``[budget]``) that the build exceeds, one line each,
    e.g. ``"registers 168 > max_registers 128"``. ``build_row``: a row of
    :func:`harness.compiler.offline.build_row` (or a record with ``to_dict()``, the API's Build);
    a row that did not build has nothing to judge (no problems)."""
    budget = parse_budget(dict(budget), HarnessError)
    row = build_row.to_dict() if hasattr(build_row, "to_dict") else build_row
    if row.get("registers") is None:
        return []
    problems = []
    limit = budget.get("max_registers")
    if limit is not None and row["registers"] > limit:
        problems.append(f"registers {row['registers']} > max_registers {limit}")
    limit = budget.get("max_spill_bytes")
    stores, loads = row["spill_store_bytes"], row["spill_load_bytes"]
    if limit is not None and stores + loads > limit:
        problems.append(f"spill bytes {stores + loads} > max_spill_bytes {limit} "
                        f"(stores {stores}, loads {loads})")
    limit = budget.get("max_smem_bytes")
    static, dynamic = row["static_smem_bytes"], row["dynamic_smem_bytes"]
    if limit is not None and static + dynamic > limit:
        size = "x".join(map(str, row.get("size") or ()))
        problems.append(f"smem bytes {static + dynamic} > max_smem_bytes {limit} "
                        f"(static {static} + dynamic {dynamic} at {size})")
    limit = budget.get("min_occupancy_pct")
    if limit is not None and row["occupancy_pct"] < limit:
        problems.append(f"occupancy {row['occupancy_pct']:g}% < min_occupancy_pct {limit} "
                        f"(limited by {row['limiter']})")
    return problems
