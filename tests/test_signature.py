"""Declared signatures (issue 22): spec keys, packing, tensor-map encoding arguments and
cluster launch attributes, all on the CPU (fake tensor-map encoders, a fake driver module)."""

import ctypes
import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.errors import HarnessError, SpecError
from harness.gpu import driver, tensormaps
from harness.kernels.registry import Kernel, discover
from harness.kernels.signature import (
    DEFAULT_SIGNATURE,
    leading_dimensions,
    pack,
    parse_signature,
)
from harness.kernels.spec import TMA_OPERANDS, parse_spec
from harness.kernels.tmap_spec import TensorMapDesc
from harness.kinds.gemm import gemm

NAMES = frozenset({"M", "N", "K", "BM"})
HEAD = """/* harness
entry = "k"
summary = "A test kernel."
precision = "bf16"
min_arch = "sm_90"
block = ["128"]
grid = ["cdiv(N, BM)", "cdiv(M, BM)"]
[params]
BM = 128
"""
BODY = 'extern "C" __global__ void k() {}\n'


def spec_of(extra: str, body: str = BODY, before_params: str = ""):
    text = HEAD.replace("[params]", before_params + "[params]") + extra + "*/\n"
    return parse_spec(text + body, Path("k.cu"))


def fake_map(label) -> ctypes.Array:
    digest = hashlib.sha512(repr(label).encode()).digest()
    return (ctypes.c_ubyte * 128).from_buffer_copy(digest + digest)


def fake_encode_2d(*args):
    return fake_map(("2d", args))


def fake_encode(desc, address, dtype, label):
    return fake_map(("nd", desc, address, dtype))


# ---- the default signature packs as before -------------------------------------------------

def legacy_arguments(kernel, m, n, k, alpha, a, b, beta, c, encode):
    """LoadedGemm.launcher's arguments as written before signatures (a copy, kept frozen)."""
    spec = kernel.spec
    dims = {"A": (a, k, m, spec.precision),
            "B": (b, n, k, spec.precision) if spec.layout_b == "row"
            else (b, k, n, spec.precision),
            "C": (c, n, m, spec.c_type)}
    maps = []
    for operand in TMA_OPERANDS:
        if operand in spec.tma:
            address, inner, outer, element = dims[operand]
            box_inner, box_outer = kernel.tma_box(operand)
            maps.append(encode(element, address, inner, outer, box_inner, box_outer,
                               f"{kernel.name} tensor map {operand}", spec.tma[operand].swizzle))
    return (ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k), ctypes.c_float(alpha),
            ctypes.c_uint64(a), ctypes.c_uint64(b), ctypes.c_float(beta), ctypes.c_uint64(c),
            *maps)


def test_default_signature_packs_byte_identically_for_every_builtin_kernel():
    kernels = discover()
    assert kernels and any(k.spec.tma for k in kernels)
    a, b, c = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000
    for kernel in kernels:
        if kernel.spec.fp8 is not None:  # its scales are not in the common ABI (fp8_spec.py)
            continue
        assert kernel.spec.signature is None and kernel.spec.abi == DEFAULT_SIGNATURE
        assert kernel.spec.has_beta and kernel.spec.has_alpha
        m, n, k = 1000, 776, 520
        old = legacy_arguments(kernel, m, n, k, 1.5, a, b, -0.25, c, fake_encode_2d)
        new = gemm.launch_arguments(kernel, m, n, k, 1.5, a, b, -0.25, c,
                                    encode_2d=fake_encode_2d, encode=None)
        assert [type(x) for x in new] == [type(x) for x in old], kernel.name
        assert [bytes(x) for x in new] == [bytes(x) for x in old], kernel.name


# ---- signature parsing -----------------------------------------------------------------------

