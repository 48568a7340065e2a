"""``rag-lab judge calibrate``: the labels file's errors, the agreement figures of a report's judge
scores against human labels (κ equal to scikit-learn's), the result stored in a baseline, and the
path that scores with a loopback judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sklearn.metrics import cohen_kappa_score

from rag_lab.cli import main
from rag_lab.eval.judge.calibrate import calibrate, calibration_problems, report_scores
from rag_lab.eval.judge.labels import LabelsError, read_labels
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, ReportError, SuiteResult, load_report, render_markdown


def _lines(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _label(qid: str, metric: str, label: int, who: str = "ana", **kw: Any) -> dict[str, Any]:
    return {"qid": qid, "metric": metric, "label": label, "labeller": who, **kw}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", r"labels.jsonl:2: not valid JSON"),
        ({"qid": "q1", "metric": "faithfulness", "label": 1}, r":2: missing required field\(s\) 'labeller'"),
        (_label("q1", "bleu", 1), r":2: field 'metric': 'bleu' is not a judge metric"),
        (_label("q1", "faithfulness", True), r":2: field 'label': True is not a grade 0..1"),
        (_label("q1", "faithfulness", 3, levels=3), r":2: field 'label': 3 is not a grade 0..2"),
        (_label("q1", "faithfulness", 0, levels=1), r":2: field 'levels': 1 is not an integer >= 2"),
        (_label("q1", "faithfulness", 0, grade=1), r":2: field 'grade': 1 is an unknown field"),
        (_label("q1", "faithfulness", 0, labeller=""), r":2: field 'labeller': '' is not a non-empty string"),
        (
            _label("q0", "faithfulness", 0),
            r":2: labeller 'ana' already labelled question 'q0' on faithfulness \(line 1\)",
        ),
        (_label("q1", "faithfulness", 0, levels=3), r":2: field 'levels': 3 differs from line 1's 2"),
    ],
)
def test_bad_labels_name_file_line_field_and_value(tmp_path: Path, row: Any, message: str) -> None:
    path = _lines(tmp_path / "labels.jsonl", [_label("q0", "faithfulness", 1), row])
    with pytest.raises(LabelsError, match=message):
        read_labels(path)


def test_missing_and_empty_labels_files(tmp_path: Path) -> None:
    with pytest.raises(LabelsError, match="labels file not found"):
        read_labels(tmp_path / "nope.jsonl")
    with pytest.raises(LabelsError, match="no labels"):
        read_labels(_lines(tmp_path / "empty.jsonl", [""]))


JUDGE = {  # judge scores per question: faithfulness (binary labels) and answer_relevancy (graded, 3)
    "faithfulness": [0.9, 0.8, 0.2, 0.6, 0.1, 0.7, 0.4, 1.0],
    "answer_relevancy": [0.95, 0.5, 0.1, 0.7, 0.3, 0.9, 0.6, 0.2],
}
HUMAN = {"faithfulness": [1, 1, 0, 0, 0, 1, 1, 1], "answer_relevancy": [2, 1, 0, 2, 0, 2, 1, 1]}
QIDS = [f"q{i}" for i in range(8)]


def _report() -> EvalReport:
    rr = evaluate_retrieval({q: ["d1"] for q in QIDS}, {q: {"d1"} for q in QIDS}, ks=(1, 5, 10))
    recs = [QueryRecord(q, "?", ["d1"], [], retrieved_doc_ids=["d1"]) for q in QIDS]
    vals = {m: list(v) for m, v in JUDGE.items()}
    vals["faithfulness"][7] = float("nan")  # the judge failed on q7
    judge = {"calls": 16, "model": "judge-m", "prompt_hash": {"faithfulness": "abc", "answer_relevancy": "def"}}
    ragas = RagasResult(list(JUDGE), QIDS, vals, judge=judge)
    return EvalReport([SuiteResult("s", "demo", "kb", {}, {}, rr, recs, ragas)])


def _labels_file(tmp_path: Path) -> Path:
    rows = [
        _label(q, m, HUMAN[m][i], levels=2 if m == "faithfulness" else 3) for m in HUMAN for i, q in enumerate(QIDS)
    ]
    rows.append(_label("q0", "faithfulness", 1, who="bo"))  # a second labeller: another pair
    rows.append(_label("gone", "faithfulness", 1))  # not in the report
    return _lines(tmp_path / "labels.jsonl", rows)


def test_calibrate_a_report_against_sklearn(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = tmp_path / "eval.json"
    rep.write_text(_report().to_json(), encoding="utf-8")
    out = tmp_path / "cal.json"
    code = main(
        ["judge", "calibrate", "--labels", str(_labels_file(tmp_path)), "--report", str(rep), "--out", str(out)]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    res = json.loads(out.read_text(encoding="utf-8"))
    assert res["judge"] == {
        "model": "judge-m",
        "base_url": "",
        "prompt_hash": {"faithfulness": "abc", "answer_relevancy": "def"},
    }
    f = res["metrics"]["faithfulness"]
    # pairs: q0..q6 (q7 is NaN) plus bo's q0; judge binned at 0.5
    human = HUMAN["faithfulness"][:7] + [1]
    judge = [int(s >= 0.5) for s in JUDGE["faithfulness"][:7]] + [1]
    assert f["n"] == 8 and f["labellers"] == {"ana": 7, "bo": 1}
    assert f["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(human, judge))
    assert f["confusion"] == [[2, 1], [1, 4]] and f["unmatched"] == ["gone"] and f["judge_nan"] == ["q7"]
    assert "weighted_kappa_linear" not in f
    g = res["metrics"]["answer_relevancy"]
    binned = [min(2, int(s * 3 + 1e-9)) for s in JUDGE["answer_relevancy"]]
    for w, key in (("linear", "weighted_kappa_linear"), ("quadratic", "weighted_kappa_quadratic")):
        assert g[key]["value"] == pytest.approx(cohen_kappa_score(HUMAN["answer_relevancy"], binned, weights=w))
    assert g["alpha_level"] == "ordinal"
    expected_bias = sum(s - h / 2 for s, h in zip(JUDGE["answer_relevancy"], HUMAN["answer_relevancy"])) / 8
    assert g["mean_bias"]["value"] == pytest.approx(expected_bias)
    assert "faithfulness" in printed and "κ quad" in printed and "judge judge-m" in printed
    assert not calibration_problems(res)


def test_all_equal_labels_are_reported_undefined_not_nan() -> None:
    from rag_lab.eval.judge.labels import HumanLabel

    labels = [HumanLabel(q, "faithfulness", 1, "ana") for q in QIDS[:3]]
    scores = {("s", q): {"faithfulness": 0.9} for q in QIDS[:3]}
    res = calibrate(labels, scores, {"model": "m"}, "test")
    f = res["metrics"]["faithfulness"]
    assert f["cohen_kappa"] == {"value": None, "undefined": f["cohen_kappa"]["undefined"]}
    assert "category 1" in f["cohen_kappa"]["undefined"] and f["spearman"]["value"] is None
    assert json.dumps(res, allow_nan=False)  # no NaN anywhere


def test_attach_stores_the_calibration_in_a_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "baseline.json"
    base.write_text(_report().to_json(), encoding="utf-8")
    args = ["judge", "calibrate", "--labels", str(_labels_file(tmp_path)), "--report", str(base)]
    assert main([*args, "--out", str(tmp_path / "c.json"), "--attach", str(base)]) == 0
    loaded = load_report(base)
    cal = loaded.meta["judge_calibration"]
    assert cal["metrics"]["faithfulness"]["n"] == 8 and cal["judge"]["model"] == "judge-m"
    assert "Judge calibration (judge-m" in render_markdown(loaded)
    data = json.loads(base.read_text(encoding="utf-8"))
    data["meta"]["judge_calibration"]["metrics"]["faithfulness"]["cohen_kappa"]["value"] = 3.0
    base.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ReportError, match=r"judge_calibration.metrics.faithfulness.cohen_kappa: 3.0 is not a number"):
        load_report(base)


def test_a_report_without_the_labelled_metric_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = tmp_path / "eval.json"
    rep.write_text(_report().to_json(), encoding="utf-8")
    labels = _lines(tmp_path / "l.jsonl", [_label("q0", "llm_context_precision", 1)])
    assert main(["judge", "calibrate", "--labels", str(labels), "--report", str(rep)]) == 2
    assert "has no judge scores for llm_context_precision" in capsys.readouterr().err


def test_report_scores_reads_every_suite() -> None:
    scores = report_scores(_report())
    assert scores[("s", "q1")] == {"faithfulness": 0.8, "answer_relevancy": 0.5}


@pytest.mark.slow
def test_calibrate_by_calling_a_loopback_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--dataset: the questions are answered and the labelled metric scored by the judge now."""
    from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset
    from tests.eval.test_judge_repeats import CHAT, ScriptedJudge
    from tests.models.fake_openai import FakeOpenAIServer

    write_dataset(
        [
            CorpusDoc("d1", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"),
            CorpusDoc("d2", "Sourdough bread rises thanks to a starter of wild yeast.", "Bread"),
        ],
        [
            QueryItem("qa", "question qa? Who built the Brightwater lighthouse?", ["Mara Quill"], ["d1"]),
            QueryItem("qb", "question qb? What makes sourdough bread rise?", ["wild yeast"], ["d2"]),
        ],
        tmp_path / "tiny",
    )
    labels = _lines(
        tmp_path / "l.jsonl", [_label("qa", "llm_context_precision", 1), _label("qb", "llm_context_precision", 0)]
    )
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([ScriptedJudge({"qa": [1] * 10, "qb": [0] * 10})] * 40))
        code = main(
            [
                "--workspace",
                str(tmp_path / "ws"),
                "judge",
                "calibrate",
                "--labels",
                str(labels),
                "--dataset",
                str(tmp_path / "tiny"),
                "--judge-model",
                "judge-m",
                "--judge-base-url",
                srv.base_url,
                "--out",
                str(tmp_path / "cal.json"),
                "--quiet",
            ]
        )
        assert code == 0, capsys.readouterr()
        assert srv.requests_to(CHAT)
    res = json.loads((tmp_path / "cal.json").read_text(encoding="utf-8"))
    m = res["metrics"]["llm_context_precision"]
    assert m["n"] == 2 and m["cohen_kappa"]["value"] == pytest.approx(1.0) and m["confusion"] == [[1, 0], [0, 1]]
    assert res["judge"]["model"] == "judge-m" and res["judge"]["base_url"] == srv.base_url
    assert len(res["judge"]["prompt_hash"]["llm_context_precision"]) == 16
