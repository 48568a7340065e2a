from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.stream.bus import EventBus
from rag_lab.stream.handler import AgentStreamHandler
from rag_lab.stream.manager import MemoryStreamManager
from rag_lab.types import SearchResult, StreamEvent, StreamResponse


def test_memory_manager_offsets():
    m = MemoryStreamManager()
    assert m.get_events("s", "m", 0) == ([], 0)
    assert m.get_events("s", "m", 5) == ([], 5)
    for i in range(3):
        m.append_event("s", "m", StreamEvent(f"e{i}", "answer", str(i)))
    evs, nxt = m.get_events("s", "m", 1)
    assert [e.id for e in evs] == ["e1", "e2"] and nxt == 3 and all(e.timestamp > 0 for e in evs)
    assert m.get_events("s", "m", 3) == ([], 3)
    evs[0].content = "changed"  # reads are copies
    assert m.get_events("s", "m", 1)[0][0].content == "1"


@given(st.lists(st.text(max_size=5), max_size=20), st.integers(0, 25))
def test_reading_in_two_parts_equals_reading_once(contents, cut):
    m = MemoryStreamManager()
    for i, c in enumerate(contents):
        m.append_event("s", "m", StreamEvent(str(i), "answer", c))
    first, nxt = m.get_events("s", "m", 0)
    head, off = m.get_events("s", "m", 0)
    head = head[:cut]
    rest, _ = m.get_events("s", "m", len(head))
    assert [e.content for e in head + rest] == [e.content for e in first] == contents
    assert nxt == len(contents)


def test_concurrent_appends_are_all_kept():
    m = MemoryStreamManager()

    def writer(k):
        for i in range(200):
            m.append_event("s", "m", StreamEvent(f"{k}-{i}", "answer", ""))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.get_events("s", "m", 0)[1] == 800


def test_handler_maps_bus_events_as_spec_8_2():
    m = MemoryStreamManager()
    bus = EventBus()
    h = AgentStreamHandler(m, "s", "m")
    h.subscribe(bus)
    bus.emit("tool_call", {"tool_call_id": "t1", "tool_name": "knowledge_search", "arguments": {"query": "q"}})
    bus.emit(
        "tool_result",
        {
            "tool_call_id": "t1",
            "tool_name": "knowledge_search",
            "success": True,
            "output": "检索到 1 条相关内容",
            "data": {"count": 1},
        },
    )
    bus.emit("references", {"references": [SearchResult(id="c1")]})
    bus.emit("references", {"references": [SearchResult(id="c2")]})
    bus.emit("thought", {"content": "hm", "done": False}, event_id="x-thinking")
    bus.emit("thought", {"content": "", "done": True}, event_id="x-thinking")
    bus.emit("final_answer", {"content": "Hi", "done": False}, event_id="x-answer")
    bus.emit("final_answer", {"content": "", "done": True}, event_id="x-answer")
    bus.emit("error", {"error": "boom", "stage": "chat_completion_stream"})
    bus.emit("tool_result", {"tool_call_id": "t2", "tool_name": "x", "success": False, "error": "bad"})
    bus.emit("agent.complete", {"final_answer": "Hi", "total_steps": 3})
    evs, _ = m.get_events("s", "m", 0)
    assert [e.type for e in evs] == [
        "tool_call",
        "tool_result",
        "references",
        "references",
        "thinking",
        "thinking",
        "answer",
        "answer",
        "error",
        "error",
        "complete",
    ]
    assert evs[0].content == "Calling tool: knowledge_search" and evs[0].data["tool_call_id"] == "t1"
    assert evs[1].content == "" and evs[1].data["output"] == "检索到 1 条相关内容" and evs[1].data["count"] == 1
    assert [r["id"] for r in evs[3].data["references"]] == ["c1", "c2"]  # accumulated
    assert evs[5].done and "duration_ms" in evs[5].data and "completed_at" in evs[5].data
    assert evs[7].done and evs[7].data["event_id"] == "x-answer"
    assert evs[8].done and evs[8].data == {"stage": "chat_completion_stream", "error": "boom"}
    assert evs[9].content == "bad" and evs[9].data["success"] is False
    assert evs[10].done and evs[10].data["total_steps"] == 3


def test_complete_without_streamed_answer_appends_the_final_answer_first():
    m = MemoryStreamManager()
    bus = EventBus()
    AgentStreamHandler(m, "s", "m").subscribe(bus)
    bus.emit("agent.complete", {"final_answer": "late", "total_steps": 1})
    evs, _ = m.get_events("s", "m", 0)
    assert [(e.type, e.content, e.done) for e in evs] == [
        ("answer", "late", False),
        ("answer", "", True),
        ("complete", "", True),
    ]
    assert evs[0].id.startswith("answer-fallback-")


def test_stream_response_omits_empty_fields():
    d = StreamResponse(id="r", response_type="answer", content="x").to_dict()
    assert d == {"id": "r", "response_type": "answer", "content": "x", "done": False, "finish_reason": ""}


def test_bus_handlers_run_in_registration_order_and_errors_stop_emit():
    bus = EventBus()
    seen = []
    bus.on("a", lambda e: seen.append("typed-1"))
    bus.on_any(lambda e: seen.append("any"))
    bus.on("a", lambda e: seen.append("typed-2"))
    ev = bus.emit("a", {})
    assert seen == ["typed-1", "any", "typed-2"] and len(ev.id) == 36

    def boom(e):
        raise RuntimeError("x")

    bus2 = EventBus()
    bus2.on_any(boom)
    bus2.on_any(lambda e: seen.append("never"))
    try:
        bus2.emit("a")
    except RuntimeError:
        pass
    assert "never" not in seen
