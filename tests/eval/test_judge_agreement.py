"""The agreement maths of ``rag-lab judge calibrate`` against scikit-learn, krippendorff and scipy
on generated label pairs (ties, all-equal labels, duplicated pairs), plus hand-computed values."""

from __future__ import annotations

import math
import warnings

import krippendorff
import numpy as np
import pytest
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from rag_lab.eval.judge.agreement import (
    AgreementUndefined,
    bin_score,
    cohen_kappa,
    confusion,
    krippendorff_alpha,
    mean_bias,
    spearman,
)


@st.composite
def label_pairs(draw: st.DrawFn) -> tuple[int, list[int], list[int]]:
    """``(levels, a, b)``: two raters' grades; often few distinct values (ties, one category),
    and some pairs repeated verbatim (duplicates)."""
    levels = draw(st.integers(2, 5))
    n = draw(st.integers(1, 30))
    narrow = draw(st.booleans())
    top = draw(st.integers(0, levels - 1)) if narrow else levels - 1
    grade = st.integers(0, top)
    pairs = draw(st.lists(st.tuples(grade, grade), min_size=n, max_size=n))
    if draw(st.booleans()):
        pairs += pairs[: draw(st.integers(0, len(pairs)))]  # duplicated pairs
    return levels, [p[0] for p in pairs], [p[1] for p in pairs]


def _sk_kappa(a: list[int], b: list[int], levels: int, weights: str | None) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(cohen_kappa_score(a, b, labels=list(range(levels)), weights=weights))


@settings(max_examples=150)
@given(label_pairs(), st.sampled_from([None, "linear", "quadratic"]))
def test_kappa_equals_sklearn(data: tuple[int, list[int], list[int]], weights: str | None) -> None:
    levels, a, b = data
    expected = _sk_kappa(a, b, levels, weights)
    if math.isnan(expected):
        with pytest.raises(AgreementUndefined):
            cohen_kappa(a, b, levels, weights)
    else:
        assert cohen_kappa(a, b, levels, weights) == pytest.approx(expected, abs=1e-9)


def _kr_alpha(a: list[int], b: list[int], level: str) -> float | None:
    try:
        return float(krippendorff.alpha(reliability_data=np.array([a, b], dtype=float), level_of_measurement=level))
    except ValueError:  # "There has to be more than one value in the domain."
        return None


@settings(max_examples=150)
@given(label_pairs(), st.sampled_from(["nominal", "ordinal", "interval"]))
def test_alpha_equals_krippendorff(data: tuple[int, list[int], list[int]], level: str) -> None:
    _, a, b = data
    expected = _kr_alpha(a, b, level)
    if expected is None or math.isnan(expected):
        with pytest.raises(AgreementUndefined):
            krippendorff_alpha([a, b], level)
    else:
        assert krippendorff_alpha([a, b], level) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=60)
