"""Reports: JSON round trip, Markdown / HTML / JUnit content, NaN and failures shown, not averaged."""

from __future__ import annotations

import base64
import json
import math
import re
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, ReportError, SuiteResult, load_report
from rag_lab.eval.runner import QueryRecord
from rag_lab.lab.outputs import write_report

NAN = math.nan


def make_suite(
    name: str = "toy",
    runs: dict[str, list[str]] | None = None,
    ragas: dict[str, list[float]] | None = None,
    reasons: dict[str, dict[str, str]] | None = None,
    failed: dict[str, list[str]] | None = None,
) -> SuiteResult:
    qrels = {"q1": {"a"}, "q2": {"b", "c"}, "q3": {"d"}}
    runs = runs if runs is not None else {"q1": ["a", "x"], "q2": ["c", "y", "b"], "q3": ["z"]}
    records = [
        QueryRecord(
            q,
            f"question {q}?",
            sorted(g),
            ["ans"],
            retrieved_doc_ids=runs.get(q, []),
            context_doc_ids=runs.get(q, [])[:2],
            context_titles=[f"Title {d.upper()}" for d in runs.get(q, [])[:2]],
            gold_titles=[f"Gold {g}" for g in sorted(g)],
            answer=f"answer to {q} <kb doc=1 chunk_id=c1/>",
            latency_ms=10.0 * (i + 1),
            error="boom" if q == "q3" else "",
        )
        for i, (q, g) in enumerate(qrels.items())
    ]
    rr = evaluate_retrieval(runs, qrels, ks=(1, 3, 5, 10))
    rg = None
    if ragas is not None:
        rg = RagasResult(list(ragas), ["q1", "q2", "q3"], ragas, reasons or {}, failed or {})
    return SuiteResult(
        name, "toyset", "kb", {"dataset": "toyset", "n_queries": 3}, {"mmr_lambda": 0.5}, rr, records, rg, 1.5
    )


