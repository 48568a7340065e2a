"""Regression gate (the decision's worked examples are in test_gate_decision.py): comparison rules, NaN handling, a planted regression on the real
pipeline, and the committed baseline (reproducible spec, metrics equal to pytrec_eval)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.gate import (
    DEFAULT_GATE_METRICS,
    GateError,
    GatePolicy,
    compare_reports,
    effect_size,
    evaluate_spec,
    holm_adjust,
    paired_test,
    parse_metric_tolerances,
    run_gate,
)
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, SuiteResult, load_report
from rag_lab.eval.runner import QueryRecord
from rag_lab.lab.outputs import write_gate, write_report

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "reports" / "baseline.json"


# --------------------------------------------------------------------------- paired tests


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


# eight questions with their gold first, one at rank 2, one without: every metric has headroom
GOOD = {**{f"q{i}": [f"g{i}", "x"] for i in range(8)}, "q8": ["x", "g8"], "q9": ["x", "y"]}


def test_unchanged_passes_and_table_lists_every_check() -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    res = compare_reports(base, EvalReport([suite(GOOD, [0.5] * 10)]))
    assert res.passed and res.exit_code == 0
    names = [c.metric for c in res.checks]
    # one name per quantity (no ndcg@5 / id_context_recall aliases), plus the suite's error count
    assert names == ["ndcg@10", "recall@5", "recall@10", "precision@5", "hit@1", "mrr", "map", "chrf", "model_errors"]
    table = res.table()
    assert table.splitlines()[0].split()[:3] == ["suite", "metric", "baseline"]
    assert "per-question changes: none" in table and "params: unchanged from the baseline" in table
    assert table.endswith(
        "GATE PASSED: 9 checks (0 regressions, 0 probable regressions, 0 inconclusive, 0 improvements, 9 passed); "
        "test=permutation, alpha=0.05, Holm over 0 tested checks; 0 questions changed"
    )
    assert {c.status for c in res.checks} == {"unchanged"} and {c.tier for c in res.checks} == {"pass"}
    assert res.changes == [] and res.params_changed == {}


def test_planted_regression_small_drop_and_improvement() -> None:
    base = EvalReport([suite(GOOD)])
    worse = {q: (["x", "y"] if i < 6 else r) for i, (q, r) in enumerate(GOOD.items())}  # 6 of 10 lose their gold doc
    # one metric gated: no correction to make, exact p = 2^-6 for 6 drops and 4 ties
    res = compare_reports(base, EvalReport([suite(worse)]), GatePolicy(metrics=["mrr"]))
    assert not res.passed and res.exit_code == 1
    bad = {c.metric: c for c in res.failures()}
    assert bad["mrr"].status == "regression" and bad["mrr"].delta == pytest.approx(-0.6)
    assert bad["mrr"].p_value == pytest.approx(1 / 64) and bad["mrr"].p_adjusted == pytest.approx(1 / 64)
    assert "GATE FAILED" in res.table() and "mrr regression" in res.table()
    # the seven default metrics all move on the same 6 questions: Holm multiplies the smallest p by 7
    every = compare_reports(base, EvalReport([suite(worse)]))
    mrr = next(c for c in every.checks if c.metric == "mrr")
    assert mrr.p_value == pytest.approx(1 / 64) and mrr.p_adjusted == pytest.approx(7 / 64)
    assert mrr.status == "probable_regression" and not every.passed  # 0.109 > 0.05, but a drop of 0.6 fails
    assert not compare_reports(base, EvalReport([suite(worse)]), GatePolicy(allow_underpowered=True)).passed
    nocorr = compare_reports(base, EvalReport([suite(worse)]), GatePolicy(correction="none"))
    assert next(c for c in nocorr.checks if c.metric == "mrr").status == "regression"
    # a drop of 0.6 within a tolerance of 0.7, but 6 questions fell by 1: a mean drop of 0.7 is not ruled out
    wide = compare_reports(base, EvalReport([suite(worse)]), GatePolicy(tolerance=0.7, metrics=["mrr"]))
    assert [c.status for c in wide.checks] == ["inconclusive", "unchanged"] and not wide.passed
    # with a tolerance above every question's drop it is (d + 1.01 > 0 everywhere: p = 2^-10)
    assert compare_reports(base, EvalReport([suite(worse)]), GatePolicy(tolerance=1.01, metrics=["mrr"])).passed
    # the reverse direction is an improvement, which passes
    up = compare_reports(EvalReport([suite(worse)]), base, GatePolicy(metrics=["mrr"]))
    assert up.passed and {c.status for c in up.checks} >= {"improved"}


def test_one_worse_question_beyond_the_tolerance_is_a_probable_regression() -> None:
    """One of ten questions loses its gold document: beyond the tolerance on average (-0.1) but a
    sign-flip test on 1 moved question can never reach p < 0.05: a probable regression, which fails
    even with ``allow_underpowered``."""
    base = EvalReport([suite(GOOD)])
    one = {q: (["x"] if i == 0 else r) for i, (q, r) in enumerate(GOOD.items())}
    res = compare_reports(base, EvalReport([suite(one)]))
    mrr = next(c for c in res.checks if c.metric == "mrr")
    assert (mrr.status, mrr.tier, mrr.n_informative) == ("probable_regression", "probable regression", 1)
    assert mrr.p_value == 0.5 and mrr.failed and not res.passed
    assert "mean dropped by 0.1000 > tolerance 0.02" in mrr.note and "not significant" in mrr.note
    assert "mrr probable regression" in res.verdict()
    allowed = compare_reports(base, EvalReport([suite(one)]), GatePolicy(allow_underpowered=True))
    assert not allowed.passed and "mrr probable regression" in allowed.verdict()
    # 17 of 20 questions moved, mean -0.055: variable changes, not significant, still beyond the tolerance
    b20 = chrf_report([0.5] * 20)
    c20 = chrf_report([0.2] * 9 + [0.7] * 8 + [0.5] * 3)
    (m,) = [c for c in compare_reports(b20, c20, GatePolicy(metrics=["chrf"])).checks if c.metric == "chrf"]
    assert (m.n_informative, m.delta) == (17, pytest.approx(-0.055))
    assert m.p_value > 0.05 and m.status == "probable_regression"


def chrf_report(values: list[float], name: str = "s") -> EvalReport:
    """A suite of ``len(values)`` questions whose chrf values are given (retrieval all at 1)."""
    qrels = {f"q{i}": {f"g{i}"} for i in range(len(values))}
    recs = [QueryRecord(q, "?", sorted(g), ["a"], retrieved_doc_ids=sorted(g)) for q, g in qrels.items()]
    rr = evaluate_retrieval({r.qid: r.retrieved_doc_ids for r in recs}, qrels, ks=(1,))
    failed = [q for q, v in zip(qrels, values) if math.isnan(v)]
    rg = RagasResult(["chrf"], list(qrels), {"chrf": list(values)}, {}, {"chrf": failed} if failed else {})
    return EvalReport([SuiteResult(name, "d", "kb", {}, {}, rr, recs, rg)])


def test_mutants_of_the_decision_rule_are_killed() -> None:
    """Boundaries of the rule, each pinned by a concrete case: the tolerance is ``delta < -tol`` (not
    -2 tol), significance is strict ``p < alpha`` (p = alpha is not), and a per-question change
    above 1e-9 is a change (1e-3 would hide it)."""
    rep = chrf_report
    base = rep([0.5] * 6)
    pol = GatePolicy(metrics=["chrf"])
    # six drops of 0.03: delta -0.03 < -0.02 and p = 2^-6; a rule at -2 tol (-0.04) would pass it
    drop = compare_reports(base, rep([0.47] * 6), pol)
    (c,) = [x for x in drop.checks if x.metric == "chrf"]
    assert c.delta == pytest.approx(-0.03) and c.p_value == pytest.approx(1 / 64) and c.status == "regression"
    # p exactly alpha is not significant: 5 drops (p = 1/32) at alpha = 1/32 → probable, not a regression
    five = compare_reports(base, rep([0.4] * 5 + [0.5]), GatePolicy(metrics=["chrf"], alpha=1 / 32))
    (c5,) = [x for x in five.checks if x.metric == "chrf"]
    assert c5.p_value == 1 / 32 and c5.status != "regression"
    loose = compare_reports(base, rep([0.4] * 5 + [0.5]), GatePolicy(metrics=["chrf"], alpha=0.0313))
    assert next(x for x in loose.checks if x.metric == "chrf").status == "regression"
    # a change of 5e-4 on one question is a change (listed, counted as moved)
    tiny = compare_reports(base, rep([0.4995] + [0.5] * 5), pol)
    (ct,) = [x for x in tiny.checks if x.metric == "chrf"]
    assert ct.n_informative == 1 and [ch.qid for ch in tiny.changes] == ["q0"]
    assert tiny.changes[0].deltas["chrf"] == pytest.approx(-5e-4)
    # 1e-10 is float noise
    noise = compare_reports(base, rep([0.5 + 1e-10] + [0.5] * 5), pol)
    assert noise.changes == [] and next(x for x in noise.checks if x.metric == "chrf").status == "unchanged"


def _holm_by_rejection(ps: list[float], alpha: float) -> list[bool]:
    """Holm's procedure as a sequence of rejections: sorted ascending, reject while
    p_(j) <= alpha / (m - j + 1) (j 1-based), stop at the first that is not."""
    order = sorted(range(len(ps)), key=lambda i: (ps[i], i))
    out = [False] * len(ps)
    for j, i in enumerate(order):
        if ps[i] > alpha / (len(ps) - j) + 1e-12:
            break
        out[i] = True
    return out


def test_holm_adjust_values_and_rejections() -> None:
    assert holm_adjust([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert holm_adjust([0.2]) == [0.2] and holm_adjust([]) == []
    assert holm_adjust([0.3, 0.6]) == pytest.approx([0.6, 0.6])  # capped by the running max, <= 1
    adj = holm_adjust([0.001, math.nan, 0.02])
    assert adj[0] == pytest.approx(0.002) and math.isnan(adj[1]) and adj[2] == pytest.approx(0.02)


@settings(max_examples=80)
@given(
    st.lists(st.sampled_from([0.001, 0.004, 0.01, 0.0125, 0.02, 0.05, 0.3, 1.0]), min_size=1, max_size=10),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_holm_adjust_agrees_with_the_rejection_procedure(ps: list[float], alpha: float) -> None:
    """Ties and duplicates included: adjusted p <= alpha exactly where Holm's sequential procedure
    rejects; adjusted p >= raw p and <= 1."""
    adj = holm_adjust(ps)
    assert [a <= alpha + 1e-12 for a in adj] == _holm_by_rejection(ps, alpha)
    assert all(p <= a <= 1.0 for p, a in zip(ps, adj))


def test_nan_and_missing_fail() -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    with_nan = [0.5] * 9 + [math.nan]
    res = compare_reports(base, EvalReport([suite(GOOD, with_nan)]))
    (c,) = res.failures()
    assert (c.metric, c.status, c.bad_baseline, c.bad_current) == ("chrf", "nan", 0, 1)
    all_nan = compare_reports(base, EvalReport([suite(GOOD, [math.nan] * 10)]))
    assert [f.note for f in all_nan.failures()] == ["current mean is NaN (no valid sample)"]
    missing_suite = compare_reports(base, EvalReport([suite(GOOD, [0.5] * 10, name="other")]))
    assert {f.status for f in missing_suite.failures()} == {"missing"} and len(missing_suite.failures()) == 8
    fewer = {q: r for q, r in GOOD.items() if q != "q9"}
    cur = suite(fewer, [0.5] * 10)
    cur.retrieval.rows = [r for r in cur.retrieval.rows if r["qid"] != "q9"]
    cur.records = [r for r in cur.records if r.qid != "q9"]
    assert cur.ragas is not None
    cur.ragas.qids, cur.ragas.values["chrf"] = cur.ragas.qids[:9], cur.ragas.values["chrf"][:9]
    res = compare_reports(base, EvalReport([cur]))
    assert not res.passed and "1 baseline queries missing" in res.failures()[0].note
    with pytest.raises(GateError, match="correction='bonferroni'"):
        GatePolicy(correction="bonferroni")
    with pytest.raises(GateError, match="gated metric 'faithfulness' is not in the baseline"):
        compare_reports(base, base, GatePolicy(metrics=["faithfulness"]))


def test_gate_cli_exit_codes_with_report_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    b = write_report(EvalReport([suite(GOOD)]), tmp_path, "base", formats=["json"])["json"]
    same = write_report(EvalReport([suite(GOOD)]), tmp_path, "same", formats=["json"])["json"]
    worse = {q: (["x"] if i < 6 else r) for i, (q, r) in enumerate(GOOD.items())}
    bad = write_report(EvalReport([suite(worse)]), tmp_path, "bad", formats=["json"])["json"]
    assert main(["gate", "--baseline", str(b), "--current", str(same), "--quiet", "--out", str(tmp_path / "g")]) == 0
    assert "GATE PASSED" in capsys.readouterr().out
    for f in ("gate.junit.xml", "gate.md", "gate.html", "gate.json"):
        assert (tmp_path / "g" / f).is_file(), f
    assert main(["gate", "--baseline", str(b), "--current", str(bad), "--quiet", "--metric", "mrr"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "GATE FAILED: 1 of 2" in out  # mrr and the suite's error count
    assert main(["gate", "--baseline", str(tmp_path / "missing.json"), "--current", str(bad)]) == 2
    assert "missing.json: file not found" in capsys.readouterr().err
    # a report without a spec cannot be re-run
    assert main(["gate", "--baseline", str(b), "--quiet"]) == 2
    assert "no meta.spec.suites" in capsys.readouterr().err


# --------------------------------------------------------------------------- statistics and per-question changes


def test_confidence_interval_and_effect_size() -> None:
    d = [-1.0] * 6 + [0.0] * 4
    lo, hi = paired_test(d, n_resamples=4000, seed=0).ci
    assert lo < -0.6 < hi <= -0.2 and lo >= -1.0
    assert paired_test([0.0] * 5).ci == (0.0, 0.0)
    sd = math.sqrt((6 * 0.4**2 + 4 * 0.6**2) / 9)
    assert effect_size(d) == pytest.approx(-0.6 / sd)  # Cohen's d_z = -1.1619
    assert effect_size([0.0, 0.0]) == 0.0 and math.isnan(effect_size([-0.5, -0.5]))
    assert effect_size([-1.0, -0.5]) == pytest.approx(-0.75 / math.sqrt(0.125))  # two pairs are enough for an SD


def test_one_changed_question_is_listed_and_fail_on_change_fails() -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    one = dict(GOOD, q3=["x", "g3"])  # q3's gold document falls to rank 2
    cur_suite = suite(one, [0.5] * 10)
    cur_suite.records[3].question = "which gold is third?"
    res = compare_reports(base, EvalReport([cur_suite]))
    assert not res.passed  # one question moved: mrr -0.05 and hit@1 -0.1 on average, beyond the tolerance
    assert {c.status for c in res.failures()} == {"probable_regression"}
    assert not compare_reports(base, EvalReport([cur_suite]), GatePolicy(allow_underpowered=True)).passed
    (ch,) = res.changes
    assert (ch.suite, ch.qid, ch.changed) == ("s", "q3", ["ranking"])
    assert ch.deltas["mrr"] == pytest.approx(-0.5) and ch.deltas["hit@1"] == -1.0 and ch.worst == -1.0
    assert ch.baseline_ids == ["g3", "x"] and ch.current_ids == ["x", "g3"]
    assert "s/q3" in res.table() and "ranking [g3, x] → [x, g3]" in res.table()
    mrr = next(c for c in res.checks if c.metric == "mrr")
    assert (mrr.n_worse, mrr.n_better, mrr.n_informative, mrr.p_value) == (1, 0, 1, 0.5)
    strict = compare_reports(base, EvalReport([cur_suite]), GatePolicy(fail_on_change=True))
    assert not strict.passed and strict.exit_code == 1
    assert "1 questions changed (--fail-on-change)" in strict.verdict()
    # answers count as changes too, even when no metric moved
    ans = suite(GOOD, [0.5] * 10)
    ans.records[0].answer = "a different answer"
    (c2,) = compare_reports(base, EvalReport([ans])).changes
    assert c2.changed == ["answer"] and c2.deltas == {}


def test_changes_sorted_worst_first_and_gate_outputs(tmp_path: Path) -> None:
    base = EvalReport([suite(GOOD, [0.5] * 10)])
    runs = dict(GOOD, q1=["x", "g1"], q7=["x", "y"])  # q7 loses its gold (worst), q1 drops to rank 2
    cur = suite(runs, [0.5] * 10)
    cur.params = {"rerank_threshold": 0.9}
    res = compare_reports(base, EvalReport([cur]), GatePolicy(allow_underpowered=True))
    assert [c.qid for c in res.changes] == ["q7", "q1"]
    assert res.params_changed == {"s": {"rerank_threshold": [None, 0.9]}}
    assert "params changed: rerank_threshold None → 0.9" in res.table()
    paths = write_gate(res, tmp_path)
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert data["kind"] == "rag_lab.gate" and data["passed"] is False
    first = data["checks"][0]
    assert {"suite", "metric", "baseline", "current", "delta", "p", "status", "ci", "effect_size", "p_ni"} <= set(first)
    mrr = next(c for c in data["checks"] if c["metric"] == "mrr")
    assert (
        mrr["delta"] == pytest.approx(-0.15) and mrr["status"] == "probable_regression" and mrr["family"] == "retrieval"
    )
    assert mrr["tier"] == "probable regression" and mrr["failed"] is True  # never allowed by the policy
    assert data["tiers"]["probable regression"][0] == "s/ndcg@10" and data["policy"]["allow_underpowered"] is True
    assert mrr["ci"][0] <= -0.15 <= mrr["ci"][1]
    assert [q["qid"] for q in data["query_changes"]] == ["q7", "q1"]
    assert data["params_changed"] == {"s": {"rerank_threshold": [None, 0.9]}}
    md = paths["md"].read_text(encoding="utf-8")
    assert "## Per-question changes (2, worst first)" in md and md.index("| s | q7 |") < md.index("| s | q1 |")
    html = paths["html"].read_text(encoding="utf-8")
    assert html.count("<table class='sortable'>") == 2 and "cellIndex" in html
    assert html.index("<td>q7</td>") < html.index("<td>q1</td>") and "rerank_threshold" in html


def test_saturated_metrics_are_gated_and_errors_fail() -> None:
    """A metric at the floor (chrf 0.01) or the ceiling is gated like any other: it is marked
    saturated, and a ceiling metric that falls fails. Errors fail when they rise."""
    base = EvalReport([suite(GOOD, [0.01] * 10)])
    res = compare_reports(base, EvalReport([suite(GOOD, [0.0] * 10)]))
    chrf = next(c for c in res.checks if c.metric == "chrf")
    assert (chrf.saturated, chrf.status, chrf.delta) == ("floor", "ok", pytest.approx(-0.01))  # within the tolerance
    ceiling = chrf_report([1.0] * 12)
    same = compare_reports(ceiling, chrf_report([1.0] * 12), GatePolicy(metrics=["chrf"]))
    (c,) = [x for x in same.checks if x.metric == "chrf"]
    assert (c.saturated, c.status) == ("ceiling", "unchanged") and "at the ceiling" in c.note
    fell = compare_reports(ceiling, chrf_report([0.25] * 12), GatePolicy(metrics=["chrf"]))
    (f,) = [x for x in fell.checks if x.metric == "chrf"]
    assert (f.saturated, f.status, f.failed) == ("ceiling", "regression", True)
    broken = suite(GOOD, [0.01] * 10)
    broken.records[2].error = "APIConnectionError: chat endpoint down"
    bad = compare_reports(base, EvalReport([broken]))
    (f,) = bad.failures()
    assert (f.metric, f.status, f.baseline, f.current) == ("model_errors", "errors", 0.0, 1.0)
    assert "q2: APIConnectionError" in f.note


# --------------------------------------------------------------------------- planted regressions on the committed baseline
# The committed baseline's stored per-query results are edited (no pipeline re-run): the gate must
# fail naming the metric for each gated family, pass a no-op, and list a one-question change.


def _committed_copy() -> EvalReport:
    return load_report(BASELINE)


def _gated(rep: EvalReport, family: str) -> tuple[SuiteResult, str]:
    """The gated metric of ``family`` with the most room to fall (highest baseline mean)."""
    res = compare_reports(rep, rep)
    fam = [c for c in res.checks if c.family == family]
    assert fam, f"no gated {family} metric in the committed baseline"
    best = max(fam, key=lambda c: c.baseline)
    return rep.suite(best.suite), best.metric


def _named(out: str, suite: str, metric: str) -> bool:
    """The verdict names the failed check, as a regression or a probable regression (a drop beyond
    the tolerance on a few questions may not be significant after Holm over the 44 checks)."""
    verdict = out.strip().splitlines()[-1]
    return f"{suite}/{metric} regression" in verdict or f"{suite}/{metric} probable regression" in verdict


def _gate_cli(tmp_path: Path, cur: EvalReport, *extra: str) -> tuple[int, str]:
    from rag_lab.commands.evaluate import main

    cpath = write_report(cur, tmp_path, "current", formats=["json"])["json"]
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(
            ["gate", "--baseline", str(BASELINE), "--current", str(cpath), "--quiet", "--out", str(tmp_path), *extra]
        )
    return code, buf.getvalue()


def test_planted_noop_passes(tmp_path: Path) -> None:
    code, out = _gate_cli(tmp_path, _committed_copy())
    assert code == 0, out
    assert "per-question changes: none" in out
    data = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    assert data["passed"] and all(c["delta"] in (0, 0.0) for c in data["checks"])


def test_planted_retrieval_regression_fails_naming_the_metric(tmp_path: Path) -> None:
    rep = _committed_copy()
    s, metric = _gated(rep, "retrieval")
    for r in s.records[: (len(s.records) * 2) // 5]:  # 40 % of the questions lose every gold document
        r.retrieved_doc_ids = [d for d in r.retrieved_doc_ids if d not in r.gold_ids]
    s.retrieval = evaluate_retrieval(
        {r.qid: r.retrieved_doc_ids for r in s.records}, {r.qid: set(r.gold_ids) for r in s.records}, ks=s.retrieval.ks
    )
    code, out = _gate_cli(tmp_path, rep)
    assert code == 1
    assert _named(out, s.name, metric)
    data = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    failed = {(c["suite"], c["metric"]) for c in data["checks"] if c["failed"]}
    assert (s.name, metric) in failed
    assert len([q for q in data["query_changes"] if q["suite"] == s.name]) >= (len(s.records) * 2) // 5


def _rescore(s: SuiteResult, metric: str, samples: list[Any]) -> None:
    from rag_lab.eval.ragas_adapter import score_samples

    assert s.ragas is not None
    new = score_samples(samples, [metric])
    by_q = dict(zip(new.qids, new.values[metric]))
    s.ragas.values[metric] = [by_q.get(q, v) for q, v in zip(s.ragas.qids, s.ragas.values[metric])]


def test_planted_ragas_retrieval_regression_fails_naming_the_metric(tmp_path: Path) -> None:
    from rag_lab.eval.ragas_adapter import RagasSample

    rep = _committed_copy()
    s, metric = _gated(rep, "ragas retrieval")
    assert metric in ("id_context_precision", "nonllm_context_precision")
    samples = []
    for r in s.records[: len(s.records) // 2]:  # half the questions: contexts from non-gold documents only
        r.context_doc_ids = [f"distractor-{i}" for i in range(max(1, len(r.context_doc_ids)))]
        r.context_ids = [f"{d}-0" for d in r.context_doc_ids]
        r.contexts = ["An unrelated paragraph about nothing in particular."] * len(r.context_doc_ids)
        samples.append(
            RagasSample(
                r.qid,
                r.question,
                r.contexts,
                r.context_doc_ids,
                r.answers[0] if r.answers else "",
                r.gold_ids,
                ["gold text that the distractors do not match at all, " * 3],
                r.answer,
            )
        )
    _rescore(s, metric, samples)
    code, out = _gate_cli(tmp_path, rep)
    assert code == 1 and _named(out, s.name, metric), out


def test_planted_answer_similarity_regression_fails_naming_the_metric(tmp_path: Path) -> None:
    from rag_lab.eval.ragas_adapter import RagasSample
    from rag_lab.eval.runner import answer_text

    rep = _committed_copy()
    s, metric = _gated(rep, "answer similarity")
    samples = []
    for r in s.records[: len(s.records) // 2]:  # half the answers become empty
        r.answer = ""
        samples.append(
            RagasSample(
                r.qid, r.question, [], [], r.answers[0] if r.answers else "", r.gold_ids, [], answer_text(r.answer)
            )
        )
    _rescore(s, metric, samples)
    code, out = _gate_cli(tmp_path, rep)
    assert code == 1 and _named(out, s.name, metric), out
    data = json.loads((tmp_path / "gate.json").read_text(encoding="utf-8"))
    assert any("answer" in q["changed"] for q in data["query_changes"])


def test_planted_one_question_change_is_listed(tmp_path: Path) -> None:
    rep = _committed_copy()
    s = rep.suites[0]
    r = s.records[0]
    r.retrieved_doc_ids = list(reversed(r.retrieved_doc_ids)) + ["not-a-gold-doc"]
    s.retrieval = evaluate_retrieval(
        {x.qid: x.retrieved_doc_ids for x in s.records}, {x.qid: set(x.gold_ids) for x in s.records}, ks=s.retrieval.ks
    )
    code, out = _gate_cli(tmp_path, rep)
    assert code == 1, out  # one of 30 questions lost its gold from the top 5: recall@5 -0.033, beyond 0.02
    assert "recall@5 probable regression" in out and "ndcg@10 inconclusive" in out
    assert "per-question changes: 1" in out and f"{s.name}/{r.qid}" in out
    md = (tmp_path / "gate.md").read_text(encoding="utf-8")
    assert r.question[:40].replace("|", "\\|") in md
    code, out = _gate_cli(tmp_path, rep, "--allow-underpowered")  # the inconclusive checks pass, not the drops
    assert code == 1 and "inconclusive (allowed)" in out and "recall@5 probable regression" in out, out
    code, out = _gate_cli(tmp_path, rep, "--fail-on-change", "--allow-underpowered")
    assert code == 1 and "1 questions changed (--fail-on-change)" in out


# --------------------------------------------------------------------------- the real pipeline


@pytest.mark.slow
def test_planted_regression_on_the_pipeline_fails_the_gate(
    eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Baseline and re-runs on the real offline pipeline (a shared lab keeps it fast): unchanged →
    exit 0; a rerank threshold that filters most chunks → exit 1."""
    from rag_lab.commands.evaluate import main

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
    # 10 questions: significant drops are regressions, the rest probable regressions; both fail
    assert _named(out, small_spec.name, "recall@5") and "GATE FAILED" in out, out
    assert main(["gate", "--baseline", str(bpath), "--current", str(bpath), "--quiet"]) == 0


