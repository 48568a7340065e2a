"""Image info gathered from the image chunks under a chunk (spec §6.9), and its use in parent
resolution (§4.8.2 step 3) and hydration."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.knowledge.models import Chunk
from rag_lab.knowledge.store import KnowledgeStore
from rag_lab.pipeline.plugins.merge import merge_results
from rag_lab.retrieval.image_info import (
    aggregate_image_entries,
    collect_image_info_by_chunk_ids,
    enrich_search_results_image_info,
)
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult

#: long enough (≥ 350 runes) that neighbour expansion leaves the parent-joined content alone (§4.8.5)
PART_ONE = "Part one ![a](http://img/a.png) " + "The keeper lit the lamp at dusk. " * 12


def _info(*entries: dict[str, str]) -> str:
    return json.dumps(list(entries))


def _chunk(cid: str, kind: str, parent: str = "", info: str = "", enabled: bool = True, content: str = "x") -> Chunk:
    return Chunk(
        id=cid,
        knowledge_id="doc",
        knowledge_base_id="kb",
        content=content,
        chunk_type=kind,
        parent_chunk_id=parent,
        image_info=info,
        is_enabled=enabled,
    )


@pytest.fixture
def store(tmp_path: Path) -> KnowledgeStore:
    s = KnowledgeStore(tmp_path / "store.db")
    s.add_chunks(
        [
            _chunk("P1", "parent_text", content="Intro ![a](http://img/a.png) ![z](http://img/z.png)"),
            _chunk("T1", "text", "P1", content=PART_ONE),
            _chunk("T2", "text", "P1", content="Part two"),
            _chunk(
                "I1", "image_caption", "T1", _info({"url": "http://img/a.png", "caption": "a lamp", "ocr_text": ""})
            ),
            _chunk("I2", "image_ocr", "T1", _info({"url": "http://img/a.png", "caption": "", "ocr_text": "1874"})),
            _chunk("I3", "image_ocr", "T2", _info({"url": "http://img/off.png", "ocr_text": "hidden"}), enabled=False),
            _chunk("I9", "image_ocr", "P1", _info({"url": "http://img/direct-off.png"}), enabled=False),
            _chunk("T3", "text", content="Lone text"),
            _chunk("I4", "image_ocr", "T3", _info({"url": "http://img/b.png", "ocr_text": "b"})),
            _chunk("I5", "image_ocr", "T3", _info({"caption": "no url at all"})),
            _chunk(
                "I6", "image_caption", "T3", _info({"url": "", "original_url": "http://orig/c.png", "caption": "c"})
            ),
            _chunk("T4", "text", content="No images"),
        ]
    )
    return s


def test_children_and_grandchildren_aggregate_by_url(store: KnowledgeStore) -> None:
    got = {k: json.loads(v) for k, v in collect_image_info_by_chunk_ids(store, ["P1", "T1", "T3", "T4", "T1"]).items()}
    lamp = {"url": "http://img/a.png", "caption": "a lamp", "ocr_text": "1874"}
    # T1's own image children; P1 through its text children (the disabled ones are ignored)
    assert got["T1"] == [lamp]
    assert got["P1"] == [lamp]
    # keyed by url, else original_url; an entry with neither is skipped
    assert got["T3"] == [
        {"url": "http://img/b.png", "ocr_text": "b"},
        {"url": "", "original_url": "http://orig/c.png", "caption": "c"},
    ]
    assert "T4" not in got  # nothing gathered: left out
    assert collect_image_info_by_chunk_ids(store, []) == {}


def test_first_entry_kept_later_text_fields_overwrite() -> None:
    into: dict[str, dict[str, str]] = {}
    aggregate_image_entries(into, _info({"url": "u", "caption": "first", "ocr_text": "", "extra": "kept"}))
    aggregate_image_entries(into, _info({"url": "u", "caption": "", "ocr_text": "later"}))
    aggregate_image_entries(into, _info({"url": "u", "caption": "second"}))
    aggregate_image_entries(into, "not json")
    assert into == {"u": {"url": "u", "caption": "second", "ocr_text": "later", "extra": "kept"}}


def test_a_failing_store_gives_an_empty_map() -> None:
    class Broken:
        def get_children(self, ids: object) -> list[Chunk]:
            raise OSError("disk gone")

    assert collect_image_info_by_chunk_ids(Broken(), ["T1"]) == {}


def test_enrich_fills_only_empty_image_info(store: KnowledgeStore) -> None:
    own = _info({"url": "http://own.png"})
    results = [SearchResult(id="T3"), SearchResult(id="T1", image_info=own), SearchResult(id="T4")]
    enrich_search_results_image_info(results, store)
    assert [json.loads(r.image_info)[0]["url"] if r.image_info else "" for r in results] == [
        "http://img/b.png",
        "http://own.png",
        "",
    ]


def test_parent_resolution_uses_the_scoped_image_info(store: KnowledgeStore) -> None:
    text = SearchResult(
        id="T1",
        knowledge_id="doc",
        content=PART_ONE,
        chunk_type="text",
        parent_chunk_id="P1",
        score=0.9,
    )
    mlog: list[dict[str, object]] = []
    (merged,) = merge_results([text], [], "lamp", PipelineParams(), store, mlog)
    # the image chunks under T1 give its image info; the parent keeps only that image
    assert json.loads(merged.image_info) == [{"url": "http://img/a.png", "caption": "a lamp", "ocr_text": "1874"}]
    assert "http://img/a.png" in merged.content and "http://img/z.png" not in merged.content
    assert merged.content.startswith("Intro") and merged.content_rewritten


def test_the_tuning_store_memo_gives_the_same_image_info(store: KnowledgeStore) -> None:
    from rag_lab.tuning.inputs import StoreMemo

    memo = StoreMemo(store)
    ids = ["P1", "T1", "T3", "T4"]
    assert collect_image_info_by_chunk_ids(memo, ids) == collect_image_info_by_chunk_ids(store, ids)
    loads = memo.loads
    assert collect_image_info_by_chunk_ids(memo, ids) == collect_image_info_by_chunk_ids(store, ids)
    assert memo.loads == loads  # served from the memo the second time


def test_children_are_found_through_the_parent_index(store: KnowledgeStore) -> None:
    # the statement get_children really runs must use the partial index chunk_parent: without
    # its condition SQLite scans every chunk on every search
    conn = store._conn()
    seen: list[str] = []
    conn.set_trace_callback(seen.append)
    try:
        assert {c.id for c in store.get_children(["T1", "T3"])} == {"I1", "I2", "I4", "I5", "I6"}
    finally:
        conn.set_trace_callback(None)
    (sql,) = [q for q in seen if "parent_chunk_id IN" in q]
    plan = " ".join(str(tuple(r)) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    assert "chunk_parent" in plan, plan


def test_a_kb_read_whole_gives_the_stores_children_and_image_info(store: KnowledgeStore) -> None:
    """Hydration reads the KB's rows the store holds whole: its children come from those rows in
    the store's order, the image info gathered is the same, and no further row is read; a KB over
    the rows' budget is read row by row."""
    from rag_lab.knowledge.kb_rows import KbRows
    from rag_lab.knowledge.models import Knowledge
    from rag_lab.retrieval.hydration import HydrationMemo, chunk_values, doc_values

    store.add_knowledge(Knowledge(id="doc", knowledge_base_id="kb", title="Doc"))
    whole = store.kb_rows.chunks("kb")
    assert whole is not None and len(whole) == 12
    for parents in (["P1"], ["T3", "T1", "T1"], ["T1", "P1", "T2", "T4", "missing", ""]):
        assert whole.get_children(parents) == store.get_children(parents)
    ids = ["P1", "T1", "T2", "T3", "T4"]
    assert collect_image_info_by_chunk_ids(whole, ids) == collect_image_info_by_chunk_ids(store, ids)

    memo = HydrationMemo()
    memo.fresh(store)
    memo.preload(["kb", "kb"])
    reads: list[str] = []
    for name in ("get_chunks", "get_knowledge", "get_children", "kb_table_rows"):
        original = getattr(store, name)
        setattr(store, name, lambda *a, _n=name, _f=original, **k: reads.append(_n) or _f(*a, **k))
    # the fields hydration reads, decoded from the held rows as the store's objects hold them
    held = {k: list(v) for k, v in memo.chunks(["T1", "T3"]).items()}
    assert reads == []
    assert held == {k: list(chunk_values(v)) for k, v in store.get_chunks(["T1", "T3"]).items()}
    reads.clear()
    assert memo.documents([("kb", "doc"), ("kb", "nope")]) == {
        ("kb", "doc"): [*doc_values(store.get_document("kb", "doc"))]
    }
    assert reads == []
    reads.clear()
    results = [SearchResult(id="T3", knowledge_base_id="kb"), SearchResult(id="T4", knowledge_base_id="kb")]
    memo.enrich_image_info(results)
    assert json.loads(results[0].image_info)[0]["url"] == "http://img/b.png" and results[1].image_info == ""
    assert reads == []
    store.kb_rows = KbRows(store)
    store.kb_rows.max_rows = 3  # 12 chunks: not held, rows as they come
    small = HydrationMemo()
    small.fresh(store)
    small.preload(["kb"])
    assert {k: list(v) for k, v in small.chunks(["T1"]).items()} == {"T1": held["T1"]}
    assert reads == ["get_chunks"]
