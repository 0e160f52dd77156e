"""Host code in a .cu kernel file, left out of what NVRTC compiles.

Kernel files written for nvcc keep host code beside their kernels: a launcher with ``<<<...>>>``,
a tensor-map builder marked ``__host__``, a schedule built in ``std::vector``, the
``#include <vector>`` it needs. NVRTC compiles device code only and refuses all of it ("host
functions are not allowed in JIT mode", "cannot open source file"). :func:`device_part` finds
that host code at namespace scope and blanks it (line numbers are kept, so diagnostics still
point at the file's own lines); the build compiles the file as written first and the device
part only when that fails (:func:`harness.compiler.compile.nvrtc_device_cubin`), so a file that
compiles today compiles exactly as before. What it cannot recognise gets a hint naming the line
and the ``#ifndef __CUDACC_RTC__`` guard (:func:`nvrtc_hints`).

Pure Python: a scanner of comments, literals, directives and braces
(:mod:`harness.kernels.cxx_scan`), not a C++ parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from harness.kernels.cxx_scan import (
    Decl,
    declarations,
    has_initializer,
    mask,
    strip_template_prefix,
)

STD_HEADERS = frozenset("""
algorithm any array atomic barrier bit bitset cassert cctype cerrno cfenv cfloat charconv chrono
cinttypes climits clocale cmath codecvt compare complex concepts condition_variable coroutine
csetjmp csignal cstdarg cstddef cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype deque
exception execution expected filesystem format forward_list fstream functional future
initializer_list iomanip ios iosfwd iostream istream iterator latch limits list locale map memory
memory_resource mutex new numbers numeric optional ostream print queue random ranges ratio regex
scoped_allocator semaphore set shared_mutex source_location span sstream stack stdexcept
stop_token streambuf string string_view syncstream system_error thread tuple type_traits
typeindex typeinfo unordered_map unordered_set utility valarray variant vector version
assert.h ctype.h errno.h fenv.h float.h inttypes.h limits.h locale.h math.h setjmp.h signal.h
stdarg.h stddef.h stdio.h stdlib.h string.h time.h uchar.h wchar.h wctype.h
unistd.h pthread.h dlfcn.h fcntl.h sys/time.h sys/types.h sys/stat.h sys/mman.h omp.h
""".split())
"""C and C++ standard library (and common POSIX) headers: the host-only #includes that are
left out when NVRTC's include path does not have them (the harness gives NVRTC <cstdint>,
<stdint.h> and <stdlib.h>; libcu++ is <cuda/std/...>)."""

# calls and names only host code makes: a launch, the runtime and driver APIs (not cuComplex's
# cuCaddf and friends, which are device functions too), the C++ standard library (not the
# fixed-width integer types the harness's <cstdint> gives NVRTC), host I/O
_HOST_MARKERS = re.compile(
    r"<<<|\bcuda[A-Z]\w*\s*\(|\bcu(?!C[a-z])[A-Z]\w*\s*\(|"
    r"(?<![\w:])(?:::)?std::(?!u?int(?:8|16|32|64|ptr|max)_t\b|size_t\b|ptrdiff_t\b|nullptr_t\b)"
    r"\w|\b(?:fprintf|fopen|fclose|fflush|exit|getenv|atoi|puts)\s*\(")
_QUALIFIERS = ("__global__", "__device__", "__host__")
_MEMORY_SPACES = re.compile(r"\b(?:__device__|__constant__|__shared__|__managed__|__global__)\b")
_NOT_A_VARIABLE = re.compile(
    r"^(?:typedef|using|namespace|template|static_assert|extern\s+template|friend|asm|"
    r"__asm__|struct|class|union|enum)\b")
_CONSTANT = re.compile(r"\b(?:constexpr|const|constinit)\b")
_FUNCTION_NAME = re.compile(r"(?:~?[A-Za-z_]\w*|operator\s*[^\s(]+)\s*\($")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<(?P<header>[^>\n]+)>", re.MULTILINE)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?![\w(])(?P<value>.*)$",
                     re.MULTILINE)
_CAPS_MACRO = re.compile(r"\b[A-Z][A-Z0-9_]*[A-Z0-9]\b")
_IDENTIFIER = re.compile(r"\b[A-Za-z_]\w*\b")


MAX_SCAN_CHARS = 2_000_000
"""Sources longer than this (generated files) are not scanned for host code (about 2 s per
million characters): their failure keeps NVRTC's own diagnostics and the hints."""


@dataclass(frozen=True)
class LeftOut:
    """One piece of host code left out: its lines (1-based, inclusive) and what it is."""

    first_line: int
    last_line: int
    what: str

    def describe(self) -> str:
        lines = (f"line {self.first_line}" if self.first_line == self.last_line
                 else f"lines {self.first_line}-{self.last_line}")
        return f"{lines} ({self.what})"


