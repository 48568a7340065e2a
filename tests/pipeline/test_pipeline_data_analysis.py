"""DATA_ANALYSIS (spec §4.10): the stage against a loopback OpenAI-compatible server, each
continue-without-result path with its recorded reason, and the whole pipeline through the Lab."""

from __future__ import annotations

import json
import re

import pytest

from rag_lab.knowledge.tables import ingest_table, stored_table_path
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugin import EventManager
from rag_lab.pipeline.plugins.data_analysis import PluginDataAnalysis
from rag_lab.prompts.templates import PromptTemplates
from rag_lab.tools.data_analysis import DataAnalysisTool
from rag_lab.types import ChatManage, EventType, MatchType, PipelineRequest, SearchResult
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"
SALES = (
    "region,month,amount,units\n"
    "North,2024-01-01,100.5,3\n"
    "South,2024-01-01,200,4\n"
    "North,2024-02-01,150,2\n"
    "East,2024-02-01,50.25,1\n"
)
TOTALS_SQL = "SELECT region, sum(amount) AS total FROM sales GROUP BY region ORDER BY total DESC"
TOTALS_TABLE = "| region | total |\n| --- | --- |\n| North | 250.5 |\n| South | 200 |\n| East | 50.25 |"


@pytest.fixture
def srv():
    with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
def setup(workspace, embedder, tmp_path):
    """(workspace, kb) with sales.csv ingested as a table document."""
    path = tmp_path / "sales.csv"
    path.write_text(SALES, encoding="utf-8")
    kb = workspace.create_kb("tables", embedder)
    ingest_table(workspace, kb, path, embedder, description="Monthly sales by region")
    return workspace, kb


def _services(workspace, model=None):
    return Services(
        workspace=workspace, chat_models={"chat": model} if model is not None else {}, prompts=PromptTemplates()
    )


def _chat(kb, query="What is the total amount per region?", **req):
    chat = ChatManage(request=PipelineRequest(query=query, chat_model_id="chat", data_analysis_enabled=True, **req))
    chat.state.merge_result = [
        SearchResult(
            id="doc#c0",
            content="Some prose about regions.",
            knowledge_id="notes.md",
            knowledge_filename="notes.md",
            score=0.9,
        ),
        SearchResult(
            id=f"{kb.id}:sales.csv#col2",
            content="Column amount",
            knowledge_id="sales.csv",
            knowledge_filename="sales.csv",
            knowledge_base_id=kb.id,
            chunk_type="table_column",
            score=0.8,
        ),
        SearchResult(
            id=f"{kb.id}:sales.csv#table",
            content="Table file sales.csv",
            knowledge_id="sales.csv",
            knowledge_filename="Sales.CSV",
            knowledge_base_id=kb.id,
            chunk_type="table_summary",
            score=0.7,
        ),
    ]
    return chat


async def _run(services, chat):
    manager = EventManager()
    manager.register(PluginDataAnalysis(services))
    reached = []

    class Tail:
        def activation_events(self):
            return [EventType.DATA_ANALYSIS]

        async def on_event(self, event, c, next):
            reached.append(True)
            return await next()

    manager.register(Tail())
    err = await manager.trigger(EventType.DATA_ANALYSIS, chat)
    return err, bool(reached)


def _model(srv):
    return OpenAIChatModel("fake", srv.base_url, "k", max_retries=0)


