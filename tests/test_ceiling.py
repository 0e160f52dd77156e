"""The mma.sync ceiling microbenchmark: its kernels, spec kind, registry filtering, launch plan,
report and CLI without a GPU; the measurement itself on a GPU."""

from pathlib import Path

import pytest

from harness.archs import get_arch
from harness.ceiling import (
    CeilingOptions,
    ceiling_kernel,
    ceiling_precisions,
    plan_launch,
)
from harness.compile import compile_kernel
from harness.errors import HarnessError, SpecError
from harness.registry import PROJECT_ROOT, discover
from harness.sass import disassemble, instruction_mix
from harness.spec import parse_spec

CEILING = discover(kind="ceiling")
INSTRUCTION = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
SPEC = f"""/* harness
kind = "ceiling"
entry = "k"
summary = "A test ceiling."
precision = "bf16"
min_arch = "sm_80"
block = ["128"]
[ceiling]
instruction = "{INSTRUCTION}"
mma_per_iteration = 16
blocks_per_sm = 4
*/
"""
BODY = f".visible .entry k(.param .u64 s, .param .u32 n)\n{{\n    {INSTRUCTION} {{}};\n}}\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))


def spec_of(text: str, body: str = BODY):
    return parse_spec(text + body, Path("k.ptx"))


def test_project_has_a_bf16_and_an_fp16_ceiling():
    assert ceiling_precisions(CEILING) == ["bf16", "fp16"]
    for precision, types in (("bf16", ".bf16.bf16."), ("fp16", ".f16.f16.")):
        kernel = ceiling_kernel(precision)
        assert kernel.spec.kind == "ceiling" and types in kernel.spec.ceiling.instruction
        assert kernel.spec.ceiling.flops_per_instruction == 2 * 16 * 8 * 16
        assert kernel.spec.path.parent.name == "ceiling"


def test_gemm_commands_never_see_ceiling_kernels():
    gemm, every = discover(), discover(kind=None)
    assert not {k.name for k in gemm} & {k.name for k in CEILING}
    assert {k.name for k in every} == {k.name for k in gemm} | {k.name for k in CEILING}
    assert all(k.spec.kind == "gemm" for k in gemm)
    with pytest.raises(HarnessError, match="unknown kernel kind 'gmem': expected one of gemm"):
        discover(kind="gmem")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel", CEILING, ids=[k.name for k in CEILING])
def test_ceiling_assembles_without_spills_and_issues_hmma(kernel, arch):
    compiled = compile_kernel(kernel, arch)
    res = compiled.resources
    assert 0 < res.registers <= 96, res  # 32 accumulators + 20 operand registers + a few
    assert res.spill_store_bytes == res.spill_load_bytes == res.stack_frame_bytes == 0
    mix = instruction_mix(disassemble(compiled.cubin))
    # ptxas may unroll the loop (it does 8x on sm_90): at least the 16 mma of one trip
    assert mix["HMMA"] >= kernel.spec.ceiling.mma_per_iteration
    assert mix["HMMA"] % kernel.spec.ceiling.mma_per_iteration == 0
    # register only: no loads at all, one store (the sum), no shared memory
    loads = sum(mix[c] for c in ("LDG", "LDG.64", "LDG.128", "LDS", "LDS.64", "LDS.128", "LDL"))
    assert loads == 0 and mix["STG"] == 1 and mix["LDGSTS"] == 0


def test_launch_plan_fills_every_sm_and_lasts_long_enough():
    kernel = ceiling_kernel("bf16")
    plan = plan_launch(kernel, get_arch("sm_90"), 132)
    assert (plan.blocks, plan.block_threads, plan.blocks_per_sm) == (528, 128, 4)
    warps = 528 * 4
    assert plan.flops == 2 * 16 * 8 * 16 * 16 * plan.iterations * warps
    # at the dense peak at 2 GHz (4096 FLOP/clock/SM) a launch takes at least 2 ms
    assert plan.flops / (4096 * 132 * 2.0e9) >= 2e-3
    assert plan.flops / (4096 * 132 * 2.0e9) < 2e-3 * 1.01
    assert plan.flop_formula.startswith("2*16*8*16 FLOP per mma x 16 mma per warp")
    fixed = plan_launch(kernel, get_arch("sm_80"), 108,
                        CeilingOptions(blocks_per_sm=2, iterations=100))
    assert (fixed.blocks, fixed.iterations) == (216, 100)
    assert fixed.flops == 4096 * 16 * 100 * 216 * 4
    with pytest.raises(HarnessError, match=r"iterations must be 1 \.\. 2\^32 - 1"):
        plan_launch(kernel, get_arch("sm_90"), 132, CeilingOptions(iterations=0))


