"""Attention kernels and the device reference built offline (NVRTC, no GPU); the baselines'
reasons for not running here."""

from __future__ import annotations

import importlib.util

import pytest

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT
from harness.kernels.spec import read_spec
from harness.kinds.attention import baselines, device_reference
from harness.kinds.attention.baselines import BASELINES, TorchSdpa, availability
from harness.kinds.attention.build import build, launch_shape, load, report_row
from harness.kinds.attention.problem import read_size

NAIVE = "cu/attention/attention_01_naive.cu"
ONLINE = "cu/attention/attention_02_online.cu"
WGMMA = "cu/attention/attention_03_wgmma.cu"


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("path, variant, d", [(NAIVE, None, 128), (ONLINE, "d64", 64),
                                              (ONLINE, "d128", 128), (ONLINE, "d256", 256),
                                              ("examples/attention_first.cu", None, 128)])
def test_kernels_build_offline_without_spills(path, variant, d, arch):
    row = report_row(load(path), arch, read_size(f"B=4,H=16,S=4096,D={d}"), variant)
    assert row["status"] == "ok", row
    assert row["spill_store_bytes"] == row["spill_load_bytes"] == 0
    assert row["blocks_per_sm"] >= 1 and row["registers"] <= 255


TMA_KERNEL = """/* harness
kind = "attention"
entry = "f"
summary = "s"
min_arch = "sm_90"
precision = "bf16"
layout = "bhsd"
block = ["128"]
grid = ["cdiv(S_q, 64)", "H", "B"]
[tmaps.q]
rank = 2
shape = ["D", "B * H * S_q"]
strides = ["D"]
box = ["64", "64"]
[tmaps.k]
rank = 2
shape = ["D", "B * H_kv * S_kv"]
strides = ["D"]
box = ["64", "64"]
*/
struct alignas(64) Map { unsigned char bytes[128]; };
extern "C" __global__ void f(const void* q, const void* k, const void* v, void* o, float* lse,
                             int B, int H, int H_kv, int S_q, int S_kv, int D, float scale,
                             int causal, const __grid_constant__ Map tq%s) {}
"""


def test_a_kernel_taking_tensor_maps_builds_and_one_missing_a_map_is_refused(tmp_path):
    """The maps a spec's [tmaps.X] declares are part of what a launch passes: a kernel that
    takes them builds; one that takes fewer is refused at its build, naming the ABI."""
    good = tmp_path / "tma_attention.cu"
    good.write_text(TMA_KERNEL % ", const __grid_constant__ Map tk")
    row = report_row(load(good), "sm_90", read_size("B=1,H=2,S=256,D=64"))
    assert row["status"] == "ok", row
    short = tmp_path / "tma_short.cu"
    short.write_text(TMA_KERNEL % "")
    row = report_row(load(short), "sm_90", read_size("B=1,H=2,S=256,D=64"))
    assert row["status"] == "compile error" and "tmap_k (from [tmaps.k])" in row["message"], row


def test_online_uses_the_instructions_it_names():
    from harness.compiler import sass
    built = build(load(ONLINE), "sm_90", "d128")
    text = sass.disassemble(built.cubin) if hasattr(sass, "disassemble") else None
    if text is None:
        pytest.skip("no SASS disassembler in harness.compiler.sass")
    for opcode in ("HMMA", "LDSM", "LDGSTS", "MUFU.EX2"):
        assert opcode in text, opcode


@pytest.mark.parametrize("variant, d, smem", [("d64", 64, 82944), ("d128", 128, 164864),
                                              ("d256", 256, 197632)])
def test_the_hopper_rung_builds_for_sm_90a_without_spills(variant, d, smem):
    """attention_03 needs sm_90a (wgmma, setmaxnreg): asked for sm_90 it is built for sm_90a,
    as GEMM rungs are; one block of 384 threads an SM, every variant under 227 KB."""
    row = report_row(load(WGMMA), "sm_90", read_size(f"B=4,H=16,S=4096,D={d}"), variant)
    assert row["status"] == "ok", row
    assert row["spill_store_bytes"] == row["spill_load_bytes"] == 0
    assert row["dynamic_smem_bytes"] == smem and row["blocks_per_sm"] == 1
    assert row["grid"] == [32, 16, 4] and row["block"] == [384]


def test_the_hopper_rung_uses_the_instructions_it_names():
    """TMA loads counted on mbarriers, the register split, wgmma from shared memory (S) and
    with A in registers and B transposed (P V), the exponentials, and the wait that leaves
    one group in flight: P V of the last tile runs on while the softmax of the next one is
    computed (its summary's intra-warpgroup pipelining)."""
    from harness.compiler import sass
    text = sass.disassemble(build(load(WGMMA), "sm_90", "d128").cubin)
    for opcode in ("UTMALDG.3D", "SYNCS.", "USETMAXREG", "HGMMA.64x128x16.F32.BF16",
                   "MUFU.EX2", "WARPGROUP.DEPBAR.LE gsb0, 0x1"):
        assert opcode in text, opcode
    assert any("HGMMA" in line and "tnspB" in line and "gdesc" in line and ", R" in line
               for line in text.splitlines())