def test_committed_baseline_is_reproducible_spec_and_matches_pytrec_eval() -> None:
    """The committed baseline names the bundled datasets' slices, and its stored per-query metrics
    equal both our recomputation and pytrec_eval on its stored runs."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    base = load_report(BASELINE)
    spec = base.meta["spec"]
    assert [s["dataset"] for s in spec["suites"]] == ["hotpotqa_distractor40", "cmrc2018_pool", "pubmedqa_long"]
    assert spec["ragas_metrics"] and spec["params"] == {}
    assert {"bleu_zh", "rouge_l_zh"} <= set(spec["suites"][1]["ragas_metrics"])  # the Chinese slice
    # every default metric present is gated, saturated ones included, and each family has one
    gated = compare_reports(base, base).checks
    fams = {c.family for c in gated}
    assert {"retrieval", "ragas retrieval", "answer similarity"} <= fams
    for s in base.suites:
        names = {c.metric for c in gated if c.suite == s.name}
        assert names == {m for m in DEFAULT_GATE_METRICS if m in s.metric_names()} | {"model_errors"}
    assert {"bleu_zh", "rouge_l_zh"} <= {c.metric for c in gated if c.suite == "cmrc2018_pool"}
    ceiling = {c.metric for c in gated if c.suite == "pubmedqa_long" and c.saturated == "ceiling"}
    assert {"ndcg@10", "mrr", "hit@1", "map", "recall@5", "recall@10"} <= ceiling
    assert {c.suite for c in gated} == {s["name"] for s in spec["suites"]}
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


def test_changed_params_compare_the_effective_params() -> None:
    """The lab's params (``meta.lab_params``) with each suite's overrides on top: a changed lab
    default shows up even when neither run overrode it."""
    b = EvalReport([suite(GOOD)], {"lab_params": {"mmr_lambda": 0.7, "rerank_threshold": 0.3}})
    cur = suite(GOOD)
    cur.params = {"rerank_threshold": 0.3}  # an override equal to the default: no change
    c = EvalReport([cur], {"lab_params": {"mmr_lambda": 0.5, "rerank_threshold": 0.3}})
    res = compare_reports(b, c)
    assert res.params_changed == {"s": {"mmr_lambda": [0.7, 0.5]}}
    assert res.params_line() == "params changed: mmr_lambda 0.7 → 0.5"
    assert compare_reports(b, b).params_line() == "params: unchanged from the baseline"


def test_stats_boundaries_pinned_against_mutants() -> None:
    """The paired test's defaults and edges, each pinned by a value."""
    d = [-1.0] * 6 + [0.0] * 4 + [0.5] * 2
    # the defaults are 95 %, 10,000 resamples, seed 0, the sign-flip test
    assert paired_test(d) == paired_test(d, 0.0, test="permutation", level=0.95, n_resamples=10_000, seed=0)
    assert paired_test(d, level=0.9).ci != paired_test(d).ci
    assert paired_test([-0.5]).ci == (-0.5, -0.5)  # one pair: a point, not NaN
    # bootstrap: a resample whose mean is exactly 0 counts on both sides (not a drop, not a rise)
    boot = paired_test([-1.0, 1.0], test="bootstrap", n_resamples=4000, seed=1)
    assert boot.p_drop == pytest.approx(0.75, abs=0.03) and boot.p_up == pytest.approx(0.75, abs=0.03)
    assert paired_test([-0.5], test="bootstrap", n_resamples=999).p_drop == pytest.approx(1 / 1000)
    # exact enumeration while 2^n <= n_resamples; the Monte Carlo p never exceeds 1
    assert paired_test([-1.0] * 13).p_drop == 2.0**-13
    assert paired_test([0.0] * 20, n_resamples=5000).p_drop == 1.0
    with pytest.raises(ValueError, match="^paired differences must be a finite 1-D sequence$"):
        paired_test([math.inf])


