"""Entity extraction (offline rules, LLM reply parsing) and building a KB's graph."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.knowledge.entities import (
    CO_OCCURS,
    GraphParseError,
    LLMGraphExtractor,
    OfflineEntityExtractor,
    build_graph,
    extract_json_block,
    first_balanced_json,
    parse_graph_reply,
    split_sentences,
)
from rag_lab.knowledge.graph import GraphData, GraphStore, NameSpace
from rag_lab.models.chat import OpenAIChatModel
from tests.models.fake_openai import FakeOpenAIServer, Reply

X = OfflineEntityExtractor()


def names(text: str, query: bool = False) -> list[str]:
    return X.extract(text, query=query).node_names()


# -- offline: English ------------------------------------------------------------------------
def test_english_proper_noun_spans_with_sentence_start_stop_words_skipped():
    text = (
        "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill. "
        "Its lamp can be seen from 22 nautical miles away."
    )
    g = X.extract(text)
    assert g.node_names() == ["Brightwater", "Mara Quill"]
    assert g.nodes[1].description.startswith("The Brightwater lighthouse was built")
    assert [(r.source, r.target, r.relation, r.strength) for r in g.relations] == [
        ("Brightwater", "Mara Quill", CO_OCCURS, 1.0)
    ]


def test_english_connectors_possessives_and_acronyms():
    assert names("Mara Quill's lamp was shown at the Bank of England to Leonardo da Vinci and NASA.") == [
        "Mara Quill",
        "Bank of England",
        "Leonardo da Vinci",
        "NASA",
    ]
    # punctuation splits a run of capitalised words; "and" never joins two names
    assert names("We met Alice Smith, Bob Jones and Carol in Paris.") == ["Alice Smith", "Bob Jones", "Carol", "Paris"]


def test_single_word_opening_a_sentence_in_documents_needs_evidence():
    # "Sourdough" and "Bakers" only open sentences: common words, not names
    assert names("Sourdough bread rises thanks to a starter. Bakers feed the starter with flour.") == []
    # "Ember" also appears capitalised inside a sentence, so the opening one counts too
    assert names("Ember erupted in 1921. The crater of Ember is acidic.") == ["Ember"]
    assert names("BM25 ranks documents. Who wrote it?") == ["BM25"]  # acronym-like


def test_queries_keep_an_opening_word_unless_it_is_a_stop_word_or_lower_case_elsewhere():
    assert X.extract_query("Brightwater history?") == ["Brightwater"]
    assert X.extract_query("Who built the Brightwater lighthouse?") == ["Brightwater"]
    assert X.extract_query("What did Mara Quill build?") == ["Mara Quill"]
    assert X.extract_query("Tell me about sourdough") == []
    assert X.extract_query("Bread: how is bread made?") == []  # "bread" also in lower case


def test_co_occurrence_strength_counts_sentences():
    text = "Ada Lovelace met Charles Babbage. Charles Babbage wrote to Ada Lovelace. Alan Turing read it."
    g = X.extract(text)
    rels = {(r.source, r.target): r.strength for r in g.relations}
    assert rels == {("Ada Lovelace", "Charles Babbage"): 2.0}  # Turing shares no sentence with them
    assert {n.name: n.attributes["mentions"] for n in g.nodes} == {
        "Ada Lovelace": 2,
        "Charles Babbage": 2,
        "Alan Turing": 1,
    }


# -- offline: Chinese ------------------------------------------------------------------------
def test_chinese_nouns_and_proper_nouns_by_jieba_pos():
    g = X.extract("布莱特沃特灯塔由工程师王小明于1874年建造。王小明也设计了北京大学的图书馆。这个问题的时候")
    kinds = {n.name: n.kind for n in g.nodes}
    assert kinds["王小明"] == "Person"  # nr
    assert kinds["北京大学"] == "Organization"  # nt
    assert kinds["布莱特沃特"] == "Person"  # two adjacent nr tokens joined
    assert kinds["灯塔"] == kinds["图书馆"] == "Concept"  # n
    assert "问题" not in kinds and "时候" not in kinds  # stop nouns
    assert all(len(n) >= 2 for n in kinds)
    rels = {(r.source, r.target): r.strength for r in g.relations}
    assert rels[("北京大学", "王小明")] == 1.0
    assert ("北京大学", "灯塔") not in rels  # different sentences


def test_mixed_chinese_and_english_text():
    assert set(names("腾讯公司的总部在深圳，Pony Ma 是创始人。")) >= {"腾讯", "深圳", "Pony Ma"}


def test_split_sentences():
    assert split_sentences("A b. C d!  E f?\n\n中文。句子；end") == ["A b.", "C d", "E f", "中文", "句子", "end"]


def test_extract_rejects_non_text():
    with pytest.raises(TypeError, match="must be a string"):
        X.extract(None)  # type: ignore[arg-type]


# -- reply parsing (§4.3.7 step 5) -----------------------------------------------------------
def test_fence_selection_rules():
    both = "```python\nprint(1)\n```\ntext\n```json\n[1]\n```\n```\n[2]\n```"
    assert extract_json_block(both) == "[1]"  # first json/untagged candidate
    assert extract_json_block("```\n[2]\n```\n```json\n[1]\n```") == "[2]"
    assert extract_json_block("```yaml\n[3]\n```") == "[3]"  # no candidate: first fence of any tag
    assert extract_json_block('Sure:\n```json\n[{"entity": "A"}') == '[{"entity": "A"}'  # unclosed
    assert extract_json_block("plain [4]") == "plain [4]"


def test_first_balanced_json_respects_strings_and_skips_unbalanced_openers():
    assert first_balanced_json('say {"a": "}]"} and [1]') == '{"a": "}]"}'
    assert first_balanced_json('x [1, {"b": 2}] {"c": 3}') == '[1, {"b": 2}]'
    assert first_balanced_json('[1, 2 then {"k": 1}') == '{"k": 1}'
    assert first_balanced_json("no json here") is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)
prose = st.text(alphabet=st.characters(blacklist_characters='{}[]"\\`'), max_size=20)


@given(
    prose,
    st.one_of(st.lists(json_values, max_size=4), st.dictionaries(st.text(max_size=5), json_values, max_size=4)),
    prose,
)
def test_balanced_extraction_recovers_any_json_container_from_prose(before, value, after):
    found = first_balanced_json(before + json.dumps(value) + after)
    assert found is not None and json.loads(found) == value


def test_parse_reply_nodes_relations_merging_and_endpoints():
    reply = """Here you go:
