"""The shell commands CI runs, read from README.md, so that the README and CI cannot drift.

The contract (tests/test_ci.py checks it): the commands are the lines of the code blocks
(indented by four spaces, or fenced with ```) in the README's "## Install" section before its
first "###" subsection ("install"), and in its "## Tests" section ("tests"). Blank lines and
whole-line comments are left out; a command's trailing comment stays (bash ignores it).

    python3 .ci/readme_commands.py install README.md   # one command a line
"""

from __future__ import annotations

import sys
from pathlib import Path

SECTIONS = {"install": "## Install", "tests": "## Tests"}


def section(text: str, heading: str) -> list[str]:
    """The lines of ``heading``'s section, up to the next heading of its level or above, and
    before its first subsection."""
    lines = text.splitlines()
    try:
        start = lines.index(heading) + 1
    except ValueError:
        raise SystemExit(f"README.md has no {heading!r} section: CI reads its commands "
                         "there (.ci/readme_commands.py)") from None
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("#")
                and not _in_fence(lines[start:i])), len(lines))
    return lines[start:end]


def _in_fence(lines: list[str]) -> bool:
    return sum(line.lstrip().startswith("```") for line in lines) % 2 == 1


def commands(text: str, name: str) -> list[str]:
    """The commands of section ``name`` (``install`` or ``tests``) of a README's ``text``."""
    found: list[str] = []
    fenced = False
    for line in section(text, SECTIONS[name]):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        code = line.strip() if fenced or line.startswith("    ") else ""
        if code and not code.startswith("#"):
            found.append(code)
    if not found:
        raise SystemExit(f"README.md's {SECTIONS[name]!r} section holds no commands in a code "
                         "block: CI runs those (.ci/readme_commands.py)")
    return found


def main(argv: list[str]) -> int:
    name, readme = argv[1], Path(argv[2] if len(argv) > 2 else "README.md")
    print("\n".join(commands(readme.read_text(), name)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
