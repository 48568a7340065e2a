"""Tests for rag_lab.eval.metrics: hand-computed values, trec_eval equality, bounds under fuzzing."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.metrics import (
    average_precision,
    dedupe_ranking,
    evaluate_retrieval,
    hit_at_k,
    mrr,
    ndcg_at_k,
    precision_at_k,
    recall_at_k,
)

pytrec_eval = pytest.importorskip("pytrec_eval")

KS = (1, 3, 5, 10)
L3 = math.log2(3)

# --------------------------------------------------------------------------- hand-computed


def test_example_from_brief() -> None:
    ranked, gold = ["a", "b", "c"], {"b", "d"}
    assert recall_at_k(ranked, gold, 3) == 0.5
    assert recall_at_k(ranked, gold, 1) == 0.0
    assert precision_at_k(ranked, gold, 3) == pytest.approx(1 / 3)
    assert hit_at_k(ranked, gold, 1) == 0.0
    assert hit_at_k(ranked, gold, 2) == 1.0
    assert mrr(ranked, gold) == 0.5
    assert mrr(ranked, gold, k=1) == 0.0
    assert mrr(ranked, gold, k=2) == 0.5
    assert ndcg_at_k(ranked, gold, 3) == pytest.approx((1 / L3) / (1 + 1 / L3), abs=1e-15)
    assert average_precision(ranked, gold) == 0.25  # (1/2) / |gold|


def test_two_hits_ap_and_ndcg() -> None:
    ranked, gold = ["d", "x", "b", "y"], {"b", "d"}
    assert average_precision(ranked, gold) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert average_precision(ranked, gold, k=2) == pytest.approx(0.5)  # only d counts, / |gold|
    assert ndcg_at_k(ranked, gold, 3) == pytest.approx((1 + 1 / 2) / (1 + 1 / L3))  # log2(4) = 2
    assert ndcg_at_k(ranked, gold, 1) == 1.0
    assert recall_at_k(ranked, gold, 10) == 1.0
    assert precision_at_k(ranked, gold, 10) == 0.2  # divided by k, not by 4 retrieved


def test_perfect_ranking_scores_one() -> None:
    ranked, gold = ["g1", "g2", "n1"], {"g1", "g2"}
    assert ndcg_at_k(ranked, gold, 10) == 1.0
    assert average_precision(ranked, gold) == 1.0
    assert mrr(ranked, gold) == 1.0


def test_ndcg_ideal_is_capped_at_k() -> None:
    # 3 gold ids but k=1: ideal DCG@1 is 1, so a hit at rank 1 scores 1.
    assert ndcg_at_k(["g1"], {"g1", "g2", "g3"}, 1) == 1.0


def test_duplicates_counted_once_first_occurrence_kept() -> None:
    ranked, gold = ["a", "a", "b", "a", "b"], {"b"}
    assert dedupe_ranking(ranked) == ["a", "b"]
    assert mrr(ranked, gold) == 0.5
    assert recall_at_k(ranked, gold, 2) == 1.0
    assert precision_at_k(["b", "b", "b"], gold, 3) == pytest.approx(1 / 3)
    assert average_precision(["b", "b"], {"b", "c"}) == 0.5


def test_no_results_scores_zero() -> None:
    for fn in (recall_at_k, precision_at_k, hit_at_k, ndcg_at_k):
        assert fn([], {"a"}, 5) == 0.0
    assert mrr([], {"a"}) == 0.0
    assert average_precision([], {"a"}) == 0.0


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="gold is empty"):
        recall_at_k(["a"], set(), 1)
    with pytest.raises(ValueError, match=r"k must be an integer >= 1, got 0"):
        precision_at_k(["a"], {"a"}, 0)
    with pytest.raises(ValueError, match="k must be"):
        ndcg_at_k(["a"], {"a"}, True)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="single str"):
        mrr("abc", {"a"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="gold must be"):
        hit_at_k(["a"], "a", 1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- evaluate_retrieval


def test_evaluate_retrieval_policies() -> None:
    qrels = {"q1": {"b", "d"}, "q2": {"x"}, "q3": set()}
    runs = {"q1": ["a", "b", "a", "c"], "q4": ["z"]}  # q2 has no run, q4 has no gold
    report = evaluate_retrieval(runs, qrels, ks=(1, 3))
    assert report.excluded_queries == ["q3", "q4"]
    assert report.n_queries == 2
    df = report.per_query()
    assert list(df.index) == ["q1", "q2"]
    assert df.loc["q1", "n_duplicates"] == 1
    assert df.loc["q1", "n_retrieved"] == 3
    assert df.loc["q1", "n_gold"] == 2
    assert df.loc["q1", "recall@3"] == 0.5
    assert df.loc["q2", "n_retrieved"] == 0
    assert (df.loc["q2", report.metric_names] == 0).all()
    summary = report.summary()
    assert list(summary) == report.metric_names
    assert summary["recall@3"] == 0.25  # (0.5 + 0) / 2: the empty run stays in the mean
    assert summary["mrr"] == 0.25
    assert summary["mrr@1"] == 0.0
    assert summary["map"] == 0.125
    assert summary["ndcg@3"] == pytest.approx(((1 / L3) / (1 + 1 / L3)) / 2)
    assert summary["precision@1"] == 0.0
    assert summary["hit@3"] == 0.5


def test_evaluate_retrieval_nothing_scorable_gives_nan() -> None:
    report = evaluate_retrieval({"q": ["a"]}, {"q": set()}, ks=(5,))
    assert report.excluded_queries == ["q"]
    assert report.per_query().empty
    assert all(math.isnan(v) for v in report.summary().values())


@pytest.mark.parametrize("ks", [(), (0,), (3, 3), (2.5,)])
def test_evaluate_retrieval_rejects_bad_ks(ks: tuple) -> None:
    with pytest.raises(ValueError):
        evaluate_retrieval({}, {"q": {"a"}}, ks=ks)


def test_evaluate_retrieval_rejects_string_run() -> None:
    with pytest.raises(TypeError, match=r"runs\['q'\]"):
        evaluate_retrieval({"q": "abc"}, {"q": {"a"}})  # type: ignore[dict-item]


# --------------------------------------------------------------------------- equality with trec_eval

DOCS = [f"d{i}" for i in range(15)]
TREC_MEASURES = {
    "recall.1,3,5,10",
    "P.1,3,5,10",
    "success.1,3,5,10",
    "ndcg_cut.1,3,5,10",
    "map_cut.1,3,5,10",
    "recip_rank",
    "map",
}


@st.composite
def qrels_and_runs(draw: st.DrawFn) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Random non-empty gold sets and duplicate-free rankings; some queries have no run at all."""
    n = draw(st.integers(1, 6))
    qrels: dict[str, set[str]] = {}
    runs: dict[str, list[str]] = {}
    for i in range(n):
        qid = f"q{i}"
        qrels[qid] = draw(st.sets(st.sampled_from(DOCS), min_size=1, max_size=6))
        mode = draw(st.sampled_from(["run", "run", "run", "empty", "absent"]))
        if mode == "run":
            perm = draw(st.permutations(DOCS))
            runs[qid] = list(perm[: draw(st.integers(1, len(DOCS)))])
        elif mode == "empty":
            runs[qid] = []
    return qrels, runs


