import pytest

from harness.errors import SpecError
from harness.kernels import expr


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("cdiv(N, TILE)", {"N": 100, "TILE": 32}, 4),
        ("cdiv(N, TILE)", {"N": 96, "TILE": 32}, 3),
        ("2 * BM * BK * 4 + (BN // 2) % 7", {"BM": 64, "BK": 8, "BN": 30}, 4097),
        ("min(M, 64) - max(K, 3)", {"M": 100, "K": 2}, 61),
        ("-N + 5", {"N": 2}, 3),
        (128, {}, 128),
    ],
)
def test_arithmetic(text, env, want):
    assert expr.parse(text)(env) == want


def test_comparisons_only_where_allowed():
    c = expr.parse("M % 128 == 0 and K >= 8", allow_compare=True)
    assert c({"M": 256, "K": 8}) is True
    assert c({"M": 200, "K": 8}) is False
    assert expr.parse("M < N < K", allow_compare=True)({"M": 1, "N": 2, "K": 2}) is False
    with pytest.raises(SpecError, match="comparison is not allowed"):
        expr.parse("M == 1")


def test_names_are_collected():
    assert expr.parse("cdiv(M, BM) * BN").names == {"M", "BM", "BN"}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("__import__('os').system('true')", "unknown function"),
        ("M.bit_length()", "unknown function"),
        ("M ** 2", "Pow is not allowed"),
        ("M / 2", "Div is not allowed"),
        ("1.5 * M", "only integer constants"),
        ("'a'", "only integer constants"),
        ("cdiv(M)", "exactly two arguments"),
        ("M +", "does not parse"),
        ("[M, N]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
    ],
)
def test_rejects_anything_but_the_grammar(text, match):
    with pytest.raises(SpecError, match=match):
        expr.parse(text)


def test_evaluation_errors_name_the_problem():
    with pytest.raises(SpecError, match="uses 'TILE', which is not defined"):
        expr.parse("cdiv(N, TILE)")({"N": 3})
    with pytest.raises(SpecError, match="divides by zero"):
        expr.parse("cdiv(N, T)")({"N": 3, "T": 0})
    with pytest.raises(SpecError, match="divides by zero"):
        expr.parse("N % T")({"N": 3, "T": 0})
