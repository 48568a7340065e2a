"""The sweep's pipeline check with a known catch rate: which configs are re-run
(:func:`check_plan`: the best ones always, a sample sized for a stated miss probability), the
miss probability itself (against brute-force enumeration), and :meth:`FastSweep.verify`
comparing ids, texts, scores and metrics, failing on every disagreement whatever the seed."""

from __future__ import annotations

import asyncio
import itertools
import math
from dataclasses import dataclass, field
from math import comb
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.records import QueryRecord
from rag_lab.eval.sweep import SweepError
from rag_lab.eval.sweep.fast import FastSweep
from rag_lab.eval.sweep.verify import check_plan, miss_probability, parse_check, sample_size


@settings(max_examples=60)
@given(st.integers(1, 9), st.data())
def test_miss_probability_equals_enumeration(pool: int, data: st.DataObject) -> None:
    bad = data.draw(st.integers(0, pool))
    sample = data.draw(st.integers(0, pool))
    subsets = list(itertools.combinations(range(pool), sample))
    missed = sum(1 for s in subsets if not set(s) & set(range(bad)))  # the first `bad` ones are bad
    assert miss_probability(pool, bad, sample) == pytest.approx(missed / len(subsets))
    assert miss_probability(pool, bad, sample) == pytest.approx(
        comb(pool - bad, sample) / comb(pool, sample) if bad else 1.0
    )


@settings(max_examples=60)
@given(st.integers(1, 300), st.integers(1, 30), st.sampled_from([0.001, 0.01, 0.05, 0.2]))
def test_sample_size_is_the_smallest_that_reaches_the_miss_probability(pool: int, bad: int, miss: float) -> None:
    bad = min(bad, pool)
    s = sample_size(pool, bad, miss)
    assert miss_probability(pool, bad, s) <= miss
    assert s == 0 or miss_probability(pool, bad, s - 1) > miss


def test_three_disagreeing_configs_of_27_are_caught_with_every_seed() -> None:
    """27 configs, 3 of them wrong, anywhere: the plan leaves at most 2 configs unchecked, so no
    seed and no placement can hide all three."""
    for seed in range(100):
        plan = check_plan(27, list(range(27)), "auto", seed=seed)
        unchecked = set(range(27)) - set(plan.indices)
        assert len(unchecked) <= 2, (seed, unchecked)  # so every 3 bad configs include a checked one
    assert check_plan(27, list(range(27)), "auto").describe() == (
        "the top 3 and 22 sampled of 27 configs: a disagreement in >= 5 % of the configs (2) goes unseen with "
        "probability 0.36 %"
    )


def test_plan_always_holds_the_best_configs_and_sizes_the_sample() -> None:
    ranked = [7, 3, 9, 0, 1, 2, 4, 5, 6, 8]
    plan = check_plan(10, ranked, 0, seed=4)
    assert plan.indices == [3, 7, 9] and plan.mode == "fixed"  # the top 3, nothing sampled
    assert set(check_plan(10, ranked, 2, seed=4).indices) >= {3, 7, 9}
    assert check_plan(10, ranked, "all").indices == list(range(10)) and check_plan(10, ranked, "all").describe() == (
        "all 10 configs"
    )
    big = check_plan(540, list(range(540)), "auto", seed=0)
    assert (big.n_top, big.bad, len(big.indices)) == (3, 27, 3 + big.n_sampled)
    assert big.miss_probability <= 0.01 < miss_probability(537, 27, big.n_sampled - 1)
    tight = check_plan(540, list(range(540)), "auto", share=0.01, miss=0.001)
    assert tight.n_sampled > big.n_sampled and tight.bad == 6
    assert check_plan(540, list(range(540)), "auto", seed=1).indices != big.indices  # seeded sample
    assert check_plan(540, list(range(540)), "auto", seed=0).indices == big.indices
    with pytest.raises(ValueError, match="share"):
        check_plan(5, [0], share=0)
    assert parse_check("ALL") == "all" and parse_check("7") == 7
    with pytest.raises(ValueError, match="'auto', 'all' or an integer"):
        parse_check("-1")


# --------------------------------------------------------------------------- verify against a fake pipeline


@dataclass
class _Res:
    records: list[QueryRecord]
    metrics: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        return dict(self.metrics)


@dataclass
class _Suite:
    name: str = "s"