def test_one_ceiling_kernel_per_precision():
    with pytest.raises(HarnessError, match="no ceiling kernel for fp32: .* found them for "
                                           "bf16, fp16"):
        ceiling_kernel("fp32")
    with pytest.raises(HarnessError, match=r"2 ceiling kernels for bf16 \(.*\); expected one"):
        ceiling_kernel("bf16", [*CEILING, *[k for k in CEILING if k.spec.precision == "bf16"]])


def test_ceiling_spec_parses():
    spec = spec_of(SPEC)
    assert spec.kind == "ceiling" and spec.grid == () and spec.params == {}
    assert spec.ceiling.instruction == INSTRUCTION and spec.ceiling.shape == (16, 8, 16)
    assert (spec.ceiling.mma_per_iteration, spec.ceiling.blocks_per_sm) == (16, 4)
    gemm = parse_spec((PROJECT_ROOT / "cu/sgemm/01_naive.cu").read_text(),
                      Path("01_naive.cu"))
    assert gemm.kind == "gemm" and gemm.ceiling is None


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace('kind = "ceiling"', 'kind = "roofline"'),
         "kind must be one of gemm, ceiling, found 'roofline'"),
        (lambda t: t.replace("[ceiling]", 'grid = ["1"]\nlayout_b = "col"\n[ceiling]'),
         "a ceiling kernel takes no grid, layout_b: it has no problem size"),
        (lambda t: t.replace("[ceiling]", "[params]\nX = 1\n[ceiling]"),
         "a ceiling kernel takes no params"),
        (lambda t: t[: t.index("[ceiling]")] + "*/\n", r"missing required key\(s\) ceiling"),
        (lambda t: t.replace('kind = "ceiling"\n', 'grid = ["1"]\n'),
         '\\[ceiling\\] belongs to ceiling microbenchmarks: add kind = "ceiling"'),
        (lambda t: t.replace("blocks_per_sm = 4", "blocks_per_sm = 4\nwarps = 2"),
         "ceiling must have exactly the keys .*; found unknown warps, missing none"),
        (lambda t: t.replace("mma_per_iteration = 16\n", ""),
         "found unknown none, missing mma_per_iteration"),
        (lambda t: t.replace("mma_per_iteration = 16", "mma_per_iteration = 0"),
         "ceiling.mma_per_iteration must be a positive integer, found 0"),
        (lambda t: t.replace("blocks_per_sm = 4", "blocks_per_sm = true"),
         "ceiling.blocks_per_sm must be a positive integer, found True"),
        (lambda t: t.replace(INSTRUCTION, "wgmma.mma_async.sp"),
         "ceiling.instruction must be an mma.sync instruction with its shape"),
        (lambda t: t.replace('precision = "bf16"', 'precision = "fp16"'),
         "does not take fp16 inputs: expected its operand types to read '.f16.f16.'"),
        (lambda t: t.replace('precision = "bf16"', 'precision = "fp32"'),
         "does not take fp32 inputs"),
        (lambda t: t.replace('block = ["128"]', 'block = ["TILE"]'),
         "block: formula 'TILE' uses TILE; it may use only"),
    ],
)
def test_bad_ceiling_specs_are_named(edit, match):
    with pytest.raises(SpecError, match=match):
        spec_of(edit(SPEC))


def test_ceiling_instruction_must_be_in_the_code():
    with pytest.raises(SpecError, match="does not appear in the kernel's code"):
        spec_of(SPEC, BODY.replace(".bf16.bf16.", ".f16.f16."))
