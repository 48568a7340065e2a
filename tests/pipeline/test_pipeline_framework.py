"""Plugin chain order, PluginError identity, builder presets, orchestrator control flow."""

from __future__ import annotations

import asyncio

import pytest

from rag_lab.pipeline.container import Services, default_plugins
from rag_lab.pipeline.orchestrator import RequestCancelled, build_event_list, knowledge_qa_by_event
from rag_lab.pipeline.plugin import (
    ErrModelCall,
    ErrSearch,
    ErrSearchNothing,
    EventManager,
    run_parallel,
)
from rag_lab.stream.bus import EventBus
from rag_lab.types import ChatManage, EventType, PipelineBuilder, PipelineRequest, SearchResult, SearchTarget
from rag_lab.types.events import PIPELINES

E = EventType


class Recorder:
    def __init__(self, name, log, events=(E.CHUNK_RERANK,), before=True, call_next=True, result=None):
        self.name, self.log, self.events = name, log, events
        self.before, self.call_next, self.result = before, call_next, result

    def activation_events(self):
        return list(self.events)

    async def on_event(self, event, chat, next):
        if self.before:
            self.log.append(f"{self.name}:before")
        err = await next() if self.call_next else None
        if not self.before:
            self.log.append(f"{self.name}:after")
        return self.result if self.result is not None else err


async def test_first_registered_is_outermost_and_post_processing_runs_inside_out():
    log: list[str] = []
    m = EventManager()
    m.register(Recorder("rerank", log))
    m.register(Recorder("wiki", log, before=False))
    m.register(Recorder("memory", log, before=False))
    assert await m.trigger(E.CHUNK_RERANK, ChatManage()) is None
    # rerank body, then MemoryAffinity (innermost) then WikiBoost, as spec §2.1 orders them
    assert log == ["rerank:before", "memory:after", "wiki:after"]


async def test_a_plugin_that_does_not_call_next_stops_the_chain_and_its_result_is_returned():
    log: list[str] = []
    m = EventManager()
    m.register(Recorder("outer", log, call_next=False, result=ErrSearchNothing))
    m.register(Recorder("inner", log))
    assert await m.trigger(E.CHUNK_RERANK, ChatManage()) is ErrSearchNothing
    assert log == ["outer:before"]


async def test_trigger_without_plugins_returns_none():
    assert await EventManager().trigger(E.WEB_FETCH, ChatManage()) is None


def test_with_error_makes_a_new_error_and_keeps_identity_of_singletons():
    e = ErrSearchNothing.with_error(ValueError("x"))
    assert e is not ErrSearchNothing and e.error_type == "search_nothing" and isinstance(e.err, ValueError)
    assert ErrSearchNothing.err is None
    assert (ErrSearch.error_type, ErrModelCall.description) == ("search_failed", "Failed to call model")


def test_default_registration_order_follows_the_container():
    names = [type(p).__name__ for p in default_plugins(Services())]
    order = [
        "PluginSearch",
        "PluginRerank",
        "PluginWebFetch",
        "PluginMerge",
        "PluginDataAnalysis",
        "PluginIntoChatMessage",
        "PluginChatCompletion",
        "PluginChatCompletionStream",
        "PluginFilterTopK",
        "PluginQueryUnderstand",
        "PluginLoadHistory",
        "PluginMemoryRecall",
        "PluginExtractEntity",
        "PluginSearchEntity",
        "PluginSearchParallel",
        "PluginWikiBoost",
        "PluginMemoryAffinity",
    ]
    assert names == order
    m = EventManager()
    m.register_all(default_plugins(Services()))
    assert [type(p).__name__ for p in m.plugins_for(E.CHUNK_RERANK)] == [
        "PluginRerank",
        "PluginWikiBoost",
        "PluginMemoryAffinity",
    ]


def test_builder_and_presets():
    b = PipelineBuilder().add(E.LOAD_HISTORY).add_if(False, E.WEB_FETCH).add_if(True, E.CHUNK_MERGE)
    built = b.build()
    assert built == [E.LOAD_HISTORY, E.CHUNK_MERGE]
    built.append(E.FILTER_TOP_K)
    assert b.build() == [E.LOAD_HISTORY, E.CHUNK_MERGE]  # build returns a copy
    assert set(PIPELINES) == {"chat", "chat_stream", "chat_history_stream", "rag", "rag_stream"}


def test_event_lists():
    pure = ChatManage(request=PipelineRequest(max_rounds=0))
    assert build_event_list(pure) == [E.MEMORY_RECALL, E.CHAT_COMPLETION_STREAM]
    rag = ChatManage(
        request=PipelineRequest(
            max_rounds=3, knowledge_base_ids=["kb"], web_search_enabled=True, data_analysis_enabled=True
        )
    )
    assert build_event_list(rag) == [
        E.LOAD_HISTORY,
        E.MEMORY_RECALL,
        E.QUERY_UNDERSTAND,
        E.CHUNK_SEARCH_PARALLEL,
        E.CHUNK_RERANK,
        E.WEB_FETCH,
        E.CHUNK_MERGE,
        E.FILTER_TOP_K,
        E.DATA_ANALYSIS,
        E.INTO_CHAT_MESSAGE,
        E.CHAT_COMPLETION_STREAM,
    ]


