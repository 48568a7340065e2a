"""Paired tests of the regression gate: sign-flip permutation and bootstrap p-values of a mean
difference, its bootstrap confidence interval, Cohen's d_z, and what a slice of ``n`` questions
can detect (:func:`min_queries_to_detect`, :func:`detectable_effect`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

EXACT_PERMUTATION_MAX_N = 16


def _diffs(diffs: Sequence[float]) -> np.ndarray:
    d = np.asarray(list(diffs), dtype=np.float64)
    if d.ndim != 1 or not np.all(np.isfinite(d)):
        raise ValueError("paired differences must be a finite 1-D sequence")
    return d


def paired_permutation_pvalue(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """One-sided p-value of ``mean(diffs) < 0`` under sign symmetry (sign-flip permutation test).

    ``p = P(mean of randomly signed diffs <= observed mean)``; exact enumeration for n <= 16,
    else ``(1 + hits) / (1 + n_resamples)`` with a ``numpy`` generator seeded by ``seed``.
    Returns 1.0 for no pairs.
    """
    d = _diffs(diffs)
    n = d.size
    if n == 0:
        return 1.0
    observed = d.mean()
    eps = 1e-12 * max(1.0, float(np.abs(d).max()))
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = signs @ np.abs(d) / n
        return float(np.mean(means <= observed + eps))
    rng = np.random.default_rng(seed)
    hits = 0
    done = 0
    while done < n_resamples:
        b = min(2000, n_resamples - done)
        signs = rng.choice((-1.0, 1.0), size=(b, n))
        hits += int(np.sum(signs @ np.abs(d) / n <= observed + eps))
        done += b
    return (1 + hits) / (1 + n_resamples)


def _bootstrap_means(d: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty(n_resamples)
    done = 0
    while done < n_resamples:
        b = min(2000, n_resamples - done)
        out[done : done + b] = d[rng.integers(0, d.size, size=(b, d.size))].mean(axis=1)
        done += b
    return out


def paired_bootstrap_pvalue(diffs: Sequence[float], n_resamples: int = 10_000, seed: int = 0) -> float:
    """One-sided bootstrap p-value of ``mean(diffs) < 0``: the share of resampled means (queries
    drawn with replacement) that are ``>= 0``, with the +1 correction. 1.0 for no pairs or all 0."""
    d = _diffs(diffs)
    if d.size == 0 or not np.any(d):
        return 1.0
    hits = int(np.sum(_bootstrap_means(d, n_resamples, seed) >= 0))
    return (1 + hits) / (1 + n_resamples)


def bootstrap_ci(
    diffs: Sequence[float], level: float = 0.95, n_resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of ``mean(diffs)`` (queries resampled with
    replacement). ``(0, 0)`` when every difference is 0, ``(nan, nan)`` for no pairs."""
    d = _diffs(diffs)
    if d.size == 0:
        return (math.nan, math.nan)
    if not np.any(d):
        return (0.0, 0.0)
    means = _bootstrap_means(d, n_resamples, seed)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi))


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


def min_queries_to_detect(n: int, alpha: float = 0.05, test: str = "permutation") -> int | None:
    """The fewest of ``n`` questions that must all get worse (by the same amount, the others
    unchanged) for the one-sided test to give ``p < alpha``; None when even all ``n`` are not enough.

    Permutation: the ``k`` drops are the only non-zero differences, so ``p = 2^-k``. Bootstrap:
    a resample has mean >= 0 only when it draws none of them, ``p ≈ (1 - k/n)^n``.
    """
    for k in range(1, n + 1):
        p = 2.0**-k if test == "permutation" else (1 - k / n) ** n
        if p < alpha:
            return k
    return None


def detectable_effect(baseline_values: Sequence[float], alpha: float = 0.05, power: float = 0.8) -> float:
    """Minimum detectable mean drop (normal approximation of a one-sided paired test) when the
    per-question changes are as variable as the metric across the baseline's questions:
    ``(z_{1-alpha} + z_power) * SD / sqrt(n)``. NaN for fewer than two valid values."""
    v = np.asarray([x for x in baseline_values if math.isfinite(x)], dtype=np.float64)
    if v.size < 2:
        return math.nan
    z = NormalDist()
    return float((z.inv_cdf(1 - alpha) + z.inv_cdf(power)) * v.std(ddof=1) / math.sqrt(v.size))


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
