"""The ceiling kind object (:class:`CeilingKind`): no problem size, no baseline; only
``harness ceiling`` (and ``harness build``/``list``) take its kernels."""

from __future__ import annotations

from typing import Any

from harness.errors import HarnessError
from harness.kinds.base import Column, Kind
from harness.kinds.dims import Problem


class CeilingKind(Kind):
    name = "ceiling"
    summary = "one instruction's issue rate, ABI (u64 sink, u32 iterations)"
    dims = ()
    commands = ("ceiling", "build")
    own_command = "harness ceiling"

    def parse_table(self, table, source, match, path, fail) -> dict[str, Any]:
        from harness.kinds.gemm_shaped import gemm_shaped_fields

        return gemm_shaped_fields(table, source, match, path, fail, kind=self.name,
                                  ceiling=True)

    def read_size(self, text: str, spec: Any = None) -> Problem:
        raise HarnessError(f"a ceiling kernel has no problem size (found --size {text!r}); "
                           "its grid is [ceiling] blocks_per_sm x the SM count")

    def flops(self, spec: Any, problem: Problem) -> float:
        return 0.0

    def compulsory_bytes(self, spec: Any, problem: Problem) -> float:
        return 0.0

    def figures(self, result: Any) -> dict[str, float | None]:
        return {}

    def columns(self) -> tuple[Column, ...]:
        return ()