def test_every_vocabulary_entry_packs_in_order_with_its_type():
    sig = parse_signature(
        [{"name": "M", "type": "i64"}, "N", "K", "lda", {"name": "ldb", "type": "i64"}, "ldc",
         "alpha", "beta", "A", "B", "C", "D", "tmap_A", "tmap_D",
         {"name": "workspace", "bytes": "M * 4", "fill": "zero"},
         {"const": 7}, {"const": 2.5, "type": "f32"}, {"const": 9, "type": "u64"}], NAMES)
    values = {"M": 64, "N": 32, "K": 16, "lda": 16, "ldb": 32, "ldc": 32, "alpha": 2.0,
              "beta": 0.5, "A": 0x1000, "B": 0x2000, "C": 0x3000, "D": 0x4000,
              "workspace": 0x5000, "tmap_A": bytes(range(128))}
    asked = []
    args = pack(sig, values, lambda operand: asked.append(operand) or fake_map(operand))
    assert asked == ["D"]  # tmap_A came with the values
    expected = [(ctypes.c_int64, 64), (ctypes.c_int, 32), (ctypes.c_int, 16),
                (ctypes.c_int, 16), (ctypes.c_int64, 32), (ctypes.c_int, 32),
                (ctypes.c_float, 2.0), (ctypes.c_float, 0.5), (ctypes.c_uint64, 0x1000),
                (ctypes.c_uint64, 0x2000), (ctypes.c_uint64, 0x3000), (ctypes.c_uint64, 0x4000)]
    for arg, (ctype, value) in zip(args[:12], expected, strict=True):
        assert type(arg) is ctype and arg.value == value
    assert bytes(args[12]) == bytes(range(128)) and bytes(args[13]) == bytes(fake_map("D"))
    assert all(ctypes.sizeof(x) == 128 and ctypes.alignment(type(x)) == 1 for x in args[12:14])
    assert type(args[14]) is ctypes.c_uint64 and args[14].value == 0x5000
    assert [(type(x), x.value) for x in args[15:]] == [
        (ctypes.c_int, 7), (ctypes.c_float, 2.5), (ctypes.c_uint64, 9)]
    assert sig[14].fill == "zero" and sig[14].bytes({"M": 3}) == 12


def test_pack_names_a_missing_value():
    sig = parse_signature(["A", "B", "C", "M"], NAMES)
    with pytest.raises(SpecError, match="no value for signature parameter 'M'"):
        pack(sig, {"A": 1, "B": 2, "C": 3})
    sig = parse_signature(["tmap_A", "B", "C"], NAMES)
    with pytest.raises(SpecError, match="no tensor map for tmap_A"):
        pack(sig, {"B": 2, "C": 3})
    with pytest.raises(SpecError, match="is 64 bytes; a CUtensorMap is 128"):
        pack(sig, {"B": 2, "C": 3}, lambda op: bytes(64))


def test_leading_dimensions_follow_the_layouts():
    assert leading_dimensions(10, 20, 30) == {"lda": 30, "ldb": 20, "ldc": 20}
    assert leading_dimensions(10, 20, 30, "col", "col", "col") == {"lda": 10, "ldb": 30,
                                                                    "ldc": 10}


@pytest.mark.parametrize(("raw", "match"), [
    (["M", "N", "K", "A", "B", "C", "colour"], r"unknown signature entry 'colour'"),
    (["M", "N", "K", "A", "B", "C", "alpah"], r"'alpah' \(did you mean 'alpha'\?\)"),
    (["M", "M", "A", "B", "C"], r"'M' appears twice"),
    (["A", "B", "D"], r"D without C"),
    (["A", "B", "beta"], r"beta without C"),
    (["A", "B", "alpha"], r"neither C nor tmap_C"),
    (["B", "C"], r"neither A nor tmap_A"),
    ([], r"non-empty list"),
    (["A", "B", "C", {"name": "M", "type": "f32"}], r"M's type must be i32 or i64"),
    (["A", "B", "C", {"name": "alpha", "type": "f64"}], r"alpha takes no type"),
    (["A", "B", "C", {"name": "workspace"}], r"workspace needs bytes"),
    (["A", "B", "C", {"name": "workspace", "bytes": "4", "fill": "ones"}],
     r"workspace fill must be one of zero, host"),
    (["A", "B", "C", {"name": "workspace", "bytes": "TILE * 4"}], r"uses TILE"),
    (["A", "B", "C", {"const": 1.5}], r"constant 1.5 is not an integer of type i32"),
    (["A", "B", "C", {"const": 1, "type": "i16"}], r"constant type must be one of"),
    (["A", "B", "C", 7], r"must be a name or an inline table"),
])
def test_bad_signatures_are_named(raw, match):
    with pytest.raises(SpecError, match=match):
        parse_signature(raw, NAMES)