def test_suite_values_summary_counts() -> None:
    s = make_suite(
        ragas={"chrf": [0.5, NAN, 1.0], "bleu": [NAN, NAN, NAN]},
        reasons={"chrf": {"q2": "missing input: no reference answer"}, "bleu": {"q1": "x", "q2": "y", "q3": "z"}},
        failed={"chrf": ["q2"], "bleu": ["q1", "q2", "q3"]},
    )
    assert s.values()["recall@3"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    summ = s.summary()
    assert summ["mrr"] == pytest.approx((1 + 1 + 0) / 3)
    assert summ["chrf"] == 0.75 and math.isnan(summ["bleu"])
    assert s.counts()["chrf"] == {"n": 3, "n_valid": 2, "n_nan": 0, "n_failed": 1}
    assert s.counts()["ndcg@10"] == {"n": 3, "n_valid": 3, "n_nan": 0, "n_failed": 0}
    assert (s.errors, s.mean_latency_ms) == (1, 15.0)  # the errored query's latency is left out
    df = s.per_query()
    assert list(df.index) == ["q1", "q2", "q3"] and df.loc["q3", "error"] == "boom"


def test_json_round_trip_keeps_nan_as_null(tmp_path: Path) -> None:
    rep = EvalReport(
        [
            make_suite(
                ragas={"chrf": [0.5, NAN, 1.0]},
                failed={"chrf": ["q2"]},
                reasons={"chrf": {"q2": "missing input: no reference answer"}},
            )
        ],
        {"spec": {"suites": []}},
    )
    paths = write_report(rep, tmp_path, "r", formats=["json"])
    raw = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert raw["kind"] == "rag_lab.eval.report" and raw["format"] == 1
    assert raw["suites"][0]["ragas"]["values"]["chrf"] == [0.5, None, 1.0]
    assert "contexts" not in raw["suites"][0]["records"][0]
    back = load_report(paths["json"])
    s0, s1 = rep.suites[0], back.suites[0]
    assert s1.summary() == pytest.approx(s0.summary(), nan_ok=True)
    assert s1.counts() == s0.counts()
    assert s1.records == [QueryRecord.from_dict({**r.to_dict(), "contexts": []}) for r in s0.records]
    assert back.meta["rag_lab"] == rep.meta["rag_lab"]


def test_load_report_errors(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="nope.json: file not found"):
        load_report(tmp_path / "nope.json")
    (tmp_path / "x.json").write_text('{"kind": "other"}', encoding="utf-8")
    with pytest.raises(ReportError, match="not a rag_lab evaluation report"):
        load_report(tmp_path / "x.json")
    (tmp_path / "y.json").write_text('{"kind": "rag_lab.eval.report", "format": 99}', encoding="utf-8")
    with pytest.raises(ReportError, match="report format 99"):
        load_report(tmp_path / "y.json")


def test_markdown_html_junit(tmp_path: Path) -> None:
    rep = EvalReport(
        [
            make_suite(
                ragas={"chrf": [0.5, NAN, 1.0], "id_context_recall": [1.0, 1.0, 0.0]},
                failed={"chrf": ["q2"]},
                reasons={"chrf": {"q2": "missing input: no reference answer"}},
            )
        ]
    )
    paths = write_report(rep, tmp_path, "r")
    assert set(paths) == {"md", "html", "json", "junit"}
    md = paths["md"].read_text(encoding="utf-8")
    assert "| chrf | 0.7500 | 3 | 2 | 0 | 1 |" in md
    assert "| ndcg@10 |" in md and "mmr_lambda=0.5" in md
    assert "q2: chrf: missing input: no reference answer" in md and "q3: pipeline error: boom" in md
    html = paths["html"].read_text(encoding="utf-8")
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) == 2 and all(base64.b64decode(i).startswith(b"\x89PNG") for i in imgs)
    assert "<tr class='bad'><td>chrf</td>" in html
    root = ET.fromstring(paths["junit"].read_text(encoding="utf-8"))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == "toy"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert len(cases) == len(rep.suites[0].metric_names()) == int(suite.get("tests", "0"))
    assert cases["chrf"].find("failure") is not None and cases["ndcg@10"].find("failure") is None
    assert "1 failed of 3" in cases["chrf"].find("failure").get("message", "")
    assert root.get("failures") == "1"


def test_unknown_format_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown report format.*pdf"):
        write_report(EvalReport([make_suite()]), tmp_path, "r", formats=["pdf"])


def test_per_query_rows_show_question_answer_titles_and_sort(tmp_path: Path) -> None:
    rep = EvalReport([make_suite()])
    paths = write_report(rep, tmp_path, "r", formats=["md", "html"], plots=False, sort_by="mrr")
    md = paths["md"].read_text(encoding="utf-8")
    assert "sorted by mrr (lowest first)" in md
    # q3 (mrr 0) first; question, answer without the citation tag, reference, gold and context titles
    rows = [line for line in md.splitlines() if line.startswith("| q") and not line.startswith("| qid")]
    assert [r.split(" | ")[0] for r in rows] == ["| q3", "| q1", "| q2"]
    assert rows[1].startswith("| q1 | question q1? | answer to q1 | ans | Gold a | Title A, Title X |")
    html = paths["html"].read_text(encoding="utf-8")
    assert "<table class='sortable'><thead><tr><th>qid</th><th>question</th><th>answer</th>" in html
    assert "<td>question q2?</td>" in html and "<td>Gold b, Gold c</td>" in html and "<td>Title C, Title Y</td>" in html
    assert "<td data-v='0.9197207891481876'>0.9197</td>" in html  # q2's nDCG@10: numeric sort key
    assert "th.cellIndex" in html and "localeCompare" in html
    assert html.index("<td>q3</td>") < html.index("<td>q1</td>")
    with pytest.raises(ValueError, match="sort_by='nope': no such metric"):
        write_report(rep, tmp_path, "r", formats=["md"], sort_by="nope")
