"""attention_03_wgmma's pipeline on the host: its producer thread, its eight consumer warps and
its TMA copies as coroutines on a model of mbarriers (phases and parity waits) and named
barriers, run under random schedules. Transliterated from the .cu file's barrier protocol (the
tile loop's waits, issues and arrivals in their order); what it proves is the protocol's, not
the code's: no schedule deadlocks, no TMA copy lands in a stage before every warp's product
that read the stage's last tile has been waited on, and no product reads a stage that does not
hold its tile. Without a GPU this is what can fail when an arrival is moved or a parity is off;
the GPU test runs the kernel (tests/test_attention_gpu.py)."""

from __future__ import annotations

import random

import pytest

WARPS = 8  # two consumer warpgroups of four warps


class Mbarrier:
    def __init__(self, count: int):
        self.count, self.pending, self.completed = count, count, 0

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending == 0:
            self.completed, self.pending = self.completed + 1, self.count

    def passed(self, parity: int) -> bool:  # try_wait.parity: the phase of that parity is done
        return self.completed % 2 != parity


class Named:  # bar.sync / bar.arrive over 256 threads: eight warp arrivals complete it
    def __init__(self):
        self.arrived, self.generation = 0, 0

    def arrive(self) -> int:
        self.arrived += 1
        if self.arrived == WARPS:
            self.arrived, self.generation = 0, self.generation + 1
        return self.generation


class Ring:
    """One ring of stages (K's or V's): which tile each stage holds and which warps have
    waited on their product that read it."""

    def __init__(self, stages: int, what: str):
        self.what = what
        self.tile = [-1] * stages
        self.done: list[set[int]] = [set(range(WARPS)) for _ in range(stages)]

    def land(self, stage: int, tile: int) -> None:
        assert self.done[stage] == set(range(WARPS)), (
            f"{self.what} of tile {tile} landed in stage {stage} while warps "
            f"{sorted(set(range(WARPS)) - self.done[stage])} still read tile {self.tile[stage]}")
        self.tile[stage], self.done[stage] = tile, set()

    def read(self, stage: int, tile: int, warp: int) -> None:
        assert self.tile[stage] == tile, (
            f"warp {warp} read {self.what} of tile {tile} from stage {stage}, which holds tile "
            f"{self.tile[stage]}")

    def finished(self, stage: int, warp: int) -> None:
        self.done[stage].add(warp)


def run(tiles: int, stages: int, pingpong: bool, rng: random.Random, wrong: str = ""):
    """One schedule of a block's pipeline. ``wrong`` breaks the protocol on purpose:
    ``v_early`` arrives on V's empty barrier when P V is issued, not once it has landed;
    ``parity`` has the producer wait on the phase it should not."""
    k_full = [Mbarrier(1) for _ in range(stages)]
    v_full = [Mbarrier(1) for _ in range(stages)]
    k_empty = [Mbarrier(WARPS) for _ in range(stages)]
    v_empty = [Mbarrier(WARPS) for _ in range(stages)]
    rings = {"K": Ring(stages, "K"), "V": Ring(stages, "V")}
    turns = [Named(), Named()]
    copies: list = []  # TMA copies in flight: (ring, stage, tile, full barrier)

    def wait(bar: Mbarrier, parity: int):
        while not bar.passed(parity):
            yield

    def producer():
        for j in range(tiles):
            s, parity = j % stages, ((j // stages) & 1) ^ (wrong != "parity")
            if j >= stages:
                yield from wait(k_empty[s], parity)
            copies.append(("K", s, j, k_full[s]))
            if j >= stages:
                yield from wait(v_empty[s], parity)
            copies.append(("V", s, j, v_full[s]))
            yield

    def consumer(w: int):
        cw = w // 4
        K, V = rings["K"], rings["V"]
        completions = [0, 0]  # of each named barrier, as this warp has seen them

        def turn_wait(c):  # bar.sync on consumer c's barrier: arrive, wait for completion
            turns[c].arrive()
            while turns[c].generation <= completions[c]:
                yield
            completions[c] += 1

        def turn_give(c):  # bar.arrive on the other consumer's barrier
            turns[1 - c].arrive()

        if tiles == 0:
            return
        yield from wait(k_full[0], 0)
        K.read(0, 0, w)
        yield
        K.finished(0, w)  # wgmma_wait<0>
        k_empty[0].arrive()
        if pingpong and cw == 1:
            turn_give(cw)
        for j in range(1, tiles):
            s, sp = j % stages, (j - 1) % stages
            if pingpong:
                yield from turn_wait(cw)
            yield from wait(k_full[s], (j // stages) & 1)
            K.read(s, j, w)
            yield from wait(v_full[sp], ((j - 1) // stages) & 1)
            V.read(sp, j - 1, w)
            if wrong == "v_early":
                v_empty[sp].arrive()
            if pingpong:
                turn_give(cw)
            yield
            K.finished(s, w)  # wgmma_wait<1>: S of tile j has landed
            k_empty[s].arrive()
            yield  # the softmax
            V.finished(sp, w)  # wgmma_wait<0>: P V of tile j - 1 has landed
            if wrong != "v_early":
                v_empty[sp].arrive()
        if pingpong and cw == 0:
            yield from turn_wait(cw)
        sl = (tiles - 1) % stages
        yield from wait(v_full[sl], ((tiles - 1) // stages) & 1)
        V.read(sl, tiles - 1, w)
        yield
        V.finished(sl, w)

    agents = [producer()] + [consumer(w) for w in range(WARPS)]
    for _ in range(100_000):
        choices = len(agents) + len(copies)
        if choices == 0:
            break
        pick = rng.randrange(choices)
        if pick >= len(agents):  # a copy lands: its bytes, then its full barrier
            what, stage, tile, full = copies.pop(pick - len(agents))
            rings[what].land(stage, tile)
            full.arrive()
            continue
        try:
            next(agents[pick])
        except StopIteration:
            agents.pop(pick)
    else:
        raise AssertionError(f"deadlock: {len(agents)} agents still waiting, no copy in flight"
                             f" ({tiles} tiles, {stages} stages, pingpong {pingpong})")


@pytest.mark.parametrize("pingpong", [False, True])
@pytest.mark.parametrize("stages", [2, 3])
def test_the_hopper_rungs_pipeline_neither_deadlocks_nor_overwrites(stages, pingpong):
    rng = random.Random(stages * 10 + pingpong)
    for tiles in (0, 1, 2, 3, 5, 9):
        for _ in range(60):
            run(tiles, stages, pingpong, rng)


@pytest.mark.parametrize("wrong, says", [("v_early", "V of tile .* landed in stage"),
                                          ("parity", "landed in stage|read . of tile")])
def test_the_model_catches_a_stage_freed_too_soon(wrong, says):
    rng = random.Random(1)
    with pytest.raises(AssertionError, match=says):
        for _ in range(400):
            run(6, 2, False, rng, wrong=wrong)
