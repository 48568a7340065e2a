"""Title generation (spec §9.2) over a loopback OpenAI-compatible server, assistant completion
(§9.1) with long-term memory, and the attachment prompt (§9.3)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.memory import MemoryStore
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.session.attachments import MessageAttachment, build_attachment_prompt
from rag_lab.session.completion import complete_assistant_message, history_passage
from rag_lab.session.sqlite_store import SQLiteSessionStore
from rag_lab.session.title import EMPTY_THINK_PREFIX, generate_title_async, sanitize_title
from rag_lab.stream.bus import EventBus
from rag_lab.types.search_result import SearchResult
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"


@pytest.fixture
def store(tmp_path):
    s = SQLiteSessionStore(tmp_path / "s.sqlite")
    yield s
    s.close()


def test_sanitize_title_spec_cases():
    assert sanitize_title(EMPTY_THINK_PREFIX + "  Lighthouse history \n") == "Lighthouse history"
    assert sanitize_title("x" * 99 + " yz") == "x" * 99  # cut at 100 runes, trimmed again
    assert sanitize_title("灯塔" * 80) == "灯塔" * 50  # runes, not bytes
    assert (
        sanitize_title("<think>\nreal thought\n</think> T") == "<think>\nreal thought\n</think> T"
    )  # only the empty prefix
    with pytest.raises(ValueError, match="max_runes"):
        sanitize_title("t", 0)


@given(st.text(max_size=300))
def test_sanitize_title_properties(text):
    t = sanitize_title(text)
    assert len(t) <= 100 and t == t.strip()
    body = text[len(EMPTY_THINK_PREFIX) :] if text.startswith(EMPTY_THINK_PREFIX) else text
    assert t in body.strip()
    assert sanitize_title(t) == t or t.startswith(EMPTY_THINK_PREFIX)


async def test_title_generated_saved_and_announced(store):
    s = store.create_session("u")
    bus, seen = EventBus(), []
    bus.on("session_title", seen.append)
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat(EMPTY_THINK_PREFIX + "  Who built the Brightwater lighthouse  "))
        model = OpenAIChatModel("fake", srv.base_url, max_retries=0)
        task = generate_title_async(store, s.id, "who built the lighthouse?", model, language="French", bus=bus)
        assert await task == "Who built the Brightwater lighthouse"
        body = srv.requests_to(CHAT)[-1].json
    assert store.get_session(s.id).title == "Who built the Brightwater lighthouse"
    assert [e.data for e in seen] == [{"session_id": s.id, "title": "Who built the Brightwater lighthouse"}]
    sys_msg, user_msg = body["messages"]
    assert sys_msg["role"] == "system" and "French" in sys_msg["content"] and "{{language}}" not in sys_msg["content"]
    assert user_msg == {"role": "user", "content": "who built the lighthouse?"}
    assert body["temperature"] == 0.3 and body["enable_thinking"] is False
    # a session that has a title is left alone
    assert generate_title_async(store, s.id, "again", model) is None


async def test_title_errors_are_logged_without_event(store, caplog):
    s = store.create_session("u")
    bus, seen = EventBus(), []
    bus.on("session_title", seen.append)
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.error(500, "boom"), Reply.chat("   "))
        model = OpenAIChatModel("fake", srv.base_url, max_retries=0)
        assert await generate_title_async(store, s.id, "q", model, bus=bus) == ""
        assert await generate_title_async(store, s.id, "q", model, bus=bus) == ""  # empty title
    assert seen == [] and store.get_session(s.id).title == ""
    assert "title generation" in caplog.text and "HTTP 500" in caplog.text
    assert generate_title_async(store, "ghost", "q", model) is None
    assert generate_title_async(store, s.id, "q", model, enabled=False) is None


def test_no_title_from_a_model_that_cannot_follow_instructions(store, embedder):
    from rag_lab.models.extractive import ExtractiveChatModel

    s = store.create_session("u")
    assert generate_title_async(store, s.id, "who built the lighthouse?", ExtractiveChatModel(embedder)) is None
    assert store.get_session(s.id).title == ""


async def test_agent_override_of_the_title_template(store):
    s = store.create_session("u")
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat("T"))
        model = OpenAIChatModel("fake", srv.base_url, max_retries=0)
        await generate_title_async(
            store,
            s.id,
            "q",
            model,
            language="German",
            overrides={"default_session_title": "Title in {{language}} please"},
        )
        assert srv.requests_to(CHAT)[-1].json["messages"][0]["content"] == "Title in German please"


def test_history_passage():
    assert history_passage("s1", "Q?", "<think>x</think> A. ") == "[Session: s1]\nQ: Q?\nA: A."
    assert history_passage("s1", "", "partial") == "[Session: s1]\nQ: \nA: partial"
    assert history_passage("s1", "", "<think>only</think>") is None


async def test_completion_saves_then_feeds_memory_and_index(store, tmp_path, embedder):
    memory = MemoryStore(tmp_path / "m.sqlite", embedder)
    s = store.create_session("alice")
    store.add_message(s.id, "user", "Remember that I prefer short answers", "r1")
    a = store.add_message(s.id, "assistant", "", "r1", is_completed=False)
    refs = [
        SearchResult(id="c1", knowledge_id="k1", knowledge_title="Lighthouse"),
        SearchResult(id="c2", knowledge_id="k1"),
        SearchResult(id="c3", knowledge_id="k2"),
    ]
    indexed = []

    async def indexer(passage, session_id, message_id):
        indexed.append((passage, session_id, message_id))

    task = await complete_assistant_message(
        store,
        s.id,
        a.id,
        content="<think>t</think>Noted.",
        knowledge_references=refs,
        is_fallback=False,
        used_memories=[{"id": "m0"}],
        query="Remember that I prefer short answers",
        user_id="alice",
        memory=memory,
        history_indexer=indexer,
    )
    saved = store.get_message(s.id, a.id)  # step 1 is done before the call returns
    assert (
        saved.is_completed
        and saved.content == "<think>t</think>Noted."
        and [r.id for r in saved.knowledge_references] == ["c1", "c2", "c3"]
    )
    assert saved.used_memories == [{"id": "m0"}]
    done = await task
    assert done == {"indexed": True, "fact": "I prefer short answers", "cited": 2, "extracted": True}
    assert indexed == [(f"[Session: {s.id}]\nQ: Remember that I prefer short answers\nA: Noted.", s.id, a.id)]
    assert [(m.content, m.importance) for m in memory.list_memories("alice")] == [("I prefer short answers", 4)]
    assert memory.document_affinity("alice", ["k1", "k2", "k3"]) == {"k1": 1, "k2": 1}


async def test_stopped_turn_indexes_but_skips_memory(store, tmp_path, embedder):
    memory = MemoryStore(tmp_path / "m.sqlite", embedder)
    s = store.create_session("alice")
    a = store.add_message(s.id, "assistant", "", "r1", is_completed=False)

    def failing_indexer(passage, **kw):
        raise RuntimeError("index down")

    task = await complete_assistant_message(
        store,
        s.id,
        a.id,
        content="half an answ",
        query="",
        user_id="alice",
        memory=memory,
        history_indexer=failing_indexer,
        knowledge_references=[SearchResult(id="c", knowledge_id="k")],
    )
    assert (await task) == {"indexed": False, "fact": None, "cited": 0, "extracted": False}
    assert store.get_message(s.id, a.id).is_completed and memory.stats("alice") == {
        "memories": 0,
        "citations": 0,
        "topics": 0,
    }


async def test_completion_task_survives_the_callers_cancellation(store, tmp_path, embedder):
    memory = MemoryStore(tmp_path / "m.sqlite", embedder)
    s = store.create_session("alice")
    a = store.add_message(s.id, "assistant", "", "r1", is_completed=False)
    holder = {}

    async def request():
        holder["task"] = await complete_assistant_message(
            store,
            s.id,
            a.id,
            content="ok",
            query="q about lighthouses",
            user_id="alice",
            memory=memory,
            knowledge_references=[SearchResult(id="c", knowledge_id="k")],
        )
        await asyncio.sleep(10)

    req = asyncio.ensure_future(request())
    while "task" not in holder:
        await asyncio.sleep(0.01)
    req.cancel()
    done = await holder["task"]
    assert done["cited"] == 1 and memory.document_affinity("alice", ["k"]) == {"k": 1}


def test_attachment_prompt_layout_and_escaping():
    atts = [
        MessageAttachment("a<b>.txt", "txt", 2048, "line </content> and </attachments>", "full", 2, 5, True, 120),
        {"file_name": "scan.pdf", "file_type": "pdf", "file_size": 10},
    ]
    out = build_attachment_prompt(atts)
    assert out.startswith("\n\n<attachments>\n<instruction>") and out.endswith("</attachments>\n\n")
    assert (
        '<attachment index="1" name="a&lt;b&gt;.txt">\n<metadata>\n<type>txt</type>\n<size_kb>2.00</size_kb>\n' in out
    )
    assert "<content_mode>full</content_mode>\n<selected_chunks>2/5</selected_chunks>\n</metadata>\n" in out
    assert "<content>\nline &lt;/content&gt; and &lt;/attachments&gt;\n</content>\n" in out
    assert "120 lines" in out
    assert (
        '<attachment index="2" name="scan.pdf">\n<metadata>\n<type>pdf</type>\n<size_kb>0.01</size_kb>\n</metadata>\n'
        "<note>File content extraction failed or is unsupported.</note>\n</attachment>\n"
    ) in out
    assert build_attachment_prompt([]) == ""
    with pytest.raises(ValueError, match=r"attachments\[0\]: unknown field\(s\) colour"):
        build_attachment_prompt([{"file_name": "x", "colour": 1}])
    assert build_attachment_prompt([{"prompt": "<pre-rendered/>"}]) == "\n\n<pre-rendered/>"
