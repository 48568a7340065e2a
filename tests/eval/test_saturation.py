"""Saturation (the share of questions at each metric's ceiling and floor): the counts worked by
hand, the line ``rag-lab eval`` prints, the report field and the schema's checks of it."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.eval.metrics import RetrievalReport
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, ReportSchemaError, SuiteResult, render_markdown, validate_report_data
from rag_lab.eval.saturation import Saturation, saturation, saturation_line


def test_counts_worked_by_hand():
    sat = saturation(
        {
            "recall@10": {"q1": 1.0, "q2": 1.0, "q3": 0.5, "q4": 0.0},
            "ndcg@10": [1.0, 1 - 1e-12, math.nan, 0.3],  # a rounding hair below 1 counts as 1; NaN has no value
            "answer_relevancy": [-1.0, 1.0],  # its floor is -1
            "latency_ms": [3.0, 4.0],  # no ceiling: left out
            "bogus": [1.0],  # not a metric: left out
        }
    )
    assert sat == {
        "recall@10": Saturation("recall@10", 4, 2, 1),
        "ndcg@10": Saturation("ndcg@10", 3, 2, 0),
        "answer_relevancy": Saturation("answer_relevancy", 2, 1, 1),
    }
    assert sat["recall@10"].ceiling_share == 0.5 and sat["recall@10"].floor_share == 0.25
    assert math.isnan(Saturation("mrr", 0, 0, 0).ceiling_share)


def test_the_line():
    sat = saturation({"mrr": [1.0, 0.5, 0.0, 1.0], "recall@10": [1.0] * 19 + [0.0], "map": [0.2]})
    assert saturation_line(sat) == (
        "saturation: recall@10 95% of 20 questions at 1 (5% at 0), mrr 50% at 1 (25% at 0); saturated on "
        "recall@10: a better config cannot show there, only a worse one"
    )
    assert saturation_line(saturation({"map": [0.2, 1.0]})) == "saturation: map 50% of 2 questions at 1"
    assert saturation_line({}) == "saturation: no question has a value"


@given(st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, math.nan])), max_size=30))
def test_counts_add_up(values):
    s = saturation({"recall@10": values})["recall@10"]
    finite = [v for v in values if not math.isnan(v)]
    assert s.n == len(finite) and s.at_ceiling + s.at_floor <= s.n
    assert s.at_ceiling == sum(1 for v in finite if v >= 1 - 1e-9)  # within a rounding hair
    assert s.at_floor == sum(1 for v in finite if v <= 1e-9)


def _suite() -> SuiteResult:
    rows = [
        {"qid": q, "n_retrieved": 1, "n_gold": 1, "n_duplicates": 0, "recall@1": v, "precision@1": v, "hit@1": v}
        | {"ndcg@1": v, "mrr@1": v, "mrr": v, "map": v}
        for q, v in (("q1", 1.0), ("q2", 1.0), ("q3", 0.0))
    ]
    records = [QueryRecord(qid=r["qid"], question="?", answers=[], gold_ids=["d"]) for r in rows]
    return SuiteResult("s", "ds", "kb", {}, {}, RetrievalReport(ks=(1,), rows=rows), records)


def test_in_the_report_and_its_markdown():
    report = EvalReport([_suite()])
    data = report.to_dict()
    assert data["suites"][0]["saturation"]["mrr"] == {"n": 3, "at_ceiling": 2, "at_floor": 1}
    validate_report_data(data)  # the schema accepts it, and a report without it
    data["suites"][0].pop("saturation")
    validate_report_data(data)
    assert "**Saturation:** mrr 67% of 3 questions at 1 (33% at 0)" in render_markdown(report)


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ([1], "suite 's', field 'saturation': is a list, not an object"),
        (
            {"recall@0": {"n": 1, "at_ceiling": 0, "at_floor": 0}},
            "suite 's', field 'saturation.recall@0': unknown metric name",
        ),
        (
            {"mrr": {"n": 2, "at_ceiling": 3, "at_floor": 0}},
            "suite 's', field 'saturation.mrr': more questions at the ceiling or the floor than the 2 with a value",
        ),
        (
            {"mrr": {"n": 2, "at_ceiling": 1.5, "at_floor": 0}},
            "suite 's', field 'saturation.mrr': {'n': 2, 'at_ceiling': 1.5, 'at_floor': 0}: expected the counts n, "
            "at_ceiling, at_floor (integers >= 0)",
        ),
    ],
)
def test_refused(value: Any, line: str):
    data = EvalReport([_suite()]).to_dict()
    data["suites"][0]["saturation"] = value
    with pytest.raises(ReportSchemaError) as exc:
        validate_report_data(data, "r.json")
    assert exc.value.problems == [line]


def test_eval_prints_it(capsys):
    from rag_lab.commands.evaluate import _print_saturation

    _print_saturation(EvalReport([_suite()]))
    # the headline metrics the suite has, in their order (recall@10 and ndcg@10 are not cut-offs of this suite)
    assert capsys.readouterr().out == "saturation: mrr 67% of 3 questions at 1 (33% at 0), hit@1 67% at 1 (33% at 0)\n"
