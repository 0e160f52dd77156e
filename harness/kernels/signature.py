"""Declared kernel signatures (``signature = [...]`` in a spec) and their argument packing.

A spec without ``signature`` takes the common GEMM ABI, :data:`DEFAULT_SIGNATURE`
``(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)``, and packs
byte for byte as before. A declared signature lists the kernel's parameters in order from a
fixed vocabulary (docs/gemm.md, "Other signatures"); :func:`pack` turns it and the launch's values
into the ctypes values a launch passes. Tensor-map descriptions (``[tmaps.NAME]``) are parsed
here too. Pure Python: no driver import (tensor maps come from an injected function).
"""

from __future__ import annotations

import ctypes
import difflib
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from harness.errors import SpecError
from harness.kernels import expr

SIZES = ("M", "N", "K")
LEADING_DIMS = ("lda", "ldb", "ldc")
SCALARS = ("alpha", "beta")
OPERANDS = ("A", "B", "C", "D")
TMAPS = tuple(f"tmap_{o}" for o in OPERANDS)
WORKSPACE = "workspace"
SCALES = ("scale_a", "scale_b")  # an FP8 GEMM's FP32 scales (kernels/fp8_spec.py)
VOCABULARY = SIZES + LEADING_DIMS + SCALARS + OPERANDS + TMAPS + (WORKSPACE,) + SCALES
"""Every name a signature entry may take (plus ``{ const = ..., type = ... }`` and
``{ host = "name", type = ... }``)."""
INT_TYPES = ("i32", "i64")
CONST_TYPES = ("i32", "i64", "u32", "u64", "f32", "f64")
WORKSPACE_FILLS = ("zero", "host")
"""``zero``: the harness zeroes the workspace before every launch; ``host``: the kernel's host
set-up (``<kernel>.py``, harness.kernels.hostsetup) gives its contents, copied in before every
launch."""

_CTYPES = {"i32": ctypes.c_int, "i64": ctypes.c_int64, "u32": ctypes.c_uint32,
           "u64": ctypes.c_uint64, "f32": ctypes.c_float, "f64": ctypes.c_double,
           "ptr": ctypes.c_uint64}
TMAP_BYTES = 128
"""A CUtensorMap passed by value (``const __grid_constant__ CUtensorMap``, 64-byte aligned)."""


@dataclass(frozen=True)
class Param:
    """One parameter of a declared signature."""

    name: str
    """A vocabulary name, or ``const`` for a constant."""
    type: str
    """``i32`` ``i64`` ``u32`` ``u64`` ``f32`` ``f64``, ``ptr`` (a device address, 64-bit) or
    ``tmap`` (a 128-byte tensor map by value)."""
    value: int | float | None = None
    """The constant's value (``const`` only)."""
    bytes: expr.Expr | None = None
    """The workspace's size in bytes, a formula over M, N, K and the parameters."""
    fill: str | None = None
    """The workspace's contents before a launch, one of :data:`WORKSPACE_FILLS`."""
    key: str | None = None
    """A ``host`` entry's name: the key of its value in what the host set-up returns."""

    @property
    def from_host(self) -> bool:
        """A value (or workspace contents) only the kernel's host set-up can give."""
        return self.name == "host" or self.fill == "host"


def _default() -> tuple[Param, ...]:
    types = {"M": "i32", "N": "i32", "K": "i32", "alpha": "f32", "beta": "f32"}
    return tuple(Param(n, types.get(n, "ptr")) for n in
                 ("M", "N", "K", "alpha", "A", "B", "beta", "C"))


DEFAULT_SIGNATURE: tuple[Param, ...] = _default()
"""The common GEMM ABI, what a spec without ``signature`` takes."""


