import numpy as np
import pytest

from harness.errors import HarnessError
from harness.stats import Summary, gflops, peak_gflops, percentile


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
