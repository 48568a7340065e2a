"""Declared stage contracts hold: every stage, run on the bundled demo questions through the Lab
(default pipeline, history, memory, web search + fetch, data analysis, a graph KB, an FAQ KB,
pure chat, the non-streaming answer), reads and writes only what its contract declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rag_lab.demo import DATASET, demo_documents
from rag_lab.eval.datasets import load_dataset
from rag_lab.pipeline.container import Services, default_plugins
from rag_lab.pipeline.contract_check import StageAccess, record_access, undeclared
from rag_lab.pipeline.contracts import ContractError, StageContract, check_contract, contract_of, stage_table
from rag_lab.types.events import EventType

SALES = "region,month,amount\nNorth,2024-01,100.5\nSouth,2024-01,200\nNorth,2024-02,150\nEast,2024-02,50.25\n"
PLUGIN_CLASSES = [type(p) for p in default_plugins(Services())]


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StageAccess]:
    from rag_lab.lab.lab import Lab

    root = tmp_path_factory.mktemp("contracts")
    pages = root / "web"
    pages.mkdir()
    (pages / "lighthouses.html").write_text(
        "<html><head><title>Lighthouse keepers</title></head><body><p>Keepers tended the lamp of "
        "the lighthouse every night until automation.</p></body></html>",
        encoding="utf-8",
    )
    tables = root / "tables"
    tables.mkdir()
    (tables / "sales.csv").write_text(SALES, encoding="utf-8")
    cfg = {
        "workspace": str(root / "ws"),
        "memory": {"enabled": True},
        "web": {"search": {"type": "local_folder", "folder": str(pages)}, "fetch": {"allow_file": True}},
    }
    lab = Lab.from_config(cfg)
    lab.kb("demo", graph_enabled=True)
    lab.ingest_documents(demo_documents(max_docs=48), kb="demo", progress=False)
    lab.ingest(tables, kb="demo", progress=False)
    faq = lab.workspace.create_kb("faq", lab.embedder, kb_type="faq")
    lab.workspace.ingest_faq(
        faq,
        [{"standard_question": "How do I reset my password?", "answers": ["Use the reset link on the login page."]}],
        lab.embedder,
        progress=False,
    )
    questions = [q.question for q in load_dataset(DATASET).queries[:3]]
    with record_access(PLUGIN_CLASSES) as got:
        session = ""
        for q in questions:  # one session: the later questions load the earlier turns
            session = lab.ask(q, kb="demo", session_id=session, snapshots=False).session_id
        lab.ask(
            "What is the total amount per region?",
            kb="demo",
            params={"data_analysis_enabled": True, "web_search_enabled": True, "web_fetch_enabled": True},
            snapshots=False,
        )
        lab.ask("How can I reset my password?", kb="faq", params={"faq_priority_enabled": True}, snapshots=False)
        lab.ask("Hello there!", kb=[], snapshots=False)  # pure chat
        run = lab.ask(questions[0], kb="demo")
        chat = run.state(EventType.INTO_CHAT_MESSAGE)  # the non-streaming answer on a real state
        import asyncio

        asyncio.run(lab._manager.trigger(EventType.CHAT_COMPLETION, chat))
    lab.workspace.close()
    return got


def test_every_registered_stage_ran(seen: dict[str, StageAccess]) -> None:
    not_run = [c.__name__ for c in PLUGIN_CLASSES if seen[c.__name__].calls == 0]
    assert not not_run, f"stages the scenarios never ran: {not_run}"


@pytest.mark.parametrize("cls", PLUGIN_CLASSES, ids=lambda c: c.__name__)
def test_no_undeclared_read_or_write(cls: type, seen: dict[str, StageAccess]) -> None:
    extra = undeclared(cls, seen[cls.__name__])
    assert extra == {"reads": [], "writes": [], "params": [], "kb": []}, (
        f"{cls.__name__} does more than its contract declares: {extra}"
    )


def test_every_contract_names_real_fields() -> None:
    for cls in PLUGIN_CLASSES:
        check_contract(cls.__name__, contract_of(cls))
    with pytest.raises(ContractError, match=r"X: contract reads 'state\.nope': PipelineState has no field 'nope'"):
        check_contract("X", StageContract(reads=("state.nope",)))
    with pytest.raises(ContractError, match=r"not PipelineParams fields"):
        check_contract("X", StageContract(params=("no_such_param",)))
    with pytest.raises(ContractError, match="no StageContract declared"):
        contract_of(object())


def test_the_recorder_sees_reads_writes_and_in_place_changes() -> None:
    from rag_lab.pipeline.plugins.base import StagePlugin
    from rag_lab.types import ChatManage, SearchResult

    class Probe(StagePlugin):
        async def on_event(self, event: Any, chat: ChatManage, next: Any) -> Any:
            _ = chat.request.query, chat.request.params.rerank_threshold
            chat.state.search_result[0].score = 0.5  # in place
            chat.state.diagnostics["probe"] = {"n": 1}
            err = await next()
            chat.state.intent = "kb_search"
            return err

    chat = ChatManage()
    chat.state.search_result = [SearchResult(id="a", score=1.0)]
    import asyncio

    async def nxt() -> None:
        chat.state.rewrite_query = "inner"  # not the probe's write

    with record_access([Probe]) as got:
        asyncio.run(Probe(Services()).on_event("x", chat, nxt))
    a = got["Probe"]
    assert a.reads == {"request.query", "state.search_result"}
    assert a.params == {"rerank_threshold"}
    assert a.writes == {"state.search_result", "state.diagnostics.probe", "state.intent"}
    assert Path  # the recorder restored the classes: plain access again
    assert "__getattribute__" not in type(chat.state).__dict__


def test_stage_table_lists_each_stage_in_registration_order() -> None:
    rows = stage_table(default_plugins(Services()))
    assert [r["stage"] for r in rows][:3] == ["PluginSearch", "PluginRerank", "PluginWebFetch"]
    rerank = rows[1]
    assert "state.search_result" in rerank["reads"] and "state.rerank_result" in rerank["writes"]
    assert "rerank_threshold" in rerank["params"] or "request.rerank_threshold" in rerank["reads"]


def test_docs_stages_md_holds_the_current_contract_table() -> None:
    from rag_lab.pipeline.contracts import stage_table_markdown

    text = (Path(__file__).resolve().parents[2] / "docs" / "stages.md").read_text(encoding="utf-8")
    begin, end = "<!-- stage-contracts:begin -->\n", "<!-- stage-contracts:end -->"
    block = text[text.index(begin) + len(begin) : text.index(end)]
    assert block == stage_table_markdown(default_plugins(Services())), (
        "docs/stages.md is stale: paste `rag-lab stages --format markdown` between its markers"
    )


def test_rag_lab_stages_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.cli import main

    assert main(["stages"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PluginSearch (chunk_search)\n  reads   request.embedding_top_k")
    assert "PluginRerank (chunk_rerank)" in out and "  params  composite_base_weight" in out
    assert main(["stages", "--format", "json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 17 and rows[1]["stage"] == "PluginRerank"
