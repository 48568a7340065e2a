"""``eval --judge-repeats N``: a loopback judge with scripted, varying verdicts scores each sample N
times; the spread is reported, questions whose repeats straddle the tolerance are unstable, and
the gate keeps them in that metric's paired test as their means and lists them."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from rag_lab.eval.gate import GatePolicy, compare_reports
from rag_lab.eval.judge.repeats import is_unstable, repeat_stats, unstable_qids
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import JudgeConfig, RagasResult, RagasSample, ascore_repeated
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, ReportSchemaError, SuiteResult, render_markdown
from rag_lab.eval.report.schema import validate_report_data
from tests.models.fake_openai import FakeOpenAIServer, RecordedRequest, Reply

CHAT = "/v1/chat/completions"


def _sample(qid: str) -> RagasSample:
    return RagasSample(qid, f"question {qid}?", [f"context of {qid}"], ["d1"], "the reference", ["d1"], ["gold"], "ans")


class ScriptedJudge:
    """Answers ragas' context-precision prompt with the next verdict scripted for that question."""

    def __init__(self, verdicts: dict[str, list[int]]) -> None:
        self.verdicts = {q: list(v) for q, v in verdicts.items()}

    def __call__(self, req: RecordedRequest) -> Reply:
        user = req.json["messages"][-1]["content"]
        data = json.loads(re.search(r"input: (\{.*\})\s*Output:\s*$", user, re.DOTALL).group(1))
        qid = re.search(r"question (\w+)\?", data["question"]).group(1)
        return Reply.chat(json.dumps({"reason": "scripted", "verdict": self.verdicts[qid].pop(0)}))


async def test_repeats_through_a_loopback_judge() -> None:
    judge_fn = ScriptedJudge({"steady": [1, 1, 1], "wobbly": [1, 0, 1]})
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([judge_fn] * 6))
        judge = JudgeConfig.from_mapping({"model": "judge-m", "base_url": srv.base_url, "concurrency": 1})
        r = await ascore_repeated(
            [_sample("steady"), _sample("wobbly")], ["llm_context_precision", "id_context_recall"], judge, 3
        )
        assert len(srv.requests_to(CHAT)) == 6  # 2 samples x 3 repeats, the offline metric once
    rep = r.repeats["llm_context_precision"]
    assert [[round(v, 6) for v in row] for row in rep] == [[1.0, 1.0, 1.0], [1.0, 0.0, 1.0]]
    assert r.values["llm_context_precision"] == pytest.approx([1.0, 2 / 3])
    assert "id_context_recall" not in r.repeats and r.values["id_context_recall"] == [1.0, 1.0]
    assert r.judge["calls"] == 6 and r.judge["model"] == "judge-m"
    assert len(r.judge["prompt_hash"]["llm_context_precision"]) == 16
    assert unstable_qids(r.qids, rep, 0.02) == ["wobbly"]


def test_stats_and_the_unstable_rule() -> None:
    st = repeat_stats([1.0, 0.0, 1.0])
    assert (st["mean"], st["min"], st["max"], st["spread"]) == (pytest.approx(2 / 3), 0.0, 1.0, 1.0)
    assert st["std"] == pytest.approx(math.sqrt(1 / 3))
    assert not is_unstable([0.5, 0.51], 0.02)  # spread 0.01 within the tolerance
    assert is_unstable([0.5, 0.53], 0.02)  # 0.03 > 0.02
    assert not is_unstable([0.5, 0.53], 0.05)  # the tolerance decides
    assert is_unstable([0.5, math.nan, 0.5], 0.02)  # scored only some of the times
    assert not is_unstable([math.nan, math.nan], 0.02) and not is_unstable([0.7], 0.02)


def _report(scores: dict[str, list[float]]) -> EvalReport:
    qids = list(scores)
    runs = {q: ["d1"] for q in qids}
    rr = evaluate_retrieval(runs, {q: {"d1"} for q in qids}, ks=(1, 5, 10))
    recs = [QueryRecord(q, "?", ["d1"], [], retrieved_doc_ids=["d1"]) for q in qids]
    reps = [scores[q] for q in qids]
    means = [sum(r) / len(r) for r in reps]
    ragas = RagasResult(["faithfulness"], qids, {"faithfulness": means}, repeats={"faithfulness": reps})
    return EvalReport([SuiteResult("s", "demo", "kb", {}, {}, rr, recs, ragas)])


STEADY = {f"q{i}": [0.9, 0.9, 0.9] for i in range(8)}


