"""What the README, docs/ and notes/ point at is there: every relative link (and its #anchor in a
page of ours), every reports/ path named in them or in the code's comments; and every committed
report is one of them cites, so reports/ holds what the text stands on and no more
(DEVELOPING.md says what gets committed)."""

import re
from pathlib import Path

import pytest

from harness.kernels.registry import PROJECT_ROOT
from harness.report.names import report_key

PAGES = sorted([PROJECT_ROOT / "README.md", PROJECT_ROOT / "DEVELOPING.md",
                *(PROJECT_ROOT / "docs").glob("*.md"), *(PROJECT_ROOT / "notes").glob("*.md"),
                PROJECT_ROOT / "reports" / "README.md"])
CODE = sorted(p for folder in ("harness", "experiments", "scripts", "cu", "ptx")
              for p in (PROJECT_ROOT / folder).rglob("*") if p.suffix in (".py", ".sh", ".cu",
                                                                        ".ptx", ".ptxh"))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REPORT_PATH = re.compile(r"(?:\.\./)?reports/h\d+/[A-Za-z0-9_.+-]*[A-Za-z0-9_+-]")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def _rel(path: Path) -> str:
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else path.name


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation out, spaces to '-'."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text()))  # code is not a link
    out = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            out.append(f"{_rel(page)}: {target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            out.append(f"{_rel(page)}: {target} (no heading #{anchor} in {where.name})")
    return out


def named_reports(path: Path) -> list[str]:
    """The reports/ paths a page or a source file names, as written; but for patterns
    (``run-*.json``, ``run-<date>``, ``NAME``) and history (``git show COMMIT:reports/...``)."""
    text = path.read_text(errors="replace")
    return [m.group(0) for m in REPORT_PATH.finditer(text)
            if not re.search(r"NAME|RUN|REPORT|\.\.\.", m.group(0))
            and not re.match(r"[*<{]|\.\.\.", text[m.end():m.end() + 3])
            and not text[:m.start()].endswith(":")]


def is_there(root: Path, name: str) -> bool:
    """A file or folder, or a report named by its key (``reports/h100/run-X``: its files)."""
    where = root / name
    return where.exists() or any(report_key(p.name) == where.name
                                 for p in where.parent.glob(f"{where.name}*"))


def test_slugs_are_githubs():
    assert slug("The main job: wall time and agreement") == "the-main-job-wall-time-and-agreement"
    assert slug("Your first memory-bound kernel: the buffers kind") == \
        "your-first-memory-bound-kernel-the-buffers-kind"
    assert slug("`harness.time` and [x](y)") == "harnesstime-and-x"


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_link_of_a_page_is_there(page):
    assert broken_links(page) == []


def test_every_reports_path_named_in_text_or_code_is_there():
    missing = []
    for path in PAGES + CODE:
        for name in named_reports(path):
            root = path.parent if name.startswith("..") else PROJECT_ROOT
            if not is_there(root, name):
                missing.append(f"{_rel(path)}: {name}")
    assert missing == []


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "there.md").write_text("# A heading: here\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](there.md#a-heading-here) [web](https://x.org/y) [gone](gone.log)\n"
                    "[anchor](there.md#elsewhere)\n```\n[in a block](nowhere.md)\n```\n")
    assert [b.split(": ", 1)[1] for b in broken_links(page)] == [
        "gone.log (no such file)", "there.md#elsewhere (no heading #elsewhere in there.md)"]


def test_every_committed_report_is_cited():
    """A file under reports/<gpu>/ is there because README, docs/, notes/, the code or the
    tests name it (its report's name, any of its files, or the folder of its companions);
    INDEX.md lists them. What nothing cites stays in git's history, not in the tree."""
    cited = set()
    texts = PAGES + CODE + sorted((PROJECT_ROOT / "tests").glob("*.py"))
    words = set()
    for path in texts:
        words |= set(re.findall(r"[A-Za-z0-9_.+-]+", path.read_text(errors="replace")))
    for word in words:  # a file's name, or its report's: run-X.md cites run-X.json beside it
        cited |= {word.rstrip("."), report_key(word.rstrip(".")) or ""}
    uncited = []
    for path in sorted((PROJECT_ROOT / "reports").glob("h*/*")):
        if path.name == "INDEX.md":
            continue
        key = report_key(path.name if path.is_file() else f"{path.name}.md")
        if not {path.name, path.name.removesuffix(".gz"), key} & cited:
            uncited.append(_rel(path))
    assert uncited == [], "commit a report with the text that cites it (DEVELOPING.md)"


def test_the_readme_links_every_page_of_docs_and_stays_short():
    """The README is read in ten minutes (at most 300 lines); the rest is in docs/, each page
    linked from it."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    linked = {target.partition("#")[0] for target in LINK.findall(readme)}
    pages = {f"docs/{p.name}" for p in (PROJECT_ROOT / "docs").glob("*.md")}
    assert pages and pages - linked == set()
    assert len(readme.splitlines()) <= 300