def _nearest(name: str) -> str:
    close = difflib.get_close_matches(name, VOCABULARY, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_signature(raw, names: frozenset[str], fail=SpecError) -> tuple[Param, ...]:
    """``signature = [...]`` checked against the vocabulary; ``names`` are what a workspace's
    ``bytes`` formula may use (M, N, K and the parameters); ``fail(message)`` makes the error."""
    if not isinstance(raw, list) or not raw:
        raise fail(f"signature must be a non-empty list of parameters in order, found {raw!r}")
    params: list[Param] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw):
        where = f"signature[{i}]"
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            raise fail(f"{where} must be a name or an inline table, found {entry!r}")
        if "const" in entry:
            extra = sorted(set(entry) - {"const", "type"})
            ctype = entry.get("type", "i32")
            value = entry["const"]
            if extra:
                raise fail(f"{where}: a constant takes const and type, found also "
                           f"{', '.join(extra)}")
            if ctype not in CONST_TYPES:
                raise fail(f"{where}: constant type must be one of {', '.join(CONST_TYPES)}, "
                           f"found {ctype!r}")
            is_float = ctype.startswith("f")
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or (not is_float and not isinstance(value, int))):
                raise fail(f"{where}: constant {value!r} is not a{' number' if is_float else 'n'}"
                           f" {'' if is_float else 'integer '}of type {ctype}")
            params.append(Param("const", ctype, value=value))
            continue
        if "host" in entry:
            param = _host_entry(entry, where, fail)
            if f"host:{param.key}" in seen:
                raise fail(f"{where}: host value {param.key!r} appears twice; list each once")
            seen.add(f"host:{param.key}")
            params.append(param)
            continue
        name = entry.get("name")
        if not isinstance(name, str):
            raise fail(f"{where}: an inline table names its parameter (name = \"M\"), is a "
                       f"constant (const = 7) or a host value (host = \"tiles\"), found "
                       f"{entry!r}")
        if name not in VOCABULARY:
            raise fail(f"{where}: unknown signature entry {name!r}{_nearest(name)}; the "
                       f"vocabulary is {', '.join(VOCABULARY)} and {{ const = ..., type = ... }}")
        if name in seen:
            raise fail(f"{where}: {name!r} appears twice in the signature; list each once")
        seen.add(name)
        allowed = {"name"} | ({"type"} if name in SIZES + LEADING_DIMS
                              else {"bytes", "fill"} if name == WORKSPACE else set())
        extra = sorted(set(entry) - allowed)
        if extra:
            raise fail(f"{where}: {name} takes no {', '.join(extra)} (it takes "
                       f"{', '.join(sorted(allowed))})")
        if name in SIZES + LEADING_DIMS:
            ctype = entry.get("type", "i32")
            if ctype not in INT_TYPES:
                raise fail(f"{where}: {name}'s type must be i32 or i64, found {ctype!r}")
            params.append(Param(name, ctype))
        elif name in SCALARS:
            params.append(Param(name, "f32"))
        elif name in OPERANDS + SCALES:
            params.append(Param(name, "ptr"))
        elif name in TMAPS:
            params.append(Param(name, "tmap"))
        else:
            if "bytes" not in entry:
                raise fail(f"{where}: workspace needs bytes = \"formula\" (its size in bytes, "
                           "over M, N, K and the parameters)")
            fill = entry.get("fill", "zero")
            if fill not in WORKSPACE_FILLS:
                raise fail(f"{where}: workspace fill must be one of "
                           f"{', '.join(WORKSPACE_FILLS)}, found {fill!r}")
            size = expr.parse_using(entry["bytes"], names, fail, f"{where}: workspace bytes")
            params.append(Param(name, "ptr", bytes=size, fill=fill))
    has = seen.__contains__
    for operand in ("A", "B"):
        if not (has(operand) or has(f"tmap_{operand}")):
            raise fail(f"signature passes neither {operand} nor tmap_{operand}: the kernel must "
                       f"take operand {operand}")
    has_c, has_d = has("C") or has("tmap_C"), has("D") or has("tmap_D")
    if has_d and not has_c:
        raise fail("signature has D without C: D is a separate output beside an input C; a "
                   "kernel with one output calls it C")
    if has("beta") and not has_c:
        raise fail("signature has beta without C: beta scales the C the kernel reads; pass C "
                   "(or tmap_C), or drop beta (absent beta means beta = 0)")
    if not has_c:
        raise fail("signature passes neither C nor tmap_C: the kernel must take an output")
    return tuple(params)


def _host_entry(entry: dict, where: str, fail) -> Param:
    extra = sorted(set(entry) - {"host", "type"})
    key, ctype = entry["host"], entry.get("type", "i32")
    if extra:
        raise fail(f"{where}: a host value takes host and type, found also {', '.join(extra)}")
    if not isinstance(key, str) or not key.isidentifier() or key == "workspace":
        raise fail(f"{where}: host = \"name\" names the value the host set-up returns (an "
                   f"identifier other than workspace), found {key!r}")
    if ctype not in CONST_TYPES:
        raise fail(f"{where}: host value type must be one of {', '.join(CONST_TYPES)}, found "
                   f"{ctype!r}")
    return Param("host", ctype, key=key)


