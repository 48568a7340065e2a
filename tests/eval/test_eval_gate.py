"""Regression gate: paired tests, comparison rules, NaN handling, a planted regression on the real
pipeline, and the committed baseline (reproducible spec, metrics equal to pytrec_eval)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.gate import (
    GateError,
    GatePolicy,
    compare_reports,
    evaluate_spec,
    paired_bootstrap_pvalue,
    paired_permutation_pvalue,
    parse_metric_tolerances,
    run_gate,
)
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, SuiteResult, load_report, write_report
from rag_lab.eval.runner import QueryRecord

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "reports" / "baseline.json"


# --------------------------------------------------------------------------- paired tests


def test_exact_permutation_pvalues() -> None:
    assert paired_permutation_pvalue([-1.0, -1.0, -1.0]) == 1 / 8  # only the observed signs are as low
    assert paired_permutation_pvalue([-1.0, -1.0, 0.0]) == 2 / 8  # the zero's sign does not matter
    assert paired_permutation_pvalue([0.0, 0.0]) == 1.0
    assert paired_permutation_pvalue([]) == 1.0
    assert paired_permutation_pvalue([1.0, 1.0, 1.0]) == 1.0
    # -2, +1: sign vectors with mean <= -0.5 are (-2, +1) and (-2, -1): 2 of 4
    assert paired_permutation_pvalue([-2.0, 1.0]) == 0.5


def _brute(d: list[float]) -> float:
    obs = sum(d) / len(d)
    means = [sum(s * abs(x) for s, x in zip(signs, d)) / len(d) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(m <= obs + 1e-12 for m in means) / len(means)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.25, 1.0]), min_size=1, max_size=9))
def test_permutation_pvalue_matches_brute_force(d: list[float]) -> None:
    p = paired_permutation_pvalue(d)
    assert p == pytest.approx(_brute(d))
    assert 0 < p <= 1


def test_monte_carlo_permutation_and_bootstrap_are_seeded() -> None:
    rng = np.random.default_rng(1)
    d = list(rng.normal(-0.2, 0.5, size=40))
    p1 = paired_permutation_pvalue(d, n_resamples=4000, seed=7)
    assert p1 == paired_permutation_pvalue(d, n_resamples=4000, seed=7)
    assert 0 < p1 < 0.05
    b1 = paired_bootstrap_pvalue(d, n_resamples=4000, seed=7)
    assert b1 == paired_bootstrap_pvalue(d, n_resamples=4000, seed=7) and 0 < b1 < 0.05
    assert paired_permutation_pvalue([0.3] * 40, n_resamples=2000) == pytest.approx(1.0)
    assert paired_bootstrap_pvalue([0.0] * 10) == 1.0
    with pytest.raises(ValueError, match="finite"):
        paired_permutation_pvalue([math.nan])


def test_policy_validation_and_metric_tolerances() -> None:
    with pytest.raises(GateError, match="test='t'"):
        GatePolicy(test="t")
    with pytest.raises(GateError, match="alpha=1.5"):
        GatePolicy(alpha=1.5)
    with pytest.raises(GateError, match="tolerance for mrr = -1"):
        GatePolicy(tolerances={"mrr": -1})
    assert parse_metric_tolerances(["ndcg@10", "mrr:0.05"]) == (["ndcg@10", "mrr"], {"mrr": 0.05})
    with pytest.raises(GateError, match="'x' is not a number"):
        parse_metric_tolerances(["mrr:x"])


# --------------------------------------------------------------------------- comparisons


def suite(runs: dict[str, list[str]], chrf: list[float] | None = None, name: str = "s") -> SuiteResult:
    qrels = {f"q{i}": {f"g{i}"} for i in range(10)}
    rr = evaluate_retrieval(runs, qrels, ks=(1, 5, 10))
    recs = [QueryRecord(q, "?", sorted(g), ["a"], retrieved_doc_ids=runs.get(q, [])) for q, g in qrels.items()]
    rg = None
    if chrf is not None:
        failed = [f"q{i}" for i, v in enumerate(chrf) if math.isnan(v)]
        rg = RagasResult(["chrf"], list(qrels), {"chrf": chrf}, {}, {"chrf": failed} if failed else {})
    return SuiteResult(name, "d", "kb", {}, {}, rr, recs, rg)


GOOD = {f"q{i}": [f"g{i}", "x"] for i in range(10)}


def test_unchanged_passes_and_table_lists_every_check() -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    res = compare_reports(base, EvalReport([suite(GOOD, [0.5] * 10)]))
    assert res.passed and res.exit_code == 0
    names = [c.metric for c in res.checks]
    assert names == ["ndcg@10", "ndcg@5", "recall@5", "recall@10", "precision@5", "hit@1", "mrr", "map", "chrf"]
    table = res.table()
    assert table.splitlines()[0].split()[:3] == ["suite", "metric", "baseline"]
    assert table.endswith("GATE PASSED: 9 checks, test=permutation, alpha=0.05")


def test_planted_regression_small_drop_and_improvement() -> None:
    base = EvalReport([suite(GOOD)])
    worse = {q: (["x", "y"] if i < 6 else r) for i, (q, r) in enumerate(GOOD.items())}  # 6 of 10 lose their gold doc
    res = compare_reports(base, EvalReport([suite(worse)]))
    assert not res.passed and res.exit_code == 1
    bad = {c.metric: c for c in res.failures()}
    assert bad["mrr"].status == "regression" and bad["mrr"].delta == pytest.approx(-0.6)
    assert bad["mrr"].p_value == pytest.approx(1 / 64)  # exact: 6 drops, 4 ties
    assert "GATE FAILED" in res.table() and "mrr regression" in res.table()
    # one query worse: beyond the tolerance but not significant (p = 1/2) → ok
    one = {q: (["x"] if i == 0 else r) for i, (q, r) in enumerate(GOOD.items())}
    assert compare_reports(base, EvalReport([suite(one)])).passed
    # a significant but tiny drop stays within a large tolerance
    assert compare_reports(base, EvalReport([suite(worse)]), GatePolicy(tolerance=0.7)).passed
    # the reverse direction is an improvement, which passes
    up = compare_reports(EvalReport([suite(worse)]), base)
    assert up.passed and {c.status for c in up.checks} >= {"improved"}


def test_nan_and_missing_fail() -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    with_nan = [0.5] * 9 + [math.nan]
    res = compare_reports(base, EvalReport([suite(GOOD, with_nan)]))
    (c,) = res.failures()
    assert (c.metric, c.status, c.bad_baseline, c.bad_current) == ("chrf", "nan", 0, 1)
    all_nan = compare_reports(base, EvalReport([suite(GOOD, [math.nan] * 10)]))
    assert [f.note for f in all_nan.failures()] == ["current mean is NaN (no valid sample)"]
    missing_suite = compare_reports(base, EvalReport([suite(GOOD, [0.5] * 10, name="other")]))
    assert {f.status for f in missing_suite.failures()} == {"missing"} and len(missing_suite.failures()) == 9
    fewer = {q: r for q, r in GOOD.items() if q != "q9"}
    cur = suite(fewer, [0.5] * 10)
    cur.retrieval.rows = [r for r in cur.retrieval.rows if r["qid"] != "q9"]
    res = compare_reports(base, EvalReport([cur]))
    assert not res.passed and "1 baseline queries missing" in res.failures()[0].note
    with pytest.raises(GateError, match="gated metric 'faithfulness' is not in the baseline"):
        compare_reports(base, base, GatePolicy(metrics=["faithfulness"]))


def test_gate_cli_exit_codes_with_report_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.eval.cli import main

    b = write_report(EvalReport([suite(GOOD)]), tmp_path, "base", formats=["json"])["json"]
    same = write_report(EvalReport([suite(GOOD)]), tmp_path, "same", formats=["json"])["json"]
    worse = {q: (["x"] if i < 6 else r) for i, (q, r) in enumerate(GOOD.items())}
    bad = write_report(EvalReport([suite(worse)]), tmp_path, "bad", formats=["json"])["json"]
    assert main(["gate", "--baseline", str(b), "--current", str(same), "--quiet", "--out", str(tmp_path / "g")]) == 0
    assert "GATE PASSED" in capsys.readouterr().out
    assert (tmp_path / "g" / "gate.junit.xml").is_file() and (tmp_path / "g" / "gate.md").is_file()
    assert main(["gate", "--baseline", str(b), "--current", str(bad), "--quiet", "--metric", "mrr"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "GATE FAILED: 1 of 1" in out
    assert main(["gate", "--baseline", str(tmp_path / "missing.json"), "--current", str(bad)]) == 2
    assert "missing.json: file not found" in capsys.readouterr().err
    # a report without a spec cannot be re-run
    assert main(["gate", "--baseline", str(b), "--quiet"]) == 2
    assert "no meta.spec.suites" in capsys.readouterr().err


# --------------------------------------------------------------------------- the real pipeline


@pytest.mark.slow
def test_planted_regression_on_the_pipeline_fails_the_gate(
    eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Baseline and re-runs on the real offline pipeline (a shared lab keeps it fast): unchanged →
    exit 0; a rerank threshold that filters most chunks → exit 1."""
    from rag_lab.eval.cli import main

    spec = {
        "suites": [small_spec.to_dict()],
        "ks": [1, 3, 5, 10],
        "ragas_metrics": ["id_context_recall", "chrf"],
        "params": {},
    }
    factory = lambda ws: eval_lab  # noqa: E731
    base = evaluate_spec(spec, lab_factory=factory)
    bpath = write_report(base, tmp_path, "baseline", formats=["json"])["json"]
    same = run_gate(bpath, lab_factory=factory)
    assert same.passed, same.table()
    assert all(c.delta == 0 for c in same.checks)
    planted = evaluate_spec(spec, params={"rerank_threshold": 0.95}, lab_factory=factory)
    ppath = write_report(planted, tmp_path, "planted", formats=["json"])["json"]
    assert planted.suites[0].params == {"rerank_threshold": 0.95}
    assert main(["gate", "--baseline", str(bpath), "--current", str(ppath), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "recall@5" in out
    assert main(["gate", "--baseline", str(bpath), "--current", str(bpath), "--quiet"]) == 0


def test_committed_baseline_is_reproducible_spec_and_matches_pytrec_eval() -> None:
    """The committed baseline names the bundled datasets' slices, and its stored per-query metrics
    equal both our recomputation and pytrec_eval on its stored runs."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    base = load_report(BASELINE)
    spec = base.meta["spec"]
    assert [s["dataset"] for s in spec["suites"]] == ["hotpotqa_hipporag100", "pubmedqa_pqal"]
    assert spec["ragas_metrics"] and spec["params"] == {}
    for s in base.suites:
        assert len(s.records) == s.spec["n_queries"]
        runs = {r.qid: r.retrieved_doc_ids for r in s.records}
        qrels = {r.qid: set(r.gold_ids) for r in s.records}
        ours = evaluate_retrieval(runs, qrels, ks=s.retrieval.ks)
        assert ours.rows == s.retrieval.rows
        trec = pytrec_eval.RelevanceEvaluator(
            {q: {d: 1 for d in g} for q, g in qrels.items()}, {"recall.5,10", "P.5", "ndcg_cut.10", "recip_rank", "map"}
        ).evaluate({q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items() if r})
        for row in s.retrieval.rows:
            t = trec.get(row["qid"])
            if t is None:  # no results: trec_eval leaves the query out, we score it 0
                assert row["ndcg@10"] == 0.0
                continue
            assert row["recall@5"] == pytest.approx(t["recall_5"], abs=1e-9)
            assert row["recall@10"] == pytest.approx(t["recall_10"], abs=1e-9)
            assert row["precision@5"] == pytest.approx(t["P_5"], abs=1e-9)
            assert row["ndcg@10"] == pytest.approx(t["ndcg_cut_10"], abs=1e-9)
            assert row["mrr"] == pytest.approx(t["recip_rank"], abs=1e-9)
            assert row["map"] == pytest.approx(t["map"], abs=1e-9)
        counts = s.counts()
        assert all(c["n_nan"] + c["n_failed"] == 0 for c in counts.values()), counts
    raw = json.loads(BASELINE.read_text(encoding="utf-8"))
    assert raw["kind"] == "rag_lab.eval.report"