async def test_sql_result_becomes_a_synthetic_result_and_table_chunks_leave(setup, srv):
    ws, kb = setup
    srv.script(CHAT, Reply.chat(json.dumps({"knowledge_id": "sales.csv", "sql": TOTALS_SQL})))
    chat = _chat(kb)
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached
    ids = [r.id for r in chat.state.merge_result]
    assert ids == ["doc#c0", "analysis_sales.csv"]
    res = chat.state.merge_result[-1]
    assert res.score == 1.0 and res.match_type == MatchType.DATA_ANALYSIS == 9
    assert (res.knowledge_id, res.knowledge_title, res.knowledge_filename, res.knowledge_description) == (
        "sales.csv",
        "sales",
        "sales.csv",
        "Monthly sales by region",
    )
    assert res.content == (
        "Data analysis of sales.csv (table sales)\n\nSQL:\n```sql\n"
        + TOTALS_SQL
        + "\n```\n\nResult: 3 rows\n\n"
        + TOTALS_TABLE
    )
    diag = chat.state.diagnostics["data_analysis"]
    assert diag["status"] == "added" and diag["sql"] == TOTALS_SQL and diag["data_files"] == ["sales.csv", "sales.csv"]
    assert diag["removed_table_chunks"] == [f"{kb.id}:sales.csv#col2", f"{kb.id}:sales.csv#table"]
    # what the model was asked: JSON schema, temperature 0.1, question + knowledge id + schema
    body = srv.requests_to(CHAT)[0].json
    assert body["temperature"] == 0.1
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["knowledge_id", "sql"]
    user = body["messages"][1]["content"]
    assert "What is the total amount per region?" in user and "knowledge_id: sales.csv" in user
    with DataAnalysisTool(stored_table_path(ws, ws.store.get_document(kb.id, "sales.csv"))) as t:
        assert t.describe_schema() in user
    assert "leave" in body["messages"][0]["content"] and '"sql"' in body["messages"][0]["content"]


@pytest.mark.parametrize(
    "reply, status, reason",
    [
        (
            Reply.chat(json.dumps({"knowledge_id": "sales.csv", "sql": "SELECT nope FROM sales"})),
            "failed",
            "running the SQL failed: query failed: Binder Error",
        ),
        (
            Reply.chat(json.dumps({"knowledge_id": "sales.csv", "sql": "DROP TABLE sales"})),
            "failed",
            "only a single SELECT or WITH query is allowed",
        ),
        (
            Reply.chat(json.dumps({"knowledge_id": "sales.csv", "sql": ""})),
            "skipped",
            "empty 'sql': no analysis needed",
        ),
        (Reply.chat("Sorry, I cannot do that."), "failed", "unreadable model reply"),
        (Reply.error(500, "boom"), "failed", "model call failed: .*HTTP 500"),
    ],
)
async def test_every_failure_continues_without_a_result(setup, srv, reply, status, reason):
    ws, kb = setup
    srv.script(CHAT, reply)
    chat = _chat(kb)
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached
    assert [r.id for r in chat.state.merge_result] == ["doc#c0"]  # table chunks removed, nothing added
    diag = chat.state.diagnostics["data_analysis"]
    assert diag["status"] == status
    assert re.search(reason, diag["reason"]), diag["reason"]


async def test_missing_file_or_document_continues_before_any_model_call(setup, srv):
    ws, kb = setup
    stored_table_path(ws, ws.store.get_document(kb.id, "sales.csv")).unlink()
    chat = _chat(kb)
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached and [r.id for r in chat.state.merge_result] == ["doc#c0"]
    assert chat.state.diagnostics["data_analysis"]["status"] == "failed"
    assert "data file of 'sales.csv' unavailable" in chat.state.diagnostics["data_analysis"]["reason"]
    assert "is missing" in chat.state.diagnostics["data_analysis"]["reason"]

    chat = _chat(kb)
    for r in chat.state.merge_result[1:]:
        r.knowledge_id = "ghost.csv"  # a data-file hit whose document is not in the store
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached
    assert chat.state.diagnostics["data_analysis"]["reason"] == "document 'ghost.csv' not found in the knowledge store"
    assert srv.requests_to(CHAT) == []


async def test_unknown_chat_model_returns_err_get_chat_model(setup):
    ws, kb = setup
    chat = _chat(kb)
    err, reached = await _run(_services(ws), chat)
    assert err is not None and err.error_type == "get_chat_model_failed" and not reached
    assert "unknown chat model 'chat'" in str(err)
    assert [r.id for r in chat.state.merge_result] == ["doc#c0"]