def host_keys(signature: tuple[Param, ...]) -> tuple[str, ...]:
    """What the kernel's host set-up must return: ``workspace`` (for ``fill = "host"``) and
    the name of every ``host`` entry, in signature order."""
    return tuple("workspace" if p.name == WORKSPACE else p.key for p in signature
                 if p.from_host)


def has_beta(signature: tuple[Param, ...]) -> bool:
    """Whether the kernel takes beta (absent: alpha = 1 and beta = 0, C is not read)."""
    return any(p.name == "beta" for p in signature)


def has_alpha(signature: tuple[Param, ...]) -> bool:
    return any(p.name == "alpha" for p in signature)


def tensor_map_operands(signature: tuple[Param, ...]) -> tuple[str, ...]:
    """The operands the signature passes as tensor maps, in signature order."""
    return tuple(p.name[len("tmap_"):] for p in signature if p.type == "tmap")


def leading_dimensions(m: int, n: int, k: int, layout_a: str = "row", layout_b: str = "row",
                       layout_c: str = "row") -> dict[str, int]:
    """lda, ldb, ldc of A (M x K), B (K x N) and C (M x N) as stored: the row length for a
    row-major matrix, the column length for a column-major one."""
    return {"lda": k if layout_a == "row" else m,
            "ldb": n if layout_b == "row" else k,
            "ldc": n if layout_c == "row" else m}


def pack(signature: tuple[Param, ...], values: Mapping[str, object],
         tensor_map: Callable[[str], object] | None = None) -> list:
    """The ctypes values of one launch, in declared order. ``values`` maps vocabulary names
    to numbers (M, N, K, lda, ldb, ldc, alpha, beta; ``host:NAME`` for a host entry), device
    addresses (A, B, C, D, workspace) or tensor maps (``tmap_X``: 128 bytes); a tensor map
    not in ``values`` comes from ``tensor_map(operand)`` (the driver's encoder, or a fake one
    in tests)."""
    out = []
    for p in signature:
        if p.name == "const":
            out.append(_CTYPES[p.type](p.value))
            continue
        if p.name == "host":
            value = values.get(f"host:{p.key}")
            if value is None:
                raise SpecError(f"no value for host entry {p.key!r}: the host set-up returns it")
            out.append(_CTYPES[p.type](value))
            continue
        if p.type == "tmap":
            raw = values.get(p.name)
            if raw is None:
                if tensor_map is None:
                    raise SpecError(f"no tensor map for {p.name}: pass it in the values or give "
                                    "pack a tensor_map function")
                raw = tensor_map(p.name[len("tmap_"):])
            out.append(_as_tmap(raw, p.name))
            continue
        if p.name not in values or values[p.name] is None:
            raise SpecError(f"no value for signature parameter {p.name!r} (have "
                            f"{', '.join(sorted(k for k, v in values.items() if v is not None))})")
        out.append(_CTYPES[p.type](values[p.name]))
    return out


def _as_tmap(raw, name: str) -> ctypes.Array:
    data = bytes(raw)
    if len(data) != TMAP_BYTES:
        raise SpecError(f"tensor map {name} is {len(data)} bytes; a CUtensorMap is {TMAP_BYTES}")
    return (ctypes.c_ubyte * TMAP_BYTES).from_buffer_copy(data)


# ---- tensor maps as the kernel wants them ([tmaps.NAME]) ----

TMAP_SWIZZLES = ("none", "32B", "64B", "128B")
TMAP_INTERLEAVES = ("none", "16B", "32B")
TMAP_L2_PROMOTIONS = ("none", "64B", "128B", "256B")
TMAP_OOB_FILLS = ("none", "nan")
"""``none``: zeros outside the tensor; ``nan``: NaN (``..._NAN_REQUEST_ZERO_FMA``)."""
_TMAP_KEYS = ("rank", "shape", "strides", "box", "element_strides", "swizzle", "interleave",
              "l2_promotion", "oob_fill")


