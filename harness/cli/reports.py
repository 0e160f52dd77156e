"""Commands that read saved runs (no GPU needed): report, diff, index.

They read every report the harness writes (run, compare and tune reports, and the JSON-lines
stream of an interrupted run) and say in one line what they cannot read. They write nothing
unless asked: ``report --write`` (or ``--out-dir``, ``--readme``), ``index --write``.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.cli import common
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT
from harness.report import diff, index, ladder
from harness.report.reading import load_report
from harness.report.width import NAME, TEXT, fit_table, fit_text
from harness.run.runner import parse_size
from harness.typed_json import jsonable

_REPORT_HELP = ("a run's ladder with its napkin model, printed (nothing written); --write also "
                "writes <run>-ladder.md and the ladder and roofline plots beside it, and "
                "regenerates that folder's INDEX.md")


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help=_REPORT_HELP, description=_REPORT_HELP + "; --out-dir "
                       "writes them into another folder; --readme rewrites a generated "
                       "section of the README or docs/ (and writes the files it links, as "
                       "--write).")
    p.add_argument("run_json", type=Path, help="a run, compare or tune report "
                   "(reports/<gpu>/run-*.json), or the .jsonl stream of an interrupted one")
    p.add_argument("--size", help="only this size (N or M,N,K); with --write, the plots' size "
                                  "(default: 4096 where the run has it, else its largest)")
    p.add_argument("--write", action="store_true",
                   help="write <run>-ladder.md, <run>-ladder.png and <run>-roofline.png beside "
                        "the report and regenerate that folder's INDEX.md (default: print only)")
    p.add_argument("--out-dir", type=Path, metavar="DIR",
                   help="write those files into DIR instead (made if missing; no INDEX.md)")
    p.add_argument("--section", default="results", metavar="NAME",
                   help="with --readme: the generated section to rewrite, between "
                        "<!-- NAME:start --> and <!-- NAME:end --> in README.md or the one "
                        "docs/*.md page that holds them (default results)")
    p.add_argument("--all-sizes", action="store_true",
                   help="with --readme: a table for every size of the run, not only --size")
    p.add_argument("--readme", action="store_true",
                   help="rewrite the section --section names (in README.md or docs/) from this "
                        "run (and write the ladder files it links, as --write)")
    p.set_defaults(run=_report)

    help_text = ("two saved runs side by side per kernel and size, with a verdict from the "
                 "medians' standard errors (same, faster, slower) and what else changed noted "
                 "beside it; writes nothing")
    p = sub.add_parser("diff", help=help_text, description=help_text + ".")
    p.add_argument("old", type=Path, metavar="OLD.json",
                   help="a run, compare or tune report (or the .jsonl stream of one)")
    p.add_argument("new", type=Path, metavar="NEW.json",
                   help="a run, compare or tune report (or the .jsonl stream of one)")
    p.add_argument("--size", metavar="N|M,N,K", help="only this size")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--fail-on-slower", action="store_true",
                   help="exit 1 when any kernel's verdict is slower, whatever else changed "
                        "(default: exit 0 whatever the verdicts)")
    p.add_argument("--per-clock", action="store_true",
                   help="judge by cycles (time x SM clock) instead of wall time: the verdict "
                        "that counts, and that --fail-on-slower reads")
    p.set_defaults(run=_diff)

    help_text = ("the reports in each reports/<gpu>/ folder, newest first, one line each "
                 "(nothing written); --write regenerates each folder's INDEX.md from them")
    p = sub.add_parser("index", help=help_text, description=help_text + ".")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS,
                   help="reports/ (each GPU folder in it), or one GPU folder (default: the "
                        "project's reports/)")
    p.add_argument("--write", action="store_true",
                   help="write INDEX.md in each folder that holds reports (reports/ itself "
                        "included where it holds any)")
    p.set_defaults(run=_index)


def _report(args) -> int:
    size = parse_size(args.size) if args.size else None
    run = load_report(args.run_json)
    width = common.width(args)
    print("\n".join(ladder.text(run, args.run_json, width, size)))
    if args.write or args.out_dir is not None or args.readme:
        if args.out_dir is not None:
            common.check_writable_folder("--out-dir", args.out_dir)
        md, ladder_png, roof_png = ladder.write(args.run_json, size, args.out_dir)
        print("written:", *(f"  {p}" for p in (md, ladder_png, roof_png) if p is not None),
              sep="\n")
    if args.readme:
        doc = ladder.document_of(args.section)
        section = ladder.readme_section(args.run_json, None if args.all_sizes else
                                        size or ladder.default_size(ladder.napkin_rows(run)),
                                        args.section, doc)
        ladder.update_readme(doc, section, args.section)
        print(f"{doc.relative_to(PROJECT_ROOT)} {args.section} section regenerated from "
              f"{args.run_json}")
    return common.EXIT_OK


def _diff(args) -> int:
    size = parse_size(args.size) if args.size else None
    result = diff.diff(load_report(args.old), load_report(args.new), size,
                       per_clock=args.per_clock)
    if args.json:
        print(json.dumps(jsonable(diff.to_json(result)), indent=1))
    else:
        print(diff.text(result, common.width(args)))
    slower = result.counts()["slower"]
    return common.EXIT_FAILED if args.fail_on_slower and slower else common.EXIT_OK


def _index(args) -> int:
    if not args.report_dir.is_dir():
        raise HarnessError(f"--report-dir {args.report_dir}: not a folder; expected reports/ "
                           "or a reports/<gpu>/ folder")
    folders = index.index_folders(args.report_dir)
    if not folders:
        raise HarnessError(f"no reports in {args.report_dir} or the folders in it")
    width = common.width(args)
    for n, folder in enumerate(folders):
        found = index.entries(folder)
        if args.write:
            path = index.write_index(folder)
            print(f"written: {path} ({len(found)} reports)")
            continue
        current = folder / index.INDEX_NAME
        state = ("INDEX.md is current" if current.is_file()
                 and current.read_text() == index.render(folder, found) else
                 "INDEX.md " + ("differs" if current.is_file() else "is not there")
                 + ": --write regenerates it")
        print(("\n" if n else "") + fit_text(f"{folder}/: {len(found)} reports; {state}", width))
        print(_listing(found, width))
    return common.EXIT_OK


def _listing(found: list[index.Entry], width: int | None) -> str:
    """One line per report: date, name and headline (--wide: kind, commit and command too)."""
    def date(e: index.Entry) -> str:
        return e.date.strftime("%Y-%m-%d %H:%M") if e.date else "—"

    if width is None:
        return fit_table(["date (UTC)", "kind", "report", "commit", "headline", "command"],
                         [[date(e), e.kind, e.key, e.commit, e.headline, e.command]
                          for e in found], {}, None).text
    return fit_table(["date (UTC)", "report", "headline"],
                     [[date(e), e.key, e.headline] for e in found],
                     {2: (TEXT, 36), 1: (NAME, 20)}, width).text
