"""Agreement between two raters (an LLM judge and people) as pure functions over plain lists.

* :func:`cohen_kappa`: Cohen's κ over categories ``0 .. levels-1``, unweighted (binary or nominal
  labels) or weighted (``"linear"``: disagreement ``|i - j|``, ``"quadratic"``: ``(i - j)²``, for
  graded labels). ``κ = 1 - Σ w·observed / Σ w·expected``, expected from the two raters' marginals.
* :func:`krippendorff_alpha`: Krippendorff's α over reliability data (one row per rater, one column
  per unit, ``None`` where a rater gave no value), ``"nominal"``, ``"ordinal"`` or ``"interval"``.
  ``α = 1 - (n - 1) Σ o_ck δ²_ck / Σ n_c n_k δ²_ck`` from the coincidence matrix ``o`` of the
  pairable values (units with at least two values).
* :func:`spearman`: Spearman's ρ (Pearson's r of the ranks, ties given their average rank).
* :func:`mean_bias`: mean of ``a - b``.
* :func:`bin_score`: a judge score in [0, 1] onto a label scale of ``levels`` grades (equal-width
  bins; see there).
* :func:`confusion`: the ``levels × levels`` count table.

When a figure is undefined (κ when every label and judge bin fall in one category, α with a single
value in the data, ρ when one side is constant) the function raises :class:`AgreementUndefined`
with the reason, never a silent NaN: a caller reports "undefined: <reason>".

>>> cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0], levels=2)  # p_o = 0.75, p_e = 0.5
0.5
>>> bin_score(0.5, 2), bin_score(0.49, 2), bin_score(1.0, 5)
(1, 0, 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    if len(rows) != len(cols):
        raise ValueError(f"{len(rows)} values against {len(cols)}: the raters must rate the same items")
    _check_labels(rows, levels, "rows")
    _check_labels(cols, levels, "cols")
    table = [[0] * levels for _ in range(levels)]
    for r, c in zip(rows, cols):
        table[r][c] += 1
    return table


def cohen_kappa(a: Sequence[int], b: Sequence[int], levels: int, weights: str | None = None) -> float:
    """Cohen's κ of two raters' categories ``0 .. levels-1`` (``weights``: None, linear, quadratic)."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights={weights!r}: use one of {WEIGHTS}")
    table = confusion(a, b, levels)
    n = len(a)
    if n == 0:
        raise AgreementUndefined("no rated pairs")
    row = [sum(r) for r in table]
    col = [sum(table[i][j] for i in range(levels)) for j in range(levels)]

    def w(i: int, j: int) -> float:
        if weights is None:
            return 0.0 if i == j else 1.0
        d = abs(i - j)
        return float(d) if weights == "linear" else float(d * d)

    observed = sum(w(i, j) * table[i][j] for i in range(levels) for j in range(levels))
    expected = sum(w(i, j) * row[i] * col[j] for i in range(levels) for j in range(levels)) / n
    if expected == 0:
        used = sorted({*a, *b})
        raise AgreementUndefined(
            f"both raters put all {n} items in category {used[0]}: chance agreement is 1, κ is 0/0"
            if len(used) == 1
            else "no disagreement is possible under these marginals: κ is 0/0"
        )
    return 1.0 - observed / expected


def _delta2(kind: str, c: float, k: float, counts: dict[float, float], values: list[float]) -> float:
    if kind == "nominal":
        return 0.0 if c == k else 1.0
    if kind == "interval":
        return (c - k) ** 2
    lo, hi = (c, k) if c <= k else (k, c)
    between = sum(counts[g] for g in values if lo <= g <= hi)
    return (between - (counts[c] + counts[k]) / 2.0) ** 2


def krippendorff_alpha(data: Sequence[Sequence[float | None]], level: str = "nominal") -> float:
    """Krippendorff's α of reliability data ``data[rater][unit]`` (``None``: no value)."""
    if level not in ALPHA_LEVELS:
        raise ValueError(f"level={level!r}: use one of {ALPHA_LEVELS}")
    if not data:
        raise AgreementUndefined("no raters")
    n_units = len(data[0])
    if any(len(r) != n_units for r in data):
        raise ValueError("every rater needs one entry per unit (None where it gave no value)")
    coincidence: dict[tuple[float, float], float] = {}
    for u in range(n_units):
        vals = [float(r[u]) for r in data if r[u] is not None]  # type: ignore[arg-type]
        m = len(vals)
        if m < 2:
            continue
        for i, c in enumerate(vals):
            for j, k in enumerate(vals):
                if i != j:
                    coincidence[(c, k)] = coincidence.get((c, k), 0.0) + 1.0 / (m - 1)
    values = sorted({c for c, _ in coincidence})
    counts = {c: sum(v for (x, _), v in coincidence.items() if x == c) for c in values}
    n = sum(counts.values())
    if n == 0:
        raise AgreementUndefined("no unit has two values to compare")
    if len(values) < 2:
        raise AgreementUndefined(f"every value is {values[0]:g}: expected disagreement is 0, α is 0/0")
    d_obs = sum(v * _delta2(level, c, k, counts, values) for (c, k), v in coincidence.items())
    d_exp = sum(counts[c] * counts[k] * _delta2(level, c, k, counts, values) for c in values for k in values)
    return 1.0 - (n - 1) * d_obs / d_exp


def _ranks(xs: Sequence[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's ρ of paired values (average ranks for ties)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} values against {len(b)}")
    if len(a) < 2:
        raise AgreementUndefined(f"{len(a)} pair(s): ρ needs at least 2")
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    sab = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    saa = sum((x - ma) ** 2 for x in ra)
    sbb = sum((y - mb) ** 2 for y in rb)
    if saa == 0 or sbb == 0:
        side = "the judge's scores" if saa == 0 else "the human labels"
        raise AgreementUndefined(f"{side} are all equal: ρ is 0/0")
    return sab / math.sqrt(saa * sbb)


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
