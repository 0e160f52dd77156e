"""One attention kernel checked on the GPU against the battery: its inputs uploaded in its
layout, its outputs poisoned before every launch, launched through the attention ABI, and
its raw outputs judged (kind.judge_raw). Needs a current context (harness.gpu.driver.Device).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import numpy as np

from harness.errors import HarnessError, SpecError
from harness.kinds.attention import battery, numerics
from harness.kinds.attention.build import build, fitted, launch_shape, params_of
from harness.kinds.attention.kind import judge_raw
from harness.kinds.attention.reference import to_layout


def tensor_maps(spec, problem, params: dict[str, int], addresses: dict[str, int],
                encode=None) -> list[ctypes.Array]:
    """The tensor maps ``spec`` declares (``[tmaps.q]`` ... ``[tmaps.o]``), each evaluated at
    ``problem`` and ``params`` and encoded over its tensor's buffer (``addresses``: q, k, v,
    o), in the order they follow the ABI. ``encode`` is ``harness.gpu.tensormaps.tensor_map``
    (a fake in CPU tests)."""
    if encode is None:
        from harness.gpu.tensormaps import tensor_map as encode
    env = {**problem.as_dict(), **params}
    maps = []
    for tensor, tmap in spec.kind_spec.tmaps:
        label = f"{spec.path.stem} tensor map {tensor}"
        try:
            desc = tmap.evaluate(env)
        except SpecError as exc:
            raise HarnessError(f"{label}: [tmaps.{tensor}] at {problem.text}: {exc}") from None
        maps.append(encode(desc, addresses[tensor], spec.precision, label))
    return maps


class Launcher:
    """A compiled attention kernel, loaded, that checks itself case by case."""

    def __init__(self, spec, arch: str, variant: str | None = None, stream=None) -> None:
        from harness.gpu.driver import Module, Stream

        self.spec = spec
        self.params = params_of(spec, variant)
        self.built = build(spec, arch, variant)
        self.module = Module(self.built.cubin, f"{spec.path.stem} ({arch})")
        self.function = self.module.function(spec.entry)
        self.stream = stream or Stream()

    def outputs(self, case: battery.Case, drawn: battery.Drawn, scale: float | None = None
                ) -> tuple[np.ndarray, np.ndarray | None]:
        """One launch on ``drawn`` (uploaded in the kernel's layout), outputs poisoned first:
        the raw output (16-bit patterns, the kernel's layout) and log-sum-exp (FP32)."""
        from harness.gpu.driver import Buffer

        p = case.problem
        layout = self.spec.kind_spec.layout
        raws = [to_layout(np.asarray(r).view(np.uint16), layout)
                for r in (drawn.q_raw, drawn.k_raw, drawn.v_raw)]
        poison = (numerics.BF16_POISON if self.spec.precision == "bf16"
                  else numerics.FP16_POISON)
        buffers = [Buffer(r.nbytes) for r in raws]
        out = Buffer(raws[0].nbytes)
        lse = Buffer(4 * p["B"] * p["H"] * p["S_q"]) if self.spec.kind_spec.lse else None
        try:
            for buffer, raw in zip(buffers, raws, strict=True):
                buffer.upload(raw, self.stream)
            out.fill(poison, 2, self.stream)
            if lse is not None:
                lse.fill(numerics.LSE_POISON, 4, self.stream)
            self.bind(p, buffers, out, lse, case.scale if scale is None else scale)()
            o_raw = out.download(np.uint16, raws[0].shape, self.stream).copy()
            lse_raw = (lse.download(np.float32, (p["B"], p["H"], p["S_q"]), self.stream).copy()
                       if lse is not None else None)
        finally:
            for buffer in (*buffers, out, lse):
                if buffer is not None:
                    buffer.close()
        return o_raw, lse_raw

    def bind(self, p, qkv, out, lse, scale: float):
        """The launch at problem ``p`` on device buffers ``qkv`` (Q, K, V), ``out`` and ``lse``
        (None where the kernel writes none), its arguments and tensor maps made once: a
        callable that enqueues it on the launcher's stream."""
        from harness.gpu.driver import LaunchShape

        shape = launch_shape(self.spec, p, self.params)
        smem = shape["dynamic_smem_bytes"]
        if smem > 48 * 1024:
            self.function.set_max_dynamic_smem(smem)
        dims = (shape["grid"] + [1, 1])[:3]
        block = (shape["block"] + [1, 1])[:3]
        shaped = LaunchShape(tuple(dims), tuple(block), smem)
        q, k, v = qkv
        args = (*(ctypes.c_uint64(b.address) for b in (q, k, v)), ctypes.c_uint64(out.address),
                ctypes.c_uint64(lse.address if lse is not None else 0),
                *(ctypes.c_int32(p[d]) for d in ("B", "H", "H_kv", "S_q", "S_kv", "D")),
                ctypes.c_float(scale), ctypes.c_int32(int(p.causal)),
                *tensor_maps(self.spec, p, self.params, {
                    "q": q.address, "k": k.address, "v": v.address, "o": out.address}))

        def launch() -> None:
            self.function.launch(shaped, self.stream, args)
        return launch

    def check(self, case: battery.Case, drawn: battery.Drawn) -> numerics.Verdict:
        o_raw, lse_raw = self.outputs(case, drawn)
        if self.spec.precision == "fp16":
            o_raw = o_raw.view(np.float16)
        return judge_raw(self.spec, case, drawn, o_raw, lse_raw)

    def close(self) -> None:
        self.module.close()


def battery_verdicts(spec, arch: str, *, seeds: int = 3, seed: int = 0,
                     variant: str | None = None) -> Iterator[tuple[battery.Case, object]]:
    """(case, verdict) for every case the kernel takes that fits its constraints, ``seeds``
    fresh draws each, inputs from one generator seeded by ``seed`` (record it)."""
    launcher = Launcher(spec, arch, variant)
    rng = np.random.default_rng(seed)
    try:
        for case in battery.CASES:
            case = fitted(case, spec, launcher.params)
            if case is None:
                continue
            for _ in range(seeds):
                yield case, launcher.check(case, battery.draw(case, spec.precision, rng))
    finally:
        launcher.close()
