"""The spec of a kernel launched as a GEMM is: block and grid formulas in the problem's M, N,
K and its parameters, the common keys, the GEMM's own (layouts, C type, FP8, TMA maps, a
declared signature, ...). What the GEMM kind parses (and, with ``ceiling``, the ceiling
kind: no grid, no problem size, its ``[ceiling]`` table); the KernelSpec it fills is
harness.kernels.spec's."""

from __future__ import annotations

from pathlib import Path

from harness.archs import ARCHS
from harness.kernels import expr
from harness.kernels.budget import parse_budget
from harness.kernels.fp8_spec import fp8_table
from harness.kernels.hostsetup import missing_setup
from harness.kernels.signature import host_keys
from harness.kernels.spec import (
    BLOCK_ORDERS,
    C_TYPES,
    CEILING_PRECISIONS,
    FP32_VIA,
    LAYOUTS,
    MODEL_KEYS,
    MODEL_WAVEFRONT_KEYS,
)
from harness.kernels.spec_tables import (
    SHAPE_NAMES,
    ceiling_table,
    cluster_of,
    int_table,
    macros_of,
    one_formula,
    param_sets,
    signature_and_maps,
    tma_table,
    tune_tables,
)
from harness.kernels.spec_text import CXX_ENTRY, NAME, check_entry_defined, with_nearest

_REQUIRED = ("entry", "summary", "precision", "min_arch", "block", "grid")
_OPTIONAL = ("layout_b", "c_type", "blas_strict", "nondeterministic", "representative",
             "dynamic_smem_bytes", "constraints", "carveout_pct", "predicted", "params",
             "variants", "tune", "tuned", "model", "kind", "ceiling", "tma", "budget",
             "signature", "layout_a", "layout_c", "tmaps", "cluster_dims", "block_order",
             "fp32_via", "macros", "fp8")
_CEILING_KEYS = ("kind", "entry", "summary", "predicted", "precision", "min_arch", "block",
                 "ceiling")



