"""Which configs of a fast sweep are re-run on the full pipeline, and how likely a wrong fast
evaluator would go unseen.

The fast evaluator scores every config from captured stage inputs; the pipeline re-runs a subset
and any disagreement stops the sweep. The subset (:func:`check_plan`):

* always the ``top`` best configs by the objective (the reported best among them: what a user acts
  on is never left unchecked);
* plus a seeded random sample of the others, sized so that a disagreement affecting at least
  ``share`` of the configs (at least one) is missed with probability at most ``miss``. Sampling
  ``s`` of the ``pool`` remaining configs without replacement misses all ``b`` bad ones with the
  hypergeometric probability ``C(pool - b, s) / C(pool, s)``; the plan takes the smallest ``s``
  that brings it to ``miss`` or below, and states the probability it reached;
* or every config (``check="all"``), or the top plus exactly ``N`` random ones (``check=N``).

>>> plan = check_plan(27, list(range(27)), "auto", share=0.05, miss=0.01, top=3, seed=0)
>>> len(plan.indices), plan.bad, round(plan.miss_probability, 4)
(25, 2, 0.0036)
>>> check_plan(540, list(range(540)), "auto", seed=1).describe()
'the top 3 and 83 sampled of 540 configs: a disagreement in >= 5 % of the configs (27) goes unseen with probability 0.95 %'
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["CheckPlan", "SCORE_REL_TOL", "check_plan", "miss_probability", "sample_size"]

#: final scores of the fast evaluator and the pipeline agree to this relative tolerance (both
#: compute the same float64 formulas; the vectorised composite may sum in another order)
SCORE_REL_TOL = 1e-9


def miss_probability(pool: int, bad: int, sample: int) -> float:
    """Probability that ``sample`` configs drawn without replacement from ``pool`` include none of
    the ``bad`` ones: ``C(pool - bad, sample) / C(pool, sample)``."""
    if bad <= 0:
        return 1.0
    if sample > pool - bad:
        return 0.0
    p = 1.0
    for i in range(sample):
        p *= (pool - bad - i) / (pool - i)
    return p


def sample_size(pool: int, bad: int, miss: float) -> int:
    """The fewest draws from ``pool`` that miss all ``bad`` configs with probability <= ``miss``."""
    for s in range(pool + 1):
        if miss_probability(pool, bad, s) <= miss:
            return s
    return pool


@dataclass(frozen=True)
class CheckPlan:
    indices: list[int]  # the configs to re-run, ascending
    n_configs: int
    n_top: int
    n_sampled: int
    mode: str  # "auto" | "all" | "fixed"
    share: float
    bad: int  # the number of bad configs the auto sample is sized for
    miss_probability: float  # of missing ``bad`` bad configs among the not-top ones

    def describe(self) -> str:
        if self.mode == "all" or len(self.indices) == self.n_configs:
            return f"all {self.n_configs} configs"
        head = f"the top {self.n_top} and {self.n_sampled} sampled of {self.n_configs} configs"
        return (
            f"{head}: a disagreement in >= {self.share * 100:g} % of the configs ({self.bad}) goes unseen with "
            f"probability {self.miss_probability * 100:.2g} %"
        )


def check_plan(
    n_configs: int,
    ranked: Sequence[int],
    check: int | str = "auto",
    *,
    share: float = 0.05,
    miss: float = 0.01,
    top: int = 3,
    seed: int = 0,
) -> CheckPlan:
    """The configs to re-run: ``ranked`` lists config indices best first (by the objective)."""
    if not 0 < share <= 1:
        raise ValueError(f"check share {share!r} must be in (0, 1]")
    if not 0 < miss < 1:
        raise ValueError(f"check miss probability {miss!r} must be in (0, 1)")
    if top < 0:
        raise ValueError(f"check top {top!r} must be >= 0")
    bad = max(1, math.ceil(share * n_configs - 1e-9)) if n_configs else 0
    if check == "all":
        idx = list(range(n_configs))
        return CheckPlan(idx, n_configs, n_configs, 0, "all", share, bad, 0.0)
    head = list(dict.fromkeys(ranked))[: min(top, n_configs)]
    rest = [i for i in range(n_configs) if i not in set(head)]
    if check == "auto":
        n = sample_size(len(rest), min(bad, len(rest)), miss)
        mode = "auto"
    else:
        if isinstance(check, bool) or not isinstance(check, int) or check < 0:
            raise ValueError(f"--check must be 'auto', 'all' or an integer >= 0, got {check!r}")
        n = min(check, len(rest))
        mode = "fixed"
    sampled = random.Random(seed).sample(rest, n)
    return CheckPlan(
        sorted([*head, *sampled]),
        n_configs,
        len(head),
        n,
        mode,
        share,
        bad,
        miss_probability(len(rest), min(bad, len(rest)), n),
    )


def parse_check(text: str) -> int | str:
    """``--check``: ``auto``, ``all`` or a number of random configs on top of the best ones."""
    t = str(text).strip().lower()
    if t in ("auto", "all"):
        return t
    if t.isdigit():
        return int(t)
    raise ValueError(f"--check {text!r}: use 'auto', 'all' or an integer >= 0")
