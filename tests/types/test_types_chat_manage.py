from __future__ import annotations

import json

from rag_lab.stream.bus import EventBus
from rag_lab.types import ChatManage, History, PipelineParams, PipelineRequest, SearchResult, SearchTarget
from rag_lab.types.chat_manage import has_knowledge_retrieval_scope


def _full_chat() -> ChatManage:
    p = PipelineParams()
    chat = ChatManage(
        request=PipelineRequest.from_params(
            p,
            query="q",
            knowledge_base_ids=["kb1"],
            search_targets=[SearchTarget(knowledge_base_id="kb1", knowledge_ids=["d1"])],
        )
    )
    s = chat.state
    s.rewrite_query, s.intent, s.image_description = "rq", "kb_search", "img"
    s.quoted_context, s.system_prompt_override, s.memory_prompt = "quoted", "override", "mem"
    s.used_memories, s.rendered_contexts = ["m1"], "<context/>"
    s.entity, s.entity_kb_ids, s.entity_knowledge = ["Ada"], ["kb1"], {"d1": "kb1"}
    s.history = [History(query="a", answer="b")]
    s.search_result = [SearchResult(id="c1")]
    s.rerank_result = [SearchResult(id="c2")]
    s.merge_result = [SearchResult(id="c3")]
    s.user_content, s.chat_response, s.graph_result = "uc", "resp", {"nodes": []}
    chat.context.event_bus = EventBus()
    chat.context.message_id, chat.context.user_message_id = "m", "um"
    return chat


def test_clone_copies_listed_state_and_request():
    chat = _full_chat()
    c = chat.clone()
    for name in (
        "rewrite_query",
        "intent",
        "image_description",
        "quoted_context",
        "system_prompt_override",
        "memory_prompt",
        "used_memories",
        "rendered_contexts",
        "entity",
        "entity_kb_ids",
        "entity_knowledge",
    ):
        assert getattr(c.state, name) == getattr(chat.state, name), name
    assert c.request.query == "q" and c.request.search_targets[0].knowledge_ids == ["d1"]


def test_clone_does_not_copy_results_history_or_context():
    c = _full_chat().clone()
    assert c.state.history == [] and c.state.search_result == [] and c.state.rerank_result == []
    assert c.state.merge_result == [] and c.state.user_content == "" and c.state.chat_response is None
    assert c.state.graph_result is None
    assert c.context.event_bus is None and c.context.message_id == "" and c.context.user_message_id == ""


def test_clone_is_deep():
    chat = _full_chat()
    c = chat.clone()
    c.request.search_targets[0].knowledge_ids.append("d2")
    c.request.knowledge_base_ids.append("kb2")
    c.state.entity.append("Bob")
    c.state.entity_knowledge["x"] = "y"
    assert chat.request.search_targets[0].knowledge_ids == ["d1"]
    assert chat.request.knowledge_base_ids == ["kb1"]
    assert chat.state.entity == ["Ada"] and "x" not in chat.state.entity_knowledge
    assert c.request.params is chat.request.params  # immutable params are shared


def test_snapshot_keeps_everything_but_the_bus_and_is_json_ready():
    chat = _full_chat()
    snap = chat.snapshot()
    assert snap.state.merge_result[0].id == "c3" and snap.context.event_bus is None
    assert chat.context.event_bus is not None
    snap.state.merge_result[0].id = "changed"
    assert chat.state.merge_result[0].id == "c3"
    json.dumps(snap.to_dict())


def test_citations_enabled_null_means_enabled():
    assert ChatManage(request=PipelineRequest(citation_enabled=None)).citations_enabled()
    assert ChatManage(request=PipelineRequest(citation_enabled=True)).citations_enabled()
    assert not ChatManage(request=PipelineRequest(citation_enabled=False)).citations_enabled()


def test_knowledge_scope_rules():
    assert not has_knowledge_retrieval_scope([], [], [])
    assert has_knowledge_retrieval_scope([], ["kb"], [])
    assert has_knowledge_retrieval_scope([], [""], ["doc"])
    assert has_knowledge_retrieval_scope(
        [SearchTarget(type="knowledge", knowledge_base_id="kb", tag_ids=["t"])], [], []
    )
    assert not has_knowledge_retrieval_scope([SearchTarget(type="knowledge", knowledge_base_id="kb")], [], [])
    assert not has_knowledge_retrieval_scope([SearchTarget(knowledge_base_id="")], [], [])


def test_recall_thresholds_disabled_for_explicit_scope():
    assert SearchTarget(disable_recall_thresholds=True).recall_thresholds(0.5, 0.3) == (0.0, 0.0)
    assert SearchTarget().recall_thresholds(0.5, 0.3) == (0.5, 0.3)


def test_request_copy_equals_a_deep_copy_and_shares_only_the_params():
    import copy

    chat = _full_chat()
    req = chat.request
    req.images, req.attachments = ["a.png"], [{"name": "f.csv", "rows": [[1, 2]]}]
    req.intent_prompt_overrides = {"kb_search": "be brief"}
    req.summary_config.prompt = "system"
    c = chat.clone()
    assert c.request == copy.deepcopy(req) and c.request.params is req.params
    assert type(c.request.search_targets[0]) is SearchTarget
    c.request.summary_config.prompt = "changed"
    c.request.search_targets[0].tag_ids.append("t")
    c.request.images.append("b.png")
    c.request.attachments[0]["rows"][0].append(3)
    c.request.intent_prompt_overrides["chat"] = "x"
    assert req.summary_config.prompt == "system" and req.search_targets[0].tag_ids == []
    assert req.images == ["a.png"] and req.attachments == [{"name": "f.csv", "rows": [[1, 2]]}]
    assert req.intent_prompt_overrides == {"kb_search": "be brief"}


def test_clone_copies_state_values_independently():
    class Memory:  # an object the fast copier does not know: deep-copied
        def __init__(self, text: str) -> None:
            self.text = text

    chat = _full_chat()
    chat.state.used_memories = [Memory("likes tea"), {"id": "m1", "tags": ["a"]}]
    c = chat.clone()
    assert c.state.used_memories[0] is not chat.state.used_memories[0]
    assert c.state.used_memories[0].text == "likes tea"
    c.state.used_memories[1]["tags"].append("b")
    c.state.used_memories[0].text = "likes coffee"
    assert (
        chat.state.used_memories[1] == {"id": "m1", "tags": ["a"]} and chat.state.used_memories[0].text == "likes tea"
    )
