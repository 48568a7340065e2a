"""ExtractEntity (QUERY_UNDERSTAND inner plugin, §4.3.7) and SearchEntity (§4.4.3 + seed limits),
alone and inside CHUNK_SEARCH_PARALLEL and the whole pipeline."""

from __future__ import annotations

import pytest

from rag_lab.knowledge.entities import OfflineEntityExtractor, build_graph
from rag_lab.knowledge.graph import GraphNode, GraphStore, NameSpace
from rag_lab.knowledge.models import Chunk
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.models.extractive import ExtractiveChatModel
from rag_lab.models.rerank import EmbeddingReranker
from rag_lab.pipeline.container import Services, default_plugins
from rag_lab.pipeline.plugin import ErrSearchNothing, EventManager
from rag_lab.pipeline.plugins.extract_entity import PluginExtractEntity, build_extract_entity_messages
from rag_lab.pipeline.plugins.query_understand import PluginQueryUnderstand
from rag_lab.pipeline.plugins.search import PluginSearch
from rag_lab.pipeline.plugins.search_entity import PluginSearchEntity, entity_namespaces
from rag_lab.pipeline.plugins.search_parallel import PluginSearchParallel
from rag_lab.prompts.templates import PromptTemplates
from rag_lab.retrieval.hybrid_search import HybridSearcher
from rag_lab.types import ChatManage, EventType, PipelineRequest, SearchResult, SearchTarget
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType
from tests.models.fake_openai import FakeOpenAIServer, Reply

E = EventType
QUILL_DOCS = [
    {"id": f"quill{i}", "title": f"Quill {i}", "text": text}
    for i, text in enumerate(
        [
            "Mara Quill designed the Brightwater lighthouse on the granite headland.",
            "The harbour wall at Port Ellis is a later work attributed to Mara Quill.",
            "Letters from Mara Quill describe storms, lamps and the keeper's long nights.",
            "A bronze statue honours Mara Quill in the town square.",
        ]
    )
] + [
    {"id": "bread", "title": "Bread", "text": "Sourdough bread rises thanks to a starter of wild yeast."},
    {"id": "volcano", "title": "Ember", "text": "Mount Ember is a stratovolcano whose last eruption was in 1921."},
]


async def _noop():
    return None


def make_services(workspace, embedder, graph, chat_model=None):
    params = PipelineParams()
    return Services(
        workspace=workspace,
        searcher=HybridSearcher(workspace, lambda kb: embedder, params),
        embedder_for=lambda kb: embedder,
        chat_models={"chat": chat_model or ExtractiveChatModel(embedder)},
        rerank_models={"rerank": EmbeddingReranker(embedder)},
        prompts=PromptTemplates(),
        graph=graph,
    )


def make_chat(kbs, query, **params) -> ChatManage:
    p = PipelineParams().with_changes(**params) if params else PipelineParams()
    req = PipelineRequest.from_params(
        p,
        query=query,
        session_id="s",
        knowledge_base_ids=[k.id for k in kbs],
        search_targets=[SearchTarget(knowledge_base_id=k.id) for k in kbs],
        chat_model_id="chat",
        rerank_model_id="rerank",
    )
    chat = ChatManage(request=req)
    chat.state.rewrite_query = query
    return chat


def enable_graph(workspace, kb):
    kb.metadata["graph_enabled"] = True
    workspace.store.update_kb(kb)
    return kb


@pytest.fixture
def graph(workspace):
    g = GraphStore(workspace.root / "graph.sqlite")
    yield g
    g.close()


@pytest.fixture
def quill_kb(workspace, embedder, graph):
    kb = enable_graph(workspace, workspace.create_kb("quill", embedder))
    workspace.ingest_documents(kb, QUILL_DOCS, embedder, progress=False)
    build_graph(workspace, kb, OfflineEntityExtractor(), progress=False, graph=graph)
    return kb


# -- ExtractEntity ---------------------------------------------------------------------------
async def test_extract_entity_offline_when_the_chat_model_cannot_follow_instructions(
    workspace, embedder, graph, quill_kb
):
    services = make_services(workspace, embedder, graph)
    chat = make_chat([quill_kb], "Who was Mara Quill?")
    chat.state.rewrite_query = "What did Mara Quill build at Port Ellis?"  # the rewrite is preferred
    called = []

    async def nxt():
        called.append(True)

    assert await PluginExtractEntity(services).on_event(E.QUERY_UNDERSTAND, chat, nxt) is None
    assert called == [True]
    assert chat.state.entity == ["Mara Quill", "Port Ellis"]
    assert chat.state.entity_kb_ids == [quill_kb.id] and chat.state.entity_knowledge == {}
    assert chat.state.diagnostics["extract_entity"]["extractor"] == "offline"


