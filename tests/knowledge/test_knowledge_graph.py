"""GraphStore: namespaces, merging, persistence, name matching rules, deletion."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.knowledge.graph import (
    GraphError,
    GraphNode,
    GraphRelation,
    GraphStore,
    NameSpace,
    match_score,
    normalize_entity_name,
    open_graph_store,
)


@pytest.fixture
def graph(tmp_path):
    g = GraphStore(tmp_path / "graph.sqlite")
    yield g
    g.close()


def N(name, *chunks, kind="", **attrs):
    return GraphNode(name, kind=kind, chunk_ids=list(chunks), attributes=attrs)


# -- normalisation and matching ---------------------------------------------------------------
@pytest.mark.parametrize(
    "raw, norm",
    [
        ("Mara Quill", "mara quill"),
        ("  Mara   QUILL's ", "mara quill"),
        ("The Queen's-Gambit", "the queen gambit"),
        ("ＡＢＣ　Corp.", "abc corp"),  # full-width letters and space (NFKC)
        ("北京大学", "北京大学"),
        ("《狂人日记》", "狂人日记"),
        ("__--..", ""),
    ],
)
def test_normalize_entity_name(raw, norm):
    assert normalize_entity_name(raw) == norm


@pytest.mark.parametrize(
    "query, node, score",
    [
        ("mara quill", "mara quill", 1.0),
        ("quill", "mara quill", 0.5),  # whole word of the node name
        ("mara quill", "quill", 0.5),  # the node name inside the query
        ("art", "martin", 0.0),  # not at a word boundary
        ("mar", "mara quill", 0.0),  # prefix of a word is not a word
        ("ab", "ab cd", 0.0),  # shorter than 3 runes (Latin)
        ("灯塔", "布莱特沃特灯塔", 2 / 7),  # Han: any position, 2 runes suffice
        ("王", "王小明", 0.0),  # one Han rune is too short
        ("", "x", 0.0),
    ],
)
def test_match_score_rule(query, node, score):
    assert match_score(query, node) == pytest.approx(score)


names = st.text(alphabet=st.sampled_from(list("abc xyz北京大学-'")), max_size=12)


@given(names)
def test_normalisation_is_idempotent_and_case_blind(s):
    n = normalize_entity_name(s)
    assert normalize_entity_name(n) == n
    assert normalize_entity_name(s.upper()) == n
    assert n == n.strip() and "  " not in n


@given(names, names)
def test_match_score_is_symmetric_bounded_and_exact_only_when_equal(a, b):
    na, nb = normalize_entity_name(a), normalize_entity_name(b)
    s = match_score(na, nb)
    assert s == match_score(nb, na)
    assert 0.0 <= s <= 1.0
    assert (s == 1.0) == (bool(na) and na == nb)


# -- store --------------------------------------------------------------------------------------
def test_add_merges_nodes_and_relations_and_adds_endpoints(graph):
    ns = NameSpace("kb1", "doc1")
    graph.add_graph(
        ns,
        [N("Mara Quill", "c1", kind="Person", mentions=1)],
        [GraphRelation("Mara Quill", "Brightwater", "co_occurs_with", 1.0, ["c1"])],
    )
    graph.add_graph(
        ns,
        [N("mara quill", "c2", "c1", mentions=2, role=["engineer"])],
        [
            GraphRelation("MARA QUILL", "brightwater", "co_occurs_with", 2.0, ["c2"]),
            GraphRelation("Quill", "quill", "same", 1.0, ["c3"]),
        ],
    )  # self-relation: dropped
    g = graph.get_graph(ns)
    assert [(n.name, n.kind, n.chunk_ids) for n in g.nodes] == [
        ("Brightwater", "", ["c1", "c2"]),
        ("Mara Quill", "Person", ["c1", "c2"]),
    ]
    assert g.nodes[1].attributes == {"mentions": 3, "role": ["engineer"]}
    assert [(r.source, r.target, r.strength, r.chunk_ids) for r in g.relations] == [
        ("Mara Quill", "Brightwater", 3.0, ["c1", "c2"])
    ]
    assert graph.count(ns) == (2, 1)


def test_graph_persists_across_reopen(tmp_path):
    path = tmp_path / "g.sqlite"
    with GraphStore(path) as g:
        g.add_graph(NameSpace("kb1", "d"), [N("Mount Ember", "c9")])
    with GraphStore(path) as g:
        assert g.get_graph(NameSpace("kb1")).nodes[0].chunk_ids == ["c9"]


def test_search_by_kb_reads_every_document_and_by_document_only_one(graph):
    graph.add_graph(NameSpace("kb1", "d1"), [N("Mara Quill", "c1")])
    graph.add_graph(NameSpace("kb1", "d2"), [N("Mara Quill", "c2"), N("Quill Harbour", "c3")])
    graph.add_graph(NameSpace("kb2", "d1"), [N("Mara Quill", "x1")])
    kb_hit = graph.search_nodes(NameSpace("kb1"), ["mara quill"])
    # exact before partial, then by name, then document
    assert [(n.name, n.knowledge_id, n.score) for n in kb_hit.nodes] == [
        ("Mara Quill", "d1", 1.0),
        ("Mara Quill", "d2", 1.0),
    ]
    doc_hit = graph.search_nodes(NameSpace("kb1", "d2"), ["Quill"])
    assert [(n.name, n.score) for n in doc_hit.nodes] == [
        ("Mara Quill", pytest.approx(5 / 10)),
        ("Quill Harbour", pytest.approx(5 / 13)),
    ]
    assert graph.search_nodes(NameSpace("kb1"), ["Quill"], partial=False).nodes == []


def test_search_follows_query_order_returns_each_node_once_and_its_relations(graph):
    ns = NameSpace("kb", "d")
    graph.add_graph(
        ns,
        [N("Alan Turing", "c1"), N("Ada Lovelace", "c2"), N("Charles Babbage", "c3")],
        [
            GraphRelation("Ada Lovelace", "Charles Babbage", "worked_with", 2.0, ["c2"]),
            GraphRelation("Alan Turing", "Enigma", "broke", 1.0, ["c1"]),
            GraphRelation("Charles Babbage", "Enigma", "unrelated", 1.0, ["c4"]),
        ],
    )
    got = graph.search_nodes(ns, ["ada lovelace", "Turing", "Ada Lovelace"])
    assert got.node_names() == ["Ada Lovelace", "Alan Turing"]
    assert [(r.source, r.target) for r in got.relations] == [
        ("Ada Lovelace", "Charles Babbage"),
        ("Alan Turing", "Enigma"),
    ]
    assert graph.search_nodes(ns, ["nobody", "  "]).nodes == []


def test_delete_and_replace_namespaces(graph):
    graph.add_graph(NameSpace("kb1", "d1"), [N("A one", "c1")])
    graph.add_graph(NameSpace("kb1", "d2"), [N("B two", "c2")])
    graph.add_graph(NameSpace("kb2", "d1"), [N("C three", "c3")])
    assert graph.delete_namespace(NameSpace("kb1", "d1")) == 1
    assert graph.get_graph(NameSpace("kb1")).node_names() == ["B two"]
    graph.replace_namespace(NameSpace("kb1", "d2"), [N("D four", "c9")])
    assert graph.get_graph(NameSpace("kb1")).node_names() == ["D four"]
    assert graph.delete_namespace(NameSpace("kb1")) == 1
    assert graph.count(NameSpace("kb1")) == (0, 0)
    assert graph.get_graph(NameSpace("kb2")).node_names() == ["C three"]


def test_bad_arguments_name_the_value(graph, tmp_path):
    with pytest.raises(GraphError, match="knowledge_base=''"):
        NameSpace("")
    with pytest.raises(GraphError, match="got the string 'Mara'"):
        graph.search_nodes(NameSpace("kb"), "Mara")
    bad = tmp_path / "not_a_db.sqlite"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(GraphError, match="not_a_db.sqlite"):
        GraphStore(bad)
    graph.close()
    with pytest.raises(GraphError, match="closed"):
        graph.get_graph(NameSpace("kb"))


def test_lookups_from_several_threads(graph):
    graph.add_graph(NameSpace("kb", "d"), [N(f"Thing {i:03d}", f"c{i}") for i in range(50)])
    out: list[int] = []

    def work():
        out.append(len(graph.search_nodes(NameSpace("kb"), ["thing 007", "Thing 042"]).nodes))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [2] * 8


def test_open_graph_store_uses_the_workspace(workspace):
    g = open_graph_store(workspace)
    try:
        assert g.path == workspace.root / "graph.sqlite"
    finally:
        g.close()
    with pytest.raises(GraphError, match="neither"):
        open_graph_store(object())
