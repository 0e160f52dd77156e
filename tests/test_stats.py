import numpy as np
import pytest

from harness.errors import HarnessError
from harness.stats import (
    Summary,
    gflops,
    grid_step,
    grouped_percentile,
    peak_gflops,
    percentile,
)


@pytest.mark.parametrize("pct", [0, 20, 50, 80, 100, 33.3])
def test_percentile_matches_numpy(pct):
    values = list(np.random.default_rng(1).uniform(0, 10, 37))
    assert percentile(values, pct) == pytest.approx(np.percentile(values, pct))


def test_summary():
    s = Summary.of([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s.median == 3.0 and s.minimum == 1.0 and s.maximum == 100.0 and s.count == 5
    assert s.p20 == pytest.approx(1.8) and s.p80 == pytest.approx(23.2)


def test_errors():
    with pytest.raises(HarnessError, match="no values"):
        percentile([], 50)
    with pytest.raises(HarnessError, match="within 0..100"):
        percentile([1.0], 101)


def test_flop_rates():
    assert gflops(4096, 4096, 4096, 2.0) == pytest.approx(2 * 4096**3 / 2e-3 / 1e9)
    # H100 SXM: 256 FP32 FLOP/clock/SM x 132 SMs x 1980 MHz = 66.9 TFLOP/s
    assert peak_gflops(256, 132, 1980) == pytest.approx(66908.16)


def _read_on_ticks(true_us: float, n: int, rng, tick_us: float = 0.032,
                   jitter_us: float = 0.02) -> list[float]:
    """Durations as CUDA events read them: the start and end stamps each cut to the clock's
    tick, at a random phase."""
    start = rng.uniform(0, tick_us, n)
    end = start + true_us + rng.normal(0, jitter_us, n)
    return list((np.floor(end / tick_us) - np.floor(start / tick_us)) * tick_us)


def test_the_grid_of_a_ticking_clock_is_found_and_nothing_else_is_called_one():
    rng = np.random.default_rng(0)
    assert grid_step(_read_on_ticks(3.2, 200, rng)) == pytest.approx(0.032)
    assert grid_step(list(rng.normal(3.2, 0.05, 200))) is None  # continuous
    assert grid_step([3.2] * 50) is None  # one value: no step to find
    assert grid_step([1.0, 2.0, 3.5, 3.5, 1.0, 2.0, 3.5, 1.0]) is None  # 1.5 is not 1 x n


def test_the_median_of_ticks_moves_smoothly_where_the_plain_one_jumps_a_tick():
    """A 3 us cuBLAS on a 32 ns clock: as its true time moves across one tick, the plain
    median stays on a tick and jumps (1% of the figure at a time); the grouped median follows
    within a quarter of a tick, and never goes backwards."""
    rng = np.random.default_rng(1)
    tick, plain_err, grouped = 0.032, [], []
    for f in np.linspace(0, 1, 11):
        true = 3.2 + f * tick
        values = _read_on_ticks(true, 400, rng, tick_us=tick, jitter_us=0.005)
        plain_err.append(abs(Summary.of(values).median - true))
        grouped.append(Summary.of_ticks(values).median)
        assert grouped[-1] == pytest.approx(true, abs=0.25 * tick)
    assert max(plain_err) > 0.4 * tick
    assert all(b >= a - 0.05 * tick for a, b in zip(grouped, grouped[1:], strict=False))


def test_values_on_no_grid_are_summarised_as_they_are():
    values = [1.0, 2.0, 3.0, 4.0, 100.0]
    assert Summary.of_ticks(values) == Summary.of(values)


def test_the_grouped_percentile_is_the_textbook_one():
    # 3 values on tick 10, 1 on tick 11 (step 1): the median's cell is 9.5-10.5, 2 of its 3
    assert grouped_percentile([10.0, 10.0, 10.0, 11.0], 50, 1.0) == pytest.approx(9.5 + 2 / 3)
    assert grouped_percentile([10.0, 11.0], 50, 1.0) == pytest.approx(10.5)


def test_summary_of_ticks_is_the_grouped_and_plain_percentiles_of_python():
    """Summary.of_ticks (numpy, taken after every batch of a timing) gives exactly what the
    Python percentiles give: on a tick grid, off any grid, and with few distinct values."""
    import random

    from harness.stats import Summary, grid_step, grouped_percentile

    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 300)
        kind = rng.random()
        if kind < 0.5:
            values = [round(rng.gauss(100, 3)) * 0.000032 for _ in range(n)]
        elif kind < 0.8:
            values = [rng.random() for _ in range(n)]
        else:
            values = [rng.choice([1.0, 2.0, 3.5]) for _ in range(n)]
        step = grid_step(values)
        want = Summary.of(values) if step is None else Summary(
            *(grouped_percentile(values, p, step) for p in (50, 20, 80)), min(values),
            max(values), len(values))
        assert Summary.of_ticks(values) == want, values