@dataclass(frozen=True)
class DevicePart:
    """A .cu source with its host code blanked, and what was blanked."""

    text: str
    left_out: tuple[LeftOut, ...]

    @property
    def headers(self) -> tuple[str, ...]:
        """The standard headers whose ``#include`` was left out."""
        return tuple(piece.what[len("#include <"):-1] for piece in self.left_out
                     if piece.what.startswith("#include <"))

    def note(self) -> str:
        """One line naming what was left out (empty when nothing was)."""
        if not self.left_out:
            return ""
        return ("host code left out for NVRTC (it compiles device code only): "
                + "; ".join(piece.describe() for piece in self.left_out))



def device_part(source: str, *, default_device: bool = False,
                header_found: Callable[[str], bool] = lambda header: False) -> DevicePart:
    """``source`` with its namespace-scope host code blanked: ``#include <...>`` of standard
    headers NVRTC cannot open (``header_found`` says which it can), ``__host__`` functions,
    functions without ``__device__``/``__global__`` (NVRTC takes them for host functions unless
    ``default_device``, NVRTC's ``-default-device``; then only those that launch kernels or
    call the runtime, the driver or the standard library), host variables (without
    ``-default-device``), classes and declarations that use the standard library, and
    declarations that name what was left out (``using ns::launch;``)."""
    if len(source) > MAX_SCAN_CHARS:
        return DevicePart(source, ())
    masked = mask(source)
    qualifier_macros = _qualifier_macros(source)
    out = list(source)
    left: list[tuple[int, int, str]] = []

    def blank(start: int, end: int, what: str) -> None:
        for i in range(start, end):
            if out[i] != "\n":
                out[i] = " "
        left.append((start, end, what))

    for match in _INCLUDE.finditer(source):
        header = match["header"].strip()
        if header in STD_HEADERS and not header_found(header):
            blank(match.start(), match.end(), f"#include <{header}>")

    decls = list(declarations(masked, 0, len(masked)))
    removed: set[str] = set()
    kept: list[Decl] = []
    for decl in decls:
        body = masked[decl.start:decl.end]
        why = _host_reason(decl, body, default_device, qualifier_macros)
        if why is None and decl.kind != "function" and _HOST_MARKERS.search(body):
            why = "host-only declaration"
        if why is None:
            kept.append(decl)
            continue
        name = _name_of(decl)
        if name:
            removed.add(name)
        blank(decl.start, decl.end, f"{why} {name}".strip())
    # what names a piece left out goes with it (a using-declaration, a prototype, an alias)
    changed = True
    while changed and removed:
        changed = False
        for decl in list(kept):
            if decl.kind == "function":
                continue
            used = set(_IDENTIFIER.findall(masked[decl.start:decl.end])) & removed
            if used:
                kept.remove(decl)
                name = _name_of(decl)
                if name and name not in removed:
                    removed.add(name)
                blank(decl.start, decl.end, f"names {', '.join(sorted(used))}")
                changed = True
    pieces = tuple(LeftOut(source.count("\n", 0, start) + 1,
                           source.count("\n", 0, max(start, end - 1)) + 1, what)
                   for start, end, what in sorted(left))
    return DevicePart("".join(out), pieces)


def _host_reason(decl: Decl, body: str, default_device: bool,
                 qualifier_macros: dict[str, frozenset[str]]) -> str | None:
    """Why ``decl`` is host code NVRTC refuses, or None to keep it."""
    head = strip_template_prefix(decl.head).strip()
    qualifiers = set()
    for word in _IDENTIFIER.findall(head):
        if word in _QUALIFIERS:
            qualifiers.add(word)
        qualifiers |= qualifier_macros.get(word, frozenset())
    if decl.kind == "function" or _is_prototype(decl, head):
        if "__global__" in qualifiers or "__device__" in qualifiers:
            return None
        if "__host__" in qualifiers:
            return "__host__ function"
        unknown = set(_CAPS_MACRO.findall(head.split("(")[0])) - set(qualifier_macros)
        if unknown:  # perhaps a qualifier macro from a header (CUTE_HOST_DEVICE): keep it
            return None
        if not default_device:
            return "host function"
        return "host function" if _HOST_MARKERS.search(body) else None
    if decl.kind == "other" and not default_device and _is_host_variable(head):
        return "host variable"
    return None


def _is_prototype(decl: Decl, head: str) -> bool:
    """A function declaration without a body (``void launch(float* C, int n);``): a return
    type and a name before its parameters (``MACRO(x);`` and ``void (*f)(int);`` are not)."""
    if (decl.kind != "other" or "(" not in head or _NOT_A_VARIABLE.match(head)
            or has_initializer(head)):
        return False
    before = head[: head.index("(")]
    return (len(_IDENTIFIER.findall(before)) >= 2
            and re.search(r"\)[\s\w]*;\s*$", head) is not None)


def _is_host_variable(head: str) -> bool:
    """A namespace-scope variable without a memory space (NVRTC takes it for a host variable,
    which it refuses), and not a compile-time constant."""
    head = head.rstrip("; \n")
    if (not head or _NOT_A_VARIABLE.match(head) or _MEMORY_SPACES.search(head)
            or _CONSTANT.search(head) or "(" in head.split("=")[0]):
        return False
    return len(_IDENTIFIER.findall(head.split("=")[0])) >= 2  # a type and a name




