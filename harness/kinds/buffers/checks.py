"""The check battery of a buffers kernel: at sizes that are not multiples of any block, each
with its own seed, a launch on fresh inputs, the same launch again, fresh inputs again, and the
wide draw; each compared with the float64 reference computed here from numpy's own draw (not
read back from the device), and the finding named (notes/buffers_kind.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.bench.seeds import derive
from harness.errors import HarnessError, LaunchError
from harness.gpu.crowd import PRESSES, Press
from harness.kinds.buffers.draw import Draws
from harness.kinds.buffers.measure import CHECK_SIZES, WIDE, Instance, Loaded, judge_all, size_text
from harness.kinds.buffers.references import expected

FINDINGS = ("unwritten", "wrong", "race", "keeps state between launches",
            "replays an earlier result", "nondeterministic (undeclared)",
            "overflows on wide inputs", "changes its inputs", "wrong when timed",
            "faster than the memory allows")


@dataclass
class Battery:
    """What the checks found: counts, the worst error as a multiple of its bound, the first
    failure's finding and story, and notes that are not failures."""

    passed: int = 0
    total: int = 0
    worst: float = 0.0
    finding: str = "ok"
    failure: str = ""
    notes: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def fail(self, finding: str, story: str) -> None:
        self.total += 1
        if self.finding == "ok":
            self.finding, self.failure = finding, story

    def ok(self) -> None:
        self.total += 1
        self.passed += 1

    def copy(self) -> Battery:
        """The battery's findings, to go on with at one size without changing them."""
        return Battery(self.passed, self.total, self.worst, self.finding, self.failure,
                       list(self.notes), list(self.skipped))


def check_sizes(loaded: Loaded) -> list[tuple[int, ...]]:
    return CHECK_SIZES[len(loaded.kernel.spec.buffers.dims)]


def _differ(a: dict, b: dict) -> bool:
    return any(not np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)) for k in a)


def one_size(session, loaded: Loaded, draws: Draws, dims: tuple[int, ...], seed: int,
             found: Battery) -> None:
    """The four launches at one size, into ``found``."""
    kernel = loaded.kernel
    spec = kernel.spec.buffers
    where = f"at {size_text(dims)} (seed {seed})"
    try:
        inst = Instance(session, loaded, draws, dims)
    except LaunchError as exc:
        found.skipped.append(f"{size_text(dims)}: {exc}")
        return
    try:
        inst.salt = derive(seed, "salt")
        stream = session.stream

        def launch(content: int) -> tuple[bool, float, str, dict]:
            draws.set_content(content)
            inst.draw(seed)
            return again(content)

        wants: dict[int, dict] = {}

        def again(content: int, press: Press | None = None) -> tuple[bool, float, str, dict]:
            inst.prepare()
            if press is None:
                inst.launch()
            else:
                session.crowd.around(inst.launch, press)
            stream.synchronize(f"{kernel.name} {where}")
            if content not in wants:
                wants[content] = expected(spec, inst.host_inputs(seed, content),
                                          dict(zip(spec.dims, dims, strict=True)),
                                          loaded.reference)
            ok, worst, detail, outs = judge_all(inst, wants[content])
            found.worst = max(found.worst, worst if np.isfinite(worst) else found.worst)
            return ok, worst, detail, outs

        draws.reset(1)
        ok1, _, detail1, outs1 = launch(1)
        on_device = inst.inputs64()
        for name, values in inst.host_inputs(seed, 1).items():
            if not np.array_equal(on_device[name], values):
                raise HarnessError(f"the harness's device draw of {name} differs from numpy's "
                                   f"{where}: a bug in harness/kinds/buffers/draw.py")
        changed = inst.changed_inputs(seed)
        if changed:
            found.fail("changes its inputs", f"{where}: {changed} input element(s) no longer "
                       "hold what was drawn after one launch")
            return
        ok2, _, detail2, outs2 = again(1)
        differ = _differ(outs1, outs2)
        if not ok1:
            if differ and not kernel.spec.nondeterministic:
                found.fail("race", f"{where}: wrong, and two launches on the same inputs give "
                           f"different bits (a race between threads or blocks): {detail1}")
            else:
                found.fail("unwritten" if ": unwritten:" in detail1 else "wrong",
                           f"{where}: {detail1}")
            return
        found.ok()
        if not ok2:
            found.fail("keeps state between launches", f"{where}: right on the first launch, "
                       f"wrong on the second on the same inputs: {detail2}")
            return
        if differ and not kernel.spec.nondeterministic:
            found.fail("nondeterministic (undeclared)", f"{where}: two launches on the same "
                       "inputs give different bits, and the spec does not declare "
                       "nondeterministic = true (atomics whose order changes)")
            return
        if not kernel.spec.nondeterministic and not _pressed_alike(again, outs1, where, found):
            return
        found.ok()
        ok3, _, detail3, outs3 = launch(2)
        if not ok3:
            replay = not _differ(outs1, outs3)
            found.fail("replays an earlier result" if replay else "keeps state between launches",
                       f"{where}: right on its first inputs, wrong on fresh ones"
                       + (", where it gives the first inputs' result bit for bit" if replay
                          else "") + f": {detail3}")
            return
        found.ok()
        inst.wide = True
        ok4, _, detail4, _ = launch(3)
        if not ok4:
            found.fail("overflows on wide inputs" if ": not finite:" in detail4 else "wrong",
                       f"{where}, inputs drawn over {WIDE_TEXT}: {detail4}")
            return
        found.ok()
    finally:
        inst.close()


WIDE_TEXT = f"{WIDE:g} times the declared range"


def _pressed_alike(again, outs1: dict, where: str, found: Battery) -> bool:
    """Launches behind a crowd (gpu/crowd.py) on the first inputs give the first launch's bits:
    two launches alike on an idle GPU do not make a kernel deterministic. A failure found
    (into ``found``) where one is wrong (a race, unless the launch after it on an idle GPU is
    wrong with the same bits: kept state) or differs."""
    for press in PRESSES:
        ok, _, detail, outs = again(1, press)
        if not ok:
            right_after, _, _, after = again(1)
            if right_after or _differ(outs, after):
                found.fail("race", f"{where}: right on an idle GPU and wrong launched behind "
                           f"blocks that hold {press} (its blocks in another order): {detail}")
            else:
                found.fail("keeps state between launches", f"{where}: right on two launches, "
                           "wrong from the third on the same inputs, the same bits after it "
                           f"on an idle GPU: {detail}")
            return False
        if _differ(outs1, outs):
            found.fail("nondeterministic (undeclared)", f"{where}: a launch behind blocks that "
                       f"hold {press} gives other bits than the launches on an idle GPU, each "
                       "within the bound, and the spec does not declare nondeterministic = "
                       "true (atomics whose order changes with the blocks')")
            return False
    return True


def battery(session, loaded: Loaded, draws: Draws, say=None) -> Battery:
    """Every check size the kernel's constraints allow (those they refuse are skipped, said)."""
    found = Battery()
    for i, dims in enumerate(check_sizes(loaded)):
        if say is not None:
            say(f"check {size_text(dims)}")
        seed = derive(session.run_seed, loaded.kernel.name, "battery", i)
        one_size(session, loaded, draws, dims, seed, found)
        if found.finding != "ok":
            break
    if found.total == 0 and found.finding == "ok":
        found.fail("wrong", "no check size fits the kernel's constraints ("
                   + "; ".join(found.skipped) + "): nothing could be checked")
    return found
