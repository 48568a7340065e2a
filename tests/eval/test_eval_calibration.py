"""Threshold calibration: the curve and the picks against brute force, a hand-built example, the
end-to-end numbers against the fast evaluator and the pipeline, and the warnings when the reranker
or its score range is not the one a baseline / calibration was made with."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.calibration.curve import best_f1, for_precision, for_recall, pr_curve, short_threshold


def _brute(scores: list[float], gold: list[bool], t: float) -> tuple[float, float, float]:
    kept = [g for s, g in zip(scores, gold) if s >= t]
    tp = sum(kept)
    p = tp / len(kept) if kept else 1.0
    r = tp / sum(gold) if sum(gold) else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


_data = st.lists(
    st.tuples(st.integers(0, 6).map(lambda i: i / 6), st.booleans()), min_size=1, max_size=40
)  # few distinct values: many ties


@settings(max_examples=200)
@given(_data, st.sampled_from([0.2, 0.5, 0.8, 1.0]))
def test_the_picks_equal_a_brute_force_scan(data: list[tuple[float, bool]], target: float) -> None:
    scores, gold = [s for s, _ in data], [g for _, g in data]
    c = pr_curve(scores, gold)
    ts = sorted(set(scores), reverse=True)
    assert c.threshold.tolist() == ts
    table = {t: _brute(scores, gold, t) for t in ts}
    for i, t in enumerate(ts):
        assert np.isclose([c.precision[i], c.recall[i], c.f1[i]], table[t]).all()
    if not any(gold):
        assert best_f1(c) is None and for_precision(c, target) is None and for_recall(c, target) is None
        return
    top = max(v[2] for v in table.values())
    assert best_f1(c) == max(t for t in ts if np.isclose(table[t][2], top))  # ties: the highest threshold
    reach_p = [t for t in ts if table[t][0] >= target - 1e-12]
    assert for_precision(c, target) == (min(reach_p) if reach_p else None)
    reach_r = [t for t in ts if table[t][1] >= target - 1e-12]
    assert for_recall(c, target) == (max(reach_r) if reach_r else None)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.floats(0, 1, allow_subnormal=False), st.booleans()), min_size=1, max_size=30), st.data())
def test_a_short_threshold_keeps_exactly_the_same_candidates(data: list[tuple[float, bool]], pick: Any) -> None:
    """Ties and near-ties included: the printed (short) threshold keeps the candidates the exact one
    keeps, is never above it, and its decimal form is no longer than the exact one's."""
    scores, gold = [s for s, _ in data], [g for _, g in data]
    c = pr_curve(scores, gold)
    t = pick.draw(st.sampled_from(c.threshold.tolist()))
    short = short_threshold(c, t)
    assert short <= t and len(repr(short)) <= len(repr(t))
    assert [x >= short for x in scores] == [x >= t for x in scores]
    assert c.at(short) == c.at(t)


def test_the_printed_threshold_is_the_applied_one() -> None:
    """0.26717… rounded to 0.2672 for print would drop the gold passage scored 0.26717…: the
    suggestion is 0.26717, which keeps it, and is what the table prints."""
    c = pr_curve([0.9, 0.26717234, 0.2671, 0.1], [True, True, False, False])
    assert for_recall(c, 0.99) == 0.26717234 and short_threshold(c, 0.26717234) == 0.26717
    assert c.at(0.2672)["recall"] == 0.5 and c.at(0.26717)["recall"] == 1.0
    assert short_threshold(c, 0.9) == 0.9 and short_threshold(c, 0.1) == 0.1  # nothing below: 2 places


