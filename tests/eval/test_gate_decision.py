"""The gate's interval decision on the cases that matter to a CI job: a tiny wobble on a real
baseline passes, a drop beyond the tolerance fails whatever the slice's size (regression or
probable regression, ``--allow-underpowered`` or not), an unstable judge's drop fails with every
question in the test, a judge that never answered is reported once, and the held-out check never
recommends a config that loses."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.gate import GatePolicy, compare_reports, paired_test, questions_to_settle
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, SuiteResult, load_report
from rag_lab.eval.runner import QueryRecord
from rag_lab.eval.sweep.holdout import hold_out, holdout_verdict
from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.runners import _Suite
from rag_lab.lab.outputs import write_report, write_sweep_outputs

BASELINE = Path(__file__).resolve().parents[2] / "reports" / "baseline.json"


def _gate(tmp_path: Path, base: EvalReport | Path, cur: EvalReport, *extra: str) -> tuple[int, str]:
    from rag_lab.commands.evaluate import main

    bpath = base if isinstance(base, Path) else write_report(base, tmp_path, "base", formats=["json"])["json"]
    cpath = write_report(cur, tmp_path, "current", formats=["json"])["json"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["gate", "--baseline", str(bpath), "--current", str(cpath), "--quiet", "--out", str(tmp_path)])
        if extra:
            code2 = main(
                ["gate", "--baseline", str(bpath), "--current", str(cpath), "--quiet", "--out", str(tmp_path), *extra]
            )
            assert code2 == code, f"{extra} changed the exit code: {buf.getvalue()}"
    return code, buf.getvalue()


# --------------------------------------------------------------------------- the paired test


def _brute(d: list[float], alternative: str) -> float:
    """Exact sign-flip p-value by enumeration of the 2^n sign vectors."""
    obs = sum(d) / len(d)
    means = [sum(s * abs(x) for s, x in zip(signs, d)) / len(d) for signs in itertools.product((1, -1), repeat=len(d))]
    hits = [m <= obs + 1e-12 for m in means] if alternative == "less" else [m >= obs - 1e-12 for m in means]
    return sum(hits) / len(means)


@settings(max_examples=60)
@given(
    st.lists(st.sampled_from([-1.0, -0.5, -0.02, 0.0, 0.0, 0.25, 1.0]), min_size=1, max_size=9),
    st.sampled_from([0.0, 0.02, 0.5]),
)
def test_sign_flip_pvalues_equal_enumeration(d: list[float], tol: float) -> None:
    """Ties and duplicates included: the three p-values equal the exact enumeration of the sign
    vectors (the non-inferiority one on ``d + tol``), each in (0, 1]."""
    t = paired_test(d, tol)
    assert t.p_drop == pytest.approx(_brute(d, "less"))
    assert t.p_up == pytest.approx(_brute(d, "greater"))
    assert t.p_ni == pytest.approx(_brute([x + tol for x in d], "greater"))
    assert all(0 < p <= 1 for p in (t.p_drop, t.p_up, t.p_ni))
    if len(set(d)) == 1:
        assert t.ci == (d[0], d[0])


def test_pvalues_by_hand_and_the_plus_one_correction() -> None:
    assert paired_test([-1.0, -1.0, -1.0]).p_drop == 1 / 8  # only the observed signs are as low
    assert paired_test([-1.0, -1.0, 0.0]).p_drop == 2 / 8  # the zero's sign does not matter
    assert paired_test([-2.0, 1.0]).p_drop == 0.5  # (-2, +1) and (-2, -1) are as low
    assert paired_test([-0.5]).p_drop == 0.5 and paired_test([-0.5]).p_up == 1.0  # one pair, exactly
    # non-inferiority at 0.02: 0.01 + 0.02 > 0 on all 6 questions → only the observed signs: 2^-6
    assert paired_test([-0.01] * 6, 0.02).p_ni == 1 / 64
    assert paired_test([-0.03] * 6, 0.02).p_ni == 1.0  # every question below -tol: nothing rules it out
    # 20 equal drops: a resample of 2^20 sign vectors almost never draws the all-minus one
    for n in (200, 1000):
        assert paired_test([-1.0] * 20, n_resamples=n, seed=3).p_drop == pytest.approx(1 / (n + 1))
        boot = paired_test([-1.0] * 20, 0.5, test="bootstrap", n_resamples=n, seed=3)
        assert (boot.p_drop, boot.p_up, boot.p_ni) == (pytest.approx(1 / (n + 1)), 1.0, 1.0)
    assert paired_test([-1.0, 1.0] * 10, seed=5) == paired_test([-1.0, 1.0] * 10, seed=5)  # seeded
    with pytest.raises(ValueError, match="finite"):
        paired_test([math.nan])
    with pytest.raises(ValueError, match="^paired test of no pairs$"):
        paired_test([])
    with pytest.raises(ValueError, match="test='t'"):
        paired_test([1.0], test="t")


def test_the_resampling_is_seeded_and_its_edges_pinned() -> None:
    """The interval is scipy's percentile bootstrap with the policy's seed (another seed, another
    interval); the default is 10,000 resamples; the bootstrap's non-inferiority share counts a mean
    exactly at -tolerance as not ruling it out."""
    import numpy as np
    from scipy import stats

    d = [0.31, -0.12, 0.05, -0.4, 0.22, 0.0, -0.07, 0.15]
    ref = stats.bootstrap((np.array(d),), np.mean, n_resamples=2000, method="percentile", rng=7).confidence_interval
    for test in ("permutation", "bootstrap"):
        t = paired_test(d, 0.02, test=test, n_resamples=2000, seed=7)
        assert t.ci == (ref.low, ref.high) and t.ci != paired_test(d, 0.02, test=test, n_resamples=2000, seed=8).ci
    assert paired_test([-1.0] * 20).p_drop == pytest.approx(1 / 10_001)  # the default: 10,000 resamples
    at = paired_test([-0.5] * 5, 0.5, test="bootstrap", n_resamples=999)
    assert (at.p_drop, at.p_ni) == (pytest.approx(1 / 1000), 1.0)


def test_questions_to_settle() -> None:
    assert questions_to_settle([0.01], 0.02, 0.05) == 5  # one question: no spread, the sign-flip floor
    # SD 0.0105 and mean 0: the normal approximation says 2, the sign-flip test needs 5 (2^-5 < 0.05)
    assert questions_to_settle([-0.01, 0.01] * 5, 0.02, 0.05) == 5
    # SD 0.1: ((1.6449 + 0.8416) * 0.1 / 0.02)^2 = 154.6 → 155
    d = [0.1, -0.1] * 10
    sd = math.sqrt(sum(x * x for x in d) / (len(d) - 1))
    assert questions_to_settle(d, 0.02, 0.05) == math.ceil(((1.6448536 + 0.8416212) * sd / 0.02) ** 2) == 163
    assert questions_to_settle([-0.02] * 4, 0.02, 0.05) is None  # the drop is the tolerance: none would
    assert questions_to_settle([0.0] * 3, 0.02, 0.05 / 41) == 10  # 2^-10 < 0.00122 <= 2^-9
    assert questions_to_settle([0.0] * 3, 0.02, 0.05 / 41, test="bootstrap") == 2


# --------------------------------------------------------------------------- worked examples


def test_a_tiny_drop_on_the_committed_baseline_passes(tmp_path: Path) -> None:
    """One question's nDCG@10 lowered by 0.01 (mean −0.0003 on 40 questions, 44 checks, Holm): the
    interval rules out a drop of 0.02, so the check passes as ``ok``."""
    cur = load_report(BASELINE)
    s = cur.suites[0]
    row = next(r for r in s.retrieval.rows if r["ndcg@10"] >= 0.5)
    row["ndcg@10"] -= 0.01
    code, out = _gate(tmp_path, BASELINE, cur)
    assert code == 0, out
    res = compare_reports(load_report(BASELINE), cur)
    (c,) = [c for c in res.checks if c.n_informative]
    assert (c.suite, c.metric, c.status, c.n_informative) == (s.name, "ndcg@10", "ok", 1)
    assert c.delta == pytest.approx(-0.01 / len(s.records))
    assert c.p_ni_adjusted < 0.05 and -0.02 < c.ci_low <= c.delta <= c.ci_high <= 0
    assert "1 tested checks" in res.verdict()


def _two_gold(lost: int, n: int = 40) -> EvalReport:
    """``n`` questions with two gold documents each, both retrieved, except ``lost`` questions
    that lose one (recall@10 0.5)."""
    qrels = {f"q{i}": {f"a{i}", f"b{i}"} for i in range(n)}
    runs = {q: ([f"a{i}", "x"] if i < lost else [f"a{i}", f"b{i}"]) for i, q in enumerate(qrels)}
    rr = evaluate_retrieval(runs, qrels, ks=(1, 5, 10))
    recs = [QueryRecord(q, "?", sorted(g), ["a"], retrieved_doc_ids=runs[q]) for q, g in qrels.items()]
    return EvalReport([SuiteResult("own", "d", "kb", {}, {}, rr, recs, None)])


def test_a_drop_beyond_the_tolerance_fails_with_and_without_allow_underpowered(tmp_path: Path) -> None:
    """3 of 40 questions lose one of two gold documents: recall@10 −0.0375 (about twice the
    tolerance). Not significant after Holm (p ≈ 1/8): a probable regression, which fails, and
    ``--allow-underpowered`` does not let it through; 12 such questions are significant."""
    base = _two_gold(0)
    code, out = _gate(tmp_path, base, _two_gold(3), "--allow-underpowered")
    assert code == 1, out
    res = compare_reports(base, _two_gold(3), GatePolicy(allow_underpowered=True))
    rec = next(c for c in res.checks if c.metric == "recall@10")
    assert (rec.status, rec.tier, rec.failed) == ("probable_regression", "probable regression", True)
    assert rec.delta == pytest.approx(-0.0375) and rec.p_adjusted >= 0.05
    assert "own/recall@10 probable regression" in res.verdict()
    big = compare_reports(base, _two_gold(12))
    assert next(c for c in big.checks if c.metric == "recall@10").status == "regression"
    # the landed rule's case: a drop within the tolerance on 1 question passes
    assert compare_reports(base, _two_gold(1), GatePolicy(metrics=["recall@10"], tolerance=0.05)).passed


def test_a_small_wobble_within_the_tolerance_is_inconclusive_on_a_small_slice() -> None:
    """8 questions moving ±0.1 (mean 0): a drop of 0.02 is not ruled out. Inconclusive fails
    unless allowed and says how many questions would settle it."""

    def rep(vals: list[float]) -> EvalReport:
        return _chrf(vals)

    base, cur = rep([0.5] * 8), rep([0.6, 0.4] * 4)
    (c,) = [c for c in compare_reports(base, cur, GatePolicy(metrics=["chrf"])).checks if c.metric == "chrf"]
    assert (c.status, c.tier, c.failed) == ("inconclusive", "inconclusive", True)
    assert c.n_needed == questions_to_settle([0.1, -0.1] * 4, 0.02, 0.05) == 177  # SD 0.1069 (ddof 1)
    assert "about 177 questions with changes like these would settle it (8 now)" in c.note
    allowed = compare_reports(base, cur, GatePolicy(metrics=["chrf"], allow_underpowered=True))
    assert allowed.passed and "inconclusive (allowed)" in allowed.table()


def _chrf(values: list[float], repeats: list[list[float]] | None = None, metric: str = "chrf") -> EvalReport:
    qids = [f"q{i}" for i in range(len(values))]
    recs = [QueryRecord(q, "?", [f"g{q}"], ["a"], retrieved_doc_ids=[f"g{q}"]) for q in qids]
    rr = evaluate_retrieval({r.qid: r.retrieved_doc_ids for r in recs}, {r.qid: set(r.gold_ids) for r in recs}, (1,))
    rg = RagasResult([metric], qids, {metric: list(values)}, {}, {}, {}, {metric: repeats} if repeats else {})
    return EvalReport([SuiteResult("s", "d", "kb", {}, {}, rr, recs, rg)])


def test_an_unstable_judges_drop_fails_with_every_question_in_the_test() -> None:
    """Faithfulness 0.46 → 0.34: the five questions that fell have judge repeats spread wider than
    the tolerance. They stay in the test as their means: a regression, not ``unchanged``."""
    stable = [[0.46, 0.46]] * 5
    base = _chrf([0.46] * 10, stable + [[0.2, 0.72]] * 5, "faithfulness")
    cur = _chrf([0.46] * 5 + [0.22] * 5, stable + [[0.0, 0.44]] * 5, "faithfulness")
    res = compare_reports(base, cur, GatePolicy(metrics=["faithfulness"]))
    (c,) = [c for c in res.checks if c.metric == "faithfulness"]
    assert (c.baseline, c.current) == (pytest.approx(0.46), pytest.approx(0.34))
    assert (c.status, c.n_pairs, c.p_value) == ("regression", 10, 1 / 32)
    assert c.unstable == ["q5", "q6", "q7", "q8", "q9"] and not res.passed
    assert "in the paired test as their means" in res.table()


def test_a_judge_that_never_answered_is_no_valid_samples_and_passes_against_itself() -> None:
    qids = [f"q{i}" for i in range(6)]
    reasons = {q: "InstructorRetryException: statements Field required" for q in qids}
    rg = RagasResult(
        ["faithfulness", "chrf"],
        qids,
        {"faithfulness": [math.nan] * 6, "chrf": [0.5] * 6},
        {"faithfulness": reasons},
        {"faithfulness": qids},
        {"model": "smollm2-135m", "calls": 18, "failed": 18},
    )
    recs = [QueryRecord(q, "?", [f"g{q}"], ["a"], retrieved_doc_ids=[f"g{q}"]) for q in qids]
    rr = evaluate_retrieval({r.qid: r.retrieved_doc_ids for r in recs}, {r.qid: set(r.gold_ids) for r in recs}, (1,))
    rep = EvalReport([SuiteResult("s", "d", "kb", {}, {}, rr, recs, rg)])
    res = compare_reports(rep, rep)
    (c,) = [c for c in res.checks if c.metric == "faithfulness"]
    assert res.passed and (c.status, c.tier, c.failed) == ("no_samples", "pass", False)
    assert c.note == (
        "no valid samples in the baseline and the current run (judge smollm2-135m, "
        "e.g. InstructorRetryException: statements Field required)"
    )
    # NaN where the baseline had a value still fails
    good = EvalReport(
        [
            SuiteResult(
                "s", "d", "kb", {}, {}, rr, recs, RagasResult(["faithfulness"], qids, {"faithfulness": [0.5] * 6})
            )
        ]
    )
    bad = EvalReport(
        [
            SuiteResult(
                "s",
                "d",
                "kb",
                {},
                {},
                rr,
                recs,
                RagasResult(["faithfulness"], qids, {"faithfulness": [math.nan] * 6}, {}, {"faithfulness": qids}),
            )
        ]
    )
    assert next(c for c in compare_reports(good, bad).checks if c.metric == "faithfulness").status == "nan"


def test_holm_corrects_the_rise_before_an_improvement() -> None:
    """Seven rises of 0.15 and one fall of 0.01 on each of three suites: raw p_up = 2/256 (the
    fall's sign may flip), Holm over the three checks 6/256 = 0.0234; at alpha 0.02 that is no
    improvement while the raw p would be one. Non-inferiority (1/256, Holm 0.0117) still passes."""

    def three(values: list[float]) -> EvalReport:
        suites = [_chrf(values).suites[0] for _ in range(3)]
        for name, s in zip("abc", suites):
            s.name = name
        return EvalReport(suites)

    base, cur = three([0.5] * 8), three([0.65] * 7 + [0.49])
    res = compare_reports(base, cur, GatePolicy(metrics=["chrf"], alpha=0.02))
    chrf = [c for c in res.checks if c.metric == "chrf"]
    assert [c.p_up for c in chrf] == pytest.approx([2 / 256] * 3)
    assert [c.p_up_adjusted for c in chrf] == pytest.approx([6 / 256] * 3)
    assert [c.p_ni_adjusted for c in chrf] == pytest.approx([3 / 256] * 3)
    assert {c.status for c in chrf} == {"ok"} and res.passed
    nocorr = compare_reports(base, cur, GatePolicy(metrics=["chrf"], alpha=0.02, correction="none"))
    assert {c.status for c in nocorr.checks if c.metric == "chrf"} == {"improved"}


# --------------------------------------------------------------------------- the held-out verdict


def _held(chosen: list[float], default: list[float], direction: str = "maximize") -> Any:
    """hold_out with a 'sweep' that picks rerank_threshold 0.6 and held-out values given per config."""
    n = len(chosen)
    from rag_lab.eval.datasets.schema import Dataset, QueryItem

    ds = Dataset("toy", Path("."), [], [QueryItem(f"q{i}", f"question {i}", [], ["d"]) for i in range(n)])
    obj = "ndcg@10" if direction == "maximize" else "latency_ms"

    async def tune(parts: list[Any]) -> SweepResult:
        rows = [
            {"config_index": 0, "rerank_threshold": 0.6, obj: 0.6814, "latency_ms": 1.0},
            {"config_index": 1, "rerank_threshold": 0.3, obj: 0.6, "latency_ms": 2.0},
        ]
        if direction == "minimize":
            rows = [{**r, obj: v} for r, v in zip(rows, (1.0, 2.0))]
        return SweepResult(["rerank_threshold"], obj, direction, rows, base_params={"rerank_top_k": 5})

    async def score(config: Any, parts: list[Any]) -> dict[str, dict[str, float]]:
        vals = chosen if config.get("rerank_threshold") == 0.6 else default
        return {"toy": {f"q{i}": v for i, v in enumerate(vals)}}

    return asyncio.run(hold_out([_Suite("toy", ds, "kb")], [_Suite("toy", ds, "kb")], tune, score, {"rerank_top_k": 5}))


def test_a_tuned_config_that_loses_held_out_keeps_the_default_in_best_yaml(tmp_path: Path) -> None:
    """MuSiQue-like: the sweep's best (0.6814 on the tuning part) scores lower than the default on
    every held-out question that moved: verdict worse, ``_best.yaml`` holds the default and the
    tuned config goes to ``_tuned.yaml``."""
    default = [0.6289] * 60
    chosen = [0.6289 - (0.0255 if i % 3 == 0 else 0.0) for i in range(60)]  # Δ −0.0085
    result, ho = _held(chosen, default)
    assert ho.delta == pytest.approx(-0.0085) and ho.ci[1] < 0 and ho.verdict == "worse" and not ho.applies
    assert ho.p_worse < 0.001 and ho.p_value > 0.99  # p that it is better
    assert ho.line().startswith("held out: tuned 0.6204 vs default 0.6289 (ndcg@10, 60 of 120 questions), Δ -0.0085")
    assert "verdict worse" in ho.line()
    result.holdout = {**ho.to_dict(), "line": ho.line(), "markdown": ho.markdown()}
    paths = write_sweep_outputs(result, tmp_path, "s")
    best = yaml.safe_load(paths["best_yaml"].read_text(encoding="utf-8"))
    tuned = yaml.safe_load(paths["tuned_yaml"].read_text(encoding="utf-8"))
    assert best == {"params": {"rerank_top_k": 5}}
    assert tuned == {"params": {"rerank_top_k": 5, "rerank_threshold": 0.6}}
    assert "worse than the default on held-out questions" in paths["best_yaml"].read_text(encoding="utf-8")
    assert "s_best.yaml keeps the default" in ho.decision("s")
    # a tuned config that wins everywhere it moved is applied
    result2, win = _held([0.7 if i % 2 else 0.65 for i in range(40)], [0.65] * 40)
    assert win.verdict == "better" and win.applies and win.p_value < 0.001 and win.p_worse == 1.0
    result2.holdout = win.to_dict() | {"line": win.line(), "markdown": win.markdown()}
    paths2 = write_sweep_outputs(result2, tmp_path / "w", "s")
    assert yaml.safe_load(paths2["best_yaml"].read_text(encoding="utf-8"))["params"]["rerank_threshold"] == 0.6
    assert "tuned_yaml" not in paths2
    # nothing moved: not better
    assert _held([0.5] * 10, [0.5] * 10)[1].verdict == "not better"


def test_a_minimised_objective_is_better_when_it_falls() -> None:
    _, ho = _held([1.0] * 20, [2.0] * 20, "minimize")  # the tuned config is faster on every question
    assert ho.direction == "minimize" and ho.delta == -1.0
    assert (ho.verdict, ho.p_value, ho.p_worse) == ("better", pytest.approx(1 / 10001), 1.0)
    _, slow = _held([3.0] * 20, [2.0] * 20, "minimize")
    assert (slow.verdict, slow.p_worse) == ("worse", pytest.approx(1 / 10001))
    assert (
        holdout_verdict((0.001, 0.01), "maximize") == "better"
        and holdout_verdict((0.0, 0.01), "maximize") == "not better"
    )
    assert (
        holdout_verdict((-0.01, -0.001), "minimize") == "better"
        and holdout_verdict((0.001, 0.01), "minimize") == "worse"
    )


def test_the_spread_of_the_verdict_across_splits() -> None:
    from rag_lab.eval.sweep.holdout import folds_summary

    results = [_held([0.6] * 10, [0.5] * 10)[1], _held([0.5] * 10, [0.5] * 10)[1], _held([0.4] * 10, [0.5] * 10)[1]]
    assert [r.verdict for r in results] == ["better", "not better", "worse"]
    assert folds_summary(results) == "3 splits: better 1, not better 1, worse 1; Δ from -0.1000 to +0.1000"
    assert folds_summary(results[:1]) == "1 splits: better 1, not better 0, worse 0; Δ from +0.1000 to +0.1000"