# ---- spec keys -----------------------------------------------------------------------------

TMAPS = """[tmaps.A]
rank = 3
shape = ["64", "M", "K // 64"]
strides = ["K", "64"]
box = ["64", "BM", "1"]
swizzle = "128B"
l2_promotion = "128B"
oob_fill = "nan"
"""


def test_a_declared_signature_with_maps_and_cluster_parses():
    spec = spec_of(TMAPS, before_params=(
        'signature = ["M", "N", "K", "tmap_A", "B", "C"]\n'
        'layout_a = "col"\nlayout_c = "col"\ncluster_dims = ["2", "1"]\n'
        'c_type = "bf16"\n'))
    assert [p.name for p in spec.abi] == ["M", "N", "K", "tmap_A", "B", "C"]
    assert not spec.has_beta and not spec.has_alpha
    assert "no beta" in spec.no_beta_reason and spec_of("").no_beta_reason == ""
    assert spec.layout_a == "col" and spec.layout_c == "col"
    assert [e.text for e in spec.cluster] == ["2", "1"] and spec.cluster_from == "spec"
    desc = spec.tmaps["A"].evaluate({"M": 256, "N": 8, "K": 512, "BM": 128})
    assert desc == TensorMapDesc(3, (64, 256, 8), (512, 64), (64, 128, 1), (1, 1, 1), "128B",
                                 "none", "128B", "nan")
    kernel = Kernel("k", spec, tuple(sorted(spec.params.items())))
    assert kernel.cluster_dims == (2, 1, 1)
    assert gemm.declared_launch_problems(kernel) == []  # column-major A and C are prepared


def test_a_declared_signature_packs_through_launch_arguments():
    spec = spec_of(TMAPS, before_params=(
        'signature = ["N", { name = "M", type = "i64" }, "K", "tmap_A", "alpha", "B", "ldb", '
        '"C", { const = 3 }]\nlayout_b = "col"\n'))
    kernel = Kernel("k", spec, tuple(sorted(spec.params.items())))
    seen = []

    def encode(desc, address, dtype, label):
        seen.append((desc.shape, address, dtype, label))
        return fake_map(label)

    args = gemm.launch_arguments(kernel, 256, 128, 512, 2.0, 0x100, 0x200, 0.0, 0x300,
                                 encode_2d=None, encode=encode)
    assert seen == [((64, 256, 8), 0x100, "bf16", "k tensor map A")]
    assert [type(x) for x in args] == [ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                       type(args[3]), ctypes.c_float, ctypes.c_uint64,
                                       ctypes.c_int, ctypes.c_uint64, ctypes.c_int]
    assert [x.value for i, x in enumerate(args) if i != 3] == [128, 256, 512, 2.0, 0x200, 512,
                                                               0x300, 3]
    assert bytes(args[3]) == bytes(fake_map("k tensor map A"))
    assert gemm.declared_launch_problems(kernel) == []
    assert gemm.scalar_problems(kernel, 2.0, 0.0) == []  # it takes alpha
    (problem,) = gemm.scalar_problems(kernel, 1.0, 0.5)
    assert "no beta" in problem and "beta = 0.5" in problem


def test_a_tma_map_goes_where_the_signature_says():
    spec = spec_of('[tma]\nB = ["64", "64"]\n', before_params=(
        'signature = ["tmap_B", "A", "C", "M", "N", "K"]\n'))
    kernel = Kernel("k", spec, tuple(sorted(spec.params.items())))
    args = gemm.launch_arguments(kernel, 256, 128, 512, 1.0, 0x100, 0x200, 0.0, 0x300,
                                 encode_2d=fake_encode_2d, encode=None)
    assert bytes(args[0]) == bytes(fake_encode_2d("bf16", 0x200, 128, 512, 64, 64,
                                                  "k tensor map B", "128B"))
    assert [x.value for x in args[1:]] == [0x100, 0x300, 256, 128, 512]