@pytest.mark.parametrize("case", ["no_graph", "not_enabled", "greeting"])
async def test_extract_entity_is_inactive(workspace, embedder, graph, case):
    kb = workspace.create_kb("plain", embedder)
    if case != "not_enabled":
        enable_graph(workspace, kb)
    services = make_services(workspace, embedder, None if case == "no_graph" else graph)
    chat = make_chat([kb], "What did Mara Quill build?")
    if case == "greeting":
        chat.state.intent = "greeting"
    called = []

    async def nxt():
        called.append(True)

    await PluginExtractEntity(services).on_event(E.QUERY_UNDERSTAND, chat, nxt)
    assert called == [True]
    assert chat.state.entity == [] and chat.state.entity_kb_ids == []


async def test_extract_entity_scope_keeps_only_graph_kbs_and_their_documents(workspace, embedder, graph, quill_kb):
    other = workspace.create_kb("other", embedder)
    workspace.ingest_documents(other, [{"id": "o1", "text": "Nothing here."}], embedder, progress=False)
    services = make_services(workspace, embedder, graph)
    chat = make_chat([], "Mara Quill?")
    chat.request.search_targets = [
        SearchTarget(type="knowledge", knowledge_base_id=quill_kb.id, knowledge_ids=["quill1"]),
        SearchTarget(type="knowledge_base", knowledge_base_id=other.id),
    ]
    chat.request.knowledge_ids = ["o1", "quill2"]  # resolved to their KBs through the store
    await PluginExtractEntity(services).on_event(E.QUERY_UNDERSTAND, chat, _noop)
    assert chat.state.entity_kb_ids == [quill_kb.id]
    assert chat.state.entity_knowledge == {"quill1": quill_kb.id, "quill2": quill_kb.id}
    assert entity_namespaces(chat.state.entity_kb_ids, chat.state.entity_knowledge) == [
        NameSpace(quill_kb.id, "quill1"),
        NameSpace(quill_kb.id, "quill2"),
    ]


def test_few_shot_prompt_layout():
    tpl = PromptTemplates().get("default_extract_entity")
    msgs = build_extract_entity_messages(tpl.content, tpl.extra["examples"], "Who is Mara Quill?")
    system = msgs[0].content
    assert system.startswith(tpl.content.rstrip("\n") + "\n\n# Examples\nQ: How did Ada Lovelace")
    assert 'A: ```json\n[\n  {\n    "entity": "Ada Lovelace",\n    "entity_attributes": [\n' in system
    assert '"entity1": "Ada Lovelace",\n    "entity2": "Analytical Engine",\n    "relation": "wrote notes on"' in system
    assert "```\n\nQ: 鲁迅的《狂人日记》" in system and system.endswith("```\n")
    assert "Romeo" not in system
    assert msgs[1].content == "# Question\nQ: Who is Mara Quill?\nA: "


async def test_extract_entity_with_a_chat_model_over_loopback(workspace, embedder, graph, quill_kb):
    reply = 'Entities:\n```json\n[{"entity": "Mara Quill"}, {"entity1": "Mara Quill", "entity2": "Brightwater lighthouse", "relation": "designed"}]\n```'
    with FakeOpenAIServer() as srv:
        srv.script("/v1/chat/completions", Reply.chat(reply))
        services = make_services(workspace, embedder, graph, OpenAIChatModel("m", srv.base_url, max_retries=0))
        chat = make_chat([quill_kb], "Which lighthouse did Mara Quill design?")
        await PluginExtractEntity(services).on_event(E.QUERY_UNDERSTAND, chat, _noop)
        body = srv.requests[-1].json
    assert chat.state.entity == ["Mara Quill", "Brightwater lighthouse"]
    assert body["temperature"] == 0.3
    assert body.get("max_completion_tokens", body.get("max_tokens")) == 4096
    assert body["messages"][1]["content"] == "# Question\nQ: Which lighthouse did Mara Quill design?\nA: "


@pytest.mark.parametrize("reply", [Reply.error(500, "boom"), Reply.chat("I cannot help with that.")])
async def test_extract_entity_failure_means_no_entities_and_the_stage_continues(
    workspace, embedder, graph, quill_kb, reply
):
    with FakeOpenAIServer() as srv:
        srv.script("/v1/chat/completions", reply)
        services = make_services(workspace, embedder, graph, OpenAIChatModel("m", srv.base_url, max_retries=0))
        chat = make_chat([quill_kb], "Mara Quill?")
        called = []

        async def nxt():
            called.append(True)

        assert await PluginExtractEntity(services).on_event(E.QUERY_UNDERSTAND, chat, nxt) is None
    assert called == [True] and chat.state.entity == []
    assert "error" in chat.state.diagnostics["extract_entity"]