def test_the_ping_pong_variant_takes_turns_on_named_barriers():
    """d128p: the consumers wait on barriers 1 and 2 for their turn and arrive on the other's;
    d128 has neither."""
    import re

    from harness.compiler import sass
    turns = sass.disassemble(build(load(WGMMA), "sm_90", "d128p").cubin)
    plain = sass.disassemble(build(load(WGMMA), "sm_90", "d128").cubin)
    def of_256(text):  # the named barriers over the two consumers' 256 (0x100) threads
        return [line for line in text.splitlines()
                if re.search(r"BAR\.(SYNC|ARV)\S* \S+, 0x100", line)]
    named = of_256(turns)
    assert any("BAR.ARV" in line for line in named) and not of_256(plain)
    assert len(named) >= 4, named  # in the loop a wait and a give; the first give, last wait


def test_the_persistent_variant_walks_work_tiles_one_block_an_sm():
    """d128pp: min(SMS, work tiles) blocks (132 on an H100 at S = 4096: 2048 work tiles), the
    consumers meeting on named barrier 3 at each tile's start, the rest as d128p; its main loop
    at most 600 instructions a trip (the rings' counters run on over the work tiles: 591 against
    d128p's 563 when written)."""
    import re
    import sys

    from harness.compiler import sass
    sys.path.insert(0, str(PROJECT_ROOT / "experiments"))
    import sass_loop

    for size, blocks in (("B=4,H=16,S=4096,D=128", 132), ("B=1,H=2,S=256,D=128,causal", 4)):
        row = report_row(load(WGMMA), "sm_90", read_size(size), "d128pp")
        assert row["status"] == "ok" and row["spill_store_bytes"] == 0, row
        assert row["grid"] == [blocks, 1, 1] and row["dynamic_smem_bytes"] == 164864, row
    text = sass.disassemble(build(load(WGMMA), "sm_90", "d128pp").cubin)
    assert re.search(r"BAR\.SYNC\S* 0x3, 0x100", text)
    assert not re.search(r"BAR\.SYNC\S* 0x3, 0x100",
                         sass.disassemble(build(load(WGMMA), "sm_90", "d128p").cubin))
    ins = sass_loop.instructions(text)
    assert len(sass_loop.shortest_trip(ins, *sass_loop.main_loop(ins))) <= 600


def test_an_unmasked_tile_issues_no_mask_and_no_denormal_guard():
    """attention_03 at D = 128, its main loop's shortest trip (an unmasked tile) read from the
    SASS: 958 instructions a warp at 750d6e4 (the mask's compares and selects predicated on
    every tile, exp2f's range test), 574 since (notes/attention.md). A compiler or source
    change that brings them back fails here, at no device cost."""
    import collections
    import sys

    from harness.compiler import sass
    sys.path.insert(0, str(PROJECT_ROOT / "experiments"))
    import sass_loop

    ins = sass_loop.instructions(sass.disassemble(build(load(WGMMA), "sm_90", "d128").cubin))
    trip = sass_loop.shortest_trip(ins, *sass_loop.main_loop(ins))
    mix = collections.Counter(op.split(".")[0] for op in trip)
    assert len(trip) <= 620, (len(trip), mix.most_common(12))
    assert mix["MUFU"] == 66 and mix["HGMMA"] == 16  # 64 exponentials, 2 rescales; 8 + 8
    assert mix["ISETP"] <= 8 and mix["FSEL"] <= 4 and mix["FSETP"] <= 4, mix


def test_launch_shape_and_constraints():
    online = load(ONLINE)
    shape = launch_shape(online, read_size("B=2,H=8,S=1000,D=128,causal"), {"HEAD_DIM": 128})
    assert shape == {"grid": [16, 8, 2], "block": [128], "dynamic_smem_bytes": 81920}
    with pytest.raises(HarnessError, match="breaks the constraint D == HEAD_DIM"):
        launch_shape(online, read_size("D=64"), {"HEAD_DIM": 128})
    with pytest.raises(HarnessError, match="not one of its head_dims"):
        launch_shape(online, read_size("D=96"), {"HEAD_DIM": 96})
    with pytest.raises(HarnessError, match="no variant 'd32'"):
        build(online, "sm_90", "d32")
    with pytest.raises(HarnessError, match="not an attention kernel"):
        load("cu/memory/sum_01_atomic.cu")


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_device_reference_builds_offline(precision, layout):
    from harness.gpu import own_kernels
    assert own_kernels.cubin(device_reference.source(precision, layout), "sm_90")