def test_compare_boundaries_pinned_against_mutants() -> None:
    """Survivors of the gate_compare mutation run, each pinned by a value."""
    pol = GatePolicy(metrics=["chrf"])
    base = chrf_report([0.5] * 8)

    def only(res: Any) -> Any:
        return next(c for c in res.checks if c.metric == "chrf")

    # a significant rise smaller than the tolerance is no improvement; the rise's p is Holm-adjusted
    small_up = only(compare_reports(base, chrf_report([0.51] * 8), pol))
    assert (small_up.status, small_up.p_up) == ("ok", pytest.approx(2.0**-8))
    assert small_up.p_up_adjusted == small_up.p_up and (small_up.n_better, small_up.n_worse) == (8, 0)
    up = only(compare_reports(base, chrf_report([0.6] * 8), pol))
    assert up.status == "improved" and up.effect_size != up.effect_size  # d_z is NaN: every diff equal
    pair = lambda v: EvalReport([chrf_report(v, "a").suites[0], chrf_report(v, "b").suites[0]])  # noqa: E731
    two = compare_reports(pair([0.5] * 8), pair([0.6] * 8), pol)
    assert [c.p_up_adjusted for c in two.checks if c.metric == "chrf"] == pytest.approx([2 * 2.0**-8] * 2)
    # a drop of exactly the tolerance is not beyond it
    at_tol = only(compare_reports(base, chrf_report([0.4375] * 8), GatePolicy(metrics=["chrf"], tolerance=0.0625)))
    assert at_tol.delta == -0.0625 and at_tol.status != "regression"  # exact in binary
    # moved with mean exactly 0 but ±0.1 on 8 questions: a drop of 0.02 is not ruled out
    even = only(compare_reports(base, chrf_report([0.6, 0.4] * 4), pol))
    assert even.delta == pytest.approx(0.0, abs=1e-12) and even.status == "inconclusive" and even.n_informative == 8
    t = paired_test([0.6 - 0.5, 0.4 - 0.5] * 4, 0.02, level=pol.ci_level, n_resamples=pol.n_resamples, seed=pol.seed)
    assert (even.ci_low, even.ci_high, even.p_ni) == (*t.ci, t.p_ni)  # the policy's seed and the tolerance
    # the same ±0.01: ruled out (d + 0.02 > 0 everywhere: p = 2^-8)
    small = only(compare_reports(base, chrf_report([0.51, 0.49] * 4), pol))
    assert (small.status, small.p_ni) == ("ok", 2.0**-8)
    # a metric the current run lacks fails as missing, with the check's own fields
    no_chrf = chrf_report([0.5] * 8)
    no_chrf.suites[0].ragas = None
    (m,) = [x for x in compare_reports(base, no_chrf, pol).checks if x.metric == "chrf"]
    assert (m.suite, m.metric, m.baseline, m.tolerance, m.status) == ("s", "chrf", 0.5, 0.02, "missing")
    assert m.note == "metric missing from the current run" and m.failed
    # a current mean of NaN is status nan
    all_nan = only(compare_reports(base, chrf_report([math.nan] * 8), pol))
    assert all_nan.status == "nan" and all_nan.tier == "regression"


