"""Issue 38: the spec parser never ends in a traceback. Real spec blocks (every kernel file of
cu/, ptx/ and examples/) are mutated at random, with fixed seeds: lines deleted, duplicated or
swapped, values replaced by values of other types, CRLF and lone-CR line ends, a byte-order mark,
truncation, stray bytes. Whatever comes out, reading the file either gives a spec (whose
kernels then evaluate their block, grid and shared memory) or raises the harness's own error
(SpecError, HarnessError) with a message that names the file; nothing else escapes."""

import random
import re
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, kernels_in
from harness.kernels.spec import read_spec

FILES = sorted(p for folder in ("cu", "ptx", "examples")
               for p in (PROJECT_ROOT / folder).rglob("*") if p.suffix in (".cu", ".ptx"))
VALUES = ['"x"', "0", "-1", "1.5", "true", "[]", '["1", "2", "3", "4"]', "{}", '{ a = 1 }',
          '"cdiv(N, 0)"', '"M // 0"', '"1 << 99"', "[[1]]", '"BM"', '"sm_75"', '"col"',
          "1e400", '"\\u00e9"', "99999999999999999999", '["M % 0 == 0"]', '"nan"']
CASES_PER_SEED = 300
SEEDS = (1, 2, 3, 4, 5, 6)


def mutate(text: str, rng: random.Random) -> bytes:
    """One to four random edits of ``text``, as bytes."""
    head, sep, tail = text.partition("*/")
    lines = head.split("\n")
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(10)
        i = rng.randrange(len(lines))
        if choice == 0 and len(lines) > 1:
            del lines[i]
        elif choice == 1:
            lines.insert(i, lines[i])
        elif choice == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif choice in (3, 4) and "=" in lines[i]:
            key = lines[i].split("=", 1)[0]
            lines[i] = f"{key}= {rng.choice(VALUES)}"
        elif choice == 5:
            cut = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:cut]
        elif choice == 6:
            lines.insert(i, rng.choice(["[params]", "[variants]", "[budget]", "[tma]",
                                        "[tmaps.A]", "[model]", "[ceiling]", "[tuned.sm_90]",
                                        'signature = ["A", "B"]', "macros = true",
                                        'block_order = "spread"', 'kind = "ceiling"',
                                        'entry = "ns::k<BM>"', "*/", "/* harness"]))
        elif choice == 8:  # one value inside a list or an inline table
            items = list(re.finditer(r'"[^"]*"|\b\d+\b|\btrue\b|\bfalse\b', lines[i]))
            if items:
                hit = rng.choice(items)
                lines[i] = lines[i][:hit.start()] + rng.choice(VALUES) + lines[i][hit.end():]
        elif choice == 7:
            at = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:at] + rng.choice(["\t", '"', "'", "[", "{", "\\", "#", "é"]) \
                + lines[i][at:]
    data = ("\n".join(lines) + sep + tail).encode()
    dress = rng.randrange(8)
    if dress == 0:
        data = data.replace(b"\n", b"\r\n")
    elif dress == 1:
        data = b"\xef\xbb\xbf" + data
    elif dress == 2:
        data = data.replace(b"\n", b"\r")
    elif dress == 3:
        data = data[: rng.randrange(len(data) + 1)]
    elif dress == 4:
        at = rng.randrange(len(data) + 1)
        data = data[:at] + bytes([rng.randrange(256)]) + data[at:]
    return data


def read_and_use(path: Path) -> None:
    """Read the spec, then what every command does with it first."""
    spec = read_spec(path)
    for kernel in kernels_in(spec):
        used = [kernel.block_dims, kernel.defines, kernel.entry_expression,
                spec.launch_parameters]
        if spec.kind == "gemm":
            used += [kernel.grid_dims(1024, 1024, 1024),
                     kernel.dynamic_smem_bytes(1024, 1024, 1024),
                     kernel.shape_problems(1000, 1000, 1000), kernel.cluster_dims,
                     [kernel.tma_box(operand) for operand in spec.tma], kernel.model_values()]
        assert min(used[0]) >= 1 and all(isinstance(d, str) for d in used[1])


def test_the_files_are_there():
    assert len(FILES) >= 40


@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_specs_raise_only_the_harness_errors(tmp_path, seed):
    rng = random.Random(seed)
    started = time.monotonic()
    outcomes = {"read": 0, "refused": 0}
    for case in range(CASES_PER_SEED):
        source = rng.choice(FILES)
        path = tmp_path / f"c{case}" / source.name
        path.parent.mkdir()
        for include in source.parent.glob("*.ptxh"):  # a PTX kernel's shared body
            (path.parent / include.name).write_bytes(include.read_bytes())
        setup = source.with_suffix(".py")
        if setup.is_file():
            (path.parent / setup.name).write_bytes(setup.read_bytes())
        data = mutate(source.read_text(), rng)
        path.write_bytes(data)
        try:
            read_and_use(path)
        except HarnessError as exc:
            message = str(exc)
            first = message.split("\n")[0]
            # one line naming the file; only the spec to paste into a file without one is longer
            assert path.name in first and ("\n" not in message or "no spec block" in first), (
                f"seed {seed} case {case} ({source.name}): {message!r}")
            outcomes["refused"] += 1
        except Exception as exc:  # noqa: BLE001 - the point: nothing else may escape
            pytest.fail(f"seed {seed} case {case} ({source.name}): {type(exc).__name__}: {exc}"
                        f"\n--- the mutated file ---\n{data.decode(errors='replace')[:3000]}")
        else:
            outcomes["read"] += 1
    assert outcomes["refused"] > CASES_PER_SEED // 4 and outcomes["read"] > 0, outcomes
    assert time.monotonic() - started < 30
