"""The real-model path against the loopback fake OpenAI server (issue #13, item 6): a failed or
cut answer stream is recorded as the run's error and counted by eval; cancelled and timed-out calls
are in the ledger; a call that never connected costs no tokens; the session-title call is capped
and recorded; query understanding sends a json_schema response_format, uses one timeout and drops
rewrites that are not about the user's message; judge calls are in the ledger, the report, the
projection and under --budget; an LLM metric without a judge fails before anything runs."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from rag_lab.lab import Lab
from rag_lab.pipeline.plugins.query_understand import (
    UNDERSTANDING_RESPONSE_FORMAT,
    allowed_intents,
    rewrite_rejection,
)
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lab(tmp_path: Path, base_url: str, docs_dir: Path, **params: Any) -> Lab:
    lab = Lab.from_config(
        {
            "models": {
                "embedder": {"type": "onnx-minilm"},
                "reranker": {"type": "embedding-rescorer"},
                "chat": {"type": "openai", "model": "fake", "base_url": base_url, "api_key": "k", "max_retries": 0},
            },
            "params": params,
        },
        workspace=tmp_path,
    )
    lab.ingest(docs_dir, kb="demo", progress=False)
    return lab


def _qu(run: Any) -> dict[str, Any]:
    return run.state("query_understand").state.diagnostics.get("query_understand", {})


def _tool_results(run: Any, name: str) -> list[dict[str, Any]]:
    return [
        e.data for e in run.events if e.type in ("tool_result", "error") and (e.data or {}).get("tool_name") == name
    ]


# --------------------------------------------------------------------------- endpoint down, stream cut, timeout


def test_endpoint_down_is_a_run_error_with_calls_at_zero_tokens(tmp_path: Path, docs_dir: Path) -> None:
    lab = _lab(tmp_path, f"http://127.0.0.1:{_free_port()}/v1", docs_dir)
    run = lab.ask("who built the lighthouse?", kb="demo")
    assert run.error and "cannot connect" in run.error  # the answer stream failed: recorded, not swallowed
    assert run.is_fallback  # the fallback answer of issue #12 replaces the missing one
    chat_calls = [c for c in run.ledger.calls if c.kind == "chat"]
    assert len(chat_calls) == 2  # query understanding + the answer stream, both failed
    assert all(c.error for c in chat_calls)
    # never connected: no tokens charged, and nothing flagged as an estimate
    assert [(c.tokens_in, c.tokens_out, c.estimated) for c in chat_calls] == [(0, 0, False), (0, 0, False)]
    (qu_result,) = _tool_results(run, "query_understand")
    assert qu_result["success"] is False and "kept the original query" in qu_result["error"]
    assert _qu(run)["error"]


def test_eval_counts_model_errors_per_suite_and_the_gate_fails(tmp_path: Path, docs_dir: Path) -> None:
    from rag_lab.asyncutil import run_sync as _run_sync
    from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem
    from rag_lab.eval.gate import compare_reports
    from rag_lab.eval.report import EvalReport, SuiteResult
    from rag_lab.eval.runner import evaluate_lab, ingest_dataset

    ds = Dataset(
        "tiny",
        tmp_path,
        [CorpusDoc("d1", "The Brightwater lighthouse was built in 1874 by Mara Quill.", "Lighthouse")],
        [QueryItem("q1", "Who built the lighthouse?", ["Mara Quill"], ["d1"])],
    )

    def evaluate(lab: Lab) -> SuiteResult:
        ingest_dataset(lab, ds, "tiny")
        res = _run_sync(lambda: evaluate_lab(lab, ds, "tiny", progress=False))
        return SuiteResult("tiny", "tiny", "tiny", {}, {}, res.report, res.records)

    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat('{"rewrite_query": "", "intent": "kb_search", "image_description": ""}'))
        good = evaluate(_lab(tmp_path / "a", srv.base_url, docs_dir))
    assert good.errors == 0
    down = evaluate(_lab(tmp_path / "b", f"http://127.0.0.1:{_free_port()}/v1", docs_dir))
    assert down.errors == 1 and "cannot connect" in down.records[0].error
    res = compare_reports(EvalReport([good]), EvalReport([down]))
    (bad,) = [c for c in res.failures() if c.metric == "model_errors"]
    assert (bad.baseline, bad.current, bad.status) == (0.0, 1.0, "errors")


def test_cut_answer_stream_is_a_run_error_and_in_the_ledger(tmp_path: Path, docs_dir: Path) -> None:
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv.base_url, docs_dir, enable_rewrite=False)
        srv.script(CHAT, Reply.chat(["It was built", " by Mara", " Quill."], drop_after=2))
        run = lab.ask("who built the lighthouse?", kb="demo")
    assert run.error and "chat stream" in run.error
    assert run.answer.startswith("It was built")  # what arrived is kept
    (call,) = [c for c in run.ledger.calls if c.kind == "chat"]
    assert call.error and call.tokens_out > 0 and call.estimated  # partial text, no usage: estimated


def test_timed_out_understanding_call_is_in_the_ledger_with_one_timeout(tmp_path: Path, docs_dir: Path) -> None:
    with FakeOpenAIServer() as srv:
        # 2 s: time enough for the server to read the request on a busy machine; the reply waits
        # for 60 s (leaving the block wakes it)
        lab = _lab(tmp_path, srv.base_url, docs_dir, query_understand_timeout_s=2.0)
        srv.script(CHAT, Reply.chat('{"rewrite_query": "late", "intent": "kb_search"}', delay=60.0), Reply.chat("ok"))
        run = lab.ask("who built the lighthouse?", kb="demo")
        first = srv.requests_to(CHAT)[0].json
    assert run.state("query_understand").state.rewrite_query == "who built the lighthouse?"
    qu_calls = [c for c in run.ledger.calls if c.stage == "query_understand"]
    assert len(qu_calls) == 1 and qu_calls[0].error
    # the stage's 2 s ended the call (named in the stage's error), not the client's 120 s
    err = run.state("query_understand").state.diagnostics["query_understand"]["error"]
    assert err == "query_understand: the model did not answer within query_understand_timeout_s=2 s", err
    assert "timed out" in qu_calls[0].error or "cancelled" in qu_calls[0].error
    assert first["response_format"]["json_schema"]["schema"] == {
        **UNDERSTANDING_RESPONSE_FORMAT["json_schema"]["schema"],
        "properties": {
            **UNDERSTANDING_RESPONSE_FORMAT["json_schema"]["schema"]["properties"],
            # web search off, no image, no attachment: those intents cannot be chosen
            "intent": {"type": "string", "enum": allowed_intents(False, False, False)},
        },
    }
    assert set(UNDERSTANDING_RESPONSE_FORMAT["json_schema"]["schema"]["properties"]["intent"]["enum"]) - set(
        allowed_intents(False, False, False)
    ) == {"web_search", "image_only", "doc_only"}


def test_cancelled_call_is_recorded() -> None:
    from rag_lab.models.base import ChatMessage
    from rag_lab.models.chat import OpenAIChatModel
    from rag_lab.observability.ledger import Ledger, LedgerChatModel, use_ledger

    async def go(url: str) -> Ledger:
        ledger = Ledger()
        model = LedgerChatModel(OpenAIChatModel("m", url, max_retries=0))
        with use_ledger(ledger):
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(model.chat([ChatMessage("user", "hi there")], None), 0.3)
        return ledger

    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat("late", delay=3.0))
        ledger = asyncio.run(go(srv.base_url))
    (call,) = ledger.calls
    assert call.error.startswith("cancelled") and call.estimated and call.tokens_in > 0  # the request was sent


# --------------------------------------------------------------------------- query understanding


def test_response_format_is_sent_and_bad_rewrites_fall_back(tmp_path: Path, docs_dir: Path) -> None:
    with FakeOpenAIServer() as srv:
        lab = _lab(tmp_path, srv.base_url, docs_dir)
        srv.script(
            CHAT,
            Reply.chat('{"rewrite_query": "2026-12-01 07:30:00 Tuesday", "intent": "kb_search"}'),
            Reply.chat("answer one"),
            Reply.chat('{"rewrite_query": "Brightwater lighthouse builder", "intent": "kb_search"}'),
            Reply.chat("answer two"),
        )
        bad = lab.ask("who built the lighthouse?", kb="demo")
        good = lab.ask("who made it?", kb="demo")
        sent = srv.requests_to(CHAT)
    fmt = sent[0].json["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == [
        "rewrite_query",
        "intent",
        "image_description",
    ]
    assert "kb_search" in fmt["json_schema"]["schema"]["properties"]["intent"]["enum"]
    assert "web_search" not in fmt["json_schema"]["schema"]["properties"]["intent"]["enum"]
    assert "response_format" not in sent[1].json  # the answer is free text
    assert bad.state("query_understand").state.rewrite_query == "who built the lighthouse?"
    assert "date/time the user did not write" in _qu(bad)["rewrite_rejected"]
    assert good.state("query_understand").state.rewrite_query == "Brightwater lighthouse builder"
    assert "rewrite_rejected" not in _qu(good)


def test_rewrite_rejection_rules() -> None:
    prompt = "You prepare a user's question for a document search. Do three things and reply with JSON"
    assert rewrite_rejection("", "hi") == "empty rewrite"
    assert rewrite_rejection("  ", "hi") == "empty rewrite"
    assert rewrite_rejection("12:30 / 2026", "when?").startswith("no words")
    assert "date/time" in rewrite_rejection("Current time: 2026-12-01 07:30:00", "what is the weather")
    assert "date/time" in rewrite_rejection("星期二 北京天气", "北京天气怎么样")
    assert rewrite_rejection("weather on 2026-12-01", "what was the weather on 2026-12-01?") == ""
    assert "intent label" in rewrite_rejection("kb_search", "who built it")
    assert "repeats the prompt" in rewrite_rejection(
        "prepare a user's question for a document search", "who built it", prompt
    )
    assert rewrite_rejection("Brightwater lighthouse builder", "who made it?", prompt) == ""
    assert rewrite_rejection("北京是中国的首都吗", "北京是首都吗？", prompt) == ""


# --------------------------------------------------------------------------- session title


def test_session_title_call_is_capped_and_in_the_ledger(tmp_path: Path) -> None:
    from rag_lab.observability.ledger import Ledger
    from rag_lab.session.title import TITLE_MAX_TOKENS, generate_title_async

    lab = Lab.from_config({"models": {"chat": {"type": "extractive"}}}, workspace=tmp_path)
    from rag_lab.models.chat import OpenAIChatModel
    from rag_lab.observability.ledger import LedgerChatModel

    async def go(url: str) -> str:
        lab.sessions.ensure_session("s1", "lab")
        task = generate_title_async(
            lab.sessions, "s1", "who built the lighthouse?", LedgerChatModel(OpenAIChatModel("m", url)), ledger=ledger
        )
        assert task is not None
        return await task

    ledger = Ledger()
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat("Lighthouse builder", usage={"prompt_tokens": 30, "completion_tokens": 3}))
        title = asyncio.run(go(srv.base_url))
        body = srv.requests_to(CHAT)[0].json
    assert title == "Lighthouse builder"
    assert body["max_completion_tokens"] == TITLE_MAX_TOKENS == 48
    (call,) = ledger.calls
    assert (call.kind, call.stage, call.tokens_in, call.tokens_out, call.estimated) == (
        "chat",
        "session_title",
        30,
        3,
        False,
    )
    assert lab.background_ledger.calls == []  # the server passes lab.background_ledger; here we passed our own
    lab.workspace.close()


# --------------------------------------------------------------------------- the judge


def _judge_reply(req: Any) -> Reply:
    return Reply.chat(json.dumps({"reason": "r", "verdict": 1}), usage={"prompt_tokens": 100, "completion_tokens": 7})


def test_judge_calls_are_in_the_ledger_report_and_projection(tmp_path: Path) -> None:
    from rag_lab.eval.ragas_adapter import JudgeConfig, RagasSample, score_samples
    from rag_lab.observability.ledger import Ledger, PriceTable

    s = RagasSample("q1", "who?", ["Mara Quill built it.", "Bread."], ["d1", "d2"], "Mara Quill", ["d1"], [], "Mara")
    ledger = Ledger(PriceTable({"judge-m": {"input_per_1m": 1000.0, "output_per_1m": 2000.0}}))
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.error(500, "busy"), _judge_reply, _judge_reply)
        judge = JudgeConfig.from_mapping({"model": "judge-m", "base_url": srv.base_url, "max_retries": 1})
        r = score_samples([s], ["llm_context_precision"], judge=judge, ledger=ledger)
        n_requests = len(srv.requests_to(CHAT))
    calls = [c for c in ledger.calls if c.kind == "judge"]
    assert len(calls) == n_requests == 3  # the 500, its retry, and the second context's call
    assert [c.error for c in calls].count("HTTP 500") == 1
    assert r.judge["calls"] == 3 and r.judge["failed"] == 1
    assert r.judge["tokens_in"] == 200 and r.judge["tokens_out"] == 14
    assert r.judge["cost_usd"] == pytest.approx((200 * 1000 + 14 * 2000) / 1e6)
    # in the report's ledger line
    from rag_lab.eval.metrics import evaluate_retrieval
    from rag_lab.eval.report import EvalReport, SuiteResult, render_markdown
    from rag_lab.eval.runner import QueryRecord

    suite = SuiteResult(
        "s",
        "d",
        "kb",
        {},
        {},
        evaluate_retrieval({"q1": ["d1"]}, {"q1": {"d1"}}),
        [QueryRecord("q1", "?", ["d1"], [])],
        r,
    )
    assert suite.ledger_totals()["model_calls"] == {"judge": 3}
    assert "model calls 3 judge; 200 tokens in, 14 out" in render_markdown(EvalReport([suite]))
    assert "1 judge calls failed" in render_markdown(EvalReport([suite]))


def test_projection_and_budget_count_the_judge(tmp_path: Path) -> None:
    from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset
    from rag_lab.eval.ragas_adapter import JUDGE_MAX_ATTEMPTS, JudgeConfig, add_judge_projection
    from rag_lab.eval.runner import SuiteSpec
    from rag_lab.observability.projection import BudgetExceeded, project_suites

    write_dataset(
        [CorpusDoc("d1", "The lighthouse was built by Mara Quill.", "L")],
        [QueryItem("q1", "Who built it?", ["Mara Quill"], ["d1"]), QueryItem("q2", "When?", ["1874"], ["d1"])],
        tmp_path / "tiny",
    )
    lab = Lab.from_config(
        {"prices": {"judge-m": {"input_per_1m": 1.0, "output_per_1m": 1.0}}}, workspace=tmp_path / "ws"
    )
    judge = JudgeConfig.from_mapping({"model": "judge-m", "base_url": "http://127.0.0.1:9/v1", "max_tokens": 100})
    suites = [SuiteSpec(str(tmp_path / "tiny"))]
    without = project_suites(lab, suites)
    proj = add_judge_projection(project_suites(lab, suites), lab, suites, judge, ["faithfulness", "chrf"])
    assert "judge" not in without.calls
    assert proj.calls["judge"] == 2 * 2 * JUDGE_MAX_ATTEMPTS  # 2 questions x 2 faithfulness calls x attempts
    assert proj.tokens_out - without.tokens_out == proj.calls["judge"] * 100
    assert proj.cost_usd > without.cost_usd
    with pytest.raises(BudgetExceeded, match="over the budget"):
        proj.check_budget(without.cost_usd)
    lab.workspace.close()


def test_llm_metric_without_a_judge_fails_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    ws = tmp_path / "ws"
    code = main(
        ["--workspace", str(ws), "eval", "--dataset", "hotpotqa_hipporag100:2:5", "--ragas-metric", "faithfulness"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "faithfulness need a judge" in err and "--judge-model" in err
    assert not (ws / "knowledge.sqlite").exists() or not any(ws.glob("**/*.faiss"))  # nothing was ingested
