"""Unreviewed synthetic questions are flagged in every report, and the gate refuses to build, update
or compare against a baseline built on them unless --allow-unreviewed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rag_lab.cli import main
from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset
from rag_lab.eval.gate import GateError, GatePolicy, compare_reports
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, SuiteResult, render_markdown
from rag_lab.eval.review import unreviewed_count, unreviewed_qids, unreviewed_section

GEN = {"synthetic": True, "reviewed": False, "generator": "keyphrase"}


def _report(unreviewed: int) -> EvalReport:
    qids = [f"gen-{i}" for i in range(6)]
    rr = evaluate_retrieval({q: ["d1"] for q in qids}, {q: {"d1"} for q in qids}, ks=(1, 5, 10))
    recs = [QueryRecord(q, "?", ["d1"], [], retrieved_doc_ids=["d1"]) for q in qids]
    prov = {}
    if unreviewed:
        prov["unreviewed_synthetic"] = {"s": {"count": unreviewed, "of": 6, "qids": qids[:unreviewed]}}
    return EvalReport([SuiteResult("s", "demo", "kb", {}, {}, rr, recs)], {"provenance": prov})


def test_what_counts_as_unreviewed() -> None:
    ds = SimpleNamespace(
        queries=[
            QueryItem("a", "?", [], ["d1"], metadata=GEN),
            QueryItem("b", "?", [], ["d1"], metadata={**GEN, "reviewed": True}),
            QueryItem("c", "?", [], ["d1"], metadata={"synthetic": False}),
            QueryItem("e", "?", [], ["d1"]),
        ]
    )
    assert unreviewed_qids(ds) == ["a"]
    assert unreviewed_section([("s", ds)]) == {"s": {"count": 1, "of": 4, "qids": ["a"]}}
    assert unreviewed_count({"provenance": {}}) == 0 and unreviewed_count({}) == 0  # old reports


def test_the_gate_refuses_a_baseline_on_unreviewed_questions() -> None:
    with pytest.raises(GateError, match=r"built on 3 unreviewed synthetic question\(s\).*--allow-unreviewed"):
        compare_reports(_report(3), _report(3))
    res = compare_reports(_report(3), _report(3), GatePolicy(allow_unreviewed=True))
    assert res.passed and res.unreviewed == {"baseline": 3, "current": 3}
    assert res.to_dict()["unreviewed_synthetic"] == {"baseline": 3, "current": 3}
    md = res.markdown()
    assert "the baseline has 3 unreviewed synthetic question(s)" in md and "(allowed by --allow-unreviewed)" in md
    assert "the current run has 3 unreviewed" in res.summary_markdown()


def test_a_reviewed_baseline_passes_and_the_current_run_is_still_flagged() -> None:
    res = compare_reports(_report(0), _report(2))
    assert res.passed and res.unreviewed == {"baseline": 0, "current": 2}
    assert any("the current run has 2 unreviewed synthetic question(s)" in w for w in res.warnings)
    assert "unreviewed" not in " ".join(compare_reports(_report(0), _report(0)).warnings)


def test_the_eval_report_flags_them() -> None:
    md = render_markdown(_report(4))
    assert "**Warning: 4 unreviewed synthetic question(s)** (suite `s`: 4 of 6)" in md
    assert "unreviewed" not in render_markdown(_report(0))


@pytest.mark.slow
def test_gate_update_and_compare_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_dataset(
        [
            CorpusDoc("d1", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"),
            CorpusDoc("d2", "Sourdough bread rises thanks to a starter of wild yeast.", "Bread"),
        ],
        [
            QueryItem("gen-1", "Who built the Brightwater lighthouse?", ["Mara Quill"], ["d1"], metadata=GEN),
            QueryItem("q2", "What makes sourdough rise?", ["wild yeast"], ["d2"]),
        ],
        tmp_path / "mine",
    )
    base = tmp_path / "baseline.json"
    ws = ["--workspace", str(tmp_path / "ws")]
    update = [*ws, "gate", "--update", "--baseline", str(base), "--dataset", str(tmp_path / "mine"), "--quiet"]
    assert main(update) == 2
    err = capsys.readouterr().err
    assert "built on 1 unreviewed synthetic question(s) (suite 'mine': 1 of 2, e.g. gen-1)" in err
    assert "--allow-unreviewed" in err and not base.exists()
    assert main([*update, "--allow-unreviewed"]) == 0
    prov = json.loads(base.read_text(encoding="utf-8"))["meta"]["provenance"]
    assert prov["unreviewed_synthetic"] == {"mine": {"count": 1, "of": 2, "qids": ["gen-1"]}}
    capsys.readouterr()
    compare = [*ws, "gate", "--baseline", str(base), "--current", str(base), "--quiet"]
    assert main(compare) == 2
    assert "built on 1 unreviewed synthetic question(s)" in capsys.readouterr().err
    assert main([*compare, "--allow-unreviewed", "--out", str(tmp_path / "g")]) == 0
    assert "1 unreviewed synthetic question(s)" in (tmp_path / "g" / "gate.md").read_text(encoding="utf-8")
    assert main([*ws, "eval", "--dataset", str(tmp_path / "mine"), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert "1 unreviewed synthetic question(s) in this evaluation" in capsys.readouterr().err
    assert "**Warning: 1 unreviewed synthetic question(s)**" in (tmp_path / "r" / "eval_mine.md").read_text("utf-8")
