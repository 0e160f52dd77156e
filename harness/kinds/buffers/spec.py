"""The spec of a ``kind = "buffers"`` kernel: its own parameters as named buffers and
dimensions, a reference, the bytes it must move (notes/buffers_kind.md).

A GEMM takes the common ABI; a reduction, a softmax, a copy or an elementwise kernel declares
what it takes: ``dims`` (the problem's sizes, in ``--size`` order), ``[buffers.NAME]`` (dtype,
shape formulas over the dims, role, how an output starts, the range inputs are drawn in),
``args`` (the kernel's parameters in order), ``reference`` (built in, or a function of the
kernel's ``.py``), ``bytes`` (the compulsory bytes) and ``baseline``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.archs import ARCHS
from harness.kernels import expr
from harness.kernels.budget import parse_budget
from harness.kernels.expr import size_formulas
from harness.kernels.spec_tables import int_table, macros_of, param_sets, tune_tables
from harness.kernels.spec_text import NAME, check_entry_defined, check_keys

DTYPES = {"f32": 4, "bf16": 2, "f16": 2, "i32": 4, "u32": 4}
"""Element types of a buffer and their bytes."""
FLOAT_DTYPES = ("f32", "bf16", "f16")
ROLES = ("in", "out", "inout", "scratch")
"""``in``: drawn before every launch, never written; ``out``: written by the kernel, checked;
``inout``: drawn, then written and checked; ``scratch``: work space, never checked."""
INITS = ("poison", "zero")
"""How an ``out`` or ``scratch`` buffer starts every launch: a NaN sentinel (every element
must be written) or zeros (the declared target of atomics, a counter)."""
REFERENCES = ("sum", "softmax", "copy")
"""Built-in references (harness/kinds/buffers/references.py); ``py:NAME`` names a function
of the kernel's ``.py`` file instead."""
BASELINES = ("copy", "cub_sum", "torch_softmax", "none")
ARG_TYPES = {"i32": 4, "i64": 8}
KEYS = ("kind", "entry", "summary", "predicted", "min_arch", "dims", "sizes", "args", "block",
        "grid", "dynamic_smem_bytes", "constraints", "reference", "bytes", "bytes_reason",
        "flops", "baseline",
        "nondeterministic", "tolerance", "buffers", "params", "variants", "representative",
        "macros", "carveout_pct", "budget", "tune", "tuned")
REQUIRED = ("entry", "summary", "min_arch", "dims", "sizes", "args", "block", "grid",
            "reference", "bytes", "buffers")


@dataclass(frozen=True)
class BufferDecl:
    """``[buffers.NAME]``."""

    name: str
    dtype: str
    shape: tuple[expr.Expr, ...]
    role: str
    init: str = "poison"
    values: tuple[float, float] = (-1.0, 1.0)

    @property
    def drawn(self) -> bool:
        """Whether the harness draws its contents before every launch."""
        return self.role in ("in", "inout")

    @property
    def checked(self) -> bool:
        return self.role in ("out", "inout")


@dataclass(frozen=True)
class Arg:
    """One kernel parameter: a buffer (a device pointer) or a dimension (an integer)."""

    name: str
    type: str
    """``ptr`` for a buffer, ``i32`` or ``i64`` for a dimension."""

    @property
    def nbytes(self) -> int:
        return 8 if self.type == "ptr" else ARG_TYPES[self.type]

    @property
    def label(self) -> str:
        return f"{self.name} {'u64' if self.type == 'ptr' else self.type}"


@dataclass(frozen=True)
class Tolerance:
    """A ``py:`` reference's tolerance: exact (the reference rounded to the output's type, bit
    for bit) or ``|y - r| <= abs + rel |r|``."""

    exact: bool = True
    rel: float = 0.0
    abs: float = 0.0

    def describe(self) -> str:
        return "exact" if self.exact else f"|y - r| <= {self.abs:g} + {self.rel:g} |r|"