@dataclass(frozen=True)
class TensorMapSpec:
    """One ``[tmaps.X]`` table: a tensor map of operand X as the kernel wants it, formulas
    over M, N, K and the parameters. Dimension 0 is the contiguous one."""

    rank: int
    shape: tuple[expr.Expr, ...]
    """Global extent of each dimension, in elements (``globalDim``)."""
    strides: tuple[expr.Expr, ...]
    """Distance between consecutive indices of dimensions 1..rank-1, in elements (the driver
    takes bytes: ``globalStrides``)."""
    box: tuple[expr.Expr, ...]
    """Box extent per dimension (``boxDim``), 1..256."""
    element_strides: tuple[expr.Expr, ...]
    """``elementStrides``, 1..8 each (all 1: every element)."""
    swizzle: str = "128B"
    interleave: str = "none"
    l2_promotion: str = "256B"
    oob_fill: str = "none"

    def evaluate(self, env: Mapping[str, int]) -> TensorMapDesc:
        def ints(formulas):
            return tuple(int(f(env)) for f in formulas)
        return TensorMapDesc(self.rank, ints(self.shape), ints(self.strides), ints(self.box),
                             ints(self.element_strides), self.swizzle, self.interleave,
                             self.l2_promotion, self.oob_fill)


@dataclass(frozen=True)
class TensorMapDesc:
    """A :class:`TensorMapSpec` at one problem size: what ``tensormaps.tensor_map`` encodes."""

    rank: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...]
    swizzle: str = "128B"
    interleave: str = "none"
    l2_promotion: str = "256B"
    oob_fill: str = "none"


