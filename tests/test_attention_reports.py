"""The attention experiments' reports (experiments/attention_compare.py and
attention_profile.py): every row's status, figures and versions land in the markdown, a row
that failed or could not run says why and shows no figure."""

from __future__ import annotations

import sys

from harness.bench import ncu
from harness.kernels.registry import PROJECT_ROOT
from harness.kinds.attention.timed import Row

sys.path.insert(0, str(PROJECT_ROOT / "experiments"))
import attention_compare  # noqa: E402
import attention_profile  # noqa: E402

META = {"date_utc": "2026-12-06T22:45:20Z", "command": "python3 experiments/x.py",
        "git": {"commit": "abc123"}, "gpu": "NVIDIA H200",
        "device": {"driver": "13.0", "clocks": {"max_sm_clock_mhz": 1980,
                                                "power_limit_w": 700.0}},
        "timing": "sustained, cold L2"}


def test_the_compare_table_has_every_row_and_no_figure_for_a_failure():
    rows = [Row("k:d128", "B=4,S=4096", "pass", "", 1.5, 1.49, 1.51, 20, 1980.0, "converged",
                374.6, 4, ratios={"torch_sdpa_cudnn": 0.56}),
            Row("tell", "B=4,S=4096", "FAIL", "wrong when timed: row 3", kept_checked=1),
            Row("cudnn_sdpa", "B=4,S=4096", "unavailable", "cudnn is not installed",
                baseline=True),
            Row("torch_sdpa_cudnn", "B=4,S=4096", "pass", "cuDNN", 0.83, 0.82, 0.84, 20,
                1980.0, "converged", 664.5, version="torch 2.11.0, cuDNN 91000",
                baseline=True)]
    lines = attention_compare.markdown(META, rows)
    assert "- git commit: abc123" in lines and lines[0].endswith("NVIDIA H200")
    table = [line for line in lines if line.startswith("| ")][1:]
    assert len(table) == 4
    assert "374.6" in table[0] and "0.560 (torch_sdpa_cudnn)" in table[0]
    assert "FAIL" in table[1] and "wrong when timed" in table[1] and "374" not in table[1]
    assert "unavailable" in table[2] and "cudnn is not installed" in table[2]
    assert "torch 2.11.0, cuDNN 91000" in table[3] and "664.5" in table[3]
    assert "0.56x torch_sdpa_cudnn" in attention_compare._line(rows[0])
    assert attention_compare._line(rows[1]).endswith("FAIL: wrong when timed: row 3")


def test_the_profile_report_names_the_bound_and_each_metric():
    metrics = ncu.select(("throughput",), "sm_90")
    report = {"meta": {"kernel": "k:d128", "problem": "B=4,S=4096", "date_utc": "d",
                       "command": "c", "git": {"commit": "abc123"}, "ncu": "2025.3",
                       "baseline": "torch_sdpa_cudnn", "dram_gbps_assumed": 3350.0},
              "napkin": {"tensor_ms": 1.0, "exp_ms": 0.5, "memory_ms": 0.01,
                         "limiter": "tensor cores", "ceiling_tflops": 1000.0},
              "kernel": {m.key: 1.0 for m in metrics}, "kernel_tflops": 400.0,
              "baseline": {m.key: 2.0 for m in metrics}}
    lines = attention_profile.markdown(report, metrics)
    assert any("tensor cores bind" in line for line in lines)
    rows = [line for line in lines if line.startswith("| ") and "metric" not in line]
    assert len(rows) == len(metrics)
    assert all(" 1 | 2 |" in line for line in rows)