def test_cluster_dims_come_from_the_source_when_the_spec_is_silent():
    body = ('extern "C" __global__ void __cluster_dims__(CL, 1, 1) k() {}\n')
    spec = spec_of("CL = 2\n", body)
    assert [e.text for e in spec.cluster] == ["CL", "1", "1"] and spec.cluster_from == "source"
    kernel = Kernel("k", spec, tuple(sorted(spec.params.items())))
    assert kernel.cluster_dims == (2, 1, 1)
    spec = spec_of("CL = 2\n", body, 'cluster_dims = ["4"]\n')
    assert [e.text for e in spec.cluster] == ["4"] and spec.cluster_from == "spec"
    assert spec_of("").cluster == () and spec_of("").cluster_from == ""
    with pytest.raises(SpecError, match=r"__cluster_dims__\(WIDTH, 1, 1\) in the source"):
        spec_of("", body.replace("CL", "WIDTH"))


def test_a_block_order_takes_the_declared_launch_path():
    """``block_order`` other than default is a launch attribute: the kernel is launched
    through cuLaunchKernelEx with it, and clusters above 8 blocks are allowed first."""
    assert spec_of("").block_order == "default"
    spec = spec_of("CL = 16\n", 'extern "C" __global__ void __cluster_dims__(CL, 1, 1) k() {}\n',
                   'block_order = "spread"\n')
    assert spec.block_order == "spread" and spec.cluster_from == "source"
    kernel = Kernel("k", spec, tuple(sorted(spec.params.items())))
    launches, allowed = [], []
    loaded = object.__new__(gemm.LoadedGemm)
    loaded.kernel, loaded.device = kernel, None
    loaded.function = SimpleNamespace(
        launch=lambda shape, stream, args, **kw: launches.append(kw),
        allow_large_clusters=lambda: allowed.append(True))
    shape = gemm.LaunchShape((32, 1, 1), (128, 1, 1), 0)
    loaded.prepare = lambda m, n, k: shape
    launch = loaded.launcher(64, 64, 64, 1.0, 0x100, 0x200, 0.0, 0x300, stream=None)
    launch()
    # __cluster_dims__ forms the clusters itself: only the order is an attribute
    assert launches == [{"cluster": None, "block_order": "spread"}] and allowed == [True]


@pytest.mark.parametrize(("extra", "before", "match"), [
    ("", 'signature = ["A", "B", "C", "lda", "lda"]\n', r"'lda' appears twice"),
    ("", 'signature = "M, N, K"\n', r"signature must be a non-empty list"),
    ("", 'layout_a = "diagonal"\n', r"layout_a must be 'row' or 'col'"),
    ("", 'layout_c = "diagonal"\n', r"layout_c must be 'row' or 'col'"),
    ("", 'cluster_dims = ["2", "1", "1", "1"]\n', r"cluster_dims must list 1 to 3"),
    ("", 'cluster_dims = ["CLUSTER"]\n', r"cluster_dims: formula 'CLUSTER' uses CLUSTER"),
    ("", 'block_order = "zigzag"\n', r"block_order must be one of default, spread, "
     r"load_balancing, found 'zigzag'"),
    (TMAPS, "", r"\[tmaps\] describes tensor maps a declared signature passes"),
    (TMAPS, 'signature = ["A", "B", "C"]\n', r"signature does not pass tmap_A"),
    ("", 'signature = ["tmap_A", "B", "C"]\n', r"passes tmap_A but no map describes it"),
    (TMAPS + '[tma]\nA = ["64", "64"]\n', 'signature = ["tmap_A", "B", "C"]\n',
     r"described twice"),
    (TMAPS.replace("rank = 3", "rank = 6"), 'signature = ["tmap_A", "B", "C"]\n',
     r"tmaps.A.rank must be an integer 1..5"),
    (TMAPS.replace('strides = ["K", "64"]', 'strides = ["K"]'),
     'signature = ["tmap_A", "B", "C"]\n', r"tmaps.A.strides must list 2 formula"),
    (TMAPS.replace('"128B"\nl2', '"96B"\nl2'), 'signature = ["tmap_A", "B", "C"]\n',
     r"tmaps.A.swizzle must be one of"),
    (TMAPS.replace('oob_fill = "nan"', 'oob = "nan"'), 'signature = ["tmap_A", "B", "C"]\n',
     r"tmaps.A: unknown key\(s\) oob"),
    (TMAPS.replace("[tmaps.A]", "[tmaps.E]"), 'signature = ["tmap_A", "B", "C"]\n',
     r"'E' is not an operand"),
    (TMAPS.replace('"K // 64"', '"K // TILE"'), 'signature = ["tmap_A", "B", "C"]\n',
     r"tmaps.A.shape: formula 'K // TILE' uses TILE"),
])
def test_bad_signature_specs_are_named(extra, before, match):
    with pytest.raises(HarnessError, match=match):
        spec_of(extra, before_params=before)


