"""Attention kernels compiled offline (NVRTC, no GPU): the cubin, ptxas's resource report and
the launch shape at a problem, for ``harness build`` and the notes' ptxas tables."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.archs import compile_target, get_arch
from harness.compiler import headers
from harness.compiler.compile import CompileOptions, nvrtc_cubin
from harness.compiler.ptxas import Resources, parse_report
from harness.errors import CompileError, HarnessError
from harness.kernels.spec import KernelSpec, read_spec
from harness.kinds.attention.problem import AttentionProblem


def load(path) -> KernelSpec:
    """The KernelSpec of the attention kernel file at ``path``."""
    spec = read_spec(Path(path))
    if spec.kind != "attention":
        raise HarnessError(f"{path} is a {spec.kind!r} kernel, not an attention kernel")
    return spec


def params_of(spec: KernelSpec, variant: str | None = None) -> dict[str, int]:
    if variant is not None and variant not in spec.variants:
        raise HarnessError(f"{spec.path}: no variant {variant!r}; the variants are "
                           f"{', '.join(spec.variants) or 'none'}")
    chosen = variant or spec.representative or next(iter(spec.variants), None)
    return {**spec.params, **(spec.variants.get(chosen, {}) if chosen else {})}


@dataclass(frozen=True)
class Built:
    """One compile: the cubin and what ptxas reported for the entry."""

    cubin: bytes
    resources: Resources
    arch: str
    params: dict


def build(spec: KernelSpec, arch: str, variant: str | None = None,
          limit_s: float | None = None) -> Built:
    """Compile ``spec``'s kernel (its variant's parameters as ``-D``) for ``arch``; refused
    (CompileError) where its parameters differ from what a launch passes: the attention ABI
    and its tensor maps."""
    get_arch(arch)
    arch = compile_target(spec.min_arch, arch)  # sm_90a for wgmma and setmaxnreg, as GEMMs
    params = params_of(spec, variant)
    options = CompileOptions(arch=arch, defines=tuple(f"-D{k}={v}" for k, v in params.items()),
                             include_paths=headers.include_paths())
    source = Path(spec.path).read_bytes()
    cubin, log, _ = nvrtc_cubin(source, str(spec.path), options.nvrtc_flags(),
                                what=f"{Path(spec.path).stem} ({spec.path})", limit_s=limit_s)
    report = parse_report(log)
    if spec.entry not in report:
        raise CompileError(f"{spec.path}: ptxas reported no entry {spec.entry!r} (found "
                           f"{', '.join(report) or 'none'}); the kernel must be extern \"C\"")
    problem = spec.parameter_problem(cubin, spec.entry)
    if problem:  # a launch with other parameters reads garbage: refused here, as GEMMs are
        raise CompileError(problem)
    return Built(cubin, report[spec.entry], arch, params)


def launch_shape(spec: KernelSpec, problem: AttentionProblem, params: dict[str, int],
                 sms: int = 132) -> dict:
    """Grid, block and dynamic shared memory at ``problem``; HarnessError when a constraint
    does not hold (constraints choose the shapes, never the checks)."""
    env = {**problem.as_dict(), **params, "SMS": sms}
    for constraint in spec.constraints:
        if not constraint(env):
            raise HarnessError(f"{spec.path}: {problem.text} breaks the constraint "
                               f"{constraint.text} (parameters {params})")
    kind_spec = spec.kind_spec
    if kind_spec.head_dims and problem["D"] not in kind_spec.head_dims:
        raise HarnessError(f"{spec.path}: D={problem['D']} is not one of its head_dims "
                           f"{list(kind_spec.head_dims)}")
    if problem.causal and not kind_spec.causal:
        raise HarnessError(f"{spec.path}: the kernel declares no causal mask (causal = false)")
    return {"grid": [int(e(env)) for e in spec.grid], "block": [int(e(env)) for e in spec.block],
            "dynamic_smem_bytes": int(spec.dynamic_smem_bytes(env))}


def fits(spec: KernelSpec, problem: AttentionProblem, params: dict[str, int]) -> bool:
    try:
        launch_shape(spec, problem, params)
    except HarnessError:
        return False
    return True


def report_row(spec: KernelSpec, arch: str, problem: AttentionProblem,
               variant: str | None = None, limit_s: float | None = None) -> dict:
    """What ``harness build`` shows for one kernel: ptxas's resources for ``arch`` and the
    predicted occupancy and launch at ``problem`` (a compile error or a launch that cannot
    be is a row saying so, not an exception)."""
    from harness.compiler import occupancy

    row = {"kernel": Path(spec.path).stem + (f"[{variant}]" if variant else ""), "arch": arch,
           "size": problem.text}
    try:
        built = build(spec, arch, variant, limit_s)
    except HarnessError as exc:
        return {**row, "status": "compile error", "message": str(exc)}
    res = built.resources
    try:
        shape = launch_shape(spec, problem, built.params)
    except HarnessError as exc:
        return {**row, "status": "skipped", "message": str(exc), "registers": res.registers}
    threads = 1
    for b in shape["block"]:
        threads *= b
    occ = occupancy.predict(get_arch(arch), threads, res.registers, res.static_smem_bytes,
                            shape["dynamic_smem_bytes"], spec.carveout_pct)
    return {**row, "status": "ok" if occ.blocks_per_sm else "cannot launch",
            "registers": res.registers, "static_smem_bytes": res.static_smem_bytes,
            "spill_store_bytes": res.spill_store_bytes, "spill_load_bytes": res.spill_load_bytes,
            "stack_frame_bytes": res.stack_frame_bytes, **shape, "block_threads": threads,
            "blocks_per_sm": occ.blocks_per_sm, "occupancy_pct": occ.occupancy_pct,
            "limiter": occ.limiter}


def fitted(case, spec, params: dict[str, int]):
    """``case`` at a shape the kernel's constraints allow: its own, or with the head dim the
    kernel takes (constraints change the shapes, never the checks); None when no head dim
    fits (a causal case for a kernel without the mask) or the case is about a head dim the
    kernel does not run (``pins_d``)."""
    from dataclasses import replace

    p = case.problem
    if case.pins_d:
        return case if fits(spec, p, params) else None
    for d in dict.fromkeys((p["D"], *spec.kind_spec.head_dims, *params.values())):
        moved = AttentionProblem.make(p["B"], p["H"], p["S_q"], p["S_kv"], d, p["H_kv"],
                                      p.causal)
        if fits(spec, moved, params):
            return case if d == p["D"] else replace(case, problem=moved)
    return None
