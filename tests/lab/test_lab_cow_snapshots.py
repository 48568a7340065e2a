"""Copy-on-write snapshots (issue 11 §4): each one reads exactly like the full deep copy taken at
the same moment, stays so after the run goes on, and shares what its event did not write."""

from __future__ import annotations

from typing import Any

import pytest

from rag_lab.pipeline.container import Services, build_event_manager
from rag_lab.pipeline.snapshots import SnapshotPlan, SnapshotTaker
from rag_lab.types.events import EventType

Q = "Who built the Brightwater lighthouse?"


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any, dict[str, Any], dict[str, Any]]]:
    """(event, cow snapshot, its to_dict() when taken, the full copy's to_dict() when taken)."""
    seen: list[tuple[str, Any, dict[str, Any], dict[str, Any]]] = []
    take = SnapshotTaker.take

    def recording(self: SnapshotTaker, event: EventType, chat: Any) -> Any:
        full = chat.snapshot().to_dict()
        snap = take(self, event, chat)
        seen.append((str(event), snap, snap.to_dict(), full))
        return snap

    final = SnapshotTaker.final

    def recording_final(self: SnapshotTaker, chat: Any) -> Any:
        full = chat.snapshot().to_dict()
        snap = final(self, chat)
        seen.append(("final", snap, snap.to_dict(), full))
        return snap

    monkeypatch.setattr(SnapshotTaker, "take", recording)
    monkeypatch.setattr(SnapshotTaker, "final", recording_final)
    return seen


def _check(recorded: list[tuple[str, Any, dict[str, Any], dict[str, Any]]], at_least: int = 8) -> None:
    assert len(recorded) >= at_least
    for event, snap, when_taken, full in recorded:
        assert when_taken == full, f"snapshot after {event} differs from the full copy"
        assert snap.to_dict() == when_taken, f"snapshot after {event} changed after it was taken"


def test_every_snapshot_equals_the_full_copy_and_stays_so(lab, recorded) -> None:
    run = lab.ask(Q, kb="demo")
    _check(recorded)
    assert [e for e, *_ in recorded] == [*run.stages, "final"]
    # what merge does not write is the rerank snapshot's own object, not a copy
    rerank, merge = run.state("chunk_rerank"), run.state("chunk_merge")
    assert merge.state.search_result is rerank.state.search_result
    assert merge.state.rerank_result is rerank.state.rerank_result
    assert merge.state.diagnostics["rerank"] is rerank.state.diagnostics["rerank"]
    assert merge.request is rerank.request
    assert merge.state.merge_result is not rerank.state.merge_result
    # a written field is copied at its event: later stages never reach into the snapshot
    assert run.state("chunk_rerank").state.rerank_result[0] is not run.references[0]
    # after the run only what background stages and a fallback write is copied again
    last, final = run.state(run.stages[-1]), run.state("final")
    assert final.state.search_result is last.state.search_result and final.request is last.request
    assert final.state.merge_result is last.state.merge_result
    assert final.state.chat_response == run.answer and final.state.chat_response is not None


def test_snapshots_hold_on_a_session_with_history_and_a_rerun(lab, recorded) -> None:
    first = lab.ask(Q, kb="demo")
    second = lab.ask("When was it built?", kb="demo", session_id=first.session_id)
    again = lab.rerun(second, "chunk_rerank", {"mmr_lambda": 0.3})
    _check(recorded)
    assert second.state("load_history").state.history, "the second turn loads the first"
    assert again.state("chunk_search_parallel") is second.state("chunk_search_parallel")


def test_the_fallback_answer_is_in_the_final_snapshot(lab, recorded) -> None:
    lab.kb("empty-cow")
    run = lab.ask(Q, kb="empty-cow")
    _check(recorded, at_least=5)
    assert run.is_fallback
    assert run.state("final").state.chat_response and not run.state("chunk_search_parallel").state.chat_response


def test_stepping_sees_the_same_states(lab, recorded) -> None:
    st = lab.step(Q, kb="demo")
    views = []
    while not st.done:
        out = st.next()
        if hasattr(out, "event"):
            views.append(out)
    _check(recorded)
    assert [v.event for v in views] == [e for e, *_ in recorded if e != "final"]


def test_plan_from_the_contracts() -> None:
    plan = SnapshotPlan.from_manager(build_event_manager(Services()))
    rerank = EventType.CHUNK_RERANK
    # only the rerank stage writes its diagnostics: the snapshot keeps the live object
    assert "state.diagnostics.rerank" in plan.share[rerank]
    # web fetch rewrites rerank_result, and search results come from several stages: copied
    assert {"state.rerank_result", "state.search_result"} <= plan.copy[rerank]
    # the answer stream writes in the background: copied at its event and every later one
    assert EventType.CHAT_COMPLETION_STREAM in plan.background
    assert "state.chat_response" in plan.copy[EventType.CHAT_COMPLETION_STREAM]


def test_a_plugin_without_contract_gets_full_copies() -> None:
    class Bare:
        events = (EventType.CHUNK_RERANK,)

        def activation_events(self) -> tuple[EventType, ...]:
            return self.events

        async def on_event(self, event: Any, chat: Any, next: Any) -> Any:
            return await next()

    manager = build_event_manager(Services())
    manager.register(Bare())
    plan = SnapshotPlan.from_manager(manager)
    assert plan.writes[EventType.CHUNK_RERANK] is None
    from rag_lab.types.chat_manage import ChatManage

    taker = SnapshotTaker(plan)
    chat = ChatManage()
    first = taker.take(EventType.CHUNK_SEARCH, chat)
    chat.state.rerank_result = []
    second = taker.take(EventType.CHUNK_RERANK, chat)
    assert second.state is not first.state and second.request is not first.request


def test_fields_a_background_stage_writes_are_copied_at_every_later_snapshot() -> None:
    from rag_lab.types.chat_manage import ChatManage

    stream, after = EventType.CHAT_COMPLETION_STREAM, EventType.FILTER_TOP_K
    plan = SnapshotPlan(
        {
            EventType.CHUNK_MERGE: frozenset({"state.merge_result"}),
            stream: frozenset({"context.background_tasks", "state.chat_response"}),
            after: frozenset({"state.user_content"}),
        }
    )
    assert plan.share[after] == {"state.user_content"} and not plan.share[stream]
    taker = SnapshotTaker(plan)
    chat = ChatManage()
    taker.take(EventType.CHUNK_MERGE, chat)
    chat.state.chat_response = ["Mara"]
    at_stream = taker.take(stream, chat)
    chat.state.chat_response.append(" Quill")  # the answer stream goes on after its event
    chat.state.user_content = "filtered"
    at_after = taker.take(after, chat)
    assert at_stream.state.chat_response == ["Mara"]
    assert at_after.state.chat_response == ["Mara", " Quill"]
    assert at_after.state.chat_response is not chat.state.chat_response
    assert at_after.state.user_content == "filtered"
