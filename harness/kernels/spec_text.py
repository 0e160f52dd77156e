"""Finding a kernel file's spec block, and saying what is wrong when it cannot be read: a
block never closed, not first in the file, a first line other than ``/* harness``, no block at
all (a spec to paste, with the entry symbols found), an entry the source does not define."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from harness.errors import SpecError
from harness.kernels import includes
from harness.kernels.kernel_path import read_regular

SPEC_BLOCK = re.compile(r"\A\s*/\*\s*harness[ \t]*\n(?P<body>.*?)\*/", re.DOTALL)
SPEC_OPENER = re.compile(r"\A\s*/\*[ \t]*harness\b(?P<rest>[^\n]*)")
SPEC_OPENER_ANYWHERE = re.compile(r"^[ \t]*/\*[ \t]*harness[ \t]*$", re.MULTILINE)
# a line of the body that is code, not TOML: the block ran on past its end
CODE_LINE = re.compile(r"^\s*(?:#\s*include\s*[<\"]|#(?:define|ifn?def|if|pragma)\b|"
                        r"extern\s+\"C\"|__global__|template\s*<|namespace\s+\w+\s*(?:\{|$)|"
                        r"\.(?:version|target|visible|entry)\s|//|/\*)")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BOUNDS = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
_CU_ENTRY = re.compile(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}([A-Za-z_]\w*)\s*\(")
_PTX_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)")
CXX_ENTRY = re.compile(r"^(?:::)?(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*\s*(?:<[^;{}()]*>)?$")
"""A .cu entry given as a C++ name (a kernel in a namespace, a template instantiation): the
build asks NVRTC for its lowered (mangled) symbol (``nvrtcAddNameExpression``)."""


def read_source(path: Path) -> str:
    """The text of the kernel file at ``path``; SpecError, in one line, where it cannot be read
    or is not UTF-8."""
    try:
        raw = read_regular(path)  # never waits on a FIFO
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the kernel file: {exc.strerror}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SpecError(f"{path}:{line}: the kernel file is not UTF-8 (byte 0x{raw[exc.start]:02x} "
                        f"at offset {exc.start}); save it as UTF-8") from None


def normalize_text(source: str) -> str:
    """``source`` without a leading UTF-8 byte-order mark, its line ends made ``\\n`` (CRLF
    and lone CR, as Windows and old Mac editors save them): what the spec is read from."""
    return source.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def opening_line(source: str) -> int:
    return source[: source.index("/*")].count("\n") + 1


def unclosed(source: str, path: Path, code_line: int | None) -> str:
    """The error for a spec block whose closing ``*/`` is missing (before ``code_line``, the
    first line of code it ran into, where one is known)."""
    opened = opening_line(source)
    where = (f"before line {code_line} ({line_of(source, code_line)!r}), where the code starts"
             if code_line else "anywhere in the file")
    return (f"{path}:{opened}: the spec block opened here ('/* harness') is not closed {where}; "
            "end it with '*/' on the line after its last TOML line")


def misplaced_spec_block(source: str, path: Path) -> str | None:
    """The error for a spec block that is there but cannot be read as one: never closed, a
    first line with more than '/* harness', or not at the top of the file. None when the file
    has no '/* harness' line at all."""
    opener = SPEC_OPENER.match(source)
    if opener:
        if opener["rest"].strip():
            return (f"{path}:{opening_line(source)}: the spec block's first line must be "
                    f"'/* harness' alone, found {line_of(source, opening_line(source))!r}; put "
                    "the TOML on the lines after it and '*/' on a line of its own")
        if "*/" not in source[opener.end():]:
            first = source[: opener.end()].count("\n") + 1
            code = next((i for i, text in enumerate(source.split("\n"), 1)
                         if i > first and CODE_LINE.match(text)), None)
            return unclosed(source, path, code)
        return None
    later = SPEC_OPENER_ANYWHERE.search(source)
    if later is None:
        head = source.split("*/", 1)[0] if "*/" in source else ""
        entry = re.search(r"^[ \t]*entry[ \t]*=", head, re.MULTILINE)
        if re.match(r"\A\s*/\*[ \t]*harness\b", source, re.IGNORECASE) or (
                entry and re.match(r"\A\s*/\*", source)):
            return (f"{path}:{opening_line(source)}: the spec block's first line must be "
                    f"'/* harness' (lower case, alone), found "
                    f"{line_of(source, opening_line(source))!r}")
        if entry:
            line = head[: entry.start()].count("\n") + 1
            return (f"{path}:{line}: this looks like a spec block without its first line "
                    "('entry = ...' before a closing '*/'): start the file with '/* harness' "
                    "on a line of its own")
        return None
    line = source[: later.start()].count("\n") + 1
    first = next(i for i, text in enumerate(source.split("\n"), 1) if text.strip())
    return (f"{path}:{line}: the spec block ('/* harness') must open the file, with only blank "
            f"lines before it; line {first} comes first ({line_of(source, first)!r}): move the "
            "block to the top")


def no_spec_block(source: str, path: Path) -> str:
    """The error for a file with no spec block: what one looks like, filled with the entry
    symbols found in the file, ready to paste at its top."""
    found = list(dict.fromkeys((_PTX_ENTRY if path.suffix == ".ptx" else _CU_ENTRY)
                               .findall(source)))
    entry = found[0] if found else "my_kernel"
    seen = (f"  # found in the file: {', '.join(found)}" if found
            else "  # no __global__ function / .entry found: name yours")
    mangled = ""
    if path.suffix == ".cu" and found and 'extern "C"' not in source:
        mangled = ("\nDeclare the kernel extern \"C\" so that its symbol is its name (C++ "
                   "mangles it otherwise).")
    return (f"{path}: no spec block: a kernel file starts with a block comment whose first "
            "line is '/* harness' and whose body is TOML, ended by '*/'. A minimal one to paste "
            "at the top (docs/spec.md has every key):\n\n"
            "/* harness\n"
            f'entry = "{entry}"{seen}\n'
            'summary = "What this kernel does."\n'
            'precision = "fp32"                     # inputs: fp32, tf32, bf16 or fp16\n'
            'min_arch = "sm_80"\n'
            'block = ["16", "16"]                   # threads per block (x, y, z)\n'
            'grid = ["cdiv(N, 16)", "cdiv(M, 16)"]  # blocks, in M, N, K and [params]\n'
            "*/\n\n"
            "The kernel takes the common GEMM ABI, row-major, C = alpha A B + beta C:\n"
            "(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)"
            + mangled)


def with_nearest(key: str, allowed) -> str:
    """``key``, with the closest allowed key when one is close (a misspelling)."""
    # ties go to the key listed first (layout_b before the rarer layout_a, layout_c)
    scored = [(difflib.SequenceMatcher(None, key, a).ratio(), -i, a)
              for i, a in enumerate(allowed)]
    score, _, best = max(scored)
    return f"{key!r} (did you mean {best!r}?)" if score >= 0.6 else repr(key)


def check_keys(table: dict, keys, required, strings, noun: str, doc: str, fail) -> None:
    """A kind's spec table against its keys: none unknown (with the nearest allowed one),
    none of ``required`` missing, each of ``strings`` a string, and ``entry`` a C
    identifier; ``noun`` names the kernel ("a buffers kernel") and ``doc`` its reference."""
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise fail("unknown key(s) " + ", ".join(with_nearest(k, keys) for k in unknown)
                   + f" for {noun}; allowed keys: {', '.join(keys)}")
    missing = [k for k in required if k not in table]
    if missing:
        raise fail(f"missing required key(s) {', '.join(missing)} ({noun}: {doc})")
    for key in strings:
        if key in table and not isinstance(table[key], str):
            raise fail(f"{key} must be a string, found {table[key]!r}")


def line_of(source: str, number: int) -> str:
    lines = source.splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else ""


def check_entry_defined(body: str, entry: str, path: Path) -> None:
    if path.suffix == ".ptx" and re.search(r"^\s*#\s*include\b", body, re.MULTILINE):
        return  # the entry may be in the included body; compiling finds it or says it is missing
    if path.suffix == ".ptx":
        pattern = rf"\.entry\s+{re.escape(entry)}\b"
        how = f"'.visible .entry {entry}(...)'"
    elif entry.startswith("_Z"):
        return  # a mangled symbol: the compiler's report finds it or says it is missing
    elif not NAME.match(entry):  # a C++ name: its last identifier is a __global__ function
        base = re.sub(r"<.*$", "", entry).split("::")[-1].strip()
        pattern = rf"__global__[^;{{]*\b{re.escape(base)}\s*\("
        how = f"'__global__ void {base}(...)' (a template, or in a namespace)"
    else:
        pattern = rf"__global__[^;{{]*\b{re.escape(entry)}\s*\("
        how = f"'extern \"C\" __global__ void {entry}(...)'"
    if re.search(pattern, body):
        return
    # the entry may be in a header the file includes ("..."), kept beside its host code
    searched = [path]
    named = [path.parent / m["name"] for m in includes.QUOTED.finditer(body)]
    for found, data in (f for header in named for f in includes.walk(header)):
        if data is None:
            return  # an include not next to the file (the include path): compiling decides
        if re.search(pattern, data.decode(errors="replace")):
            return
        searched.append(found)
    where = ("the file" if len(searched) == 1 else "the file or the files it includes "
             f"(searched: {', '.join(str(p) for p in searched)})")
    raise SpecError(f"{path}: spec: entry symbol {entry!r} is not defined in {where}; "
                    f"expected {how}")
