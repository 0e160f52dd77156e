"""The commands, under both doors: functions that take typed options and return records.

The command line (``harness.cli``) parses its flags into the options, calls a command, prints
what it returns and picks the exit status; the Python API (``harness.api``) does the same with
its keywords and shapes the records for notebooks. Neither does the work: it is here, one
module per command or family, each on the layers below it (``run/`` for worker processes,
``bench/`` for what runs on the GPU, ``report/`` for the files):

- ``place``: where kernels are measured (this host's GPUs, or a Dask cluster's): a Target;
- ``measure``: ``harness run``, ``compare`` and ``check``;
- ``tune``: a kernel's parameter space screened, timed, ranked and pinned;
- ``ceiling``, ``energy``, ``launch``: the in-process GPU commands;
- ``profile``: the napkin model beside Nsight Compute's counters;
- ``timeit``: :func:`harness.time`, any launch or callable timed by the harness's method.

No command prints, and none returns an exit status: progress goes to the ``say`` it is given.
"""
