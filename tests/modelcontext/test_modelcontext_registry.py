"""Registry: handle spaces, guard, merges, web canonicalisation, compaction, resources (spec §7.1, §7.3, §7.4)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.modelcontext import Registry, canonical_web_url
from rag_lab.modelcontext.registry import HandleTable
from rag_lab.types.search_result import SearchResult


def test_chunk_handles_are_stable_and_sequential() -> None:
    r = Registry(True)
    assert r.register_chunk("X") == "c1"
    assert r.register_chunk("X") == "c1"
    assert r.register_chunk("  X\t") == "c1"
    assert r.register_chunk("Y") == "c2"
    assert r.register_chunk("") == ""
    assert r.register_chunk("   ") == ""


def test_each_space_has_its_own_counter() -> None:
    r = Registry(True)
    assert r.register_chunk("id-1") == "c1"
    assert r.register_document("id-1") == "d1"
    assert r.register_kb("id-1") == "b1"
    assert r.register_web("https://ex.com/") == "w1"
    assert r.register_issue("ISSUE-7") == "i1"
    assert r.register_document("") == "" and r.register_kb(" ") == "" and r.register_web("") == ""


def test_handle_shaped_input_guard() -> None:
    r = Registry(True)
    assert r.register_chunk("c1") == ""  # never a new durable ID
    assert r.register_chunk("real-chunk") == "c1"
    assert r.register_chunk("C1") == "c1"  # existing handle in the same space, lower-cased
    assert r.register_document("c1") == ""  # exists, but in another space
    assert r.register_document("d1") == ""
    assert r.register_document("doc") == "d1"
    assert r.register_document(" D1 ") == "d1"
    assert r.register_kb("b2") == ""
    assert r.register_web("w1") == ""
    # not handle-shaped: leading zero, so it is an ordinary durable ID
    assert r.register_document("c01") == "d2"
    assert r.document_id("d2") == "c01"
    assert r.register_chunk("c9") == ""
    assert r.chunk("c9") is None


def test_chunk_reregistration_fills_only_empty_fields() -> None:
    r = Registry(True)
    assert r.register_chunk("X") == "c1"
    assert r.register_chunk("X", "K", "B", "Title", 5, "text") == "c1"
    ref = r.chunk("c1")
    assert ref is not None
    assert (ref.chunk_id, ref.knowledge_id, ref.kb_id, ref.title, ref.chunk_index, ref.chunk_type) == (
        "X",
        "K",
        "B",
        "Title",
        5,
        "text",
    )
    r.register_chunk("X", "K2", "B2", "T2", 7, "faq")
    ref = r.chunk("c1")
    assert ref is not None and (ref.knowledge_id, ref.kb_id, ref.title, ref.chunk_index, ref.chunk_type) == (
        "K",
        "B",
        "Title",
        5,
        "text",
    )
    # index 0 counts as empty
    r.register_chunk("Z", chunk_index=0)
    r.register_chunk("Z", chunk_index=4)
    assert r.chunk("c2").chunk_index == 4  # type: ignore[union-attr]


def test_lookups_are_lower_cased_but_not_trimmed() -> None:
    r = Registry(True)
    r.register_chunk("X", kb_id="B")
    assert r.chunk("C1") is not None
    assert r.chunk(" c1") is None
    assert r.chunk("c2") is None
    assert r.durable_for_handle(" C1 ") == "X"
    assert r.chunk_handle("X") == "c1" and r.chunk_handle("nope") == ""
    # lookups return copies
    ref = r.chunk("c1")
    assert ref is not None
    ref.title = "mutated"
    assert r.chunk("c1").title == ""  # type: ignore[union-attr]


def test_web_dedup_on_canonical_url_keeps_first_raw_url() -> None:
    r = Registry(True)
    assert r.register_web("https://ex.com/a?q=1#one", "") == "w1"
    assert r.register_web("  https://ex.com/a?q=1#two ", "A") == "w1"
    assert r.register_web("HTTPS://ex.com/a?q=1") == "w1"
    assert r.register_web("https://ex.com/a?q=2") == "w2"
    web = r.web("w1")
    assert web is not None and web.url == "https://ex.com/a?q=1#one" and web.title == "A"
    r.register_web("https://ex.com/a?q=1", "B")  # title already set: unchanged
    assert r.web("w1").title == "A"  # type: ignore[union-attr]
    # no scheme/host: the trimmed string itself is the key, fragments included
    assert r.register_web("notes#x") == "w3"
    assert r.register_web("notes#y") == "w4"
    assert r.web_handle("https://ex.com/a?q=1#zzz") == "w1"


def test_canonical_web_url() -> None:
    assert canonical_web_url(" https://ex.com/p#frag ") == "https://ex.com/p"
    assert canonical_web_url("Http://Ex.com/P") == "http://Ex.com/P"
    assert canonical_web_url("mailto:someone@ex.com#x") == "mailto:someone@ex.com#x"
    assert canonical_web_url("http://[::1/broken#x") == "http://[::1/broken#x"


def test_register_search_results_order_doc_kb_chunk() -> None:
    r = Registry(True)
    results = [
        SearchResult(
            id="ch-1",
            knowledge_id="K1",
            knowledge_base_id="KB-1",
            knowledge_title="  ",
            knowledge_filename="f.pdf",
            chunk_index=2,
            chunk_type="text",
        ),
        None,
        SearchResult(id="ch-2", knowledge_id="K2", knowledge_base_id="KB-1", knowledge_title="T2"),
        SearchResult(id="ch-1", knowledge_id="K1", knowledge_base_id="KB-1"),
    ]
    r.register_search_results(results)
    assert [r.document_handle("K1"), r.document_handle("K2")] == ["d1", "d2"]
    assert r.kb_handle("KB-1") == "b1"
    assert [r.chunk_handle("ch-1"), r.chunk_handle("ch-2")] == ["c1", "c2"]
    ref = r.chunk("c1")
    assert ref is not None and (ref.title, ref.chunk_index, ref.chunk_type, ref.kb_id) == ("f.pdf", 2, "text", "KB-1")


def test_compact_known_text_longest_value_first_across_spaces() -> None:
    r = Registry(True)
    r.register_document("abc")
    r.register_chunk("abc-123")
    r.register_web("https://ex.com/abc-123")
    text = "see https://ex.com/abc-123 and abc-123 and abc."
    assert r.compact_known_text(text) == "see w1 and c1 and d1."
    assert r.compact_known_text("") == ""


def test_resource_encoding_pattern_and_reuse() -> None:
    r = Registry(True)
    uuid = "0123abcd-4567-89ab-CDEF-0123456789ab"
    text = (
        "![](minio://bucket/a.png) and resource://AAAAAAAAAAAAAAAAAAAAAA, summary/"
        + uuid
        + " entity/Some-Title storage://tenant_1/s3://bk/k.txt minio://bucket/a.png"
    )
    encoded = r.encode_resources(text)
    assert encoded == "![](res://0001) and res://0002, res://0003 entity/Some-Title res://0004 res://0001"
    assert r.resource_handles() == ["res://0001", "res://0002", "res://0003", "res://0004"]
    assert r.resource_value("res://0004") == "storage://tenant_1/s3://bk/k.txt"
    # a 21-character resource id is not a stored reference
    assert r.encode_resources("resource://AAAAAAAAAAAAAAAAAAAAA") == "resource://AAAAAAAAAAAAAAAAAAAAA"
    # provider URL stops at whitespace, ')', ']', '>', quotes
    assert r.encode_resources("<img src='cos://b/x.png'>") == "<img src='res://0005'>"


def test_resource_decode_restores_then_strips_orphans() -> None:
    r = Registry(True)
    r.encode_resources("minio://b/one.png")
    assert r.restore_resources("x res://0001 res://12") == "x minio://b/one.png res://12"
    assert r.decode_resources("x res://0001 res://12 y") == "x minio://b/one.png  y"
    # plain substring: no word boundary
    assert r.decode_resources("res://00012") == "minio://b/one.png2"
    assert r.orphan_resource_handles("res://0001 res://7 res://7") == ["res://7"]


def test_resource_counter_grows_past_9999_and_decodes_longest_first() -> None:
    table: HandleTable[None] = HandleTable("res://", 4)
    for n in range(1, 10001):
        table.register(f"k{n}", f"v{n}")
    assert table.handle_for_key("k1") == "res://0001"
    assert table.handle_for_key("k9999") == "res://9999"
    assert table.handle_for_key("k10000") == "res://10000"
    from rag_lab.modelcontext.resources import restore_resources

    assert restore_resources("[res://10000] [res://1000]", table) == "[v10000] [v1000]"


def test_issue_handles_decode_at_word_boundaries() -> None:
    r = Registry(True)
    assert r.register_issue("wiki-issue-42") == "i1"
    assert r.register_issue("I1") == "i1"
    assert r.decode_issue_handles("see i1, xi1, i12 and i1.") == "see wiki-issue-42, xi1, i12 and wiki-issue-42."


@given(st.lists(st.text(alphabet="abcXYZ-_0123", min_size=1, max_size=8), max_size=30))
def test_handles_stable_and_dense(ids: list[str]) -> None:
    """Any sequence of registrations yields c1..cN in first-seen order, re-registration returns the same."""
    r = Registry(True)
    first_seen: dict[str, str] = {}
    for raw in ids:
        key = raw.strip()
        handle = r.register_chunk(raw)
        if not key or re.fullmatch(r"[cdbwCDBW][1-9][0-9]*", key):
            assert handle in ("", key.lower())
            continue
        first_seen.setdefault(key, f"c{len(first_seen) + 1}")
        assert handle == first_seen[key]
    assert sorted(r._chunks.handles()) == sorted(first_seen.values())
