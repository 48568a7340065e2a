"""QUERY_UNDERSTAND (spec §4.3 + seed): model selection (vision chat model, VLM, text path,
dedicated model with fallback), prompt assembly, the 2,048-token image cap, tolerant parsing with
partial recovery of cut replies, image caption write-back, history fallback, asker background,
intent prompt overrides, and the offline small-talk detector."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.memory import AskerBackground
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.models.extractive import ExtractiveChatModel
from rag_lab.pipeline.container import Services
from rag_lab.pipeline.plugins.query_understand import (
    PluginQueryUnderstand,
    asker_background_block,
    build_understanding_query,
    detect_smalltalk,
    parse_query_understanding,
    recover_truncated_understanding,
    scan_object_prefix,
)
from rag_lab.prompts.templates import default_templates
from rag_lab.session.sqlite_store import SQLiteSessionStore
from rag_lab.session.store import MemoryMessageStore
from rag_lab.types import ChatManage, History, PipelineRequest
from tests.models.fake_openai import FakeOpenAIServer, Reply

CHAT = "/v1/chat/completions"
IMG = "data:image/png;base64,iVBORw0KGgo="


# -- partial recovery ----------------------------------------------------------------------------
FULL = {
    "rewrite_query": "Who built the Brightwater lighthouse?",
    "intent": "kb_search",
    "image_description": "A red and white tower. A sign reads: BRIGHTWATER 1874",
}


def test_recovery_of_cut_replies_concrete_cases():
    text = json.dumps(FULL)
    cut_in_desc = text[: text.index("BRIGHT") + 6]
    assert recover_truncated_understanding(cut_in_desc) == {
        "rewrite_query": FULL["rewrite_query"],
        "intent": "kb_search",
        "image_description": "A red and white tower. A sign reads: BRIGHT",
    }
    cut_in_intent = text[: text.index('"kb_') + 4]
    assert recover_truncated_understanding(cut_in_intent) == {
        "rewrite_query": FULL["rewrite_query"],
        "intent": "",
        "image_description": "",
    }
    cut_in_rewrite = text[: text.index("Bright")]
    assert recover_truncated_understanding(cut_in_rewrite) is None  # a cut rewrite is never used
    assert recover_truncated_understanding('{"rewri') is None
    assert recover_truncated_understanding("I think the user means the lighthouse.") is None
    assert recover_truncated_understanding("") is None


def test_recovery_tolerates_what_models_write():
    fenced = '```json\n{\n  "rewritten_query": "q1",\n  "intent": "Greeting",\n  "image_desc": "line1\nline2",\n  "ocr": "OCR TE'
    assert recover_truncated_understanding(fenced) == {
        "rewrite_query": "q1",
        "intent": "Greeting",
        "image_description": "line1\nline2\n\n[OCR]\nOCR TE",
    }
    # single quotes, bare keys, trailing commas, non-string values before the fields
    odd = '{\'meta\': {"a": [1, "}"]}, n: 3, ok: true, rewrite_query: \'q2\', "intent": "kb_search",}'
    assert scan_object_prefix(odd)["rewrite_query"] == ("q2", True)
    assert recover_truncated_understanding(odd)["rewrite_query"] == "q2"
    # a non-string alias is skipped, the next alias is used
    assert recover_truncated_understanding('{"query": 5, "question": "q3", "intent": "x') == {
        "rewrite_query": "q3",
        "intent": "",
        "image_description": "",
    }
    # escapes: a cut \\uXXXX or a cut surrogate pair is dropped, complete ones decoded
    assert (
        recover_truncated_understanding('{"intent":"kb_search","image_description":"caf\\u00e9 \\ud83d\\ude00 x\\u00')[
            "image_description"
        ]
        == "café 😀 x"
    )
    assert (
        recover_truncated_understanding('{"intent":"kb_search","image_description":"smile \\ud83d')["image_description"]
        == "smile"
    )
    assert (
        recover_truncated_understanding('{"intent":"kb_search","image_description":"back\\')["image_description"]
        == "back"
    )
    # a duplicate key that is cut does not replace a complete one
    assert scan_object_prefix('{"intent": "greeting", "intent": "kb_')["intent"] == ("greeting", True)


_VALUE = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=150)
@given(
    rewrite=_VALUE,
    intent=st.sampled_from(["kb_search", "greeting", "chitchat", "", "KB-Search"]),
    desc=_VALUE,
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 2]),
    prefix=st.sampled_from(["", "```json\n", "Sure: "]),
    data=st.data(),
)
def test_recovery_property_every_cut(rewrite, intent, desc, ascii_only, indent, prefix, data):
    """For a reply cut at any point: no exception; a field whose string closed before the cut is
    recovered exactly (trimmed); the cut description is a prefix of the real one; the uncut reply
    gives what the full parser gives."""
    obj = {"rewrite_query": rewrite, "intent": intent, "image_description": desc}
    text = prefix + json.dumps(obj, ensure_ascii=ascii_only, indent=indent)
    assert recover_truncated_understanding(text) == parse_query_understanding(text)
    k = data.draw(st.integers(min_value=0, max_value=len(text)))
    cut = text[:k]
    got = recover_truncated_understanding(cut)
    closes = {}
    body = json.dumps(obj, ensure_ascii=ascii_only, indent=indent)
    # where each value's closing quote sits in the text
    for key in obj:
        enc_key = json.dumps(key)
        start = text.index(enc_key, len(prefix)) + len(enc_key)
        start = text.index('"', text.index(":", start))
        closes[key] = start + len(json.dumps(obj[key], ensure_ascii=ascii_only))
    assert body  # keep linters quiet about the unused name
    if got is None:
        assert k < closes["rewrite_query"] or rewrite.strip() == ""
        return
    if k >= closes["rewrite_query"]:
        assert got["rewrite_query"] == rewrite.strip()
    else:
        assert got["rewrite_query"] == ""
    assert got["intent"] == (intent if k >= closes["intent"] else "")
    assert desc.strip().startswith(got["image_description"])
    if k >= closes["image_description"]:
        assert got["image_description"] == desc.strip()


# -- offline detector ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, label",
    [
        ("hi", "greeting"),
        ("Hello there!", "greeting"),
        ("hey, good morning :)", "greeting"),
        ("你好", "greeting"),
        ("您好！", "greeting"),
        ("早上好", "greeting"),
        ("大家好呀～", "greeting"),
        ("Hi there, thanks a lot!! 😊", "greeting"),
        ("thanks!", "chitchat"),
        ("Thank you so much", "chitchat"),
        ("谢谢", "chitchat"),
        ("谢谢啦！", "chitchat"),
        ("ok", "chitchat"),
        ("How are you?", "chitchat"),
        ("what's up", "chitchat"),
        ("再见", "chitchat"),
        ("bye bye", "chitchat"),
        ("你是谁？", "chitchat"),
        ("hello, who built the lighthouse?", ""),
        ("Who built the Brightwater lighthouse?", ""),
        ("history", ""),
        ("thanks, and what about the lamp?", ""),
        ("早餐吃什么", ""),
        ("你好，长城有多长？", ""),
        ("hi " * 40, ""),
        ("", ""),
        ("kb", ""),
        ("ty for the sourdough recipe", ""),
        ("42", ""),
    ],
)
def test_detect_smalltalk(text, label):
    assert detect_smalltalk(text) == label


@given(
    st.sampled_from(["hi", "hello", "thanks", "你好", "谢谢"]),
    st.sampled_from(["lighthouse", "长城", "sourdough", "1874"]),
)
def test_detect_smalltalk_never_swallows_a_question(greeting, topic):
    assert detect_smalltalk(f"{greeting} {topic}") == ""
    assert detect_smalltalk(f"{greeting}, {topic}?") == ""


# -- prompt pieces ----------------------------------------------------------------------------------
def test_query_placeholder_assembly():
    assert build_understanding_query("q", 0, "") == "q\n\n<no_image_attached />\n<no_document_attached />"
    assert build_understanding_query("q", 2, "\n\n<attachments>x</attachments>\n\n", "\n\n<bg/>") == (
        'q\n\n<images_uploaded count="2" />\n\n<attachments>x</attachments>\n\n\n\n<bg/>'
    )
    block = asker_background_block(AskerBackground("Keeps bees <b>", ["lighthouse", "bread"], ["Guide"]))
    assert block.startswith('\n\n<asker_background note="') and block.endswith("\n</asker_background>")
    assert "\nKeeps bees &lt;b&gt;\nLong-term interests: lighthouse, bread\nOften consulted: Guide" in block
    assert asker_background_block(AskerBackground()) == "" and asker_background_block(None) == ""
    assert asker_background_block({"interests": ["x"]}).count("\n") == 4  # mapping form, interests line only


# -- the plugin ---------------------------------------------------------------------------------------
def _chat(query="who made it?", **kw) -> ChatManage:
    kw.setdefault("chat_model_id", "chat")
    req = PipelineRequest(query=query, session_id=kw.pop("session_id", "s1"), user_id="u1", **kw)
    chat = ChatManage(request=req)
    chat.state.rewrite_query = query
    return chat


async def _run(plugin: PluginQueryUnderstand, chat: ChatManage) -> list[str]:
    calls: list[str] = []

    async def nxt():
        calls.append("next")
        return None

    assert await plugin.on_event("query_understand", chat, nxt) is None
    for t in chat.context.background_tasks:
        await t
    return calls


def _services(**models) -> Services:
    return Services(chat_models=dict(models), prompts=default_templates())


async def test_gate_skips_without_rewrite_and_images():
    with FakeOpenAIServer() as srv:
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))
        chat = _chat(enable_rewrite=False)
        assert await _run(PluginQueryUnderstand(svc), chat) == ["next"]
        assert srv.requests == [] and chat.state.rewrite_query == "who made it?" and chat.state.intent == ""


async def test_text_path_prompt_options_and_result():
    with FakeOpenAIServer() as srv:
        srv.script(
            CHAT,
            Reply.chat(
                '```json\n{"rewrite_query": "Who built the Brightwater lighthouse?", "intent": "KB-Search"}\n```'
            ),
        )
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))
        chat = _chat(language="French")
        chat.state.history = [History(query="Tell me about Brightwater", answer="It is a lighthouse.")]
        await _run(PluginQueryUnderstand(svc), chat)
        body = srv.requests_to(CHAT)[0].json
    assert chat.state.rewrite_query == "Who built the Brightwater lighthouse?" and chat.state.intent == "kb_search"
    assert (body["temperature"], body["max_completion_tokens"], body["enable_thinking"]) == (0.3, 150, False)
    system, user = body["messages"]
    assert system["content"].endswith(
        "## Conversation History\n------BEGIN------\nUser question: Tell me about Brightwater\n"
        "Assistant answer: It is a lighthouse.\n------END------\n\n"
    )
    assert "French" in system["content"]
    assert "## User Question\nwho made it?\n\n<no_image_attached />\n<no_document_attached />\n" in user["content"]
    assert isinstance(user["content"], str)  # no image parts


async def test_cut_image_reply_is_recovered_and_the_caption_written_back(tmp_path):
    store = SQLiteSessionStore(tmp_path / "s.sqlite")
    sess = store.create_session("u1")
    user_msg = store.add_message(sess.id, "user", "what does the sign say?", "r1", image_urls=["a.png", "b.png"])
    cut = '{"rewrite_query": "Text on the Brightwater sign", "intent": "image_only", "image_description": "A sign reading BRIGHTW'
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat(cut, finish_reason="length"))
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, supports_vision=True, max_retries=0))
        svc.messages = store
        chat = _chat("what does the sign say?", images=[IMG, IMG], chat_model_supports_vision=True, session_id=sess.id)
        chat.context.user_message_id = user_msg.id
        await _run(PluginQueryUnderstand(svc), chat)
        body = srv.requests_to(CHAT)[0].json
    s = chat.state
    assert (s.rewrite_query, s.intent, s.image_description) == (
        "Text on the Brightwater sign",
        "image_only",
        "A sign reading BRIGHTW",
    )
    assert s.diagnostics["query_understand"]["partial"] and s.diagnostics["query_understand"]["truncated"]
    assert body["max_completion_tokens"] == 2048
    user = body["messages"][1]["content"]
    assert [p["type"] for p in user] == ["text", "image_url", "image_url"]
    assert '<images_uploaded count="2" />' in user[0]["text"]
    assert store.get_message(sess.id, user_msg.id).image_captions == ["A sign reading BRIGHTW", ""]
    # image_only needs no retrieval: the global intent prompt becomes the system prompt
    assert s.system_prompt_override == default_templates().intent_prompts()["image_only"]
    store.close()


@pytest.mark.parametrize(
    "reply, finish",
    [('{"rewrite_query": "Who built the Bright', "length"), ("I cannot comply.", "stop"), ("", "stop")],
)
async def test_unreadable_replies_keep_the_original_query(reply, finish):
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat(reply, finish_reason=finish))
        chat = _chat()
        chat.state.intent = ""
        await _run(PluginQueryUnderstand(_services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))), chat)
    assert (chat.state.rewrite_query, chat.state.intent, chat.state.system_prompt_override) == ("who made it?", "", "")


async def test_vlm_is_used_when_the_chat_model_has_no_vision():
    with FakeOpenAIServer() as srv:
        srv.script(
            CHAT,
            Reply.chat(
                '{"rewrite_query": "q", "intent": "kb_search", "image_description": "a cat", "ocr_text": "MEOW"}'
            ),
        )
        svc = _services(
            chat=OpenAIChatModel("text-model", srv.base_url, max_retries=0),
            vlm=OpenAIChatModel("vision-model", srv.base_url, supports_vision=True, max_retries=0),
        )
        chat = _chat(images=[IMG], vlm_model_id="vlm")
        await _run(PluginQueryUnderstand(svc), chat)
        body = srv.requests_to(CHAT)[0].json
    assert body["model"] == "vision-model" and body["max_completion_tokens"] == 2048
    assert chat.state.image_description == "a cat\n\n[OCR]\nMEOW"


async def test_images_without_any_vision_model_take_the_text_path(caplog):
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.chat('{"rewrite_query": "q", "intent": "kb_search", "image_description": ""}'))
        svc = _services(chat=OpenAIChatModel("text-model", srv.base_url, max_retries=0))
        chat = _chat(images=[IMG], vlm_model_id="missing-vlm", enable_rewrite=False)
        with caplog.at_level(logging.WARNING):
            await _run(PluginQueryUnderstand(svc), chat)
        body = srv.requests_to(CHAT)[0].json
    user = body["messages"][1]["content"]
    assert isinstance(user, str) and '<images_uploaded count="1" />' in user  # the marker, not the image
    assert body["max_completion_tokens"] == 150
    assert "no vision model" in caplog.text and "missing-vlm" in caplog.text


async def test_dedicated_model_then_fallback_to_chat_then_skip(caplog):
    with FakeOpenAIServer() as srv:
        svc = _services(
            chat=OpenAIChatModel("big", srv.base_url, max_retries=0),
            small=OpenAIChatModel("small", srv.base_url, max_retries=0),
        )
        await _run(PluginQueryUnderstand(svc), _chat(query_understand_model_id="small"))
        await _run(PluginQueryUnderstand(svc), _chat(query_understand_model_id="gone"))
        assert [r.json["model"] for r in srv.requests_to(CHAT)] == ["small", "big"]
        assert "query-understanding model 'gone' unavailable" in caplog.text
        chat = _chat(query_understand_model_id="gone", chat_model_id="also-gone")
        assert await _run(PluginQueryUnderstand(svc), chat) == ["next"]
        assert chat.state.diagnostics["query_understand"]["skipped"] == "no model" and len(srv.requests_to(CHAT)) == 2


async def test_call_error_skips_the_stage():
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, Reply.error(500, "down"))
        chat = _chat()
        assert await _run(
            PluginQueryUnderstand(_services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))), chat
        ) == ["next"]
    assert (
        chat.state.rewrite_query == "who made it?" and "HTTP 500" in chat.state.diagnostics["query_understand"]["error"]
    )


class RecordingStore(MemoryMessageStore):
    def __init__(self):
        super().__init__()
        self.limits: list[int] = []

    def get_recent_messages(self, session_id, limit):
        self.limits.append(limit)
        return super().get_recent_messages(session_id, limit)


async def test_history_fallback_fetches_20_messages():
    store = RecordingStore()
    for i in range(15):
        store.add_message("s1", "user", f"q{i}", f"r{i}", created_at=float(i))
        store.add_message("s1", "assistant", f"a{i}", f"r{i}", created_at=i + 0.5)
    with FakeOpenAIServer() as srv:
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))
        svc.messages = store
        chat = _chat(max_rounds=3)
        await _run(PluginQueryUnderstand(svc), chat)
        system = srv.requests_to(CHAT)[0].json["messages"][0]["content"]
        assert store.limits == [20]
        assert [h.query for h in chat.state.history] == ["q12", "q13", "q14"]
        assert "User question: q12\nAssistant answer: a12" in system and "q11" not in system
        no_rounds = _chat(max_rounds=0)
        await _run(PluginQueryUnderstand(svc), no_rounds)
        assert store.limits == [20] and no_rounds.state.history == []


class Memory:
    def __init__(self, fail=False):
        self.fail = fail

    def asker_background(self, user_id, query):
        if self.fail:
            raise RuntimeError("memory down")
        return AskerBackground("Works as a lighthouse keeper", ["lighthouse"], ["Brightwater guide"])


async def test_asker_background_and_attachments_reach_the_prompt():
    with FakeOpenAIServer() as srv:
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))
        svc.memory = Memory()
        chat = _chat(attachments=[{"file_name": "notes.txt", "file_type": "txt", "file_size": 1024, "content": "lamp"}])
        await _run(PluginQueryUnderstand(svc), chat)
        svc.memory = Memory(fail=True)
        await _run(PluginQueryUnderstand(svc), _chat())
        first, second = (r.json["messages"][1]["content"] for r in srv.requests_to(CHAT))
    assert '<attachment index="1" name="notes.txt">' in first and "<no_document_attached />" not in first
    assert (
        "\nWorks as a lighthouse keeper\nLong-term interests: lighthouse\nOften consulted: Brightwater guide\n</asker_background>"
        in first
    )
    assert first.index("<no_image_attached />") < first.index("<attachments>") < first.index("<asker_background")
    assert "<asker_background" not in second and "<no_document_attached />" in second
    assert chat.state.used_memories == []  # the background never counts as used memories


async def test_intent_prompt_overrides():
    with FakeOpenAIServer() as srv:
        srv.script(
            CHAT,
            Reply.chat('{"rewrite_query": "hello", "intent": "greeting"}'),
            Reply.chat('{"rewrite_query": "hello", "intent": "greeting"}'),
            Reply.chat('{"rewrite_query": "x", "intent": "summarize"}'),
        )
        svc = _services(chat=OpenAIChatModel("m", srv.base_url, max_retries=0))
        agent = _chat(intent_prompt_overrides={"greeting": "  Say hi like a pirate.  "})
        await _run(PluginQueryUnderstand(svc), agent)
        blank = _chat(intent_prompt_overrides={"greeting": "   "})
        await _run(PluginQueryUnderstand(svc), blank)
        summ = _chat()
        await _run(PluginQueryUnderstand(svc), summ)
    assert agent.state.system_prompt_override == "  Say hi like a pirate.  "  # raw, untrimmed
    assert blank.state.system_prompt_override == default_templates().intent_prompts()["greeting"]
    assert summ.state.intent == "summarize" and summ.state.system_prompt_override == ""  # summarize retrieves (§1.2)


@pytest.mark.parametrize("query, intent", [("hello there", "greeting"), ("谢谢！", "chitchat"), ("Who built it?", "")])
async def test_offline_model_never_rewrites_and_detects_smalltalk(embedder, query, intent):
    svc = _services(chat=ExtractiveChatModel(embedder))
    chat = _chat(query, images=[IMG])
    await _run(PluginQueryUnderstand(svc), chat)
    s = chat.state
    assert (s.rewrite_query, s.intent) == (query, intent)
    assert s.diagnostics["query_understand"]["path"] == "offline"
    expected = default_templates().intent_prompts().get(intent, "") if intent else ""
    assert s.system_prompt_override == expected


# -- end to end through the Lab -------------------------------------------------------------------------
def test_lab_recovers_a_cut_reply_end_to_end(tmp_path, docs_dir):
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
                }
            },
            workspace=tmp_path,
        )
        lab.ingest(docs_dir, kb="demo", progress=False)
        srv.script(
            CHAT,
            Reply.chat(
                '{"rewrite_query": "Who built the Brightwater lighthouse?", "intent": "kb_search", "image_descr',
                finish_reason="length",
            ),
            Reply.chat("Mara Quill built it."),
        )
        run = lab.ask("who made it?", kb="demo")
    qu = run.state("query_understand").state
    assert qu.rewrite_query == "Who built the Brightwater lighthouse?" and qu.intent == "kb_search"
    assert qu.diagnostics["query_understand"]["partial"] is True
    assert run.answer == "Mara Quill built it." and run.references
    assert run.references[0].knowledge_title or run.references[0].knowledge_filename


def test_offline_lab_answers_a_greeting_without_retrieval(lab):
    run = lab.ask("Hello there!", kb="demo")
    assert run.state("query_understand").state.intent == "greeting"
    assert run.references == [] and run.state("chunk_search_parallel").state.search_result == []
    question = lab.ask("Who built the Brightwater lighthouse?", kb="demo")
    assert question.state("query_understand").state.intent == "" and question.references
