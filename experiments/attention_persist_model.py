"""attention_03_wgmma:d128pp's barrier protocol as a model, run under random schedules: the
producer, the two ping-pong consumers, the mbarriers (phases, arrival counts, TMA bytes), the
named barriers and the TMA copies landing at random times. Each schedule must end (no
deadlock), no copy may land in a buffer a wgmma still reads, every read must see the copy it
waits for, and no warpgroup may arrive twice on one generation of a named barrier.

    python3 experiments/attention_persist_model.py [--without-meet] [--schedules N]

It models the kernel as written at 90e589a (cu/attention/attention_03_wgmma.cu, PERSIST = 1,
STAGES = 2); a change to the kernel's barriers is to be made here too. With --without-meet
(no named barrier 3 at a tile's start) some schedules have consumer 1 arrive twice on
barrier 1 (notes/attention.md, "A persistent walk of the work tiles").
"""

from __future__ import annotations

import argparse
import random

STAGES = 2


class Hazard(Exception):
    pass


class MBar:
    def __init__(self, count: int):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def complete_phase(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.phase, self.pending = self.phase + 1, self.count

    def arrive(self, n: int = 1) -> None:
        self.pending -= n
        if self.pending < 0:
            raise Hazard("more arrivals than the barrier's count")
        self.complete_phase()

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes
        self.arrive()

    def landed(self, nbytes: int) -> None:
        self.tx -= nbytes
        self.complete_phase()

    def done(self, parity: int) -> bool:  # mbarrier.try_wait.parity
        return (self.phase & 1) != parity


class Named:
    def __init__(self):
        self.generation, self.arrived = 0, set()

    def arrive(self, who: str) -> None:
        if who in self.arrived:
            raise Hazard(f"{who} arrived twice on one generation of a named barrier")
        self.arrived.add(who)
        if len(self.arrived) == 2:
            self.generation, self.arrived = self.generation + 1, set()


def schedule(tiles: list[int], rnd: random.Random, meet: bool = True) -> None:
    """One block's work tiles (``tiles``: each one's key tiles) under one random schedule."""
    bars = {"q_full": MBar(1), "q_empty": MBar(8)}
    for s in range(STAGES):
        bars.update({f"k_full{s}": MBar(1), f"v_full{s}": MBar(1), f"k_empty{s}": MBar(8),
                     f"v_empty{s}": MBar(8)})
    named = {1: Named(), 2: Named(), 3: Named()}
    readers: dict[str, set] = {}
    held: dict[str, tuple] = {}
    copies: list[tuple] = []

    def read(buf: str, who: str, want: tuple) -> None:
        if held.get(buf) != want:
            raise Hazard(f"{who} reads {buf} holding {held.get(buf)}, not {want}")
        readers.setdefault(buf, set()).add(who)

    def load(buf: str, bar: str, what: tuple) -> None:
        bars[bar].expect_tx(1)
        copies.append((buf, bar, what))

    def wait(bar: str, parity: int):
        while not bars[bar].done(parity):
            yield

    def producer():
        kt = 0
        for done, count in enumerate(tiles):
            if done:
                yield from wait("q_empty", (done - 1) & 1)
            load("Q", "q_full", ("Q", done))
            for j in range(count):
                it = kt + j
                s, parity = it % STAGES, ((it // STAGES) & 1) ^ 1
                if it >= STAGES:
                    yield from wait(f"k_empty{s}", parity)
                load(f"K{s}", f"k_full{s}", ("K", done, j))
                if it >= STAGES:
                    yield from wait(f"v_empty{s}", parity)
                load(f"V{s}", f"v_full{s}", ("V", done, j))
                yield
            kt += count

    def sync(bar: int, who: str):
        generation = named[bar].generation
        named[bar].arrive(who)
        while named[bar].generation == generation:
            yield

    def consumer(cw: int):
        who, kt = f"consumer {cw}", 0
        for done, count in enumerate(tiles):
            if meet:
                yield from sync(3, who)
            yield from wait("q_full", done & 1)
            if count:
                s0 = kt % STAGES
                yield from wait(f"k_full{s0}", (kt // STAGES) & 1)
                read("Q", who, ("Q", done))
                read(f"K{s0}", who, ("K", done, 0))
                yield
                readers["Q"].discard(who)
                readers[f"K{s0}"].discard(who)
                bars[f"k_empty{s0}"].arrive(4)
                yield
                if cw == 1:
                    named[1].arrive(who)
                for j in range(1, count):
                    it = kt + j
                    s, sp = it % STAGES, (it - 1) % STAGES
                    yield from sync(1 + cw, who)
                    yield from wait(f"k_full{s}", (it // STAGES) & 1)
                    read("Q", who, ("Q", done))
                    read(f"K{s}", who, ("K", done, j))
                    yield from wait(f"v_full{sp}", ((it - 1) // STAGES) & 1)
                    read(f"V{sp}", who, ("V", done, j - 1))
                    named[2 - cw].arrive(who)
                    yield
                    readers["Q"].discard(who)
                    readers[f"K{s}"].discard(who)
                    bars[f"k_empty{s}"].arrive(4)
                    yield
                    readers[f"V{sp}"].discard(who)
                    bars[f"v_empty{sp}"].arrive(4)
                    yield
                bars["q_empty"].arrive(4)
                yield
                if cw == 0:
                    yield from sync(1, who)
                last = kt + count - 1
                sl = last % STAGES
                yield from wait(f"v_full{sl}", (last // STAGES) & 1)
                read(f"V{sl}", who, ("V", done, count - 1))
                yield
                readers[f"V{sl}"].discard(who)
                bars[f"v_empty{sl}"].arrive(4)
            else:
                bars["q_empty"].arrive(4)
            yield  # the epilogue
            kt += count

    running = {"producer": producer(), "consumer 0": consumer(0), "consumer 1": consumer(1)}
    for _ in range(200_000):
        if not running and not copies:
            break
        pick = rnd.choice(list(running) + (["copy"] if copies else []))
        if pick == "copy":
            buf, bar, what = copies.pop(rnd.randrange(len(copies)))
            if readers.get(buf):
                raise Hazard(f"a copy lands in {buf} while {sorted(readers[buf])} read it")
            held[buf] = what
            bars[bar].landed(1)
            continue
        try:
            next(running[pick])
        except StopIteration:
            del running[pick]
    else:
        raise Hazard("no end after 200,000 steps: a deadlock")
    left = {bar: sorted(n.arrived) for bar, n in named.items() if n.arrived}
    if left:
        raise Hazard(f"arrivals left on named barriers: {left}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--without-meet", action="store_true")
    ap.add_argument("--schedules", type=int, default=3000)
    args = ap.parse_args()
    failed = 0
    for seed in range(args.schedules):
        rnd = random.Random(seed)
        tiles = [rnd.choice([0, 1, 1, 2, 3, 4, 5]) for _ in range(rnd.randint(1, 6))]
        try:
            schedule(tiles, rnd, meet=not args.without_meet)
        except Hazard as exc:
            failed += 1
            if failed <= 3:
                print(f"schedule {seed}, work tiles of {tiles} key tiles: {exc}")
    print(f"{failed} of {args.schedules} schedules failed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
