"""Options that check themselves (harness/knobs.py): whoever makes them, a bad value is refused
with the command line's one line, and the timing describes itself once, for every report."""

from __future__ import annotations

import math

import pytest

from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.knobs import Knob
from harness.run.runner import RunOptions

SIZE = ((256, 256, 256),)


@pytest.mark.parametrize(("values", "message"), [
    ({"budget_ms": 0}, "--budget-ms 0: expected more than 0 (the most GPU time per timing, in "
                       "milliseconds)"),
    ({"budget_ms": math.nan}, "--budget-ms nan: expected more than 0"),
    ({"min_ms": -1}, "--min-ms -1: expected at least 0 (the least GPU time per timing"),
    ({"warmup_ms": -1}, "--warmup-ms -1: expected at least 0 (milliseconds of warm-up)"),
    ({"rest": -0.5}, "--rest -0.5: expected at least 0 (a multiple of each launch's time"),
    ({"max_rel_se_pct": -1}, "--max-rel-se -1: expected at least 0 (a percent; 0 spends"),
    ({"power_s": 0.1}, "--power-s 0.1: expected seconds from 0.5 to 60 (NVML's power reading "
                       "moves every ~100 ms"),
    ({"isolated_gap_ms": 5000}, "--gap-ms 5000: expected an idle gap above 0 and up to 1000 "
                                "ms before each isolated launch"),
    ({"min_ms": 50, "budget_ms": 10}, "--min-ms 50 is above --budget-ms 10: the floor must "
                                      "not exceed the cap"),
])
def test_timing_options_refuse_what_the_cli_refuses(values, message):
    with pytest.raises(HarnessError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
                       .replace("+", r"\+")):
        TimingOptions(**values)


def test_the_default_floor_follows_a_smaller_cap():
    assert TimingOptions(budget_ms=20).min_ms == 20
    assert TimingOptions(budget_ms=300).min_ms == 30
    assert TimingOptions(power_s=0).power_s == 0 and TimingOptions(power_s=2).power_s == 2


def test_the_flags_map_onto_the_options():
    """One translation, for the CLI's flags and the API's keywords: ``--gap-ms`` counts with
    ``--isolated``, ``--power-s`` with ``--power``, and both are checked either way."""
    assert TimingOptions.from_flags({}) == TimingOptions()
    assert TimingOptions.from_flags({"gap_ms": 2}).isolated_gap_ms == 0
    assert TimingOptions.from_flags({"isolated": True}).isolated_gap_ms == 5.0
    assert TimingOptions.from_flags({"isolated": True, "gap_ms": 2}).regime == "isolated"
    assert TimingOptions.from_flags({"power_s": 3}).power_s == 0
    assert TimingOptions.from_flags({"power": True}).power_s == 2.0
    assert TimingOptions.from_flags({"max_rel_se": 0.5, "cold_l2": False},
                                    warmup_ms=10).max_rel_se_pct == 0.5
    with pytest.raises(HarnessError, match=r"^--gap-ms -1: expected at least 0 \(milliseconds "
                                           r"between launches\)$"):
        TimingOptions.from_flags({"gap_ms": -1})
    with pytest.raises(HarnessError, match=r"^--gap-ms 0: expected an idle gap above 0"):
        TimingOptions.from_flags({"isolated": True, "gap_ms": 0})
    with pytest.raises(HarnessError, match=r"^--power-s 0: expected more than 0 \(seconds of "
                                           r"each power pass\)$"):
        TimingOptions.from_flags({"power_s": 0})


def test_timing_options_from_a_dict():
    assert TimingOptions.of(None) == TimingOptions()
    same = TimingOptions(budget_ms=50)
    assert TimingOptions.of(same) is same
    assert TimingOptions.of({"budget_ms": 50, "cold_l2": False}) == TimingOptions(
        budget_ms=50, cold_l2=False)
    with pytest.raises(HarnessError, match=r"^timing: no option 'budget'; TimingOptions has "
                                           r"cold_l2, warmup_ms, warmup_steady_pct, budget_ms"):
        TimingOptions.of({"budget": 50})
    with pytest.raises(HarnessError, match="expected TimingOptions or a dict of its fields"):
        TimingOptions.of(50)


def test_run_options_check_themselves_and_take_a_timing_dict():
    options = RunOptions(SIZE, timing={"budget_ms": 50})
    assert options.timing == TimingOptions(budget_ms=50)
    with pytest.raises(HarnessError, match=r"^--timeout-s 0: expected more than 0 \(seconds "
                                           r"without progress"):
        RunOptions(SIZE, timeout_s=0)
    with pytest.raises(HarnessError, match=r"^--carveout 150: expected a percent from 0 to 100 "
                                           r"\(the preferred shared-memory carve-out"):
        RunOptions(SIZE, carveout_pct=150)
    with pytest.raises(HarnessError, match="--budget-ms 0"):
        RunOptions(SIZE, timing={"budget_ms": 0})


def test_a_knob_says_its_range():
    knob = Knob("--x", 1, True, "things")
    knob.check(None)
    knob.check(1)
    with pytest.raises(HarnessError, match=r"^--x 0: expected at least 1 \(things\)$"):
        knob.check(0)
    with pytest.raises(HarnessError, match=r"^--x inf: expected at least 1"):
        knob.check(math.inf)
    ranged = Knob("--y", 0.5, True, most=60, expect="0.5 to 60", off=0)
    ranged.check(0)
    with pytest.raises(HarnessError, match=r"^--y 61: expected 0.5 to 60$"):
        ranged.check(61)


def test_the_timing_describes_itself_once():
    """The method and the stopping rule come from the options; a report that names only some
    options (an experiment's, energy's none) reads the switches it leaves out as off."""
    from dataclasses import asdict

    from harness.report.files import timing_record

    options = TimingOptions(isolated_gap_ms=5)
    assert options.describe() == f"{options.method()}; {options.stopping()}"
    assert timing_record(options) == timing_record(asdict(options))
    assert timing_record(options)["method"] == options.describe()
    untimed = timing_record({})
    assert untimed == {"l2": "hot (warm L2, no flush)", "method": (
        "sustained: CUDA events around each launch with the queue kept full behind L2-flush "
        "work; median and p20/p80 of the repetitions; C poisoned before every repetition")}
    assert timing_record({"cold_l2": True, "budget_ms": 300})["l2"] == (
        "cold (flushed before every repetition)")
