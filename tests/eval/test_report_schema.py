"""The report schema (:mod:`rag_lab.eval.report.schema`) on small hand-made reports: what it
accepts, and the exact line of each refusal (naming suite, question and field)."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import pytest

from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, ReportSchemaError, SuiteResult, validate_report, validate_report_data


def _row(qid: str, v: float = 1.0) -> dict[str, Any]:
    names = [f"{p}@1" for p in ("recall", "precision", "hit", "ndcg", "mrr")] + ["mrr", "map"]
    return {"qid": qid, "n_retrieved": 1, "n_gold": 1, "n_duplicates": 0, **dict.fromkeys(names, v)}


def _gold() -> dict[str, Any]:
    return {"id": "d", "ranks": {"fused": 1, "final": None}, "lost_at": "final"}


def _report() -> dict[str, Any]:
    """Two suites that pass: ``s`` (questions q1, q2, ragas scored twice per question) and ``t``."""
    qids = ["q1", "q2"]
    s = {
        "name": "s",
        "retrieval": {"ks": [1], "rows": [_row(q) for q in qids], "excluded_queries": []},
        "records": [{"qid": q, "gold_ids": ["d"], "latency_ms": 3.0, "funnel": {"gold": [_gold()]}} for q in qids],
        "ragas": {
            "metrics": ["faithfulness", "answer_relevancy"],
            "qids": qids,
            "values": {"faithfulness": [0.5, None], "answer_relevancy": [-0.5, math.nan]},
            "repeats": {"faithfulness": [[0.5, 0.5], [None, math.nan]]},
        },
        "summary": {"mrr": 1.0, "faithfulness": None, "latency_ms": 3.0},
        "funnel": {"recall": {"fused": {"5": 1.0}}, "hit": {}, "lost_at": {"final": 0.5}, "kept": 0.5},
    }
    t = {"name": "t", "retrieval": {"ks": [1], "rows": [_row("a")]}, "records": [{"qid": "a"}]}
    return {"kind": "rag_lab.eval.report", "format": 1, "suites": [s, t], "meta": {}}


def _problems(edit: Callable[[dict[str, Any]], object]) -> list[str]:
    data = _report()
    edit(data)
    with pytest.raises(ReportSchemaError) as exc:
        validate_report_data(data, "r.json")
    assert exc.value.source == "r.json"
    return exc.value.problems


def _s(d: dict[str, Any]) -> dict[str, Any]:
    suite: dict[str, Any] = d["suites"][0]
    return suite


def _row0(d: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = _s(d)["retrieval"]["rows"][0]
    return row


def _gold0(d: dict[str, Any]) -> dict[str, Any]:
    gold: dict[str, Any] = _s(d)["records"][0]["funnel"]["gold"][0]
    return gold


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: None,
        lambda d: _row0(d).update(n_gold=2.0, n_duplicates=None),  # a whole float or null is a count
        lambda d: _row0(d).pop("n_retrieved"),
        lambda d: _s(d)["retrieval"].update(ks=[1.0]),
        lambda d: (_s(d)["retrieval"]["rows"].pop(), _s(d)["retrieval"].update(excluded_queries=["q2"])),
        lambda d: _s(d)["records"][0].update(funnel={}),  # reports written before the funnel
        lambda d: _s(d)["records"][0].pop("funnel"),
        lambda d: _s(d).update(ragas=None, funnel=None, summary=None),
        lambda d: _s(d)["ragas"].update(repeats={}),
        lambda d: _s(d)["ragas"]["values"].update(bogus="values of an unscored metric are not read"),
        lambda d: d.pop("meta"),
    ],
    ids=[
        "as-is",
        "counts",
        "no-count",
        "float-ks",
        "excluded",
        "no-funnel",
        "funnel-absent",
        "optional",
        "no-repeats",
        "extra-values",
        "no-meta",
    ],
)
def test_accepted(edit: Callable[[dict[str, Any]], object]) -> None:
    data = _report()
    edit(data)
    validate_report_data(data, "r.json")


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        # metric rows
        (
            lambda d: _row0(d).update(map=math.nan),
            "suite 's', question 'q1', field 'map': missing value (null / NaN): retrieval metrics are always computed",
        ),
        (
            lambda d: _row0(d).update(map=None),
            "suite 's', question 'q1', field 'map': missing value (null / NaN): retrieval metrics are always computed",
        ),
        (lambda d: _row0(d).update(map=True), "suite 's', question 'q1', field 'map': True is a bool, not a number"),
        (
            lambda d: _row0(d).update(map={"a": 1}),
            "suite 's', question 'q1', field 'map': {'a': 1} is a dict, not a number",
        ),
        (
            lambda d: _row0(d).update(map=math.inf),
            "suite 's', question 'q1', field 'map': inf is outside the range [0, 1]",
        ),
        (
            lambda d: _row0(d).pop("mrr@1"),
            "suite 's', question 'q1', field 'mrr@1': missing (the suite's cut-offs [1] declare it)",
        ),
        (
            lambda d: _row0(d).update({"ndcg@5": 0.5}),
            "suite 's', question 'q1', field 'ndcg@5': a metric the suite's cut-offs do not declare",
        ),
        (lambda d: _row0(d).update(colour=1), "suite 's', question 'q1', field 'colour': unknown field"),
        (
            lambda d: _row0(d).update(n_gold=-1),
            "suite 's', question 'q1', field 'n_gold': -1 is not a count (integer >= 0)",
        ),
        (
            lambda d: _row0(d).update(n_gold=1.5),
            "suite 's', question 'q1', field 'n_gold': 1.5 is not a count (integer >= 0)",
        ),
        (
            lambda d: _row0(d).update(n_gold=math.inf),
            "suite 's', question 'q1', field 'n_gold': inf is not a count (integer >= 0)",
        ),
        (lambda d: _row0(d).pop("qid"), "suite 's', question 'row #1', field 'qid': None is not a non-empty string"),
        (lambda d: _s(d)["retrieval"]["rows"].append(5), "suite 's', question 'row #3': is a int, not an object"),
        (
            lambda d: _s(d)["retrieval"]["rows"].append(_row("q1")),
            "suite 's', question 'q1': the question has more than one metric row",
        ),
        (
            lambda d: _s(d)["retrieval"].update(ks=[1, 1]),
            "suite 's', field 'retrieval.ks': [1, 1] is not a list of distinct integers >= 1",
        ),
        (
            lambda d: _s(d)["retrieval"].update(ks=[0]),
            "suite 's', field 'retrieval.ks': [0] is not a list of distinct integers >= 1",
        ),
        (
            lambda d: _s(d)["retrieval"].update(ks=[math.inf]),
            "suite 's', field 'retrieval.ks': [inf] is not a list of distinct integers >= 1",
        ),
        (
            lambda d: _s(d)["retrieval"].pop("ks"),
            "suite 's', field 'retrieval.ks': None is not a list of distinct integers >= 1",
        ),
        # records
        (
            lambda d: _s(d)["records"][0].update(gold_ids=["d", 1]),
            "suite 's', question 'q1', field 'gold_ids': not a list of strings",
        ),
        (
            lambda d: _s(d)["records"][0].update(answer=None),
            "suite 's', question 'q1', field 'answer': None is a NoneType, not a string",
        ),
        (
            lambda d: _s(d)["records"][0].update(latency_ms=-1),
            "suite 's', question 'q1', field 'latency_ms': -1 is not a number >= 0",
        ),
        (
            lambda d: _s(d)["records"][0].update(latency_ms=math.nan),
            "suite 's', question 'q1', field 'latency_ms': nan is not a number >= 0",
        ),
        (
            lambda d: _s(d)["records"][1].update(qid=""),
            "suite 's', question 'record #2', field 'qid': '' is not a non-empty string",
        ),
        (
            lambda d: _s(d)["records"].append({"qid": "q1"}),
            "suite 's', question 'q1': the question has more than one record",
        ),
        (
            lambda d: _gold0(d)["ranks"].update(fused=0),
            "suite 's', question 'q1', field \"funnel.gold['d'].ranks.fused\": 0: ranks are integers >= 1 (or null) of the stages vector, keyword, fused, search, rerank, mmr, merge, final",
        ),
        (
            lambda d: _gold0(d)["ranks"].update(nope=1),
            "suite 's', question 'q1', field \"funnel.gold['d'].ranks.nope\": 1: ranks are integers >= 1 (or null) of the stages vector, keyword, fused, search, rerank, mmr, merge, final",
        ),
        (
            lambda d: _gold0(d).update(lost_at="vector"),
            "suite 's', question 'q1', field \"funnel.gold['d'].lost_at\": 'vector' is not a stage",
        ),
        (lambda d: _gold0(d).pop("id"), "suite 's', question 'q1', field 'funnel.gold.id': None is not a document id"),
        (
            lambda d: _s(d)["records"][0].update(funnel=[]),
            "suite 's', question 'q1', field 'funnel': is a list, not an object",
        ),
        # rows against records
        (
            lambda d: d["suites"][1]["retrieval"]["rows"].append(_row("b")),
            "suite 't', question 'b': no per-question record for 1 metric row(s) ('b')",
        ),
        (
            lambda d: _s(d)["retrieval"]["rows"].pop(),
            "suite 's', question 'q2': 1 record(s) without a metric row and not excluded ('q2')",
        ),
        # ragas
        (
            lambda d: _s(d)["ragas"]["values"]["faithfulness"].__setitem__(1, 1.5),
            "suite 's', question 'q2', field 'faithfulness': 1.5 is outside the range [0, 1]",
        ),
        (
            lambda d: _s(d)["ragas"]["values"]["answer_relevancy"].__setitem__(0, -1.5),
            "suite 's', question 'q1', field 'answer_relevancy': -1.5 is outside the range [-1, 1]",
        ),
        (
            lambda d: _s(d)["ragas"]["values"].update(faithfulness=[0.5]),
            "suite 's', field 'ragas.values.faithfulness': 1 values for 2 questions",
        ),
        (
            lambda d: _s(d)["ragas"]["metrics"].append("nope"),
            "suite 's', field \"ragas.metrics['nope']\": unknown metric name",
        ),
        (lambda d: _s(d)["ragas"].update(qids=["q1", 2]), "suite 's', field 'ragas.qids': not a list of question ids"),
        (
            lambda d: _s(d)["ragas"].update(qids=["q1", "q1"]),
            "suite 's', question 'q1', field 'ragas.qids': 1 question(s) scored twice ('q1')",
        ),
        (
            lambda d: _s(d)["ragas"].update(qids=["q1", "q9"]),
            "suite 's', question 'q9', field 'ragas.qids': 1 scored question(s) have no record",
        ),
        (
            lambda d: _s(d)["ragas"]["repeats"]["faithfulness"].__setitem__(1, [0.5, 1.7]),
            "suite 's', question 'q2', field 'ragas.repeats.faithfulness': 1.7 is outside the range [0, 1]",
        ),
        (
            lambda d: _s(d)["ragas"]["repeats"].update(faithfulness=[[0.5]]),
            "suite 's', field 'ragas.repeats.faithfulness': needs one list of repeats for each of the 2 questions",
        ),
        (
            lambda d: _s(d)["ragas"]["repeats"].update(faithfulness=[[0.5], [0.5]]),
            "suite 's', field 'ragas.repeats': repeat counts [1]: expected one count >= 2",
        ),
        (
            lambda d: _s(d)["ragas"]["repeats"].update(chrf=[[0.5, 0.5]] * 2),
            "suite 's', field 'ragas.repeats.chrf': repeats of a metric the suite did not score",
        ),
        # the suite's means
        (lambda d: _s(d)["summary"].update(nope=1), "suite 's', field 'summary.nope': unknown metric name"),
        (
            lambda d: _s(d)["summary"].update(latency_ms=math.inf),
            "suite 's', field 'summary.latency_ms': inf is outside the range [0, inf]",
        ),
        (lambda d: _s(d)["summary"].update(mrr="1"), "suite 's', field 'summary.mrr': '1' is a str, not a number"),
        (
            lambda d: _s(d)["funnel"]["recall"]["fused"].update({"5": 1.5}),
            "suite 's', field 'funnel.recall.fused.5': 1.5 is outside the range [0, 1]",
        ),
        (
            lambda d: _s(d)["funnel"]["recall"].update(nope={"5": 0.5}),
            "suite 's', field 'funnel.recall.nope.5': unknown stage or cut-off",
        ),
        (
            lambda d: _s(d)["funnel"]["lost_at"].update(vector=0.5),
            "suite 's', field 'funnel.lost_at.vector': unknown stage",
        ),
        (lambda d: _s(d)["funnel"].update(ar=[1]), "suite 's', field 'funnel.ar': is a list, not an object"),
        # suites and the report
        (lambda d: d["suites"][1].update(name="s"), "suite 's': the suite appears twice"),
        (lambda d: d["suites"][1].update(name=5), "suite #2, field 'name': 5 is not a non-empty string"),
        (lambda d: d["suites"].append([]), "suite #3: is a list, not an object"),
        (lambda d: _s(d).pop("retrieval"), "suite 's', field 'retrieval': missing"),
        (lambda d: _s(d).update(records={}), "suite 's', field 'records': is a dict, not a list"),
        (lambda d: d.pop("suites"), "field 'suites': missing"),
    ],
)
def test_refused_with_one_line_naming_suite_question_and_field(
    edit: Callable[[dict[str, Any]], object], line: str
) -> None:
    assert _problems(edit) == [line]


def test_every_problem_is_counted_and_twelve_are_shown() -> None:
    data = _report()
    _s(data)["retrieval"]["rows"] = [_row("q1", 2.0), _row("q2", 2.0)]  # 7 metrics out of range on each
    with pytest.raises(ReportSchemaError) as exc:
        validate_report_data(data, "r.json")
    assert len(exc.value.problems) == 14
    lines = str(exc.value).splitlines()
    assert lines[0] == "r.json: 14 problems:" and lines[1:13] == [f"  {p}" for p in exc.value.problems[:12]]
    assert lines[13:] == ["  … 2 more"]
    _s(data)["retrieval"]["rows"] = [_row("q1"), _row("q2", 2.0)][:2]
    _s(data)["retrieval"]["rows"][1]["map"] = 1.0
    _s(data)["retrieval"]["rows"][1] = _row("q2")
    _s(data)["summary"]["x"] = 1
    with pytest.raises(ReportSchemaError) as exc:
        validate_report_data(data, "r.json")
    assert str(exc.value) == "r.json: 1 problem:\n  suite 's', field 'summary.x': unknown metric name"


def test_problems_in_different_places_are_all_listed() -> None:
    problems = _problems(
        lambda d: (
            _row0(d).update(map=2, n_gold=-1),
            _s(d)["records"][1].update(answer=3),
            _s(d)["summary"].update(mrr=-1),
            d["suites"][1]["retrieval"]["rows"][0].update(hit=1),
        )
    )
    assert problems == [
        "suite 's', question 'q1', field 'map': 2 is outside the range [0, 1]",
        "suite 's', question 'q1', field 'n_gold': -1 is not a count (integer >= 0)",
        "suite 's', question 'q2', field 'answer': 3 is a int, not a string",
        "suite 's', field 'summary.mrr': -1 is outside the range [0, 1]",
        "suite 't', question 'a', field 'hit': unknown field",
    ]


def test_a_judge_calibration_problem_names_its_own_place_next_to_the_suites_ones() -> None:
    problems = _problems(lambda d: (_row0(d).update(map=2), d.update(meta={"judge_calibration": 5})))
    assert problems == [
        "suite 's', question 'q1', field 'map': 2 is outside the range [0, 1]",
        "meta.judge_calibration: is a int, not an object",
    ]


def test_an_in_memory_report_is_checked_as_it_is() -> None:
    qids = ["q1", "q2"]
    records = [QueryRecord(q, f"{q}?", ["d"], ["an answer"], retrieved_doc_ids=["d"]) for q in qids]
    retrieval = evaluate_retrieval({q: ["d"] for q in qids}, {q: {"d"} for q in qids}, ks=(1, 3))
    repeats = {"faithfulness": [[0.5, 0.5], [0.4, 0.6]]}
    ragas = RagasResult(["faithfulness"], qids, {"faithfulness": [0.5, math.nan]}, repeats=repeats)
    suite = SuiteResult("s", "ds", "kb", {}, {}, retrieval, records, ragas)
    report = EvalReport([suite])
    validate_report(report, "current")
    bad = copy.deepcopy(report)
    bad.suites[0].ragas.repeats["faithfulness"][1] = [0.4]
    bad.suites[0].retrieval.rows[0]["ndcg@3"] = "high"
    with pytest.raises(ReportSchemaError) as exc:
        validate_report(bad, "current")
    assert exc.value.problems == [
        "suite 's', question 'q1', field 'ndcg@3': 'high' is a str, not a number",
        "suite 's', field 'ragas.repeats': repeat counts [1, 2]: expected one count >= 2",
    ]
