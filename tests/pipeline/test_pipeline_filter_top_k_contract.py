"""FILTER_TOP_K's contract on the path without merge results (issue 23): it reads and writes back
the rerank or search results, so its contract declares them and its copy-on-write snapshot holds
the cut list, not the previous stage's."""

from __future__ import annotations

import asyncio

import pytest

from rag_lab.pipeline.container import Services, build_event_manager
from rag_lab.pipeline.contract_check import record_access, undeclared
from rag_lab.pipeline.plugins.filter_top_k import PluginFilterTopK
from rag_lab.pipeline.snapshots import SnapshotPlan, SnapshotTaker
from rag_lab.types import ChatManage, EventType, PipelineParams, PipelineRequest, SearchResult


def _chat(field: str) -> ChatManage:
    chat = ChatManage(request=PipelineRequest.from_params(PipelineParams(), query="q", rerank_top_k=2))
    setattr(chat.state, field, [SearchResult(id=f"r{i}", knowledge_id="k", score=i / 10) for i in range(5)])
    return chat


def _run(chat: ChatManage) -> None:
    async def nxt() -> None:
        return None

    asyncio.run(PluginFilterTopK(Services()).on_event(EventType.FILTER_TOP_K, chat, nxt))


@pytest.mark.parametrize("field", ["merge_result", "rerank_result", "search_result"])
def test_filter_top_k_does_what_its_contract_declares_without_merge(field: str) -> None:
    chat = _chat(field)
    with record_access([PluginFilterTopK]) as got:
        _run(chat)
    access = got["PluginFilterTopK"]
    assert f"state.{field}" in access.reads and f"state.{field}" in access.writes
    assert undeclared(PluginFilterTopK, access) == {"reads": [], "writes": [], "params": [], "kb": []}
    assert [r.id for r in getattr(chat.state, field)] == ["r4", "r3"]


def test_the_filter_top_k_snapshot_holds_the_cut_rerank_results_without_merge() -> None:
    """A pipeline without merge: the snapshot after FILTER_TOP_K reads like a full copy (the cut
    list), not the rerank snapshot's list it would share if the write were undeclared."""
    plan = SnapshotPlan.from_manager(build_event_manager(Services()))
    chat = _chat("rerank_result")
    taker = SnapshotTaker(plan)
    before = taker.take(EventType.CHUNK_RERANK, chat)
    _run(chat)
    after = taker.take(EventType.FILTER_TOP_K, chat)
    assert [r.id for r in after.state.rerank_result] == ["r4", "r3"]
    assert after.to_dict() == chat.snapshot().to_dict()
    assert len(before.state.rerank_result) == 5  # the earlier snapshot is unchanged
    assert {"state.rerank_result", "state.search_result", "state.merge_result"} <= set(
        plan.writes[EventType.FILTER_TOP_K] or ()
    )
