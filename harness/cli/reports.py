"""Commands that read saved runs (no GPU needed): report, diff, index."""

from __future__ import annotations

import json
from pathlib import Path

from harness.bench.result import jsonable, load_report
from harness.cli import common
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT
from harness.report import diff, index, ladder
from harness.run.runner import parse_size


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help="napkin model, ladder and roofline plots from a run's "
                                      "JSON; optionally the README's results table")
    p.add_argument("run_json", type=Path, help="a run report (reports/<gpu>/run-*.json)")
    p.add_argument("--size", default="4096", help="size for the plots and the README table")
    p.add_argument("--section", default="results", metavar="NAME",
                   help="with --readme: the generated section to rewrite, between "
                        "<!-- NAME:start --> and <!-- NAME:end --> (default results)")
    p.add_argument("--all-sizes", action="store_true",
                   help="with --readme: a table for every size of the run, not only --size")
    p.add_argument("--readme", action="store_true",
                   help="rewrite the README's results section from this run")
    p.set_defaults(run=_report)

    p = sub.add_parser("diff", help="two saved runs side by side per kernel and size, with a "
                                    "verdict from the medians' standard errors (same, faster, "
                                    "slower) and what else changed noted beside it")
    p.add_argument("old", type=Path, metavar="OLD.json", help="a run, compare or tune report")
    p.add_argument("new", type=Path, metavar="NEW.json", help="a run, compare or tune report")
    p.add_argument("--size", metavar="N|M,N,K", help="only this size")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--fail-on-slower", action="store_true",
                   help="exit 1 when any kernel's verdict is slower, whatever else changed "
                        "(default: exit 0 whatever the verdicts)")
    p.add_argument("--per-clock", action="store_true",
                   help="judge by cycles (time x SM clock) instead of wall time: the verdict "
                        "that counts, and that --fail-on-slower reads")
    p.set_defaults(run=_diff)

    p = sub.add_parser("index", help="regenerate INDEX.md (one line per report, newest first) "
                                     "in each reports/<gpu>/ folder")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS,
                   help="reports/ (each GPU folder in it), or one GPU folder (default: the "
                        "project's reports/)")
    p.set_defaults(run=_index)


def _report(args) -> int:
    size = parse_size(args.size)
    md, ladder_png, roof_png = ladder.write(args.run_json, size)
    print(md.read_text())
    written = [str(p) for p in (md, ladder_png, roof_png) if p is not None]
    print(f"written: {', '.join(written)}")
    if args.readme:
        section = ladder.readme_section(args.run_json, None if args.all_sizes else size,
                                        args.section)
        ladder.update_readme(PROJECT_ROOT / "README.md", section, args.section)
        print(f"README.md results section regenerated from {args.run_json}")
    return common.EXIT_OK


def _diff(args) -> int:
    size = parse_size(args.size) if args.size else None
    result = diff.diff(load_report(args.old), load_report(args.new), size,
                       per_clock=args.per_clock)
    if args.json:
        print(json.dumps(jsonable(diff.to_json(result)), indent=1))
    else:
        print(diff.text(result))
    slower = result.counts()["slower"]
    return common.EXIT_FAILED if args.fail_on_slower and slower else common.EXIT_OK


def _index(args) -> int:
    if not args.report_dir.is_dir():
        raise HarnessError(f"--report-dir {args.report_dir}: not a folder; expected reports/ "
                           "or a reports/<gpu>/ folder")
    folders = index.index_folders(args.report_dir)
    if not folders:
        raise HarnessError(f"no reports in {args.report_dir} or the folders in it")
    for folder in folders:
        path = index.write_index(folder)
        print(f"written: {path} ({len(index.entries(folder))} reports)")
    return common.EXIT_OK