@given(
    st.lists(
        st.lists(st.one_of(st.none(), st.integers(0, 3)), min_size=6, max_size=6),
        min_size=2,
        max_size=4,
    ),
    st.sampled_from(["nominal", "ordinal", "interval"]),
)
def test_alpha_with_missing_values_and_more_raters(data: list[list[int | None]], level: str) -> None:
    arr = np.array([[np.nan if v is None else v for v in row] for row in data], dtype=float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its 0/0 comes back as NaN with a RuntimeWarning
            expected = float(krippendorff.alpha(reliability_data=arr, level_of_measurement=level))
    except ValueError:
        expected = math.nan
    if math.isnan(expected):
        with pytest.raises(AgreementUndefined):
            krippendorff_alpha(data, level)
    else:
        assert krippendorff_alpha(data, level) == pytest.approx(expected, abs=1e-9)


@settings(max_examples=100)
@given(label_pairs(), st.lists(st.floats(0, 1), min_size=60, max_size=60))
def test_spearman_equals_scipy(data: tuple[int, list[int], list[int]], scores: list[float]) -> None:
    _, a, _ = data
    judge = [round(s, 1) for s in scores[: len(a)]]  # rounded: ties on the judge's side too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = float(scipy.stats.spearmanr(judge, a).statistic) if len(a) >= 2 else math.nan
    if math.isnan(expected):
        with pytest.raises(AgreementUndefined):
            spearman(judge, a)
    else:
        assert spearman(judge, a) == pytest.approx(expected, abs=1e-9)


def test_hand_computed_2x2_kappa() -> None:
    # 20 both yes, 5 judge yes / human no, 10 judge no / human yes, 15 both no (n = 50):
    # p_o = 35/50 = 0.7; p_e = (30/50)(25/50) + (20/50)(25/50) = 0.5; κ = (0.7 - 0.5) / 0.5 = 0.4
    judge = [1] * 20 + [1] * 5 + [0] * 10 + [0] * 15
    human = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    assert cohen_kappa(judge, human, 2) == pytest.approx(0.4)
    assert confusion(human, judge, 2) == [[15, 5], [10, 20]]


def test_hand_computed_weighted_kappa() -> None:
    # 3 grades, pairs (0,0) (1,2) (2,1) (2,2): quadratic weights 0/1/4.
    # observed Σw·o = 1 + 1 = 2; marginals a = [1,1,2], b = [1,1,2], n = 4;
    # expected Σw·r·c/n = (0·… ) → (1·1·1 + 1·1·1 + 4·1·2 + 4·2·1 + 1·1·2 + 1·2·1) / 4 = 22/4
    a, b = [0, 1, 2, 2], [0, 2, 1, 2]
    assert cohen_kappa(a, b, 3, "quadratic") == pytest.approx(1 - 2 / (22 / 4))


def test_hand_computed_alpha() -> None:
    # Two raters, 4 units, values (1,1) (1,2) (2,2) (2,2): o_11 = 2, o_12 = o_21 = 1, o_22 = 4; n = 8,
    # n_1 = 3, n_2 = 5. Nominal: α = 1 - (n-1) (o_12 + o_21) / (2 n_1 n_2) = 1 - 7·2/30
    assert krippendorff_alpha([[1, 1, 2, 2], [1, 2, 2, 2]], "nominal") == pytest.approx(1 - 14 / 30)


def test_undefined_figures_say_why() -> None:
    with pytest.raises(AgreementUndefined, match="category 1"):
        cohen_kappa([1, 1, 1], [1, 1, 1], 2)
    with pytest.raises(AgreementUndefined, match="every value is 1"):
        krippendorff_alpha([[1, 1], [1, 1]])
    with pytest.raises(AgreementUndefined, match="all equal"):
        spearman([0.2, 0.2, 0.2], [0, 1, 1])
    with pytest.raises(AgreementUndefined):
        mean_bias([], [])


def test_perfect_and_opposite_agreement() -> None:
    assert cohen_kappa([0, 1, 0, 1], [0, 1, 0, 1], 2) == 1.0
    assert cohen_kappa([0, 1, 0, 1], [1, 0, 1, 0], 2) == -1.0
    assert mean_bias([1.0, 0.5], [0.0, 0.5]) == 0.5


def test_bin_score_edges() -> None:
    assert [bin_score(s, 2) for s in (0.0, 0.4999, 0.5, 1.0)] == [0, 0, 1, 1]
    assert [bin_score(s, 5) for s in (0.0, 0.2, 0.39, 0.6, 0.8, 1.0)] == [0, 1, 1, 3, 4, 4]
    for bad in (-0.1, 1.1, math.nan):
        with pytest.raises(ValueError, match="not a number in"):
            bin_score(bad, 2)


def test_bad_labels_are_errors() -> None:
    with pytest.raises(ValueError, match="not a category 0..1"):
        cohen_kappa([0, 2], [0, 1], 2)
    with pytest.raises(ValueError, match="same items"):
        confusion([0], [0, 1], 2)