# -- SearchEntity: the seed's limits ----------------------------------------------------------
def _chunk(kb_id, kid, i, text=None, enabled=True):
    return Chunk(
        id=f"{kb_id}:{kid}#g{i}",
        knowledge_id=kid,
        knowledge_base_id=kb_id,
        content=text or f"Graph passage {i} about Mara Quill and item {i * 7919}.",
        chunk_index=i,
        is_enabled=enabled,
    )


async def test_search_entity_keeps_enabled_chunks_of_turn_kbs_with_documents(workspace, embedder, graph, quill_kb):
    outside = workspace.create_kb("outside", embedder)
    workspace.ingest_documents(outside, [{"id": "x", "text": "Mara Quill abroad."}], embedder, progress=False)
    ok = workspace.store.list_chunks(quill_kb.id, "quill3")[0]
    disabled = _chunk(quill_kb.id, "quill0", 50, enabled=False)
    orphan = _chunk(quill_kb.id, "ghost-doc", 51)  # its document does not exist
    foreign = workspace.store.list_chunks(outside.id, "x")[0]
    present = workspace.store.list_chunks(quill_kb.id, "quill0")[0]
    workspace.store.add_chunks([disabled, orphan])
    graph.delete_namespace(NameSpace(quill_kb.id))  # only the hand-made graph below
    graph.replace_namespace(
        NameSpace(quill_kb.id, "quill0"),
        [
            GraphNode(
                "Mara Quill", chunk_ids=[present.id, "missing#c0", disabled.id, orphan.id, foreign.id, ok.id, ok.id]
            )
        ],
    )

    services = make_services(workspace, embedder, graph)
    chat = make_chat([quill_kb], "Mara Quill?")
    chat.state.entity, chat.state.entity_kb_ids = ["mara quill"], [quill_kb.id]
    chat.state.search_result = [SearchResult(id=present.id, content=present.content, score=0.9)]
    called = []

    async def nxt():
        called.append(True)

    assert await PluginSearchEntity(services).on_event(E.ENTITY_SEARCH, chat, nxt) is None
    assert called == [True]
    assert [r.id for r in chat.state.search_result] == [present.id, ok.id]
    hit = chat.state.search_result[1]
    assert (hit.score, hit.match_type, hit.seq, hit.knowledge_id, hit.knowledge_title) == (
        0.0,
        MatchType.GRAPH,
        ok.chunk_index,
        "quill3",
        "Quill 3",
    )
    assert hit.knowledge_base_id == quill_kb.id
    assert chat.state.graph_result.node_names() == ["Mara Quill"]
    dropped = dict(chat.state.diagnostics["entity_search"]["dropped"])
    assert dropped == {
        "missing#c0": "chunk not found",
        disabled.id: "chunk disabled",
        orphan.id: "document not found",
        foreign.id: "knowledge base not in this turn",
    }


async def test_search_entity_loads_at_most_30_chunks_in_node_order(workspace, embedder, graph, quill_kb):
    chunks = [_chunk(quill_kb.id, "quill1", 100 + i) for i in range(40)]
    workspace.store.add_chunks(chunks)
    graph.delete_namespace(NameSpace(quill_kb.id))
    graph.replace_namespace(
        NameSpace(quill_kb.id, "quill1"),
        [
            GraphNode("Mara Quill", chunk_ids=[c.id for c in chunks[:25]]),
            GraphNode("Port Ellis", chunk_ids=[c.id for c in chunks[20:]]),
        ],
    )
    services = make_services(workspace, embedder, graph)
    chat = make_chat([quill_kb], "Mara Quill in Port Ellis")
    chat.state.entity, chat.state.entity_kb_ids = ["Mara Quill", "Port Ellis"], [quill_kb.id]
    await PluginSearchEntity(services).on_event(E.ENTITY_SEARCH, chat, _noop)
    assert PipelineParams().entity_search_max_chunks == 30
    assert [r.id for r in chat.state.search_result] == [c.id for c in chunks[:30]]
    assert {r.score for r in chat.state.search_result} == {0.0}

    chat = make_chat([quill_kb], "q", entity_search_max_chunks=5)
    chat.state.entity, chat.state.entity_kb_ids = ["Port Ellis"], [quill_kb.id]
    await PluginSearchEntity(services).on_event(E.ENTITY_SEARCH, chat, _noop)
    assert [r.id for r in chat.state.search_result] == [c.id for c in chunks[20:25]]


