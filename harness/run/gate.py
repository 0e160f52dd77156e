"""A gated worker's gate (protocol.Job.gated): its kernels' screens fed to it as they finish,
the worker told ``go`` or ``skip`` for each (run/runner.py makes one, run/process.py feeds a
worker through it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from harness.bench.result import Result
from harness.kernels.registry import Kernel
from harness.run.protocol import GO, SKIP


class Gate:
    """The screens of a gated worker's kernels (protocol.Job.gated), in the kernels' order as
    they finish: the rows of a kernel that gets no worker kept, and the worker told ``go`` or
    ``skip`` for each; stdin closed after the last. ``runnable``: the kernels released."""

    def __init__(self, screens: Iterator[tuple[Kernel, list[Result]]],
                 keep: Callable[[Result], None]):
        self.screens, self.keep = screens, keep
        self.runnable: list[Kernel] = []
        self.first_s = self.last_s = 0.0
        """When the first kernel's screen and the last one's were done (perf_counter)."""
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None

    def start(self, stdin) -> None:
        self.thread = threading.Thread(target=self._feed, args=(stdin,), daemon=True,
                                       name="harness-gate")
        self.thread.start()

    def _feed(self, stdin) -> None:
        try:
            for kernel, rows in self.screens:
                self.last_s = time.perf_counter()
                self.first_s = self.first_s or self.last_s
                for row in rows:
                    self.keep(row)
                if not rows:
                    self.runnable.append(kernel)
                try:
                    stdin.write((SKIP if rows else GO) + "\n")
                    stdin.flush()
                except OSError:  # the worker ended (a fault, a retire): the rows go on
                    pass
        except BaseException as exc:  # a bug in a screen: the run raises it (join)
            self.error = exc
        finally:
            self.last_s = self.last_s or time.perf_counter()
            self.first_s = self.first_s or self.last_s
            try:
                stdin.close()
            except OSError:
                pass

    def join(self) -> None:
        """Wait for every screen; raise what stopped them, if anything did."""
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error
