"""Declared kernel signatures (``signature = [...]`` in a spec) and their argument packing.

A spec without ``signature`` takes the common GEMM ABI, :data:`DEFAULT_SIGNATURE`
``(int M, int N, int K, float alpha, const T* A, const T* B, float beta, float* C)``, and packs
byte for byte as before. A declared signature lists the kernel's parameters in order from a
fixed vocabulary (docs/gemm.md, "Other signatures"); :func:`pack` turns it and the launch's values
into the ctypes values a launch passes. Tensor-map descriptions (``[tmaps.NAME]``) are parsed
in :mod:`harness.kernels.tmap_spec`, and the parameters a compiled kernel takes are read and
compared with those declared in :mod:`harness.kernels.compiled_params`. Pure Python: no driver
import (tensor maps come from an injected function).
"""

from __future__ import annotations

import ctypes
import difflib
from collections.abc import Callable, Mapping
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


# ---- each parameter as a launch's buffer and a parameter list hold it ----

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