# ---- driver: tensor-map encoding arguments and launch attributes ----------------------------

class _Enum:
    def __init__(self, kind):
        self.kind = kind

    def __getattr__(self, name):
        return f"{self.kind}.{name}"


class FakeCu:
    """Just enough of cuda.bindings.driver to see what the harness asks of it."""

    def __init__(self):
        self.calls = []
        self.cuuint64_t = lambda v: ("u64", v)
        self.cuuint32_t = lambda v: ("u32", v)
        for kind in ("CUtensorMapDataType", "CUtensorMapInterleave", "CUtensorMapSwizzle",
                     "CUtensorMapL2promotion", "CUtensorMapFloatOOBfill", "CUlaunchAttributeID",
                     "CUclusterSchedulingPolicy"):
            setattr(self, kind, _Enum(kind))
        self._map = (ctypes.c_ubyte * 128)(*range(128))

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        return 0, SimpleNamespace(getPtr=lambda: ctypes.addressof(self._map))

    @staticmethod
    def CUlaunchAttribute():
        return SimpleNamespace(id=None, value=SimpleNamespace(
            clusterDim=SimpleNamespace(x=0, y=0, z=0)))


def test_tensor_map_translates_the_description_into_encode_arguments():
    api = FakeCu()
    desc = TensorMapDesc(3, (64, 256, 8), (512, 64), (64, 128, 1), (1, 1, 1), "128B",
                         "none", "128B", "nan")
    tmap = tensormaps.tensor_map(desc, 0x7F0000000000, "bf16", "k tensor map A", api=api)
    assert bytes(tmap) == bytes(range(128)) and ctypes.sizeof(tmap) == 128
    (args,) = api.calls
    assert args == (
        "CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16", 3, 0x7F0000000000,
        [("u64", 64), ("u64", 256), ("u64", 8)], [("u64", 1024), ("u64", 128)],
        [("u32", 64), ("u32", 128), ("u32", 1)], [("u32", 1)] * 3,
        "CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE",
        "CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B",
        "CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
        "CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA")
    one = TensorMapDesc(1, (1000,), (), (256,), (2,), "none", "16B", "none", "none")
    tensormaps.tensor_map(one, 0x1000, "fp32", api=api)
    assert api.calls[1][1:4] == (1, 0x1000, [("u64", 1000)]) and api.calls[1][4] == []
    assert api.calls[1][7:10] == ("CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_16B",
                                  "CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE",
                                  "CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE")


@pytest.mark.parametrize(("desc", "match"), [
    (TensorMapDesc(2, (64, 64), (60,), (64, 64), (1, 1)), r"multiple of 16"),
    (TensorMapDesc(2, (64, 64), (64,), (512, 64), (1, 1)), r"box \[512, 64\]"),
    (TensorMapDesc(2, (64, 64), (64,), (64,), (1, 1)), r"rank 2 with shape"),
    (TensorMapDesc(2, (64, 64), (64,), (64, 64), (1, 1), swizzle="96B"), r"swizzle must be"),
])
def test_tensor_map_refuses_what_the_driver_would(desc, match):
    with pytest.raises(HarnessError, match=match):
        tensormaps.tensor_map(desc, 0x1000, "fp16", api=FakeCu())
    with pytest.raises(HarnessError, match="no tensor-map element type"):
        tensormaps.tensor_map(desc, 0x1000, "int8", api=FakeCu())


