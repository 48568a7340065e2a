"""Exit codes that say what happened: params refused before the first question (2), an evaluation
whose questions or judge calls failed is degraded (3, the count and the first reason on stderr,
``--allow-errors N``), and a ``--config`` that is not YAML is refused by every command (2)."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import pytest
import yaml

from rag_lab.commands.evaluate import DEGRADED_EXIT, _degraded_exit, main
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.report import EvalReport, SuiteResult
from rag_lab.eval.runner import QueryRecord

DATASET = "hotpotqa_hipporag100@2-4:8"  # 2 questions over 8 documents


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: connections are refused


def test_a_threshold_outside_the_rerankers_range_exits_2_before_the_first_question(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    argv = ["--workspace", str(ws), "eval", "--dataset", DATASET, "--quiet", "--out", str(tmp_path / "out")]
    assert main([*argv, "--param", "rerank_threshold=7"]) == 2
    err = capsys.readouterr().err
    assert "rerank_threshold=7 is outside [0, 1], the score range of" in err and "no candidate can reach it" in err
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written
    assert main([*argv, "--param", "rerank_top_k=-1"]) == 2  # outside the field's range [0, 500]
    assert "rerank_top_k" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_dead_chat_model_exits_3_and_allow_errors_accepts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "config" / "lab.yaml").read_text(encoding="utf-8"))
    cfg.setdefault("models", {})["chat"] = {
        "type": "openai",
        "model": "dead",
        "base_url": f"http://127.0.0.1:{_closed_port()}/v1",
        "api_key": "x",
        "max_retries": 0,
    }
    conf = tmp_path / "lab.yaml"
    conf.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["--config", str(conf), "--workspace", str(tmp_path / "ws"), "eval", "--dataset", DATASET, "--quiet"]
    assert main([*argv, "--out", str(out), "--name", "e"]) == DEGRADED_EXIT
    err = capsys.readouterr().err
    assert "degraded: 2 of 2 questions errored or fell back (first: hotpotqa_hipporag100@2-4/" in err
    rep = json.loads((out / "e.json").read_text(encoding="utf-8"))  # the report is still written
    assert all(r["error"] for s in rep["suites"] for r in s["records"])
    assert main([*argv, "--out", str(out), "--name", "e2", "--allow-errors", "2"]) == 0
    assert "within --allow-errors 2" in capsys.readouterr().err
    assert main([*argv, "--out", str(out), "--name", "e3", "--allow-errors", "1"]) == DEGRADED_EXIT


def _report(errors: list[str], judge_failed: int = 0, unscored: dict[str, str] | None = None) -> EvalReport:
    qids = [f"q{i}" for i in range(len(errors))]
    recs = [QueryRecord(q, "?", ["g"], ["a"], retrieved_doc_ids=["g"], error=e) for q, e in zip(qids, errors)]
    rr = evaluate_retrieval({q: ["g"] for q in qids}, {q: {"g"} for q in qids}, ks=(1,))
    un = unscored or {}
    rg = RagasResult(
        ["faithfulness"],
        qids,
        {"faithfulness": [math.nan if q in un else 0.5 for q in qids]},
        {"faithfulness": dict(un)},
        {"faithfulness": list(un)},
        {"model": "j", "calls": 3, "failed": judge_failed},
    )
    return EvalReport([SuiteResult("s", "d", "kb", {}, {}, rr, recs, rg)])


def test_degraded_counts_questions_and_judge_calls(capsys: pytest.CaptureFixture[str]) -> None:
    assert _degraded_exit(_report(["", "", ""]), 0) == 0 and capsys.readouterr().err == ""
    assert _degraded_exit(_report(["", "APIConnectionError: down", ""]), 0) == 3
    assert "1 of 3 questions errored or fell back (first: s/q1 errored: APIConnectionError: down)" in (
        capsys.readouterr().err
    )
    assert _degraded_exit(_report(["", "", ""], judge_failed=2), 0) == 3
    assert "2 judge call(s) failed" in capsys.readouterr().err
    bad_json = {"q0": "InstructorRetryException: statements Field required"}
    assert _degraded_exit(_report(["", ""], unscored=bad_json), 0) == 3
    assert "1 judge call(s) failed (first: s/q0 faithfulness: InstructorRetryException" in capsys.readouterr().err
    assert _degraded_exit(_report(["", ""], unscored=bad_json), 1) == 0
    assert _degraded_exit(_report(["e1", "e2"], judge_failed=1), 1) == 3  # 2 questions > 1


@pytest.mark.parametrize("argv", [["stages"], ["eval", "--dataset", DATASET]])
def test_every_command_refuses_a_config_that_is_not_yaml(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.cli import main as rag_lab

    bad = tmp_path / "lab.yaml"
    bad.write_text("models: {chat: [unclosed\n", encoding="utf-8")
    assert rag_lab(["--config", str(bad), *argv]) == 2
    assert f"--config {bad}: invalid YAML" in capsys.readouterr().err
    bad.write_text("- a list\n", encoding="utf-8")
    assert rag_lab(["--config", str(bad), *argv]) == 2
    assert "expected a mapping at the top level, got list" in capsys.readouterr().err
    assert rag_lab(["--config", str(tmp_path / "missing.yaml"), *argv]) == 2
    assert "cannot read it" in capsys.readouterr().err
