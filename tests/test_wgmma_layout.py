"""The shared-memory layout of the wgmma body (ptx/hgemm/wgmma_gemm.ptxh) against the
``dynamic_smem_bytes`` its rungs declare, with no GPU: the body places its stages, staging
buffers, split-K partials (rung 22's SPLITK) and mbarriers one after the other, and the spec's
formula must end exactly where the last mbarrier does. A formula shorter than the layout lets
the kernel write past its allocation (the driver does not check); a longer one wastes shared
memory and hides a layout change (notes/small_sizes.md)."""

import re

import pytest

from harness.kernels.ptxpp import expand
from harness.kernels.registry import discover

WGMMA = [k for k in discover()
         if k.spec.language == "ptx" and k.spec.path.parent.name == "hgemm"
         and "wgmma_gemm.ptxh" in k.spec.path.read_text()]
BARRIER_INIT = re.compile(r"mbarrier\.init\.shared::cta\.b64 \[%smem \+ (\d+)\]")


def layout_end(kernel) -> int:
    """One past the last mbarrier the expanded kernel initialises (8 bytes each)."""
    text = expand(kernel.spec.path.read_text(), kernel.param_env, kernel.spec.path,
                  "sm_90a").text
    offsets = [int(x) for x in BARRIER_INIT.findall(text)]
    assert offsets, f"{kernel.name}: no mbarrier.init at [%smem + N] in its expanded PTX"
    return max(offsets) + 8


def test_every_wgmma_rung_is_found():
    names = {k.spec.stem for k in WGMMA}
    assert {"15_wgmma_tma_bf16", "19_wgmma_epi_bf16", "20_wgmma_fp8",
            "22_wgmma_splitk_bf16"} <= names


@pytest.mark.parametrize("kernel", WGMMA, ids=[k.name for k in WGMMA])
def test_the_declared_shared_memory_ends_at_the_last_mbarrier(kernel):
    assert kernel.dynamic_smem_bytes(512, 512, 512) == layout_end(kernel)


def test_a_split_k_variant_holds_its_partials_between_the_staging_and_the_mbarriers():
    """22:k4m64n128: 6 stages of 24 KB, one 16 KB staging buffer, 3 slots of 16 KB (one unit
    each of the 2 per tile, from each other rank), then 6 full + 6 empty + X + Y mbarriers."""
    (kernel,) = [k for k in WGMMA if k.name == "22_wgmma_splitk_bf16:k4m64n128"]
    assert layout_end(kernel) == 6 * 24576 + 16384 + 3 * 16384 + 8 * 14


WAIT_READ = re.compile(r"cp\.async\.bulk\.wait_group\.read (\d+);")
STAGED = [k for k in WGMMA if k.param_env.get("EPI", 0) == 1]


def unread_slot(rounds: int, epb: int, splitk: int, cw: int, wait: int, tiles: int = 3):
    """The first (warpgroup, rank, round) whose staging slot may still be read by an earlier
    TMA store when the warpgroup writes it, or None: before each round it owns (unit
    cw ROUNDS + rd, owned by rank unit % SPLITK) thread 0 waits until at most ``wait`` younger
    bulk groups are pending, then the round is staged in slot rd % EPB and committed as one
    group, tile after tile."""
    for w in range(cw):
        for rank in range(splitk):
            groups = []
            for _ in range(tiles):
                for rd in range(rounds):
                    if (w * rounds + rd) % splitk != rank:
                        continue
                    pending = groups[len(groups) - wait:] if wait else []
                    if rd % epb in pending:
                        return w, rank, rd
                    groups.append(rd % epb)
    return None


@pytest.mark.parametrize("kernel", STAGED, ids=[k.name for k in STAGED])
def test_no_staged_round_overwrites_a_slot_its_store_still_reads(kernel):
    """22:k2m64n256 raced on the H100 (d5da2d7): rank 0 stages rounds 0 and 2, both in slot 0,
    and the wait before each round let one younger store still read it. The wait the expanded
    PTX holds before staging (its largest; the exit waits for none) must cover every owned
    round's slot, over tiles."""
    env = kernel.param_env
    text = expand(kernel.spec.path.read_text(), env, kernel.spec.path, "sm_90a").text
    wait = max(int(n) for n in WAIT_READ.findall(text))
    rounds = env["BN"] // env.get("EPN", env["BN"])
    found = unread_slot(rounds, env.get("EPB", 1), env.get("SPLITK", 1), env["CW"], wait)
    assert found is None, f"{kernel.name}: warpgroup, rank, round {found} (wait {wait})"


def test_the_slot_model_finds_the_race_that_was():
    assert unread_slot(rounds=4, epb=2, splitk=2, cw=1, wait=1) == (0, 0, 2)  # k2m64n256
    assert unread_slot(rounds=2, epb=2, splitk=2, cw=2, wait=1) == (0, 0, 0)  # across tiles
    assert unread_slot(rounds=4, epb=2, splitk=1, cw=2, wait=1) is None       # 19:s4e64
    assert unread_slot(rounds=4, epb=2, splitk=2, cw=1, wait=0) is None