async def test_a_model_that_cannot_follow_instructions_is_skipped_not_faked(setup, embedder):
    from rag_lab.models.extractive import ExtractiveChatModel

    ws, kb = setup
    chat = _chat(kb)
    err, reached = await _run(_services(ws, ExtractiveChatModel(embedder)), chat)
    assert err is None and reached
    assert [r.id for r in chat.state.merge_result] == ["doc#c0"]
    diag = chat.state.diagnostics["data_analysis"]
    assert diag["status"] == "skipped" and "cannot write SQL (follows_instructions is False" in diag["reason"]
    assert "sql" not in diag


async def test_no_data_file_and_no_retrieval_intent(setup, srv):
    ws, kb = setup
    chat = _chat(kb)
    chat.state.merge_result = chat.state.merge_result[:1]
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached and [r.id for r in chat.state.merge_result] == ["doc#c0"]
    assert chat.state.diagnostics["data_analysis"]["reason"] == "no CSV or Excel document among the merge results"

    chat = _chat(kb)
    chat.state.intent = "greeting"  # needs_retrieval is false: the stage does nothing at all
    err, reached = await _run(_services(ws, _model(srv)), chat)
    assert err is None and reached and len(chat.state.merge_result) == 3
    assert "data_analysis" not in chat.state.diagnostics and srv.requests_to(CHAT) == []


# ---- the whole pipeline ----------------------------------------------------------------------
def _lab(tmp_path, chat_cfg, **params):
    from rag_lab.lab import Lab

    cfg = {"params": {"data_analysis_enabled": True, "enable_rewrite": False, **params}}
    if chat_cfg is not None:
        cfg["models"] = {"chat": chat_cfg}
    lab = Lab.from_config(cfg, workspace=tmp_path / "ws")
    path = tmp_path / "sales.csv"
    path.write_text(SALES, encoding="utf-8")
    ingest_table(lab.workspace, lab.kb("sales"), path, lab.embedder)
    return lab


def test_lab_question_gets_the_analysis_into_the_answer(tmp_path):
    with FakeOpenAIServer() as srv:
        lab = _lab(
            tmp_path, {"type": "openai", "model": "fake", "base_url": srv.base_url, "api_key": "k", "max_retries": 0}
        )

        def answer_from_context(req):
            """A model that reads the North total off the table it was given and cites it."""
            system = req.json["messages"][0]["content"]
            m = re.search(r"^\| North \| (\S+) \|$", system, re.M)
            chunk = re.search(r'<chunk id="(c\d+)"', system)
            return Reply.chat(
                f'North leads with {m.group(1)} <ref id="{chunk.group(1)}"/>.' if m and chunk else "no table"
            )

        srv.script(CHAT, Reply.chat(json.dumps({"knowledge_id": "sales.csv", "sql": TOTALS_SQL})), answer_from_context)
        run = lab.ask("What is the total sales amount per region?", kb="sales")
        assert run.error == "" and "data_analysis" in run.stages
        merged = run.state("filter_top_k").state.merge_result
        assert merged and all(r.chunk_type in ("table_column", "table_summary") for r in merged)
        after = run.state("data_analysis").state
        assert [r.id for r in after.merge_result] == ["analysis_sales.csv"]
        assert after.diagnostics["data_analysis"]["status"] == "added"
        assert [r.id for r in run.references] == ["analysis_sales.csv"]
        answer_request = srv.requests_to(CHAT)[1].json
        assert answer_request["stream"] is True
        assert TOTALS_TABLE in answer_request["messages"][0]["content"]
        assert run.answer.startswith("North leads with 250.5 <kb ")
        assert 'chunk_id="analysis_sales.csv"' in run.answer


def test_lab_with_the_offline_answerer_skips_the_analysis(tmp_path):
    lab = _lab(tmp_path, None)
    run = lab.ask("What is the total sales amount per region?", kb="sales")
    after = run.state("data_analysis").state
    assert after.diagnostics["data_analysis"]["status"] == "skipped"
    assert "follows_instructions is False" in after.diagnostics["data_analysis"]["reason"]
    assert all(not r.id.startswith("analysis_") for r in after.merge_result)
    assert all(r.chunk_type not in ("table_column", "table_summary") for r in run.references)