@dataclass(frozen=True)
class BuffersSpec:
    """What a buffers kernel declares beyond block, grid and the common keys."""

    dims: tuple[str, ...]
    sizes: tuple[tuple[expr.Expr, ...], ...]
    args: tuple[Arg, ...]
    buffers: dict[str, BufferDecl]
    reference: str
    bytes: expr.Expr
    flops: expr.Expr | None
    baseline: str
    tolerance: Tolerance
    bytes_reason: str = ""
    """Why ``bytes`` differs from the buffers' bytes (bench/memory/bytes_moved.py); empty:
    it must not."""

    @property
    def inputs(self) -> list[BufferDecl]:
        return [b for b in self.buffers.values() if b.drawn]

    @property
    def outputs(self) -> list[BufferDecl]:
        return [b for b in self.buffers.values() if b.checked]

    def default_sizes(self) -> list[tuple[int, ...]]:
        return [tuple(int(e({})) for e in size) for size in self.sizes]


def parse_buffers(table: dict, params: frozenset[str], fail) -> BuffersSpec:
    """The buffers-kind keys of a spec table (validated; ``fail(message)`` makes the error)."""
    dims = table["dims"]
    if (not isinstance(dims, list) or not dims or len(dims) > 3
            or any(not isinstance(d, str) or not NAME.match(d) for d in dims)):
        raise fail(f"dims must list 1 to 3 dimension names (C identifiers), as [\"N\"] or "
                   f"[\"ROWS\", \"COLS\"], found {dims!r}")
    dims = tuple(dims)
    clash = sorted(set(dims) & params)
    if clash:
        raise fail(f"{', '.join(clash)} is both a dim and a [params] name: rename one")
    names = frozenset(dims) | params
    raw_sizes = table["sizes"]
    if not isinstance(raw_sizes, list) or not raw_sizes:
        raise fail(f"sizes must list the timed sizes (\"1<<24\", or \"4096x1024\" for two "
                   f"dims), found {raw_sizes!r}")
    sizes = tuple(size_formulas(s, dims, fail, "sizes") for s in raw_sizes)

    raw_buffers = table["buffers"]
    if not isinstance(raw_buffers, dict) or not raw_buffers:
        raise fail("[buffers.NAME] tables must declare the kernel's buffers (dtype, shape, "
                   "role): see notes/buffers_kind.md")
    buffers = {name: _buffer(name, raw, names, fail) for name, raw in raw_buffers.items()}
    if not any(b.checked for b in buffers.values()):
        raise fail("no buffer has role \"out\" or \"inout\": nothing the kernel writes could "
                   "be checked")

    raw_args = table["args"]
    if not isinstance(raw_args, list) or not raw_args:
        raise fail(f"args must list the kernel's parameters in order (buffer names and dims, "
                   f"\"N:i64\" for a 64-bit dim), found {raw_args!r}")
    args = []
    for item in raw_args:
        name, _, type_ = str(item).partition(":")
        if name in buffers:
            if type_:
                raise fail(f"args: {item!r}: a buffer is passed as its device address; drop "
                           f"\":{type_}\"")
            args.append(Arg(name, "ptr"))
        elif name in dims:
            type_ = type_ or "i32"
            if type_ not in ARG_TYPES:
                raise fail(f"args: {item!r}: a dim is passed as {' or '.join(ARG_TYPES)}")
            args.append(Arg(name, type_))
        else:
            raise fail(f"args: {item!r} is neither a buffer ({', '.join(buffers)}) nor a dim "
                       f"({', '.join(dims)})")
    seen = [a.name for a in args]
    twice = sorted({n for n in seen if seen.count(n) > 1})
    if twice:
        raise fail(f"args: {', '.join(twice)} listed twice")
    unpassed = [b for b in buffers if b not in seen]
    if unpassed:
        raise fail(f"args: the buffer(s) {', '.join(unpassed)} are declared but not passed")

    reference = table["reference"]
    if not isinstance(reference, str) or not (
            reference in REFERENCES or re.fullmatch(r"py:[A-Za-z_]\w*", reference)):
        raise fail(f"reference must be one of {', '.join(REFERENCES)} or \"py:NAME\" (a "
                   f"function in the kernel's .py file), found {reference!r}")
    _reference_fits(reference, buffers, dims, fail)
    tolerance = _tolerance(table.get("tolerance"), reference, fail)
    baseline = table.get("baseline", "none")
    if not isinstance(baseline, str) or baseline not in BASELINES:
        raise fail(f"baseline must be one of {', '.join(BASELINES)}, found {baseline!r}")
    nbytes = expr.parse_using(table["bytes"], names, fail, "bytes")
    flops = (expr.parse_using(table["flops"], names, fail, "flops") if "flops" in table
             else None)
    reason = table.get("bytes_reason", "")
    if not isinstance(reason, str) or ("bytes_reason" in table and not reason.strip()):
        raise fail(f"bytes_reason must say in words why bytes differs from the buffers' bytes "
                   f"(each input and output once), found {reason!r}")
    return BuffersSpec(dims, sizes, tuple(args), buffers, reference, nbytes, flops, baseline,
                       tolerance, reason.strip())


