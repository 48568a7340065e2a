"""The paired statistics of the regression gate and of the held-out check, on ``scipy.stats``.

For the per-question differences ``d = current - baseline`` of one check, :func:`paired_test`
gives three one-sided p-values of the mean difference and its confidence interval:

* ``p_drop``: H0 ``mean(d) >= 0`` against a drop;
* ``p_up``: H0 ``mean(d) <= 0`` against a rise;
* ``p_ni`` (non-inferiority): H0 ``mean(d) <= -tolerance``, i.e. the data rule out a drop of the
  tolerance when it is small. It is the test of ``d + tolerance`` against a rise.

``test="permutation"`` is the sign-flip permutation test (``scipy.stats.permutation_test`` with
``permutation_type="samples"`` on one sample: exact over the ``2^n`` sign vectors while they
number at most ``n_resamples``, else ``n_resamples`` random flips from ``seed`` and ``p = (1 +
hits) / (1 + n_resamples)``); ``test="bootstrap"`` reads all three from one percentile bootstrap
of the mean (``scipy.stats.bootstrap``): the share of resampled means on the wrong side of the
bound, with the same +1 correction. The interval is the percentile bootstrap interval in both cases.

:func:`holm_adjust` corrects a family of p-values (Holm's step-down), and
:func:`questions_to_settle` says how many questions an inconclusive check would need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from scipy import stats

TESTS = ("permutation", "bootstrap")


@dataclass(frozen=True)
class PairedTest:
    """The one-sided p-values and the confidence interval of ``mean(d)`` (see the module doc)."""

    p_drop: float
    p_up: float
    p_ni: float
    ci: tuple[float, float]


def _diffs(diffs: Sequence[float]) -> np.ndarray:
    d = np.asarray(list(diffs), dtype=np.float64)
    if d.ndim != 1 or not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be a finite 1-D sequence")
    return d


def _sign_flip(d: np.ndarray, alternative: str, n_resamples: int, seed: int) -> float:
    if d.size == 1:  # scipy wants two observations: the two sign vectors of one, exactly
        null = np.array([abs(d[0]), -abs(d[0])])
        return float(np.mean(null <= d[0] if alternative == "less" else null >= d[0]))
    res = stats.permutation_test(
        (d,),
        np.mean,
        permutation_type="samples",
        alternative=alternative,
        n_resamples=n_resamples,
        vectorized=True,
        rng=seed,
    )
    return float(res.pvalue)


def _bootstrap_means(
    d: np.ndarray, level: float, n_resamples: int, seed: int
) -> tuple[np.ndarray, tuple[float, float]]:
    if d.size < 2:  # one question: every resample is that question
        return np.full(n_resamples, d[0]), (float(d[0]), float(d[0]))
    res = stats.bootstrap(
        (d,), np.mean, n_resamples=n_resamples, confidence_level=level, method="percentile", rng=seed, vectorized=True
    )
    ci = res.confidence_interval
    return np.asarray(res.bootstrap_distribution), (float(ci.low), float(ci.high))


def paired_test(
    diffs: Sequence[float],
    tolerance: float = 0.0,
    *,
    test: str = "permutation",
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
) -> PairedTest:
    """:class:`PairedTest` of the paired differences ``diffs`` (finite; at least one).

    >>> t = paired_test([-1.0, -1.0, -1.0], 0.02)
    >>> t.p_drop, t.p_up, t.ci  # the 8 sign vectors: only the observed one is as low
    (0.125, 1.0, (-1.0, -1.0))
    """
    if test not in TESTS:
        raise ValueError(f"test={test!r}: use 'permutation' or 'bootstrap'")
    d = _diffs(diffs)
    if d.size == 0:
        raise ValueError("paired test of no pairs")
    means, ci = _bootstrap_means(d, level, n_resamples, seed)
    if test == "bootstrap":
        b = means.size + 1

        def share(hits: np.ndarray) -> float:
            return float((1 + np.count_nonzero(hits)) / b)

        return PairedTest(share(means >= 0), share(means <= 0), share(means <= -tolerance), ci)
    return PairedTest(
        _sign_flip(d, "less", n_resamples, seed),
        _sign_flip(d, "greater", n_resamples, seed),
        _sign_flip(d + tolerance, "greater", n_resamples, seed),
        ci,
    )


def effect_size(diffs: Sequence[float]) -> float:
    """Cohen's d_z of paired differences: mean / SD (ddof 1). 0 when nothing changed; NaN when
    fewer than two pairs or every difference is the same non-zero value (SD 0)."""
    d = _diffs(diffs)
    if d.size and not np.any(d):
        return 0.0
    if d.size < 2:
        return math.nan
    sd = float(d.std(ddof=1))
    return float(d.mean() / sd) if sd > 0 else math.nan


def questions_to_settle(
    diffs: Sequence[float], tolerance: float, level: float, power: float = 0.8, test: str = "permutation"
) -> int | None:
    """About how many questions, with changes like ``diffs``, would let the non-inferiority test
    reach ``p < level`` with probability ``power``: ``ceil(((z_{1-level} + z_power) * SD / (mean +
    tolerance))^2)`` (normal approximation), and never fewer than the sign-flip test needs to reach
    ``level`` at all (``2^-n < level``). None when the mean drop is the tolerance or more (no number
    of questions rules it out).

    >>> questions_to_settle([-0.01, 0.01] * 5, 0.02, 0.05)  # SD 0.0105, mean 0: 2 questions; 5 for 2^-n
    5
    """
    d = _diffs(diffs)
    margin = float(d.mean()) + tolerance if d.size else math.nan
    if not margin > 0:
        return None
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    z = NormalDist()
    approx = math.ceil(((z.inv_cdf(1 - level) + z.inv_cdf(power)) * sd / margin) ** 2)
    floor = math.floor(math.log2(1 / level)) + 1 if test == "permutation" else 2
    return max(approx, floor)


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (family-wise error at the level compared):
    sorted ascending, ``adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))`` (1-based ``j``),
    returned in the input order. NaN entries stay NaN and do not count in ``m``.

    >>> holm_adjust([0.01, 0.04, 0.03, 0.5])
    [0.04, 0.09, 0.09, 0.5]
    """
    idx = [i for i, p in enumerate(pvalues) if math.isfinite(p)]
    out = [math.nan] * len(pvalues)
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: (pvalues[i], i))):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        out[i] = running
    return out