class _Ev:
    """The parts of the sweep's evaluator that :class:`FastSweep` uses to verify."""

    objective = "ndcg@10"

    def __init__(self, n: int, bad: set[int], score_only: bool = False) -> None:
        self.rows = [{"ndcg@10": 0.5 + 0.01 * i, "latency_ms": 1.0} for i in range(n)]
        self.bad, self.score_only = bad, score_only
        self.pipeline_runs: list[int] = []

    async def pipeline_results(self, config: dict[str, Any]) -> list[tuple[_Suite, _Res]]:
        i = int(config["i"])
        self.pipeline_runs.append(i)
        rec = _record(i)
        if i in self.bad:
            if self.score_only:
                rec.context_scores = [rec.context_scores[0] * (1 + 1e-6), *rec.context_scores[1:]]
            else:
                rec.context_ids = rec.context_ids[:-1]
        return [(_Suite(), _Res([rec], {"ndcg@10": self.rows[i]["ndcg@10"]}))]


def _record(i: int) -> QueryRecord:
    return QueryRecord(
        "q1", "?", ["d1"], [], ["d1", "d2"], [f"c{i}", "c9"], ["d1", "d2"], ["a", "b"], context_scores=[0.8, 0.5]
    )


def _sweep(n: int, bad: set[int], seed: int, check: int | str = "auto", **kw: Any) -> tuple[FastSweep, _Ev]:
    ev = _Ev(n, bad, **kw)
    fs = FastSweep(ev, check=check, seed=seed)  # type: ignore[arg-type]
    for i in range(n):
        fs.fast_records[i] = ({"i": i}, [(_Suite(), _Res([_record(i)], {"ndcg@10": ev.rows[i]["ndcg@10"]}))])
    return fs, ev


@pytest.mark.parametrize("seed", range(8))
def test_verify_fails_on_three_bad_configs_of_27_with_every_seed(seed: int) -> None:
    fs, ev = _sweep(27, {4, 11, 19}, seed)
    with pytest.raises(SweepError, match=r"disagree on \d of 25 checked configs \(nothing written\)") as exc:
        asyncio.run(fs.verify())
    assert "context_ids" in str(exc.value) and "config {'i': " in str(exc.value)
    assert {26, 25, 24} <= set(ev.pipeline_runs)  # the best three (highest ndcg@10) always


def test_verify_compares_scores_and_marks_checked_rows() -> None:
    fs, _ = _sweep(6, {5}, 0, check="all", score_only=True)
    with pytest.raises(SweepError, match="context_scores"):
        asyncio.run(fs.verify())
    ok, ev = _sweep(6, set(), 0, check="all")
    assert asyncio.run(ok.verify()) == list(range(6))
    assert {r["evaluated_by"] for r in ev.rows} == {"fast, checked"}
    assert ok.plan.describe() == "all 6 configs"
    # scores equal up to float noise are the same
    noise, _ = _sweep(3, set(), 0, check="all")
    rec = noise.fast_records[0][1][0][1].records[0]
    rec.context_scores = [math.nextafter(rec.context_scores[0], 1.0), rec.context_scores[1]]
    assert asyncio.run(noise.verify()) == [0, 1, 2]


def test_check_plan_boundaries_pinned_against_mutants() -> None:
    """Survivors of the sweep_verify mutation run, each pinned by a value."""
    r = list(range(27))
    assert check_plan(27, r) == check_plan(27, r, "auto", share=0.05, miss=0.01, top=3, seed=0)  # the defaults
    assert check_plan(27, r).mode == "auto" and parse_check("auto") == "auto"
    assert check_plan(10, list(range(10)), share=1.0).bad == 10  # share 1 is allowed
    assert check_plan(10, list(range(10)), share=0.05).bad == 1  # at least one bad config
    assert check_plan(0, []).indices == [] and check_plan(0, []).bad == 0
    every = check_plan(5, [4, 3, 2, 1, 0], "all")
    assert (every.n_top, every.n_sampled, every.bad, every.mode) == (5, 0, 1, "all")
    assert check_plan(3, [0, 1, 2]).describe() == "all 3 configs"  # the top 3 are every config
    assert sample_size(2, 1, 0.5) == 1  # miss probability exactly at the target is enough
    with pytest.raises(ValueError, match=r"check miss probability 0 must be in \(0, 1\)"):
        check_plan(5, [0], miss=0)
    with pytest.raises(ValueError, match="check top -1 must be >= 0"):
        check_plan(5, [0], top=-1)
    for bad in (True, 1.5, -2):
        with pytest.raises(ValueError, match=r"--check must be 'auto', 'all' or an integer >= 0, got"):
            check_plan(5, [0], bad)  # type: ignore[arg-type]