async def test_search_entity_nothing_found_and_no_entities(workspace, embedder, graph, quill_kb):
    services = make_services(workspace, embedder, graph)
    chat = make_chat([quill_kb], "q")
    chat.state.entity, chat.state.entity_kb_ids = ["Nobody Known"], [quill_kb.id]
    assert await PluginSearchEntity(services).on_event(E.ENTITY_SEARCH, chat, _noop) is ErrSearchNothing
    assert chat.state.graph_result.nodes == []
    chat = make_chat([quill_kb], "q")  # no entities: continue, nothing looked up
    assert await PluginSearchEntity(services).on_event(E.ENTITY_SEARCH, chat, _noop) is None
    assert chat.state.graph_result is None


# -- end to end ------------------------------------------------------------------------------
async def test_a_named_entity_brings_in_chunks_that_chunk_search_missed(workspace, embedder, graph, quill_kb):
    # another graph KB outside the turn also knows Mara Quill: its chunks must never come in
    outside = enable_graph(workspace, workspace.create_kb("outside", embedder))
    workspace.ingest_documents(outside, [{"id": "x", "text": "Mara Quill abroad."}], embedder, progress=False)
    build_graph(workspace, outside, OfflineEntityExtractor(), progress=False, graph=graph)
    # a disabled chunk that mentions her stays out too
    disabled = workspace.store.list_chunks(quill_kb.id, "quill3")[0]
    workspace.store.set_chunks_enabled([disabled.id], False)

    services = make_services(workspace, embedder, graph)
    search = PluginSearch(services)
    question = "Where did Mara Quill work?"

    async def run(entity_plugin):
        manager = EventManager()
        manager.register_all(
            [
                PluginQueryUnderstand(services),
                PluginExtractEntity(services),
                PluginSearchParallel(services, search=search, entity=entity_plugin),
            ]
        )
        chat = make_chat([quill_kb], question, embedding_top_k=1, enable_query_expansion=False)
        assert await manager.trigger(E.QUERY_UNDERSTAND, chat) is None
        assert await manager.trigger(E.CHUNK_SEARCH_PARALLEL, chat) is None
        return chat

    alone = await run(None)
    both = await run(PluginSearchEntity(services))
    assert both.state.entity == ["Mara Quill"]
    chunk_ids = [r.id for r in alone.state.search_result]
    assert len(chunk_ids) == 1 and [r.id for r in both.state.search_result][:1] == chunk_ids
    graph_hits = both.state.search_result[1:]
    expected = {c.id for d in ("quill0", "quill1", "quill2") for c in workspace.store.list_chunks(quill_kb.id, d)}
    assert {r.id for r in graph_hits} == expected - set(chunk_ids)
    assert len(graph_hits) == 2
    assert all(r.score == 0.0 and r.match_type == MatchType.GRAPH for r in graph_hits)
    assert all(r.knowledge_base_id == quill_kb.id for r in both.state.search_result)
    assert both.state.graph_result is not None and "Mara Quill" in both.state.graph_result.node_names()


async def test_whole_pipeline_reranks_graph_hits_with_the_model_score_as_base(workspace, embedder, graph, quill_kb):
    from rag_lab.pipeline.qa import run_knowledge_qa
    from rag_lab.stream.manager import MemoryStreamManager

    services = make_services(workspace, embedder, graph)
    plugins = default_plugins(services)
    search = next(p for p in plugins if isinstance(p, PluginSearch))
    plugins = [
        PluginSearchParallel(services, search=search, entity=PluginSearchEntity(services))
        if isinstance(p, PluginSearchParallel)
        else p
        for p in plugins
    ]
    plugins.insert(
        next(i for i, p in enumerate(plugins) if isinstance(p, PluginQueryUnderstand)) + 1,
        PluginExtractEntity(services),
    )
    manager = EventManager()
    manager.register_all(plugins)
    chat = make_chat([quill_kb], "Mara Quill", embedding_top_k=1, enable_query_expansion=False, rerank_threshold=0.0)
    snaps = {}

    async def on_stage(event, c, err):
        snaps[str(event)] = c.snapshot()

    outcome = await run_knowledge_qa(chat, services, manager, MemoryStreamManager(), on_stage)
    assert not outcome.error
    searched = snaps["chunk_search_parallel"].state.search_result
    assert sum(r.match_type == MatchType.GRAPH for r in searched) == 3
    reranked = [r for r in snaps["chunk_rerank"].state.rerank_result if r.match_type == MatchType.GRAPH]
    assert reranked
    for r in reranked:
        assert r.metadata["base_score"] == r.metadata["model_score"]