def test_query_changes_pinned_against_mutants() -> None:
    base = chrf_report([0.5, 0.0, 0.5, 0.5])
    cur = chrf_report([0.5, math.nan, 0.5, 0.4])
    cur.suites[0].records[2].answer = "another answer"
    del cur.suites[0].records[0]  # q0 missing from the current run: the later changes still listed
    cur.suites[0].retrieval.rows = [r for r in cur.suites[0].retrieval.rows if r["qid"] != "q0"]
    rg = cur.suites[0].ragas
    assert rg is not None
    rg.qids, rg.values["chrf"] = rg.qids[1:], rg.values["chrf"][1:]
    res = compare_reports(base, cur, GatePolicy(metrics=["chrf"], allow_underpowered=True))
    by = {ch.qid: ch for ch in res.changes}
    assert set(by) == {"q1", "q2", "q3"}
    assert by["q1"].nan_metrics == ["chrf"] and by["q1"].deltas == {}  # 0 -> NaN: no drop to count
    assert by["q2"].changed == ["answer"] and (by["q2"].baseline_answer, by["q2"].current_answer) == (
        "",
        "another answer",
    )
    assert by["q3"].changed == ["metrics"] and by["q3"].deltas == {"chrf": pytest.approx(-0.1)}
    b2 = chrf_report([0.7, 0.5])
    gone = compare_reports(b2, chrf_report([math.nan, 0.5]), GatePolicy(metrics=["chrf"]))
    assert gone.changes[0].deltas == {"chrf": pytest.approx(-0.7)}  # became NaN: a drop to 0
    # equal worst and sum: the change with more kinds of change first
    w = chrf_report([0.5, 0.5])
    x = chrf_report([0.4, 0.4])
    x.suites[0].records[1].answer = "changed"
    x.suites[0].records[1].retrieved_doc_ids = ["elsewhere"]
    order = compare_reports(w, x, GatePolicy(metrics=["chrf"], allow_underpowered=True)).changes
    assert [ch.qid for ch in order] == ["q1", "q0"]


def test_error_check_pinned_against_mutants() -> None:
    fixed = compare_reports(chrf_report([0.5] * 3), chrf_report([0.5] * 3))
    err = next(c for c in fixed.checks if c.metric == "model_errors")
    assert (err.status, err.n_pairs, err.tolerance, err.delta) == ("unchanged", 3, 0.0, 0.0)
    was = chrf_report([0.5] * 3)
    was.suites[0].records[1].error = "APIError: down"
    healed = next(c for c in compare_reports(was, chrf_report([0.5] * 3)).checks if c.metric == "model_errors")
    assert (healed.status, healed.n_informative, healed.delta, healed.failed) == ("ok", 1, -1.0, False)
    assert math.isnan(healed.p_value) and (healed.bad_baseline, healed.bad_current) == (0, 0)