def test_precision_and_recall_at_a_threshold_by_hand() -> None:
    c = pr_curve([0.9, 0.8, 0.8, 0.4, 0.1], [True, False, True, False, True])
    assert c.at(0.8) == {"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "kept": 3.0}
    assert c.at(0.5) == c.at(0.8)  # between scores: the same candidates pass
    assert c.at(0.9) == {"precision": 1.0, "recall": 1 / 3, "f1": 0.5, "kept": 1.0}
    assert c.at(0.95)["kept"] == 0.0 and c.at(0.95)["recall"] == 0.0
    assert c.at(0.0) == {"precision": 0.6, "recall": 1.0, "f1": 0.75, "kept": 5.0}
    assert best_f1(c) == 0.1 and for_precision(c, 0.9) == 0.9 and for_recall(c, 0.6) == 0.8


def test_end_to_end_numbers_are_the_fast_evaluators_and_the_pipelines(
    eval_lab: Any, small_ds: Any, small_spec: Any
) -> None:
    from rag_lab.eval.calibration import acalibrate, end_to_end
    from rag_lab.eval.metrics import evaluate_retrieval
    from rag_lab.eval.runner import evaluate_lab
    from rag_lab.tuning import FastEvaluator, doc_ids
    from rag_lab.tuning.capture import CaptureQuestion, acapture_questions

    kb = small_spec.kb_name
    cal = asyncio.run(acalibrate(eval_lab, small_ds, kb, target_precision=1.0, target_recall=0.95))
    assert [s["name"] for s in cal.suggestions] == ["current", "best F1", "precision >= 1", "recall >= 0.95"]
    assert cal.model_id.startswith("embedding-rescorer:") and cal.score_range is not None
    inputs = asyncio.run(
        acapture_questions(eval_lab, [CaptureQuestion(q.id, q.question) for q in small_ds.queries], kb)
    )
    fe = FastEvaluator(inputs, eval_lab.params)
    gold = {q.id: set(q.gold_ids) for q in small_ds.queries}
    for s in [*cal.suggestions, {"threshold": 0.9, "end_to_end": end_to_end(fe, 0.9, gold, cal.ks)}]:
        t = s["threshold"]
        fe.stats.outcomes.clear()
        got = fe.evaluate({"rerank_threshold": t})
        summ = evaluate_retrieval({q: doc_ids(r) for q, r in got.items()}, gold, ks=cal.ks).summary()
        e2e = s["end_to_end"]
        assert {k: e2e[f"recall@{k}"] for k in cal.ks} == {k: summ[f"recall@{k}"] for k in cal.ks}
        assert {k: v for k, v in e2e["outcomes"].items() if v} == fe.stats.outcomes
    md = cal.markdown()
    for s in cal.suggestions[1:]:  # every suggestion prints the value it was evaluated at
        assert f"| {s['name']} | {s['threshold']!r} |" in md
    high = end_to_end(fe, 0.9, gold, cal.ks)["outcomes"]  # above every score: the lower rungs serve
    assert high["fallback_top1"] + high["threshold_degraded"] > 0 and high["ok"] == 0
    # the pipeline at the best-F1 threshold: the same recall, and the eval records the same score range
    t = cal.suggestion("best F1")["threshold"]
    res = asyncio.run(evaluate_lab(eval_lab, small_ds, kb, ks=cal.ks, progress=False, params={"rerank_threshold": t}))
    assert {k: res.summary()[f"recall@{k}"] for k in cal.ks} == {
        k: cal.suggestion("best F1")["end_to_end"][f"recall@{k}"] for k in cal.ks
    }
    assert res.rerank_scores == {"min": cal.score_range[0], "max": cal.score_range[1], "questions": 10}


def test_gate_warns_when_the_reranker_or_its_score_range_changed() -> None:
    import datetime

    from rag_lab.eval.gate.provenance import provenance_warnings

    class R:
        def __init__(self, prov: dict[str, Any]) -> None:
            self.meta = {"provenance": prov}

    def prov(reranker: str, lo: float, hi: float) -> dict[str, Any]:
        return {
            "code_version": "v",
            "models": {"reranker": reranker},
            "datasets": {},
            "rerank_scores": {"s": {"min": lo, "max": hi, "questions": 10}},
        }

    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert provenance_warnings(R(prov("a", 0.0, 0.83)), R(prov("a", 0.01, 0.85)), 0, now) == []  # noise
    (w,) = provenance_warnings(R(prov("a", 0.0, 0.83)), R(prov("a", -7.9, 9.6)), 0, now)
    assert w.startswith("suite 's': the reranker's raw scores span [-7.9, 9.6] now, [0, 0.83] in the baseline")
    got = provenance_warnings(R(prov("a", 0.0, 0.83)), R(prov("bge", 0.0, 0.83)), 0, now)
    assert got == [
        "the reranker model differs from the baseline's ('a' → 'bge'): scores on other scales are not comparable; "
        "rerank_threshold and rerank_fallback_min_score were set for the old one's scores"
    ]


def test_calibrate_check_warns_on_another_reranker(tmp_path: Path, capsys: Any) -> None:
    from rag_lab.commands.evaluate import main
    from rag_lab.eval.calibration import Calibration, check_calibration
    from rag_lab.lab.outputs import write_calibration

    cal = Calibration("other-reranker", "s", [0.0, 0.8], None, 1, 2, 1, 0.3, {}, {}, [], gold_scores=[0.8])
    cal.suggestions = [{"name": "best F1", "threshold": 0.5}]
    path = write_calibration(cal, tmp_path, "cal")["json"]
    assert json.loads(path.read_text())["model_id"] == "other-reranker"
    assert check_calibration(cal, "other-reranker", [0.0, 0.79]) == []
    (w,) = check_calibration(cal, "other-reranker", [-5.0, 5.0])
    assert "span [-5, 5] now, [0, 0.8] in the calibration" in w
    assert main(["--workspace", str(tmp_path / "ws"), "calibrate", "--check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "warning: the reranker differs from the calibration's ('other-reranker' → 'embedding-rescorer:" in err
    assert "(best F1 0.5000)" in err