def _trec(qrels: dict[str, set[str]], runs: dict[str, list[str]]) -> dict[str, dict[str, float]]:
    """pytrec_eval results; ranks become strictly decreasing scores so no tie-breaking applies."""
    trec_qrels = {q: {d: 1 for d in g} for q, g in qrels.items()}
    trec_run = {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items()}
    return pytrec_eval.RelevanceEvaluator(trec_qrels, TREC_MEASURES).evaluate(trec_run)


def test_pytrec_eval_conventions_we_rely_on() -> None:
    """trec_eval skips queries absent from the run but scores an empty run as 0."""
    res = _trec({"q1": {"a"}, "q2": {"a"}, "q3": {"a"}}, {"q1": ["a"], "q2": [], "q4": ["a"]})
    assert set(res) == {"q1", "q2"}  # q3 (no run) and q4 (no qrels) are left out
    assert res["q2"]["recip_rank"] == 0.0 and res["q2"]["map"] == 0.0


@settings(max_examples=150)
@given(qrels_and_runs())
def test_equal_to_pytrec_eval(data: tuple[dict[str, set[str]], dict[str, list[str]]]) -> None:
    qrels, runs = data
    trec = _trec(qrels, runs)
    report = evaluate_retrieval(runs, qrels, ks=KS)
    assert report.excluded_queries == []
    df = report.per_query()
    for qid in qrels:
        row = df.loc[qid]
        if qid not in trec:
            # trec_eval drops queries absent from the run; our policy scores them 0 and keeps them.
            assert qid not in runs
            assert (row[report.metric_names] == 0).all()
            continue
        t = trec[qid]
        for k in KS:
            assert row[f"recall@{k}"] == pytest.approx(t[f"recall_{k}"], abs=1e-9)
            assert row[f"precision@{k}"] == pytest.approx(t[f"P_{k}"], abs=1e-9)
            assert row[f"hit@{k}"] == pytest.approx(t[f"success_{k}"], abs=1e-9)
            assert row[f"ndcg@{k}"] == pytest.approx(t[f"ndcg_cut_{k}"], abs=1e-9)
            ap_k = average_precision(runs[qid], qrels[qid], k)
            assert ap_k == pytest.approx(t[f"map_cut_{k}"], abs=1e-9)
        assert row["mrr"] == pytest.approx(t["recip_rank"], abs=1e-9)
        assert row["map"] == pytest.approx(t["map"], abs=1e-9)
    # Means: trec_eval's per-query values, with 0 for the queries it leaves out, over all queries.
    summary = report.summary()
    n = len(qrels)
    for ours, theirs in [("map", "map"), ("mrr", "recip_rank"), ("ndcg@10", "ndcg_cut_10"), ("recall@5", "recall_5")]:
        expected = sum(trec[q][theirs] for q in trec) / n
        assert summary[ours] == pytest.approx(expected, abs=1e-9)


