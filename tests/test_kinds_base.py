"""The kinds' contract (harness/kinds/base.py, dims.py) and the registry, offline."""

import pytest

from harness import kinds
from harness.errors import HarnessError
from harness.kinds.base import Baseline, Baselines, Column, Kind, percent, rate
from harness.kinds.dims import Problem, parse_dims

GEMM_DIMS = ("M", "N", "K")


def test_the_three_spellings_of_a_size():
    assert parse_dims("4096", GEMM_DIMS) == Problem.of(M=4096, N=4096, K=4096)
    assert parse_dims("2048x1024x512", GEMM_DIMS).values == (2048, 1024, 512)
    assert parse_dims("2048,1024,512", GEMM_DIMS).short == "2048x1024x512"
    named = parse_dims("B=8,h=16,S=4096,D=128", ("B", "H", "S", "D"))
    assert named.as_dict() == {"B": 8, "H": 16, "S": 4096, "D": 128}
    assert named.text == "B=8,H=16,S=4096,D=128"
    assert parse_dims(named.text, ("B", "H", "S", "D")) == named


def test_named_dims_take_defaults_in_the_kinds_order():
    got = parse_dims("S=1024,B=2", ("B", "H", "S"), defaults={"H": 16})
    assert got.dims == (("B", 2), ("H", 16), ("S", 1024))


@pytest.mark.parametrize("text, match", [
    ("1,2", r"has 2 value\(s\); expected N or MxNxK"),
    ("M=1,Q=3", r"no dim 'Q'; the dims are M, N, K"),
    ("0", r"M must be a positive integer, found '0'"),
    ("M=2", r"N, K not given"),
    ("M=2,M=3,N=1,K=1", r"M is given twice"),
    ("M2", r"M must be a positive integer"),
    ("", r"size is empty"),
])
def test_a_size_that_is_not_one_says_how_to_write_it(text, match):
    with pytest.raises(HarnessError, match=match):
        parse_dims(text, GEMM_DIMS)


def test_one_value_is_refused_where_the_kind_is_not_square():
    with pytest.raises(HarnessError, match=r"has 1 value\(s\); expected rowsxcols"):
        parse_dims("4096", ("rows", "cols"), square=False)


def test_a_problem_refuses_bad_dims_and_reads_back_from_json():
    with pytest.raises(HarnessError, match="positive integer"):
        Problem.of(M=0)
    with pytest.raises(HarnessError, match="named twice"):
        Problem((("M", 1), ("M", 2)))
    p = Problem.of(rows=4, cols=8)
    assert Problem.from_json(p.to_json()) == p and p["cols"] == 8 and "rows" in p
    with pytest.raises(KeyError, match="no dim 'K'"):
        p["K"]
    with pytest.raises(HarnessError, match="object of dim"):
        Problem.from_json([4, 8])


class _Copy(Baseline):
    name = "copy"

    def __init__(self, spec, problem):
        self.log = []

    def version(self):
        return "1"

    def prepare(self, operands):
        self.log.append(("prepare", operands))

    def launch(self):
        self.log.append("launch")

    def close(self):
        self.log.append("close")


class _Toy(Kind):
    name = "toy"
    dims = ("n",)
    baselines = Baselines({"copy": _Copy})

    def parse_table(self, table, source, match, path, fail):
        return {"kind": self.name}

    def flops(self, spec, problem):
        return 0.0

    def compulsory_bytes(self, spec, problem):
        return 8.0 * problem["n"]

    def figures(self, result):
        return {"gbps": rate(self.compulsory_bytes(None, result), result.ms)}

    def columns(self):
        return (Column("gbps", "GB/s"),)


def test_a_kind_reads_its_sizes_and_names_its_baselines():
    toy = _Toy()
    assert toy.read_size("1024") == Problem.of(n=1024)
    assert toy.baseline_name(None) == "copy" and "COPY" in toy.baselines
    with toy.baselines.make("copy", None, Problem.of(n=4)) as b:
        b.prepare("ops")
        b.launch()
    assert b.log == [("prepare", "ops"), "launch", "close"]
    with pytest.raises(HarnessError, match="no baseline 'cub'; this kind has copy"):
        toy.baselines.factory("cub")
    with pytest.raises(HarnessError, match="empty or taken"):
        toy.baselines.add("Copy", _Copy)
    assert toy.takes("run") and not toy.takes("ceiling")
    with pytest.raises(HarnessError, match="has no measurement"):
        toy.measure(None, None, (), None)


def test_rates_and_percents_say_nan_for_what_was_not_measured():
    assert rate(2e9, 1.0) == 2000.0
    assert rate(1.0, 0.0) != rate(1.0, 0.0)
    assert percent(50.0, 200.0) == 25.0
    assert percent(None, 1.0) != percent(None, 1.0)


def test_the_registry_finds_kinds_by_folder_and_refuses_others():
    assert kinds.DEFAULT == "gemm"
    assert set(kinds.names()) <= {"gemm", "buffers", "ceiling", "attention"}
    with pytest.raises(HarnessError, match=r"no kind 'nope'; the kinds are"):
        kinds.get("nope")
    with pytest.raises(HarnessError, match="no kind '../x'"):
        kinds.get("../x")