def test_cluster_launch_attribute():
    api = FakeCu()
    assert driver.launch_attributes(None, api=api) == []
    (attr,) = driver.launch_attributes((2, 1), api=api)
    assert attr.id == "CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION"
    dim = attr.value.clusterDim
    assert (dim.x, dim.y, dim.z) == (2, 1, 1)
    with pytest.raises(HarnessError, match="at least 1"):
        driver.launch_attributes((0, 1, 1), api=api)


def test_block_order_launch_attribute():
    api = FakeCu()
    assert driver.launch_attributes(None, api=api, block_order="default") == []
    (order,) = driver.launch_attributes(None, api=api, block_order="spread")
    assert order.id == ("CUlaunchAttributeID."
                        "CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE")
    assert order.value.clusterSchedulingPolicyPreference == (
        "CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_SPREAD")
    cluster, order = driver.launch_attributes((2, 1, 1), api=api, block_order="load_balancing")
    assert cluster.value.clusterDim.x == 2 and order.value.clusterSchedulingPolicyPreference \
        .endswith("LOAD_BALANCING")
    with pytest.raises(HarnessError, match="block order 'zigzag': expected one of default"):
        driver.launch_attributes(None, api=api, block_order="zigzag")


def test_function_launch_adds_the_attribute_only_when_asked(monkeypatch):
    launched = []
    fake = FakeCu()
    fake.CUlaunchConfig = SimpleNamespace
    fake.cuLaunchKernelEx = lambda config, handle, args, extra: launched.append(config) or (0,)
    monkeypatch.setattr(driver, "cu", fake)
    function = driver.Function("handle", "k", None)
    shape = driver.LaunchShape((4, 2, 1), (128, 1, 1), 0)
    stream = SimpleNamespace(handle="stream")
    function.launch(shape, stream, [ctypes.c_int(1)])
    function.launch(shape, stream, [ctypes.c_int(1)], cluster=(2, 1, 1))
    function.launch(shape, stream, [ctypes.c_int(1)], block_order="spread")
    plain, clustered, ordered = launched
    assert plain.numAttrs == 0 and not hasattr(plain, "attrs")
    assert clustered.numAttrs == 1 and clustered.attrs[0].value.clusterDim.x == 2
    assert ordered.numAttrs == 1 and ordered.attrs[0].value.clusterSchedulingPolicyPreference \
        .endswith("_SPREAD")


def test_real_bindings_build_the_cluster_attribute():
    cu = pytest.importorskip("cuda.bindings.driver")
    (attr,) = driver.launch_attributes((2, 1, 1), api=cu)
    assert attr.id == cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (attr.value.clusterDim.x, attr.value.clusterDim.y) == (2, 1)
    _, order = driver.launch_attributes((2, 1, 1), api=cu, block_order="spread")
    assert order.value.clusterSchedulingPolicyPreference == \
        cu.CUclusterSchedulingPolicy.CU_CLUSTER_SCHEDULING_POLICY_SPREAD