# --------------------------------------------------------------------------- fuzzing with duplicates

ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@settings(max_examples=300)
@given(st.lists(ids, max_size=20), st.sets(ids, min_size=1), st.integers(1, 12))
def test_bounds_and_duplicate_invariance(ranked: list[str], gold: set[str], k: int) -> None:
    deduped = dedupe_ranking(ranked)
    assert len(set(deduped)) == len(deduped) == len(set(ranked))
    values = {
        "recall": recall_at_k(ranked, gold, k),
        "precision": precision_at_k(ranked, gold, k),
        "hit": hit_at_k(ranked, gold, k),
        "ndcg": ndcg_at_k(ranked, gold, k),
        "mrr_k": mrr(ranked, gold, k),
        "mrr": mrr(ranked, gold),
        "ap": average_precision(ranked, gold),
        "ap_k": average_precision(ranked, gold, k),
    }
    for name, v in values.items():
        assert 0.0 <= v <= 1.0, (name, v)
    assert values["recall"] == recall_at_k(deduped, gold, k)
    assert values["ndcg"] == ndcg_at_k(deduped, gold, k)
    assert values["ap"] == average_precision(deduped, gold)
    # Orderings that hold for any ranking.
    assert recall_at_k(ranked, gold, k) <= recall_at_k(ranked, gold, k + 1)
    assert (values["hit"] > 0) == (values["recall"] > 0) == (values["mrr_k"] > 0)
    assert values["mrr_k"] <= values["mrr"]
    assert values["ap_k"] <= values["ap"]


@settings(max_examples=50)
@given(
    st.dictionaries(st.sampled_from(["q1", "q2", "q3"]), st.lists(ids, max_size=8)),
    st.dictionaries(st.sampled_from(["q1", "q2", "q3", "q4"]), st.sets(ids, max_size=3)),
)
def test_report_bounds_and_exclusions(runs: dict[str, list[str]], qrels: dict[str, set[str]]) -> None:
    report = evaluate_retrieval(runs, qrels, ks=(1, 5))
    expected_excluded = [q for q, g in qrels.items() if not g] + [q for q in runs if q not in qrels]
    assert report.excluded_queries == expected_excluded
    assert report.n_queries == sum(1 for g in qrels.values() if g)
    for v in report.summary().values():
        assert math.isnan(v) if report.n_queries == 0 else 0.0 <= v <= 1.0