```json
[
  {"entity": "Ada Lovelace", "entity_attributes": ["mathematician"]},
  {"entity": "ada  lovelace", "type": "Person"},
  {"entity1": "Ada Lovelace", "entity2": "Analytical Engine", "relation": "wrote notes on", "strength": 8},
  {"entity1": "Ada Lovelace", "entity2": "ADA LOVELACE", "relation": "is"},
  "Alan Turing"
]
```"""
    g = parse_graph_reply(reply)
    assert g.node_names() == ["Ada Lovelace", "Alan Turing", "Analytical Engine"]
    assert g.nodes[0].kind == "Person" and g.nodes[0].attributes == {"entity_attributes": ["mathematician"]}
    assert [(r.source, r.target, r.relation, r.strength) for r in g.relations] == [
        ("Ada Lovelace", "Analytical Engine", "wrote notes on", 8.0)
    ]


def test_parse_reply_dict_unfenced_and_errors():
    assert parse_graph_reply('The entity is {"entity": "Mount Ember"}.').node_names() == ["Mount Ember"]
    assert parse_graph_reply("[]").nodes == []
    g = parse_graph_reply('[{"source": "A corp", "target": "B corp", "description": "owns"}]')
    assert g.node_names() == ["A corp", "B corp"] and g.relations[0].relation == "related_to"
    for bad in ("", "no json at all", "```json\n{broken\n```", "42"):
        with pytest.raises(GraphParseError):
            parse_graph_reply(bad)


# -- LLM extractor over a loopback server ----------------------------------------------------
async def test_llm_extractor_sends_the_template_and_parses_the_reply():
    reply = '```json\n[{"entity": "Mara Quill", "type": "Person"}, {"entity1": "Mara Quill", "entity2": "Brightwater", "relation": "built"}]\n```'
    with FakeOpenAIServer() as srv:
        srv.script("/v1/chat/completions", Reply.chat(reply))
        ex = LLMGraphExtractor(OpenAIChatModel("m", srv.base_url, max_retries=0), language="French")
        g = await ex.aextract("Mara Quill built Brightwater.")
        body = srv.requests[-1].json
    assert g.node_names() == ["Mara Quill", "Brightwater"]
    assert body["temperature"] == 0.3
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    assert "French" in system and "{{" not in system
    assert "Mara Quill built Brightwater." in user


def test_llm_extractor_refuses_a_model_that_cannot_follow_instructions(embedder):
    from rag_lab.models.extractive import ExtractiveChatModel

    with pytest.raises(ValueError, match="OfflineEntityExtractor"):
        LLMGraphExtractor(ExtractiveChatModel(embedder))


# -- build_graph -----------------------------------------------------------------------------
DOCS = [
    {
        "id": "light",
        "title": "Lighthouse",
        "text": "The Brightwater lighthouse was built by Mara Quill. Mara Quill also drew the harbour of Port Ellis.",
    },
    {"id": "bread", "title": "Bread", "text": "Sourdough bread rises thanks to wild yeast."},
    {"id": "zh", "title": "灯塔", "text": "王小明设计了北京大学的图书馆。"},
]


@pytest.fixture
def kb(workspace, embedder):
    kb = workspace.create_kb("graphkb", embedder)
    workspace.ingest_documents(kb, DOCS, embedder, progress=False)
    return kb


def test_build_graph_stores_nodes_per_document_with_chunk_ids(workspace, kb):
    report = build_graph(workspace, kb, X, progress=False)
    assert (report.documents, report.failed, report.removed) == (3, [], [])
    with GraphStore(workspace.root / "graph.sqlite") as g:
        light = g.get_graph(NameSpace(kb.id, "light"))
        chunk_ids = [c.id for c in workspace.store.list_chunks(kb.id, "light")]
        quill = next(n for n in light.nodes if n.name == "Mara Quill")
        assert quill.chunk_ids == chunk_ids and quill.attributes["mentions"] == 2
        assert set(light.node_names()) == {"Brightwater", "Mara Quill", "Port Ellis"}
        assert g.get_graph(NameSpace(kb.id, "bread")).nodes == []
        assert "王小明" in g.get_graph(NameSpace(kb.id, "zh")).node_names()
        assert report.nodes == sum(g.count(NameSpace(kb.id, d["id"]))[0] for d in DOCS)


def test_rebuilding_some_documents_and_removing_deleted_ones(workspace, kb):
    build_graph(workspace, kb, X, progress=False)
    workspace.delete_knowledge(kb, "light")
    report = build_graph(workspace, kb, X, knowledge_ids=["light", "zh"], progress=False)
    assert report.removed == ["light"] and report.documents == 1
    with GraphStore(workspace.root / "graph.sqlite") as g:
        assert g.get_graph(NameSpace(kb.id, "light")).nodes == []
        assert g.get_graph(NameSpace(kb.id, "zh")).nodes


class FlakyExtractor:
    """Fails on chunks mentioning bread, works elsewhere (offline rules)."""

    async def aextract(self, text: str) -> GraphData:
        if "bread" in text:
            raise RuntimeError("model timeout")
        return X.extract(text)


async def test_a_failing_chunk_is_reported_and_the_rest_kept_also_from_a_running_loop(workspace, kb):
    # build_graph is synchronous; inside a running loop (Jupyter) it runs in a helper thread
    asyncio.get_running_loop()
    report = build_graph(workspace, kb, FlakyExtractor(), progress=False)
    assert [c for c, _ in report.failed] == [c.id for c in workspace.store.list_chunks(kb.id, "bread")]
    assert "model timeout" in report.failed[0][1]
    assert report.documents == 3 and report.nodes > 0


def test_build_graph_checks_its_arguments(workspace, kb):
    with pytest.raises(ValueError, match="concurrency=0"):
        build_graph(workspace, kb, X, progress=False, concurrency=0)
    with pytest.raises(TypeError, match="aextract"):
        build_graph(workspace, kb, object(), progress=False)  # type: ignore[arg-type]