def test_the_signature_examples_pack_as_their_sources_declare():
    from harness.kernels.registry import PROJECT_ROOT, load_registry

    registry = load_registry([])
    (colmajor,) = registry.select([str(PROJECT_ROOT / "examples" / "colmajor_sgemm.cu")])
    args = gemm.launch_arguments(colmajor, 100, 60, 40, 2.0, 0x100, 0x200, 0.5, 0x300)
    assert [(type(x), x.value) for x in args] == [
        (ctypes.c_int, 100), (ctypes.c_int, 60), (ctypes.c_int, 40), (ctypes.c_float, 2.0),
        (ctypes.c_uint64, 0x100), (ctypes.c_int, 100), (ctypes.c_uint64, 0x200),
        (ctypes.c_int, 40), (ctypes.c_float, 0.5), (ctypes.c_uint64, 0x300), (ctypes.c_int, 100)]
    assert gemm.declared_launch_problems(colmajor) == []  # column-major A and C are prepared
    (abt,) = registry.select([str(PROJECT_ROOT / "examples" / "abt_bf16.cu")])
    args = gemm.launch_arguments(abt, 100, 60, 40, 1.0, 0x100, 0x200, 0.0, 0x300)
    assert [x.value for x in args] == [0x100, 0x200, 0x300, 100, 60, 40]
    assert gemm.declared_launch_problems(abt) == [] and gemm.scalar_problems(abt, 1.0, 0.0) == []
    assert not abt.spec.has_beta and abt.spec.c_type == "bf16" and abt.spec.layout_b == "col"


def test_a_workspace_is_zeroed_outside_the_timed_region(monkeypatch):
    """The timer times a declared kernel's launch alone; zeroing its workspace goes with the
    poisoning of C, before every repetition, outside the events."""
    from types import SimpleNamespace

    from harness.kinds.gemm import launches, measure
    calls = []

    def launch():
        calls.append("whole")

    launch.prepare, launch.run = (lambda: calls.append("zero")), (lambda: calls.append("run"))
    monkeypatch.setattr(launches, "launcher", lambda gemm, ops, session: launch)
    ops = SimpleNamespace(poison_c=lambda stream: calls.append("poison"))
    timed, before = measure.kernel_timed(None, ops, SimpleNamespace(stream=None))
    before()
    timed()
    assert calls == ["poison", "zero", "run"] and timed.count == 1


# ---- C++ entries: a kernel in a namespace, a template instantiation, a mangled symbol ------

TEMPLATE_BODY = """namespace lessons {
template <int T, typename Real>
__global__ void tiled(int M, Real* C) { if (threadIdx.x < T) C[threadIdx.x] = Real(M); }
}
"""


def test_a_cxx_entry_is_lowered_to_its_symbol_with_params_in_its_template_arguments():
    """A .cu entry may be the kernel's C++ name; [params] in its template arguments take the
    variant's values, and the build asks NVRTC for the symbol it lowers to (what the module
    and the compiler's report know it by)."""
    text = HEAD.replace('entry = "k"', 'entry = "lessons::tiled<BM, float>"') + "*/\n"
    spec = parse_spec(text + TEMPLATE_BODY, Path("k.cu"))
    assert spec.entry_is_cxx and not parse_spec(HEAD + "*/\n" + BODY, Path("k.cu")).entry_is_cxx
    kernel = Kernel("k", spec, (("BM", 64),))
    assert kernel.entry_expression == "lessons::tiled<64, float>"
    assert Kernel("k", parse_spec(HEAD + "*/\n" + BODY, Path("k.cu")),
                  (("BM", 64),)).entry_expression == "k"


def test_the_template_fixture_compiles_to_its_mangled_symbol():
    from harness.compiler.compile import compile_kernel
    from harness.kernels.registry import load_registry

    fixture = Path(__file__).parent / "kernels" / "signatures" / "template_sgemm.cu"
    kernels = {k.name: k for k in load_registry([]).select([str(fixture)])}
    assert set(kernels) == {"template_sgemm:t16", "template_sgemm:t32"}
    symbols = {}
    for name, kernel in kernels.items():
        compiled = compile_kernel(kernel, "sm_90", use_cache=False)
        symbols[name] = compiled.symbol
        assert compiled.resources.registers > 0
    assert symbols["template_sgemm:t16"] == (
        "_ZN7lessons11tiled_sgemmILi16EfEEviiiT0_PKS1_S3_S1_PS1_")
    assert symbols["template_sgemm:t32"].startswith("_ZN7lessons11tiled_sgemmILi32Ef")