def _name_of(decl: Decl) -> str:
    """The name a declaration declares: a function's or a class's, a variable's."""
    head = strip_template_prefix(decl.head).strip()
    if decl.kind == "class":
        words = [w for w in _IDENTIFIER.findall(head.split(":")[0].split("{")[0])
                 if w not in ("struct", "class", "union", "enum", "typedef", "alignas")]
        return words[-1] if words else ""
    if "(" in head and not has_initializer(head):
        found = _FUNCTION_NAME.search(head[: head.index("(") + 1])
        return found[0].rstrip("( ").split("::")[-1] if found else ""
    words = _IDENTIFIER.findall(head.split("=")[0].split("[")[0].split("{")[0])
    return words[-1] if len(words) >= 2 else ""




def _qualifier_macros(source: str) -> dict[str, frozenset[str]]:
    """Object-like macros the file defines that expand to execution-space qualifiers
    (``#define DEVICE __device__ __forceinline__``), to what they expand to."""
    defined = {m["name"]: m["value"] for m in _DEFINE.finditer(source)}
    found: dict[str, frozenset[str]] = {}
    for _ in range(3):  # macros of macros
        for name, value in defined.items():
            words = set(_IDENTIFIER.findall(value))
            quals = {w for w in words if w in _QUALIFIERS}
            for word in words:
                quals |= found.get(word, frozenset())
            if quals:
                found[name] = frozenset(quals)
    return found




_JIT_HOST = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): error: (?P<msg>A function explicitly "
                       r"marked as a __host__ function|A function without execution space|"
                       r"A namespace scope variable without memory space)", re.MULTILINE)
_DECLARES = r"(?:\b(?:int|unsigned|long|short|bool|char|auto|size_t|u?int(?:8|16|32|64)_t|" \
            r"typename|class|float|double)\s*[&*]?\s+)"


def nvrtc_hints(log: str, source: str, name: str, defines: Iterable[str] = (),
                left_out: DevicePart | None = None,
                withheld: dict[str, int] | None = None) -> list[str]:
    """What to do about a failed NVRTC compile of ``source`` (the file ``name``) whose log is
    ``log``: host code NVRTC refused that the harness could not leave out (its line and the
    ``#ifndef __CUDACC_RTC__`` guard), ``-D`` parameters (``defines``) that rewrite a name
    the source declares itself (``template <int BM>`` read as ``template <int 128>``), and
    parameters ``withheld`` from the macros (the entry's template arguments) that the source
    uses as macros (``identifier "BK" is undefined``)."""
    hints = []
    lines = source.splitlines()
    refused = [m for m in _JIT_HOST.finditer(log) if m["file"] == name]
    if refused:
        first = int(refused[0]["line"])
        shown = lines[first - 1].strip() if 0 < first <= len(lines) else ""
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        tried = (" the harness left out the host code it recognised (" + left_out.note()
                 + ") but not this;") if left_out is not None and left_out.left_out else ""
        hints.append(
            f"hint: {name}:{first}: {shown!r} is host code{more}: NVRTC compiles device code "
            f"only;{tried} guard host code with '#ifndef __CUDACC_RTC__' ... '#endif' (NVRTC "
            "defines __CUDACC_RTC__), or mark a function that runs on the GPU __device__")
    rewritten: dict[int, list[tuple[str, str]]] = {}
    for define in defines:
        macro, _, value = define.removeprefix("-D").partition("=")
        pattern = re.compile(rf"(?:{_DECLARES}|\b(?:constexpr|const)\s+\w+\s+){re.escape(macro)}\b")
        for number, text in enumerate(lines, 1):
            if pattern.search(text) and not text.lstrip().startswith(("#", "//")):
                rewritten.setdefault(number, []).append((macro, value))
                break
    for number, macros in sorted(rewritten.items()):
        names = ", ".join(m for m, _ in macros)
        flags = " ".join(f"-D{m}={v}" for m, v in macros)
        hints.append(
            f"hint: {name}:{number}: [params] {names} arrive as macros ({flags}) and rewrite "
            f"the names this line declares ({lines[number - 1].strip()!r}): pass them as "
            f"template arguments instead (name them in the entry, entry = \"kernel<{names}>\", "
            "and leave them out of the spec's macros: macros = false, or a list without them)")
    undefined = dict.fromkeys(re.findall(r'^(?:.+?)\((\d+)\): error: identifier "(\w+)" is '
                                         r"undefined", log, re.MULTILINE))
    for number, macro in undefined:
        if withheld and macro in withheld:
            hints.append(
                f"hint: {name}:{number}: [params] {macro} is not a macro (the entry's template "
                f"arguments name it, so it reaches the kernel as one), and this line uses it as "
                f"one: add macros = [\"{macro}\"] to the spec (or macros = true) to pass "
                f"-D{macro}={withheld[macro]} as well")
            withheld = {k: v for k, v in withheld.items() if k != macro}
    return hints