def test_baselines_by_name_and_why_each_is_skipped_here():
    assert BASELINES.names()[0] == "cudnn_sdpa"
    reasons = availability()
    assert set(reasons) == set(BASELINES.names())
    if importlib.util.find_spec("torch") is None:
        for name in ("flash_attn_2", "flash_attn_3", "torch_sdpa_flash", "torch_sdpa_cudnn",
                     "torch_sdpa_efficient"):
            assert reasons[name] == "torch is not installed (pip install torch, a CUDA build)"
    if importlib.util.find_spec("cudnn") is None:
        assert reasons["cudnn_sdpa"].startswith("cudnn is not installed (pip install "
                                                "nvidia-cudnn-frontend")
    made = BASELINES.make("torch_sdpa_cudnn", read_spec(NAIVE), read_size("S=128"))
    assert made.name == "torch SDPA (cudnn)" and "CUDNN_ATTENTION" in made.compute
    with pytest.raises(HarnessError, match="no PyTorch SDPA backend 'math'"):
        TorchSdpa("math")
    with pytest.raises(HarnessError, match="launch before prepare"):
        made.launch()
    made.close()
    made.close()  # idempotent


def test_skip_reasons_when_the_libraries_are_there_but_no_gpu(monkeypatch):
    found = {"torch", "cudnn", "flash_attn", "flash_attn_interface"}
    monkeypatch.setattr(baselines.importlib.util, "find_spec",
                        lambda name: object() if name in found else None)
    monkeypatch.setattr(baselines, "_torch_gpu_reason",
                        lambda: "torch sees no CUDA device (a CPU build, or no GPU here)")
    for name, reason in availability().items():
        assert reason == "torch sees no CUDA device (a CPU build, or no GPU here)", name
    found.discard("flash_attn")
    monkeypatch.setattr(baselines, "_torch_gpu_reason", lambda: "")
    assert baselines.FlashAttention(False).unavailable().startswith(
        "flash_attn is not installed (pip install flash-attn")


def test_harness_build_takes_both_kernels_at_their_head_dims_or_the_size_given():
    """`harness build` (issue 60's done-means): each variant at the first timed size with its
    own head dim; --size in the kind's named dims; a variant the size does not fit says why."""
    import json
    import subprocess
    import sys

    from conftest import harness_env

    from harness.kernels.registry import PROJECT_ROOT

    def build(*args):
        done = subprocess.run([sys.executable, "-m", "harness", "build", NAIVE, ONLINE, *args],
                              capture_output=True, text=True, cwd=PROJECT_ROOT,
                              env=harness_env(gpu=False), timeout=300)
        return done.returncode, json.loads(done.stdout) if done.stdout.startswith("[") else done

    rc, rows = build("--json")
    assert rc == 0, rows
    by_name = {r["kernel"]: r for r in rows}
    assert set(by_name) == {"attention_01_naive", "attention_02_online:d64",
                            "attention_02_online:d128", "attention_02_online:d256"}
    for name, d in (("attention_02_online:d64", 64), ("attention_02_online:d256", 256)):
        assert by_name[name]["status"] == "ok" and f"D={d}" in by_name[name]["size"]
        assert by_name[name]["spill_store_bytes"] == 0
    rc, rows = build("--json", "--size", "B=2,H=8,S=1000,D=256", "--arch", "sm_80")
    assert rc == 0, rows  # a variant the size does not fit is skipped, not failed
    status = {r["kernel"]: r["status"] for r in rows}
    assert status["attention_02_online:d256"] == "ok"
    assert status["attention_02_online:d64"] == "skipped"


def test_harness_run_without_a_gpu_builds_both_kernels_at_the_sizes_a_run_takes():
    """Offline `harness run` (issue 60's done-means): each attention kernel built at every
    size a run of it would take (each variant at its own head dim), the largest shown; a
    --size in named dims, a variant it does not fit said with its constraint; exit 3 (no
    GPU) with the report printed."""
    import subprocess
    import sys

    from conftest import harness_env

    from harness import kinds
    from harness.kernels.registry import PROJECT_ROOT, discover, select

    def run(*args):
        return subprocess.run([sys.executable, "-m", "harness", "run", *args],
                              capture_output=True, text=True, cwd=PROJECT_ROOT,
                              env=harness_env(gpu=False), timeout=300)

    done = run(NAIVE, ONLINE)
    assert done.returncode == 3, done.stdout + done.stderr
    for name in ("attention_01_naive", "attention_02_online:d64", "attention_02_online:d128",
                 "attention_02_online:d256"):
        assert name in done.stdout
    assert "needs a GPU" in done.stderr and "Fails without a GPU" not in done.stdout

    kernels = select(discover(), [ONLINE])
    d64 = next(k for k in kernels if k.variant == "d64")
    rows = kinds.of(d64.spec).offline_rows(d64, "sm_90")
    assert len(rows) >= 2 and all(r["status"] == "ok" and ",D=64" in r["size"] for r in rows)
    assert rows == sorted(rows, key=lambda r: kinds.of(d64.spec).flops(
        d64.spec, read_size(r["size"])))  # the largest last: the one the table shows

    done = run(ONLINE, "--size", "B=1,H=8,S=1000,D=64")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "attention_02_online:d128 at B=1,H=8,H_kv=8,S_q=1000,S_kv=1000,D=64" in done.stdout
    assert "D == HEAD_DIM" in done.stdout  # why d128 and d256 are not built there
