"""Where a worker's wall time goes, sampled every few milliseconds: now
harness/bench/wall_sampler.py (the worker reads it there: an experiment the harness runs
lives in the package, so that nothing of the package imports upward into experiments/).
``HARNESS_WORKER_SAMPLE=folder`` turns it on."""

from harness.bench.wall_sampler import INTERVAL_S, sampled  # noqa: F401 (this name's old home)