def test_the_gate_keeps_unstable_questions_as_their_means_and_lists_them() -> None:
    base = _report({**STEADY, "noisy": [0.2, 0.9, 0.5]})
    # every steady question drops by 0.5; the noisy one "rises" by 1/6 through judge noise
    cur = _report({**{q: [0.4, 0.4, 0.4] for q in STEADY}, "noisy": [1.0, 0.1, 1.0]})
    res = compare_reports(base, cur, GatePolicy(metrics=["faithfulness"]))
    check = next(c for c in res.checks if c.metric == "faithfulness")
    assert check.unstable == ["noisy"]
    assert check.n_pairs == 9 and check.delta == pytest.approx((8 * -0.5 + 1 / 6) / 9)  # the noisy one is paired
    # 2 of the 512 sign vectors are as low: the observed one, and the one that also flips the rise
    assert check.status == "regression" and check.p_value == pytest.approx(2 / 512)
    assert res.unstable_count() == 1
    md = res.markdown()
    assert "unstable: s/faithfulness: 1 question(s)" in md and "in the paired test as their means (noisy)" in md
    assert "noisy" in res.table() and res.to_dict()["unstable"] == {"s/faithfulness": ["noisy"]}
    assert res.to_dict()["checks"][0]["unstable"] == ["noisy"]


def test_an_unstable_question_of_the_current_run_counts_in_the_test() -> None:
    base = _report(dict(STEADY))
    cur = _report({**STEADY, "q0": [0.0, 0.9, 0.9]})  # mean 0.6: -0.3 on one of 8 questions
    check = compare_reports(base, cur, GatePolicy(metrics=["faithfulness"])).checks[0]
    assert check.unstable == ["q0"] and check.n_pairs == 8 and check.delta == pytest.approx(-0.0375)
    assert check.status == "probable_regression" and check.failed


def test_a_metric_whose_questions_are_all_unstable_is_compared_on_their_means() -> None:
    noisy = {f"q{i}": [0.1, 0.9] for i in range(4)}
    res = compare_reports(_report(noisy), _report(noisy), GatePolicy(metrics=["faithfulness"]))
    check = res.checks[0]
    assert (check.status, check.n_pairs, check.unstable) == ("unchanged", 4, ["q0", "q1", "q2", "q3"])
    assert res.passed
    fell = _report({f"q{i}": [0.0, 0.6] for i in range(4)})  # every mean 0.5 → 0.3
    assert compare_reports(_report(noisy), fell, GatePolicy(metrics=["faithfulness"])).checks[0].status == (
        "probable_regression"  # 4 equal drops: p = 1/16, not significant; 0.2 is ten times the tolerance
    )


def test_repeats_round_trip_through_the_report_json_and_markdown() -> None:
    rep = _report({**STEADY, "noisy": [0.2, 0.9, math.nan]})
    back = EvalReport.from_dict(json.loads(rep.to_json()))
    assert back.suites[0].ragas.repeats["faithfulness"][-1][:2] == [0.2, 0.9]
    assert math.isnan(back.suites[0].ragas.repeats["faithfulness"][-1][2])
    md = render_markdown(back)
    assert "### Judge repeats (3 per sample)" in md and "faithfulness 1 of 9" in md
    assert "| noisy | faithfulness | 0.5500 | 0.2000 | 0.9000 |" in md and "**unstable**" in md
    once = _report(dict(STEADY))
    once.suites[0].ragas.repeats = {}  # scored once: no section, no "repeats" key in the JSON
    assert "Judge repeats" not in render_markdown(once) and "repeats" not in once.to_json()


def test_the_schema_checks_repeats() -> None:
    data: dict[str, Any] = json.loads(_report(dict(STEADY)).to_json())
    data["suites"][0]["ragas"]["repeats"]["faithfulness"][0] = [0.9, 1.7, 0.9]
    with pytest.raises(ReportSchemaError, match=r"ragas.repeats.faithfulness'.*1.7 is outside the range"):
        validate_report_data(data, "r.json")
    data["suites"][0]["ragas"]["repeats"]["faithfulness"] = [[0.9]] * 8
    with pytest.raises(ReportSchemaError, match="repeat counts"):
        validate_report_data(data, "r.json")
    data["suites"][0]["ragas"]["repeats"] = {"answer_relevancy": [[0.9, 0.9]] * 8}
    with pytest.raises(ReportSchemaError, match="did not score"):
        validate_report_data(data, "r.json")
