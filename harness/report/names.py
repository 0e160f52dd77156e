"""Report file names: which report a file belongs to (:func:`report_key`) and its kind
(:func:`kind_of`), from the name alone (pure; the index and the readers use them)."""

from __future__ import annotations

import re

INDEX_NAME = "INDEX.md"
KINDS = ("nvml-power-probe", "kernel-energy", "kernel-clock", "occupancy-sweep",
         "ncu-vs-harness", "ncu-profile", "block-placement", "compare", "ceiling", "tune",
         "run", "ncu", "pytest", "sass")
"""Report kinds by the start of their file names; the longest that fits wins."""
EXTENSIONS = (".csv.gz", ".txt.gz", ".log.gz", ".json.gz", ".jsonl", ".json", ".md", ".png", ".txt",
              ".log", ".csv", ".npz")
"""A report file's endings; the ``.gz`` ones are committed reports kept compressed
(DEVELOPING.md), read through gzip; ``.npz``, the arrays an experiment saved beside its text."""
COMPANIONS = ("-ladder", "-roofline", "-table", "-sass", "-ncu", "-sustained", "-isolated")
"""Name endings of files (and folders) that belong to the report whose name they extend, a
size after them allowed (``profile-X-roofline-4096x4096x4096.png``)."""
_SIZE_SUFFIX = re.compile(r"-\d+x\d+x\d+$")
STAMP = re.compile(r"(\d{8}-\d{6})")


def report_key(name: str) -> str | None:
    """The report a file belongs to: its name without its extension and any companion ending
    (``run-X-ladder.png`` -> ``run-X``); None for INDEX.md and files of no report format."""
    if name == INDEX_NAME or name.startswith("."):
        return None
    stem = next((name[:-len(e)] for e in EXTENSIONS if name.endswith(e)), None)
    if stem is None:
        return None
    stem = _SIZE_SUFFIX.sub("", stem)
    for ending in COMPANIONS:
        if stem.endswith(ending) and len(stem) > len(ending):
            stem = stem[:-len(ending)]
            break
    return stem


def kind_of(key: str) -> str:
    """The kind a report's name starts with; for a name of no known kind, the name before its
    stamp, or else its first word (``diag-18-cluster`` -> ``diag``)."""
    known = [k for k in KINDS if key == k or key.startswith(k + "-")]
    if known:
        return max(known, key=len)
    match = STAMP.search(key)
    head = key[:match.start()].rstrip("-_") if match else re.split(r"[-_.]", key)[0]
    return head or "report"
