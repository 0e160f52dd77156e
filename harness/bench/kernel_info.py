"""Which kernel a result is of: :class:`KernelInfo` (its name, parameters, source and how it
is declared and launched), with the one-line texts of its signature, layouts and launch
attributes that reports print."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.kernels.registry import Kernel, project_relative

BUFFERS = "buffers: "
"""How a buffers kernel's signature text begins (KernelInfo.signature)."""


@dataclass(frozen=True)
class KernelInfo:
    """Which kernel, with what parameters, from which source."""

    name: str
    file: str
    """The kernel file, relative to the project root where it lies inside it."""
    precision: str
    params: dict[str, int] = field(default_factory=dict)
    layout_b: str = "row"
    c_type: str = "fp32"
    source_sha256: str = ""
    """Hash of the kernel file and the files it includes, as they were when it ran."""
    signature: str = ""
    """The declared parameter list as text (``"ptr A, ptr B, ptr C, i32 M, i32 N, i32 K"``);
    empty for the common ABI (and in reports written before signatures existed)."""
    layouts: str = ""
    """The operands' storage, ``"A row, B col, C row"``; empty in older reports."""
    launch_attributes: str = ""
    """What the kernel is launched with besides its grid and block: ``"cluster 2x1x1
    (__cluster_dims__), block order spread"``; empty for a plain launch."""
    fp32_via: str = ""
    """How an FP32 kernel computes on tensor cores, as its spec declares (``bf16x3``, ...);
    empty: FP32 itself."""
    kind: str = ""
    """The kernel's kind (harness.kinds); empty in reports before schema 3."""

    @classmethod
    def of(cls, kernel: Kernel) -> KernelInfo:
        spec = kernel.spec
        return cls(kernel.name, project_relative(spec.path), spec.precision, dict(kernel.params),
                   spec.layout_b, spec.c_type, kernel.source_sha256,
                   signature_text(spec.signature) if spec.buffers is None else
                   BUFFERS + ", ".join(a.label for a in spec.buffers.args),
                   layouts_text(spec), launch_text(kernel),
                   getattr(spec, "fp32_via", ""), spec.kind)

    @property
    def computes(self) -> str:
        """The precision as every table names it: ``fp32``, or ``fp32 via bf16x3``."""
        return f"{self.precision} via {self.fp32_via}" if self.fp32_via else self.precision


def launch_text(kernel: Kernel) -> str:
    """The launch attributes a kernel declares (cluster, block order) as one phrase; "" for
    none."""
    spec, parts = kernel.spec, []
    if kernel.cluster_dims is not None:
        parts.append(f"cluster {'x'.join(map(str, kernel.cluster_dims))} ("
                     f"{'__cluster_dims__' if spec.cluster_from == 'source' else 'spec'})")
    if spec.block_order != "default":
        parts.append(f"block order {spec.block_order}")
    return ", ".join(parts)


def signature_text(signature) -> str:
    """A declared signature (a tuple of signature.Param) as one line; "" for None (the common
    ABI)."""
    if signature is None:
        return ""
    def one(p) -> str:
        if p.name == "const":
            return f"const {p.value}"
        if p.name == "host":
            return f"{p.type} host {p.key}"
        if p.name == "workspace":
            return f"ptr workspace ({p.fill})"
        return f"{p.type} {p.name}"
    return ", ".join(one(p) for p in signature)


def layouts_text(spec) -> str:
    """``"A row, B col, C row"``: how the spec stores A, B and C."""
    return (f"A {getattr(spec, 'layout_a', 'row')}, B {spec.layout_b}, "
            f"C {getattr(spec, 'layout_c', 'row')}")
