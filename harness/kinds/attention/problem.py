"""An attention problem: its named dims, how ``--size`` text reads, and the sizes timed first.

Dims: ``B`` (batch), ``H`` (query heads), ``H_kv`` (key/value heads: grouped-query attention
when fewer than ``H``, ``H % H_kv == 0``; query head ``h`` reads key/value head
``h // (H // H_kv)``), ``S_q`` and ``S_kv`` (query and key sequence lengths), ``D`` (head dim).
``--size`` reads ``B=4,H=16,S=4096,D=128``: ``S`` sets ``S_q`` and ``S_kv`` together, ``H_kv``
left out is ``H``, and ``causal`` (or ``causal=1``) asks for the causal mask. The causal mask is
aligned to the bottom-right corner, as FlashAttention-2 >= 2.1 and cuDNN do: query ``i`` sees key
``j`` when ``j <= i + S_kv - S_q``, so the last query sees every key; with ``S_q > S_kv`` the first
``S_q - S_kv`` queries see none, and their output is 0 (log-sum-exp ``-inf``).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.errors import HarnessError
from harness.kinds.dims import Problem, parse_dims

DIMS = ("B", "H", "H_kv", "S_q", "S_kv", "D")
DEFAULTS = {"B": 4, "H": 16, "S_q": 4096, "S_kv": 4096, "D": 128}
"""What a dim left out of ``--size`` takes: the issue's example, FlashAttention's benchmark
shape at 4K (hidden 2048 = 16 heads of 128)."""
TIMED_FIRST = ((16, 1024), (4, 4096), (1, 16384))
"""(B, S) timed when no size is given: FlashAttention-2/3's benchmark sweep (16K tokens in all,
16 heads of 128), its short, middle and long end."""


@dataclass(frozen=True)
class AttentionProblem(Problem):
    """A :class:`Problem` of the dims :data:`DIMS` plus whether the causal mask applies."""

    causal: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.names != DIMS:
            raise HarnessError(f"an attention problem has the dims {', '.join(DIMS)} in that "
                               f"order, found {', '.join(self.names)}")
        if self["H"] % self["H_kv"]:
            raise HarnessError(f"H={self['H']} is not a multiple of H_kv={self['H_kv']}: "
                               "grouped-query attention shares each key/value head among "
                               "H / H_kv query heads; choose H_kv dividing H")

    @classmethod
    def make(cls, B: int, H: int, S_q: int, S_kv: int, D: int, H_kv: int | None = None,
             causal: bool = False) -> AttentionProblem:
        return cls((("B", B), ("H", H), ("H_kv", H if H_kv is None else H_kv), ("S_q", S_q),
                    ("S_kv", S_kv), ("D", D)), causal)

    @property
    def text(self) -> str:
        return super().text + (",causal" if self.causal else "")

    @property
    def short(self) -> str:
        b, h, hkv, sq, skv, d = self.values
        heads = f"{h}" if h == hkv else f"{h}/{hkv}"
        seq = f"{sq}" if sq == skv else f"{sq}x{skv}"
        return f"B{b} H{heads} S{seq} D{d}" + (" causal" if self.causal else "")

    def to_json(self) -> dict[str, int]:
        return {**self.as_dict(), "causal": int(self.causal)}

    @classmethod
    def from_json(cls, data) -> AttentionProblem:
        data = dict(data or {})
        causal = bool(data.pop("causal", 0))
        base = Problem.from_json(data)
        return cls(base.dims, causal)

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self["H"] // self["H_kv"]

    @property
    def offset(self) -> int:
        """``S_kv - S_q``: how far the causal diagonal is shifted right (bottom-right)."""
        return self["S_kv"] - self["S_q"]


def read_size(text: str) -> AttentionProblem:
    """``--size`` text as an attention problem (see the module's documentation); HarnessError
    saying what was expected otherwise."""
    raw = text.strip().replace(" ", "")
    causal = False
    parts = []
    for part in raw.split(","):
        key, _, value = part.partition("=")
        if key.lower() == "causal":
            if value not in ("", "0", "1", "true", "false"):
                raise HarnessError(f"size {text!r}: causal takes 0 or 1 (or stands alone), "
                                   f"found {value!r}")
            causal = value in ("", "1", "true")
        else:
            parts.append(part)
    if not parts or parts == [""]:
        raise HarnessError(f"size {text!r} names no dim; expected B=4,H=16,S=4096,D=128")
    if all("=" not in p for p in parts):
        if len(parts) != 1:
            raise HarnessError(f"size {text!r}: an attention size names its dims, as "
                               "B=4,H=16,S=4096,D=128 (a lone number is S)")
        parts = [f"S={parts[0]}"]
    given = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep:
            raise HarnessError(f"size {text!r}: {part!r} has no '='; write every dim as "
                               "name=value, as B=4,H=16,S=4096,D=128")
        given[key] = value
    named = {k.lower() for k in given}
    if "s" in named:
        if named & {"s_q", "s_kv"}:
            raise HarnessError(f"size {text!r}: S sets both S_q and S_kv; give S alone or "
                               "S_q and S_kv")
        value = given.pop(next(k for k in given if k.lower() == "s"))
        given["S_q"] = given["S_kv"] = value
    defaults = dict(DEFAULTS)
    h = next((v for k, v in given.items() if k.lower() == "h"), None)
    if h is not None and h.isdigit():
        defaults["H_kv"] = int(h)
    else:
        defaults["H_kv"] = defaults["H"]
    problem = parse_dims(",".join(f"{k}={v}" for k, v in given.items()), DIMS, square=False,
                         defaults=defaults)
    return AttentionProblem(problem.dims, causal)


def timed_first() -> tuple[AttentionProblem, ...]:
    """The sizes a user times first (:data:`TIMED_FIRST`), non-causal and causal."""
    return tuple(AttentionProblem.make(b, 16, s, s, 128, causal=c)
                 for c in (False, True) for b, s in TIMED_FIRST)


def unmasked_pairs(s_q: int, s_kv: int, causal: bool) -> int:
    """Query-key pairs one head computes: ``S_q * S_kv`` without a mask; with the bottom-right
    causal mask, query ``i`` sees ``clamp(i + S_kv - S_q + 1, 0, S_kv)`` keys, summed exactly."""
    if not causal:
        return s_q * s_kv
    first = s_kv - s_q + 1  # keys the first query sees (may be <= 0)
    if first >= 1:
        return s_q * (first + s_kv) // 2
    return s_kv * (s_kv + 1) // 2