def parse_tmaps(raw, names: frozenset[str], fail=SpecError) -> dict[str, TensorMapSpec]:
    """``[tmaps.X]`` tables (X among A, B, C, D) checked: rank 1..5, shape and box of rank
    entries, rank - 1 strides, element_strides (default all 1), and the enumerations."""
    if not isinstance(raw, dict):
        raise fail(f"tmaps must be a table of [tmaps.X] tables (X among {', '.join(OPERANDS)}), "
                   f"found {raw!r}")
    out = {}
    for operand, table in raw.items():
        where = f"tmaps.{operand}"
        if operand not in OPERANDS:
            raise fail(f"{where}: {operand!r} is not an operand; expected one of "
                       f"{', '.join(OPERANDS)}")
        if not isinstance(table, dict):
            raise fail(f"{where} must be a table, found {table!r}")
        unknown = sorted(set(table) - set(_TMAP_KEYS))
        if unknown:
            raise fail(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                       f"{', '.join(_TMAP_KEYS)}")
        missing = [k for k in ("rank", "shape", "strides", "box") if k not in table]
        if missing:
            raise fail(f"{where}: missing {', '.join(missing)}")
        rank = table["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= 5:
            raise fail(f"{where}.rank must be an integer 1..5, found {rank!r}")

        enums = {}
        for key, allowed, default in (("swizzle", TMAP_SWIZZLES, "128B"),
                                      ("interleave", TMAP_INTERLEAVES, "none"),
                                      ("l2_promotion", TMAP_L2_PROMOTIONS, "256B"),
                                      ("oob_fill", TMAP_OOB_FILLS, "none")):
            value = table.get(key, default)
            if value not in allowed:
                raise fail(f"{where}.{key} must be one of {', '.join(map(repr, allowed))}, "
                           f"found {value!r}")
            enums[key] = value
        lists = {key: _formulas(table.get(key, default), count, f"{where}.{key}", rank, names,
                                fail)
                 for key, count, default in (("shape", rank, None), ("strides", rank - 1, None),
                                             ("box", rank, None),
                                             ("element_strides", rank, ["1"] * rank))}
        out[operand] = TensorMapSpec(rank, **lists, **enums)
    return out


def _formulas(items, count: int, where: str, rank: int, names: frozenset[str], fail) -> tuple:
    if not isinstance(items, list) or len(items) != count:
        raise fail(f"{where} must list {count} formula(s) (rank {rank}), found {items!r}")
    parsed = []
    for item in items:
        try:
            e = expr.parse(item)
        except SpecError as exc:
            raise fail(f"{where}: {exc}") from None
        if e.names - names:
            raise fail(f"{where}: formula {e.text!r} uses {', '.join(sorted(e.names - names))}; "
                       f"it may use only {', '.join(sorted(names))}")
        parsed.append(e)
    return tuple(parsed)


# ---- the parameters a compiled kernel takes, against those declared ----

def param_bytes(param: Param) -> int:
    """The bytes ``param`` takes in a launch's parameter buffer."""
    if param.type == "tmap":
        return TMAP_BYTES
    return ctypes.sizeof(_CTYPES[param.type])


def param_label(param: Param) -> str:
    """``param`` as a parameter list shows it: ``M i32``, ``const 7 i32``, ``host tiles i32``."""
    if param.name == "const":
        return f"const {param.value} {param.type}"
    if param.name == "host":
        return f"host {param.key} {param.type}"
    return f"{param.name} {param.type}"


_NV_INFO_KPARAM = 0x17
"""EIATTR_KPARAM_INFO: one record per kernel parameter in the cubin's ``.nv.info.<symbol>``."""
_EIFMT_SVAL = 0x04


def cubin_parameter_sizes(cubin: bytes, symbol: str) -> tuple[int, ...] | None:
    """The bytes of each parameter of the kernel ``symbol``, in order, as ptxas recorded them
    in the cubin (``.nv.info.<symbol>``, the records ``cuobjdump -elf`` shows as
    EIATTR_KPARAM_INFO: ordinal, offset, size); None when the cubin does not say."""
    try:
        info = _elf_sections(cubin).get(f".nv.info.{symbol}")
        if info is None:
            return None
        sizes: dict[int, int] = {}
        i = 0
        while i + 4 <= len(info):
            fmt, attr = info[i], info[i + 1]
            if fmt == _EIFMT_SVAL:
                (length,) = struct.unpack_from("<H", info, i + 2)
                if attr == _NV_INFO_KPARAM and length >= 12:
                    _, ordinal_offset, flags = struct.unpack_from("<III", info, i + 4)
                    sizes[ordinal_offset & 0xFFFF] = (flags >> 18) & 0x3FFF
                i += 4 + length
            else:
                i += 4
    except (struct.error, ValueError, IndexError):
        return None
    if not sizes or sorted(sizes) != list(range(len(sizes))):
        return () if not sizes else None
    return tuple(sizes[k] for k in range(len(sizes)))


def _elf_sections(data: bytes) -> dict[str, bytes]:
    """The sections of a 64-bit little-endian ELF file (a cubin) by name."""
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    sections = {}
    for name, _, _, _, offset, size in headers:
        end = data.index(b"\0", names_at + name)
        sections[data[names_at + name:end].decode(errors="replace")] = data[offset:offset + size]
    return sections


_PTX_ENTRY = r"\.entry\s+{name}\s*\("
_PTX_TYPE = re.compile(r"\.(?:[usbf])(8|16|32|64)\b")
_PTX_ARRAY = re.compile(r"\[\s*(\d+)\s*\]")


def ptx_entry_parameters(ptx: str, entry: str) -> tuple[tuple[str, int], ...] | None:
    """Each parameter of ``.entry entry(...)`` in ``ptx``: its declaration as written
    (``.u32 M``) and its bytes (type size x array length); None when the entry or one of its
    parameters cannot be read."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", ptx, flags=re.DOTALL)
    found = re.search(_PTX_ENTRY.format(name=re.escape(entry)), text)
    if not found:
        return None
    close = text.find(")", found.end())
    if close < 0:
        return None
    params = []
    for raw in text[found.end():close].split(","):
        raw = " ".join(raw.split())
        if not raw:
            continue
        declared = raw.removeprefix(".param").strip()
        kind = _PTX_TYPE.search(declared)
        if not raw.startswith(".param") or kind is None:
            return None
        count = 1
        for length in _PTX_ARRAY.findall(declared):
            count *= int(length)
        shown = re.sub(r"\s*\.ptr\b|\s*\.(?:global|const|shared|local)\b|\s*\.align\s+\d+", "",
                       declared).strip()
        params.append((shown, int(kind[1]) // 8 * count))
    return tuple(params)


def parameter_mismatch(declared: Sequence[tuple[str, int]],
                       found: Sequence[tuple[str, int]]) -> str | None:
    """How the parameters a kernel was compiled with (``found``: label and bytes, the label
    empty where only sizes are known) differ from those ``declared`` (label, bytes) in count
    or sizes; None when they agree."""
    sizes = [b for _, b in found]
    if sizes == [b for _, b in declared]:
        return None
    for i, ((label, want), (_, have)) in enumerate(zip(declared, found, strict=False), 1):
        if want != have:
            return (f"parameter {i} is {have} bytes in the kernel, {want} declared "
                    f"({label})")
    if len(found) > len(declared):
        extra = ", ".join(f"{label or '?'} {b}" for label, b in found[len(declared):])
        return (f"the kernel takes {len(found) - len(declared)} more after the declared "
                f"{len(declared)} ({extra} bytes)")
    missing = ", ".join(label for label, _ in declared[len(found):])
    return f"the kernel ends after {len(found)}; declared next: {missing}"


def show_parameters(params: Sequence[tuple[str, int]]) -> str:
    """``n: label bytes, ...`` for an error message."""
    return f"{len(params)}: " + (", ".join(f"{label} {b}".strip() for label, b in params)
                                 or "none")