@pytest.mark.parametrize(("entry", "body", "suffix", "match"), [
    ("lessons::tiled<BM>", TEMPLATE_BODY, ".ptx", r"entry must be a C identifier"),
    ("tiled<BM>(int)", TEMPLATE_BODY, ".cu", r"entry must be a C identifier"),
    ("lessons::other<BM>", TEMPLATE_BODY, ".cu", r"entry symbol 'lessons::other<BM>' is not "
     r"defined in the file; expected '__global__ void other\(...\)'"),
])
def test_bad_cxx_entries_are_refused_with_what_to_write(entry, body, suffix, match):
    text = HEAD.replace('entry = "k"', f'entry = "{entry}"') + "*/\n"
    with pytest.raises(SpecError, match=match):
        parse_spec(text + body, Path("k" + suffix))


def test_a_mangled_entry_is_taken_as_the_symbol(tmp_path):
    """An entry given as the mangled symbol (a kernel instantiated explicitly) is not looked
    for in the source; the compiler's report must have it, and says so when it has not."""
    from harness.compiler.compile import compile_kernel
    from harness.errors import CompileError
    from harness.kernels.spec import read_spec

    # the common GEMM ABI: the build checks the compiled kernel's parameters against it
    symbol = "_ZN7lessons5tiledILi64EfEEviiiT0_PKS1_S3_S1_PS1_"
    body = ("namespace lessons {\ntemplate <int T, typename Real>\n__global__ void tiled(int M, "
            "int N, int K, Real alpha, const Real* A, const Real* B, Real beta, Real* C) {\n"
            "    if (threadIdx.x < T) C[threadIdx.x] = Real(M);\n}\n}\n"
            "template __global__ void lessons::tiled<64, float>(int, int, int, float, "
            "const float*, const float*, float, float*);\n")
    for entry in (symbol, symbol.replace("64", "32")):
        path = tmp_path / f"k{len(entry)}{entry[-6:-4]}.cu"
        path.write_text(HEAD.replace('entry = "k"', f'entry = "{entry}"').replace(
            'min_arch = "sm_90"', 'min_arch = "sm_80"') + "*/\n" + body)
        spec = read_spec(path)
        assert not spec.entry_is_cxx
        kernel = Kernel("k", spec, (("BM", 128),))
        if entry == symbol:
            assert compile_kernel(kernel, "sm_90", use_cache=False).symbol == symbol
        else:
            with pytest.raises(CompileError, match=r"no entry function '_ZN7lessons5tiledILi32"):
                compile_kernel(kernel, "sm_90", use_cache=False)


def test_ncu_names_a_template_kernel_demangled():
    from harness.bench.ncu_csv import Launch, is_entry

    launch = Launch(1, "void lessons::tiled_sgemm<16, float>(int, int, int, float, const float "
                       "*, const float *, float, float *)", "", "")
    assert is_entry(launch, "lessons::tiled_sgemm<16, float>")
    assert is_entry(launch, "lessons::tiled_sgemm<16,float>")
    assert not is_entry(launch, "lessons::tiled_sgemm<32, float>")
    assert is_entry(Launch(2, "gemm_k", "", ""), "gemm_k")
    assert not is_entry(Launch(3, "gemm_k2", "", ""), "gemm_k")


def test_an_fp8_gemm_gets_its_scales_after_its_codes_and_byte_maps():
    """scale_a and scale_b point after A's and B's codes (operands.scale_offset), and its
    tensor maps are of bytes."""
    from harness.kinds.gemm.operands import scale_offset

    (kernel,) = [k for k in discover() if k.name == "20_wgmma_fp8:s4e64"]
    seen = []

    def encode(element, *args):
        seen.append(element)
        return fake_encode_2d(element, *args)

    a, b, c, m, n, k = 0x7F0000000000, 0x7F0000100000, 0x7F0000200000, 1000, 776, 528
    args = gemm.launch_arguments(kernel, m, n, k, 1.0, a, b, 0.0, c, encode_2d=encode,
                                 encode=None)
    assert [x.value for x in args[:8]] == [m, n, k, a, b, c, a + scale_offset(m * k),
                                           b + scale_offset(k * n)]
    assert seen == ["fp8", "fp8", "bf16"]
