"""Agreement between two raters (an LLM judge and people), on scikit-learn, krippendorff and scipy.

* :func:`cohen_kappa`: Cohen's κ over categories ``0 .. levels-1``, unweighted (binary or nominal
  labels) or weighted (``"linear"``, ``"quadratic"``, for graded labels):
  ``sklearn.metrics.cohen_kappa_score`` with every category of the scale as a label.
* :func:`krippendorff_alpha`: Krippendorff's α over reliability data (one row per rater, one column
  per unit, ``None`` where a rater gave no value), ``"nominal"``, ``"ordinal"`` or ``"interval"``:
  ``krippendorff.alpha``.
* :func:`spearman`: Spearman's ρ (ties given their average rank): ``scipy.stats.spearmanr``.
* :func:`mean_bias`: mean of ``a - b``.
* :func:`bin_score`: a judge score in [0, 1] onto a label scale of ``levels`` grades (equal-width
  bins; see there).
* :func:`confusion`: the ``levels × levels`` count table.

What the libraries answer with NaN or a warning — κ when every label and judge bin fall in one
category, α with a single value in the data or no unit rated twice, ρ when one side is constant —
is checked first and raised as :class:`AgreementUndefined` with the reason, never a silent NaN: a
caller reports "undefined: <reason>".

>>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0], levels=2)  # p_o = 0.75, p_e = 0.5
0.5
>>> bin_score(0.5, 2), bin_score(0.49, 2), bin_score(1.0, 5)
(1, 0, 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, cast

import numpy as np

__all__ = [
    "AgreementUndefined",
    "bin_score",
    "cohen_kappa",
    "confusion",
    "krippendorff_alpha",
    "mean_bias",
    "spearman",
]

WEIGHTS = (None, "linear", "quadratic")
ALPHA_LEVELS = ("nominal", "ordinal", "interval")
#: added before flooring in :func:`bin_score`, so 0.6 * 5 lands in bin 3 despite float rounding
_BIN_EPS = 1e-9


class AgreementUndefined(ValueError):
    """The figure has no value on these data (the message says why)."""


def _check_labels(xs: Sequence[int], levels: int, who: str) -> None:
    for x in xs:
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < levels:
            raise ValueError(f"{who}: {x!r} is not a category 0..{levels - 1}")


def confusion(rows: Sequence[int], cols: Sequence[int], levels: int) -> list[list[int]]:
    """``table[i][j]`` = how many pairs have ``rows == i`` and ``cols == j``."""
    from sklearn.metrics import confusion_matrix

    if len(rows) != len(cols):
        raise ValueError(f"{len(rows)} values against {len(cols)}: the raters must rate the same items")
    _check_labels(rows, levels, "rows")
    _check_labels(cols, levels, "cols")
    if not rows:
        return [[0] * levels for _ in range(levels)]
    table = confusion_matrix(list(rows), list(cols), labels=list(range(levels)))
    return [[int(v) for v in r] for r in table]


def cohen_kappa(a: Sequence[int], b: Sequence[int], levels: int, weights: str | None = None) -> float:
    """Cohen's κ of two raters' categories ``0 .. levels-1`` (``weights``: None, linear, quadratic)."""
    from sklearn.metrics import cohen_kappa_score

    if weights not in WEIGHTS:
        raise ValueError(f"weights={weights!r}: use one of {WEIGHTS}")
    table = np.asarray(confusion(a, b, levels), dtype=np.float64)
    n = len(a)
    if n == 0:
        raise AgreementUndefined("no rated pairs")
    # κ = 1 - Σ w·observed / Σ w·expected: undefined when chance disagreement is 0
    idx = np.arange(levels)
    dist = np.abs(idx[:, None] - idx[None, :]).astype(np.float64)
    w = (dist > 0).astype(np.float64) if weights is None else dist if weights == "linear" else dist**2
    if float(np.sum(w * np.outer(table.sum(axis=1), table.sum(axis=0)))) == 0:
        used = sorted({*a, *b})
        raise AgreementUndefined(
            f"both raters put all {n} items in category {used[0]}: chance agreement is 1, κ is 0/0"
            if len(used) == 1
            else "no disagreement is possible under these marginals: κ is 0/0"
        )
    return float(cohen_kappa_score(list(a), list(b), labels=list(range(levels)), weights=weights))


def krippendorff_alpha(data: Sequence[Sequence[float | None]], level: str = "nominal") -> float:
    """Krippendorff's α of reliability data ``data[rater][unit]`` (``None``: no value)."""
    import krippendorff

    if level not in ALPHA_LEVELS:
        raise ValueError(f"level={level!r}: use one of {ALPHA_LEVELS}")
    if not data:
        raise AgreementUndefined("no raters")
    n_units = len(data[0])
    if any(len(r) != n_units for r in data):
        raise ValueError("every rater needs one entry per unit (None where it gave no value)")
    matrix = np.array([[np.nan if v is None else float(v) for v in r] for r in data], dtype=np.float64)
    pairable = matrix[:, np.sum(~np.isnan(matrix), axis=0) >= 2]
    values = np.unique(pairable[~np.isnan(pairable)])
    if values.size == 0:
        raise AgreementUndefined("no unit has two values to compare")
    if values.size < 2:
        raise AgreementUndefined(f"every value is {values[0]:g}: expected disagreement is 0, α is 0/0")
    return float(
        krippendorff.alpha(
            reliability_data=matrix, level_of_measurement=cast("Literal['nominal', 'ordinal', 'interval']", level)
        )
    )


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ of paired values (average ranks for ties)."""
    from scipy.stats import spearmanr

    if len(a) != len(b):
        raise ValueError(f"{len(a)} values against {len(b)}")
    if len(a) < 2:
        raise AgreementUndefined(f"{len(a)} pair(s): ρ needs at least 2")
    for side, xs in (("the judge's scores", a), ("the human labels", b)):
        if len(set(xs)) == 1:
            raise AgreementUndefined(f"{side} are all equal: ρ is 0/0")
    return float(spearmanr(list(a), list(b)).statistic)


def mean_bias(a: Sequence[float], b: Sequence[float]) -> float:
    """Mean of ``a - b`` (positive: ``a`` rates higher)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values against {len(b)}")
    if not a:
        raise AgreementUndefined("no rated pairs")
    return math.fsum(x - y for x, y in zip(a, b)) / len(a)


def bin_score(score: float, levels: int) -> int:
    """The grade of a judge score on a scale of ``levels`` grades: equal-width bins
    ``[k/levels, (k+1)/levels)``, the last one closed at 1 (``min(levels - 1, floor(score · levels))``).
    Binary (``levels=2``): a score of 0.5 or more is 1."""
    if levels < 2:
        raise ValueError(f"levels={levels!r}: a scale needs at least 2 grades")
    if not (isinstance(score, (int, float)) and math.isfinite(score) and 0.0 <= score <= 1.0):
        raise ValueError(f"judge score {score!r} is not a number in [0, 1]")
    return min(levels - 1, int(math.floor(score * levels + _BIN_EPS)))