def _buffer(name: str, raw, names: frozenset[str], fail) -> BufferDecl:
    where = f"buffers.{name}"
    if not NAME.match(name):
        raise fail(f"{where}: a buffer name must be a C identifier")
    if not isinstance(raw, dict):
        raise fail(f"{where} must be a table (dtype, shape, role)")
    unknown = sorted(set(raw) - {"dtype", "shape", "role", "init", "values"})
    if unknown:
        raise fail(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: dtype, shape, role, "
                   "init, values")
    for key in ("dtype", "shape", "role"):
        if key not in raw:
            raise fail(f"{where}: missing {key}")
    if not isinstance(raw["dtype"], str) or raw["dtype"] not in DTYPES:
        raise fail(f"{where}: dtype must be one of {', '.join(DTYPES)}, found {raw['dtype']!r}")
    if not isinstance(raw["role"], str) or raw["role"] not in ROLES:
        raise fail(f"{where}: role must be one of {', '.join(ROLES)}, found {raw['role']!r}")
    shape = raw["shape"]
    if not isinstance(shape, list) or not shape:
        raise fail(f"{where}: shape must be a list of formulas over the dims, as [\"N\"]")
    shape = tuple(expr.parse_using(s, names, fail, f"{where}.shape") for s in shape)
    init = raw.get("init", "poison")
    if not isinstance(init, str) or init not in INITS:
        raise fail(f"{where}: init must be one of {', '.join(INITS)}, found {init!r}")
    if "init" in raw and raw["role"] not in ("out", "scratch"):
        raise fail(f"{where}: init is for out and scratch buffers (an input is drawn)")
    values = raw.get("values", [-1.0, 1.0])
    if (not isinstance(values, list) or len(values) != 2
            or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values)
            or not values[0] < values[1]):
        raise fail(f"{where}: values must be [low, high] with low < high, found {values!r}")
    if "values" in raw and raw["role"] not in ("in", "inout"):
        raise fail(f"{where}: values is the range inputs are drawn in; this buffer is "
                   f"{raw['role']}")
    if raw["dtype"] not in FLOAT_DTYPES and raw["role"] in ("in", "inout"):
        raise fail(f"{where}: inputs of type {raw['dtype']} cannot be drawn yet; inputs are "
                   f"{', '.join(FLOAT_DTYPES)}")
    return BufferDecl(name, raw["dtype"], shape, raw["role"], init,
                      (float(values[0]), float(values[1])))


def _reference_fits(reference: str, buffers: dict[str, BufferDecl], dims, fail) -> None:
    ins = [b for b in buffers.values() if b.drawn]
    outs = [b for b in buffers.values() if b.checked]
    if reference == "sum":
        if len(ins) != 1 or len(outs) != 1 or len(outs[0].shape) != 1 \
                or outs[0].shape[0].text != "1" or outs[0].dtype not in FLOAT_DTYPES:
            raise fail("reference \"sum\" sums its one input into one output of shape [\"1\"]")
    elif reference == "softmax":
        if (len(ins) != 1 or len(outs) != 1 or len(ins[0].shape) != 2
                or [e.text for e in ins[0].shape] != [e.text for e in outs[0].shape]
                or outs[0].dtype not in FLOAT_DTYPES):
            raise fail("reference \"softmax\" takes one 2-D input [ROWS, COLS] and writes one "
                       "output of the same shape")
    elif reference == "copy":
        if (len(ins) != 1 or len(outs) != 1 or outs[0].dtype != ins[0].dtype
                or [e.text for e in ins[0].shape] != [e.text for e in outs[0].shape]):
            raise fail("reference \"copy\" takes one input and one output of the same dtype "
                       "and shape")