async def test_concurrency_helpers():
    async def ok():
        return 1

    async def bad():
        raise ValueError("boom")

    errs = await run_parallel({"a": ok, "b": bad})
    assert list(errs) == ["b"] and isinstance(errs["b"], ValueError)


# --- orchestrator ------------------------------------------------------------------------------
class Stage:
    def __init__(self, event, result=None, action=None):
        self.event, self.result, self.action = event, result, action

    def activation_events(self):
        return [self.event]

    async def on_event(self, event, chat, next):
        if self.action:
            self.action(chat)
        return self.result if self.result is not None else await next()


def _chat(**kw) -> tuple[ChatManage, list]:
    req = PipelineRequest(
        query="q",
        knowledge_base_ids=["kb"],
        search_targets=[SearchTarget(knowledge_base_id="kb")],
        max_rounds=0,
        fallback_strategy="fixed",
        fallback_response="FALLBACK",
        **kw,
    )
    chat = ChatManage(request=req)
    bus = EventBus()
    seen: list = []
    bus.on_any(seen.append)
    chat.context.event_bus = bus
    return chat, seen


def _manager(*stages) -> EventManager:
    m = EventManager()
    m.register_all(stages)
    return m


async def test_search_nothing_runs_the_fixed_fallback_and_stops():
    chat, seen = _chat()
    ran: list = []
    m = _manager(
        Stage(E.CHUNK_SEARCH_PARALLEL, ErrSearchNothing), Stage(E.CHUNK_RERANK, action=lambda c: ran.append(1))
    )
    err = await knowledge_qa_by_event(chat, build_event_list(chat), m, Services())
    assert err is None and ran == []
    answers = [e for e in seen if e.type == "final_answer"]
    assert len(answers) == 1 and answers[0].data == {"content": "FALLBACK", "done": True, "is_fallback": True}
    assert answers[0].id.endswith("-fallback") and len(answers[0].id) == len("12345678-fallback")
    assert chat.state.chat_response == "FALLBACK"
    # the retrieval window opened and was closed as a success with no results
    results = [e for e in seen if e.type == "tool_result" and e.data["tool_name"] == "knowledge_search"]
    assert len(results) == 1 and results[0].data["success"] and results[0].data["output"] == "No relevant content found"


async def test_cancellation_is_checked_before_search_nothing():
    chat, seen = _chat()
    chat.context.cancel_event = asyncio.Event()
    m = _manager(Stage(E.CHUNK_SEARCH_PARALLEL, ErrSearchNothing, action=lambda c: c.context.cancel_event.set()))
    with pytest.raises(RequestCancelled):
        await knowledge_qa_by_event(chat, build_event_list(chat), m, Services())
    assert not [e for e in seen if e.type in ("final_answer", "error")]
    assert chat.state.chat_response is None


async def test_other_errors_are_returned_and_close_the_window():
    chat, seen = _chat()
    boom = ErrSearch.with_error(RuntimeError("index down"))
    m = _manager(Stage(E.CHUNK_SEARCH_PARALLEL, boom))
    err = await knowledge_qa_by_event(chat, build_event_list(chat), m, Services())
    assert err is boom
    closes = [e for e in seen if e.type == "tool_result"]
    assert closes[-1].data["tool_name"] == "knowledge_search" and closes[-1].data["success"] is False
    assert "index down" in closes[-1].data["error"]


async def test_references_are_emitted_before_the_answer_stage_and_window_counts():
    chat, seen = _chat()
    order: list[str] = []

    def merged(c):
        c.state.merge_result = [
            SearchResult(id="a", knowledge_id="d"),
            SearchResult(id="w", knowledge_source="web_search"),
        ]

    chat.context.event_bus.on_any(lambda e: order.append(e.type))
    m = _manager(
        Stage(E.CHUNK_MERGE, action=merged), Stage(E.CHAT_COMPLETION_STREAM, action=lambda c: order.append("stream"))
    )
    await knowledge_qa_by_event(chat, build_event_list(chat), m, Services())
    assert order.index("references") < order.index("stream")
    ref = next(e for e in seen if e.type == "references")
    assert ref.id.endswith("-references") and [r.id for r in ref.data["references"]] == ["a", "w"]
    done = next(e for e in seen if e.type == "tool_result" and e.data["tool_name"] == "knowledge_search")
    assert done.data["data"] == {
        "count": 2,
        "doc_count": 1,
        "web_count": 1,
        "search_source": "mixed",
        "candidate_count": 0,
    }
    assert done.data["output"] == "Found 2 relevant passage(s)"  # the session's language: English


def test_progress_texts_follow_the_session_language():
    from rag_lab.pipeline.progress import progress_text

    assert progress_text("English", "found", count=3) == "Found 3 relevant passage(s)"
    assert progress_text("Chinese", "found", count=3) == "检索到 3 条相关内容"
    assert progress_text("zh-CN", "query_done") == "已完成问题理解"
    assert progress_text("中文", "none") == "未检索到相关内容"
    assert progress_text("French", "none") == "No relevant content found"  # no table: English


async def test_query_understand_window_opens_only_when_rewrite_enabled():
    for enabled, expected in ((True, 1), (False, 0)):
        chat, seen = _chat(enable_rewrite=enabled)
        await knowledge_qa_by_event(chat, build_event_list(chat), _manager(), Services())
        calls = [e for e in seen if e.type == "tool_call" and e.data["tool_name"] == "query_understand"]
        assert len(calls) == expected