def gemm_shaped_fields(table: dict, source: str, match, path: Path, fail, *, kind: str,
                       ceiling: bool = False) -> dict:
    """The KernelSpec fields of a kernel launched as a GEMM is (block and grid formulas in the
    problem's M, N, K; the common keys): what the GEMM kind parses, and with ``ceiling`` a
    ceiling probe (no grid, no problem size, its ``[ceiling]`` table)."""
    unknown = sorted(set(table) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise fail("unknown key(s) " + ", ".join(with_nearest(k, _REQUIRED + _OPTIONAL)
                                                 for k in unknown)
                   + f"; allowed keys: {', '.join(_REQUIRED + _OPTIONAL)}")
    required = _REQUIRED
    if ceiling:
        required = tuple(k for k in _REQUIRED if k != "grid") + ("ceiling",)
        gemm_only = sorted(set(table) - set(_CEILING_KEYS))
        if gemm_only:
            raise fail(f"a ceiling kernel takes no {', '.join(gemm_only)}: it has no problem "
                       "size, and its grid is [ceiling] blocks_per_sm x the SM count; remove "
                       f"them (keys of a ceiling kernel: {', '.join(_CEILING_KEYS)})")
    elif "ceiling" in table:
        raise fail('[ceiling] belongs to ceiling microbenchmarks: add kind = "ceiling", or '
                   "remove the table from this GEMM kernel")
    missing = [k for k in required if k not in table]
    if missing:
        raise fail(f"missing required key(s) {', '.join(missing)}")
    for key in ("entry", "summary", "precision", "min_arch", "layout_a", "layout_b", "layout_c",
                "c_type", "predicted"):
        if key in table and not isinstance(table[key], str):
            raise fail(f"{key} must be a string, found {table[key]!r}")

    entry = table["entry"]
    if not NAME.match(entry):
        if path.suffix != ".cu" or not CXX_ENTRY.match(entry):
            raise fail(f"entry must be a C identifier (an extern \"C\" kernel or a .entry), or "
                       "in a .cu file a C++ name such as 'ns::kernel<128, BN>' (template "
                       f"arguments may name [params]), found {entry!r}")
    check_entry_defined(source[match.end():], entry, path)
    precision = table["precision"]
    if precision not in CEILING_PRECISIONS:
        raise fail(f"precision must be one of {', '.join(CEILING_PRECISIONS)}, found "
                   f"{precision!r}")
    fp8 = None if ceiling else fp8_table(table, precision, fail)
    layout_b = table.get("layout_b", "row")
    if layout_b not in LAYOUTS:
        raise fail(f"layout_b must be 'row' or 'col', found {layout_b!r}")
    for key in ("layout_a", "layout_c"):
        if table.get(key, "row") not in LAYOUTS:
            raise fail(f"{key} must be 'row' or 'col', found {table[key]!r}")
    if table["min_arch"] not in ARCHS:
        raise fail(f"min_arch {table['min_arch']!r} is not an architecture the harness knows; "
                   f"expected one of {', '.join(ARCHS)}")
    c_type = table.get("c_type", "fp32")
    if c_type not in C_TYPES:
        raise fail(f"c_type must be one of {', '.join(C_TYPES)}, found {c_type!r}")
    if c_type not in ("fp32", precision) and fp8 is None:
        allowed = "\"fp32\"" + (f" or \"{precision}\"" if precision in C_TYPES[1:] else "")
        raise fail(f"c_type {c_type!r} with {precision} inputs: a 16-bit C must be the inputs' "
                   f"own type, the pairs cuBLAS (the baseline) offers; use c_type = {allowed}")
    fp32_via = table.get("fp32_via", "")
    if fp32_via and (precision != "fp32" or fp32_via not in FP32_VIA):
        raise fail(f"fp32_via {fp32_via!r}: an FP32 kernel that computes on tensor cores names "
                   f"how, one of {', '.join(FP32_VIA)}" if precision == "fp32" else
                   f"fp32_via is for precision = \"fp32\" kernels; this one is {precision}")
    for key in ("blas_strict", "nondeterministic"):
        if not isinstance(table.get(key, False), bool):
            raise fail(f"{key} must be true or false, found {table[key]!r}")
    carveout = table.get("carveout_pct")
    if carveout is not None and (
        isinstance(carveout, bool) or not isinstance(carveout, int) or not 0 <= carveout <= 100
    ):
        raise fail(f"carveout_pct must be an integer percent 0..100, found {carveout!r}")

    params = int_table(table.get("params", {}), "params", fail)
    variants = param_sets(table.get("variants", {}), "variants", params, fail)
    for name in variants:
        if not NAME.match(name):
            raise fail(f"variant name {name!r} must be letters, digits and '_'")
    representative = table.get("representative")
    if representative is not None and (not isinstance(representative, str)
                                       or representative not in variants):
        raise fail(f"representative {representative!r} is not one of the variants "
                   f"({', '.join(variants) or 'none declared'})")

    tune, tuned = tune_tables(table, params, fail)

    raw_model = table.get("model", {})
    if (not isinstance(raw_model, dict)
            or set(raw_model) - set(MODEL_KEYS) - set(MODEL_WAVEFRONT_KEYS)
            or (raw_model and set(MODEL_KEYS) - set(raw_model))):
        raise fail(f"model must be a table with keys {', '.join(MODEL_KEYS)} (and optionally "
                   f"{', '.join(MODEL_WAVEFRONT_KEYS)}), found {raw_model!r}")
    for op in ("ld", "st"):
        pair = {f"smem_{op}_requests", f"smem_{op}_wavefronts"}
        if len(pair & set(raw_model)) == 1:
            raise fail(f"model: {' and '.join(sorted(pair))} go together (wavefronts per "
                       f"request is their ratio); found only {(pair & set(raw_model)).pop()}")
    model = {key: one_formula(value, frozenset(params), fail, f"model.{key}")
             for key, value in raw_model.items()}

    def formulas(key: str, *, names: frozenset[str], compare: bool = False) -> tuple:
        return expr.formula_list(table, key, names, fail, compare)

    param_names = frozenset(params)
    block = formulas("block", names=param_names)
    grid = formulas("grid", names=param_names | SHAPE_NAMES | {"SMS"})
    for key, dims in (("block", block), ("grid", grid))[: 1 if ceiling else 2]:
        if not 1 <= len(dims) <= 3:
            raise fail(f"{key} must list 1 to 3 dimensions (x, y, z), found {len(dims)}")
    constraints = formulas("constraints", names=param_names | SHAPE_NAMES, compare=True)
    dynamic_smem = one_formula(table.get("dynamic_smem_bytes", "0"), param_names | SHAPE_NAMES,
                                fail)

    tma = tma_table(table.get("tma", {}), param_names, fail)
    signature, tmaps = signature_and_maps(table, param_names | SHAPE_NAMES, tma, fail)
    if signature is not None and host_keys(signature):
        why = missing_setup(path, host_keys(signature))
        if why is not None:
            raise fail(why)
    cluster, cluster_from = cluster_of(table, source[match.end():], path, param_names, fail)
    block_order = table.get("block_order", "default")
    if block_order not in BLOCK_ORDERS:
        raise fail(f"block_order must be one of {', '.join(BLOCK_ORDERS)}, found "
                   f"{block_order!r}")
    macros, template_params, macro_tested = macros_of(table, entry, params,
                                                    source[match.end():], path, fail)

    return dict(
        path=path, entry=entry, summary=table["summary"].strip(), precision=precision,
        min_arch=table["min_arch"], block=block, grid=grid, dynamic_smem_bytes=dynamic_smem,
        layout_b=layout_b, c_type=c_type, blas_strict=table.get("blas_strict", False),
        fp32_via=fp32_via, nondeterministic=table.get("nondeterministic", False), fp8=fp8,
        constraints=constraints,
        carveout_pct=carveout,
        predicted=table.get("predicted", "").strip(), params=params, variants=variants,
        representative=representative,
        tune=tune, tuned=tuned, model=model, kind=kind,
        ceiling=(ceiling_table(table["ceiling"], precision, source[match.end():], fail)
                 if ceiling else None),
        tma=tma,
        budget=parse_budget(table.get("budget", {}), fail),
        layout_a=table.get("layout_a", "row"), layout_c=table.get("layout_c", "row"),
        signature=signature, tmaps=tmaps, cluster=cluster, cluster_from=cluster_from,
        block_order=block_order, macros=macros, template_params=template_params,
        macro_tested=macro_tested,
    )