def _tolerance(raw, reference: str, fail) -> Tolerance:
    if raw is None:
        return Tolerance()
    if not reference.startswith("py:"):
        raise fail(f"tolerance is for py: references; the built-in {reference!r} brings its "
                   "own bound (notes/buffers_kind.md)")
    if raw == "exact":
        return Tolerance()
    if isinstance(raw, dict) and set(raw) <= {"rel", "abs"} and raw and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for v in raw.values()):
        return Tolerance(False, float(raw.get("rel", 0.0)), float(raw.get("abs", 0.0)))
    raise fail(f"tolerance must be \"exact\" or {{rel = ..., abs = ...}} (non-negative), "
               f"found {raw!r}")


def buffers_kernel_spec(table: dict, source: str, match, path, fail) -> dict:
    """The KernelSpec fields of a ``kind = "buffers"`` file (spec.parse_spec hands it the
    table, and makes the KernelSpec)."""

    check_keys(table, KEYS, REQUIRED, ("entry", "summary", "min_arch", "predicted"),
               "a buffers kernel", "notes/buffers_kind.md", fail)
    entry = table["entry"]
    if not NAME.match(entry):
        raise fail(f"entry must be a C identifier (an extern \"C\" kernel or a .entry), found "
                   f"{entry!r}")
    body = source[match.end():]
    check_entry_defined(body, entry, path)
    if table["min_arch"] not in ARCHS:
        raise fail(f"min_arch {table['min_arch']!r} is not an architecture the harness knows; "
                   f"expected one of {', '.join(ARCHS)}")
    if not isinstance(table.get("nondeterministic", False), bool):
        raise fail(f"nondeterministic must be true or false, found {table['nondeterministic']!r}")
    carveout = table.get("carveout_pct")
    if carveout is not None and (isinstance(carveout, bool) or not isinstance(carveout, int)
                                 or not 0 <= carveout <= 100):
        raise fail(f"carveout_pct must be an integer percent 0..100, found {carveout!r}")
    params = int_table(table.get("params", {}), "params", fail)
    variants = param_sets(table.get("variants", {}), "variants", params, fail)
    representative = table.get("representative")
    if representative is not None and representative not in variants:
        raise fail(f"representative {representative!r} is not one of the variants "
                   f"({', '.join(variants) or 'none declared'})")
    tune, tuned = tune_tables(table, params, fail)
    spec = parse_buffers(table, frozenset(params), fail)
    names = frozenset(spec.dims) | frozenset(params)

    def formulas(key: str, allowed: frozenset[str], compare: bool = False) -> tuple:
        return expr.formula_list(table, key, allowed, fail, compare)

    block = formulas("block", frozenset(params))
    grid = formulas("grid", names | {"SMS"})
    for key, dims in (("block", block), ("grid", grid)):
        if not 1 <= len(dims) <= 3:
            raise fail(f"{key} must list 1 to 3 dimensions (x, y, z), found {len(dims)}")
    constraints = formulas("constraints", names, compare=True)
    dynamic_smem = expr.parse_using(table.get("dynamic_smem_bytes", "0"), names, fail,
                                    "dynamic_smem_bytes")
    macros, template_params, macro_tested = macros_of(table, entry, params, body, path, fail)
    first = (spec.inputs or spec.outputs)[0].dtype
    precision = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}.get(first, "fp32")
    return dict(
        path=path, entry=entry, summary=table["summary"].strip(), precision=precision,
        min_arch=table["min_arch"], block=block, grid=grid, dynamic_smem_bytes=dynamic_smem,
        nondeterministic=table.get("nondeterministic", False), constraints=constraints,
        carveout_pct=carveout, predicted=table.get("predicted", "").strip(), params=params,
        variants=variants, representative=representative, kind="buffers", buffers=spec,
        tune=tune, tuned=tuned,
        budget=parse_budget(table.get("budget", {}), fail),
        macros=macros, template_params=template_params, macro_tested=macro_tested,
        c_type={"bf16": "bf16", "f16": "fp16"}.get(spec.outputs[0].dtype, "fp32"))
