"""MEMORY_RECALL (spec §4.2): skipped without a memory service, memory prompt and used memories,
the ``memory_recalled`` event, never failing; end to end with the memory store, the answer's
system prompt and the MemoryAffinity boost (§4.6.5)."""

from __future__ import annotations

import pytest

from rag_lab.memory import MEMORY_PREAMBLE, MemoryStore, Recall
from rag_lab.pipeline.container import Services, build_event_manager, default_plugins
from rag_lab.pipeline.plugins.memory_recall import PluginMemoryRecall
from rag_lab.pipeline.qa import run_knowledge_qa
from rag_lab.stream.bus import EventBus
from rag_lab.stream.handler import AgentStreamHandler
from rag_lab.stream.manager import MemoryStreamManager
from rag_lab.types import ChatManage, PipelineRequest
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"


def _chat(query="lighthouse opening hours") -> ChatManage:
    chat = ChatManage(request=PipelineRequest(query=query, session_id="s", user_id="alice"))
    chat.context.event_bus = EventBus()
    chat.context.message_id = "m"
    return chat


async def _run(memory, chat):
    calls = []

    async def nxt():
        calls.append("next")

    assert await PluginMemoryRecall(Services(memory=memory)).on_event("memory_recall", chat, nxt) is None
    assert calls == ["next"]


async def test_skipped_without_memory_service():
    chat = _chat()
    await _run(None, chat)
    assert (chat.state.memory_prompt, chat.state.used_memories, chat.state.diagnostics) == ("", [], {})


async def test_recall_sets_prompt_items_and_emits_the_event(tmp_path, embedder):
    memory = MemoryStore(tmp_path / "m.sqlite", embedder)
    memory.add_memory("alice", "Alice volunteers at the Brightwater lighthouse")
    memory.add_memory("bob", "Bob volunteers at the lighthouse museum")
    chat = _chat()
    streams = MemoryStreamManager()
    AgentStreamHandler(streams, "s", "m").subscribe(chat.context.event_bus)
    seen = []
    chat.context.event_bus.on("memory_recalled", seen.append)
    await _run(memory, chat)
    assert chat.state.memory_prompt == (
        f"\n\n<user_memory>\n{MEMORY_PREAMBLE}\n- Alice volunteers at the Brightwater lighthouse\n</user_memory>"
    )
    assert [m["content"] for m in chat.state.used_memories] == ["Alice volunteers at the Brightwater lighthouse"]
    assert [e.data["memories"] for e in seen] == [chat.state.used_memories]
    events, _ = streams.get_events("s", "m", 0)
    assert [e.type for e in events] == ["memory_recalled"] and events[0].data["memories"][0][
        "id"
    ] == chat.state.used_memories[0]["id"]


class Scripted:
    def __init__(self, result=None, error=None):
        self.result, self.error = result, error

    def recall(self, user_id, query):
        if self.error:
            raise self.error
        return self.result


@pytest.mark.parametrize("result", [Recall("", [{"id": "x"}]), {"prompt": "", "items": []}, None])
async def test_empty_prompt_changes_nothing(result):
    chat = _chat()
    seen = []
    chat.context.event_bus.on("memory_recalled", seen.append)
    await _run(Scripted(result), chat)
    assert (chat.state.memory_prompt, chat.state.used_memories, seen) == ("", [], [])


async def test_prompt_without_items_sets_prompt_but_emits_nothing():
    chat = _chat()
    seen = []
    chat.context.event_bus.on("memory_recalled", seen.append)
    await _run(Scripted({"prompt": "\n\n<user_memory>\nx\n</user_memory>", "items": []}), chat)
    assert chat.state.memory_prompt.endswith("</user_memory>") and seen == []


@pytest.mark.parametrize("memory", [Scripted(error=RuntimeError("db locked")), Scripted({"prompt": 42, "items": []})])
async def test_failures_never_block(memory, caplog):
    chat = _chat()
    await _run(memory, chat)
    assert chat.state.memory_prompt == "" and "memory_recall failed" in caplog.text
    assert chat.state.diagnostics["memory_recall"]["error"]


async def test_a_failing_event_handler_does_not_fail_the_stage():
    chat = _chat()

    def boom(ev):
        raise RuntimeError("subscriber bug")

    chat.context.event_bus.on("memory_recalled", boom)
    await _run(Scripted(Recall("\n\n<user_memory>\np\n</user_memory>", [{"id": "1"}])), chat)
    assert chat.state.used_memories == [{"id": "1"}]


async def test_end_to_end_memory_reaches_the_model_and_boosts_cited_documents(tmp_path, docs_dir):
    from rag_lab.lab import Lab

    with FakeOpenAIServer() as srv:
        lab = Lab.from_config(
            {
                "models": {
                    "embedder": {"type": "onnx-minilm"},
                    "reranker": {"type": "embedding-rescorer"},
                    "chat": {
                        "type": "openai",
                        "model": "fake",
                        "base_url": srv.base_url,
                        "api_key": "k",
                        "max_retries": 0,
                    },
                },
                "params": {"enable_rewrite": False},
            },
            workspace=tmp_path,
        )
        lab.ingest(docs_dir, kb="demo", progress=False)
        memory = MemoryStore(tmp_path / "memory.sqlite", lab.embedder)
        memory.add_memory("lab", "The user restores old lighthouses for a living")
        services = lab.services
        services.memory = memory
        chat = lab.new_chat("Who built the Brightwater lighthouse?", ["demo"])
        # the lighthouse document was cited by two earlier answers: MemoryAffinity boosts it
        # (the lab records the first answer's citations itself when it completes the message)
        first = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
        lighthouse = next(r.knowledge_id for r in first.references if "Brightwater" in r.content)
        assert memory.document_affinity("lab", [lighthouse]) == {lighthouse: 1}
        memory.record_citations("lab", [lighthouse], message_id="a2")
        srv.script(CHAT, Reply.chat("Mara Quill."))
        manager = build_event_manager(services, default_plugins(services))
        streams = MemoryStreamManager()
        outcome = await run_knowledge_qa(chat, services, manager, streams)
        system = srv.requests_to(CHAT)[-1].json["messages"][0]["content"]
    assert outcome.answer == "Mara Quill."
    assert "<user_memory>" in system and "- The user restores old lighthouses for a living\n</user_memory>" in system
    events, _ = streams.get_events(chat.request.session_id, chat.context.message_id, 0)
    assert "memory_recalled" in [e.type for e in events]
    boosted = [r for r in chat.state.rerank_result if r.knowledge_id == lighthouse]
    assert boosted, [r.metadata for r in chat.state.rerank_result]
    assert all(r.metadata.get("memory_affinity") == "1.0750" for r in boosted), [
        r.metadata.get("memory_affinity") for r in boosted
    ]  # 1 + 0.15 * ln3/ln9
