"""searchutil.chunkmerge: joining chunk texts with overlap (§6.12–§6.14)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from rag_lab.searchutil.chunkmerge import (
    append_with_exact_overlap,
    append_with_overlap,
    contains_chunk_content,
    join_chunk_content,
    merge_text_chunks,
)

# --- contains_chunk_content ------------------------------------------------------------------


def test_contains_chunk_content() -> None:
    assert not contains_chunk_content("", "")
    assert not contains_chunk_content("abc", "")
    assert not contains_chunk_content("", "abc")
    assert contains_chunk_content("abc", "abc")  # equal strings, however short
    assert not contains_chunk_content("hello world!!", "hello")  # 5 runes < 12
    assert contains_chunk_content("xx 0123456789AB yy", "0123456789AB")  # exactly 12 runes
    assert contains_chunk_content("前言：一二三四五六七八九十甲乙。", "一二三四五六七八九十甲乙")  # 12 runes
    assert not contains_chunk_content("0123456789AB", "0123456789ABC")


# --- join_chunk_content (§6.12) -----------------------------------------------------------------


def test_join_empty_sides() -> None:
    assert join_chunk_content("", "next", "\n\n") == "next"
    assert join_chunk_content("acc", "", "\n\n") == "acc"


def test_join_containment() -> None:
    acc = "0123456789ABCDEF"
    assert join_chunk_content(acc, "23456789ABCD", "|") == acc
    assert join_chunk_content("23456789ABCD", acc, "|") == acc


def test_join_overlap_and_separator() -> None:
    assert (
        join_chunk_content("The quick brown fox jumps", "brown fox jumps over the lazy dog", "\n\n")
        == "The quick brown fox jumps over the lazy dog"
    )
    # An 11-rune overlap is below the minimum: separator join.
    assert join_chunk_content("xx hello worl", "hello worl yy", "\n\n") == "xx hello worl\n\nhello worl yy"
    # The longest overlap wins.
    assert join_chunk_content("A" * 20, "A" * 15 + "B", "|") == "A" * 20 + "B"


def test_join_span_limit_and_min_overlap_parameters() -> None:
    acc, nxt = "left 0123456789ABC", "0123456789ABC right"  # 13-rune overlap
    assert join_chunk_content(acc, nxt, "|") == "left 0123456789ABC right"
    assert join_chunk_content(acc, nxt, "|", span=12) == acc + "|" + nxt
    assert join_chunk_content("ab cd", "cd ef", "|", min_overlap=2) == "ab cd ef"


@given(st.text(max_size=60), st.text(max_size=3))
def test_join_with_empty_next_is_identity(acc: str, sep: str) -> None:
    assert join_chunk_content(acc, "", sep) == acc
    assert join_chunk_content("", acc, sep) == acc


@given(st.text(alphabet="abc ", max_size=40), st.text(alphabet="abc ", max_size=40))
def test_join_keeps_both_texts(a: str, b: str) -> None:
    out = join_chunk_content(a, b, "\n\n")
    assert a in out and b in out


# --- append_with_exact_overlap (§6.13) -------------------------------------------------------------


def test_append_with_exact_overlap_table() -> None:
    assert append_with_exact_overlap("", "next", 3) == ("next", True)
    assert append_with_exact_overlap("acc", "", 3) == ("acc", True)
    assert append_with_exact_overlap("acc", "next", -1) == ("", False)
    assert append_with_exact_overlap("acc", "next", 0) == ("accnext", True)
    assert append_with_exact_overlap("ab", "abc", 3) == ("", False)  # longer than acc
    assert append_with_exact_overlap("abc", "bc", 3) == ("", False)  # longer than next
    assert append_with_exact_overlap("hello wor", "world", 3) == ("hello world", True)
    assert append_with_exact_overlap("hello wor", "xorld", 3) == ("", False)
    assert append_with_exact_overlap("数据中文", "中文内容", 2) == ("数据中文内容", True)


# --- append_with_overlap (§6.14) -----------------------------------------------------------------


def test_append_with_overlap_no_search_when_position_overlap_not_positive() -> None:
    assert append_with_overlap("", "b", 5) == "b"
    assert append_with_overlap("a", "", 5) == "a"
    text = "shared overlap segment"
    assert append_with_overlap(text, text, 0) == text + text
    assert append_with_overlap(text, text, -3) == text + text


def test_append_with_overlap_skips_a_synthetic_prefix() -> None:
    acc = "intro text shared overlap segment"
    nxt = "HEADER\nshared overlap segment continues"
    assert append_with_overlap(acc, nxt, 22) == "intro text shared overlap segment continues"


def test_append_with_overlap_head_slack() -> None:
    acc = "unique overlap text!"
    # The overlap may start at rune 320 (head_slack = max(2*5, 320)) but not at 321.
    assert append_with_overlap(acc, "y" * 320 + acc + "tail", 5) == acc + "tail"
    far = "y" * 321 + acc + "tail"
    assert append_with_overlap(acc, far, 5) == acc + far
    # A larger position overlap widens the window: head_slack = 2*200 = 400.
    assert append_with_overlap(acc, far, 200) == acc + "tail"


def test_append_with_overlap_not_found_concatenates() -> None:
    assert append_with_overlap("first part of it", "completely other", 4) == "first part of itcompletely other"


# --- merge_text_chunks ---------------------------------------------------------------------------


@dataclass
class _Chunk:
    content: str
    start_at: int
    end_at: int
    chunk_index: int


def test_merge_text_chunks_rebuilds_the_document() -> None:
    src = "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs."
    chunks = [
        _Chunk("no offsets", 200, 0, 9),  # end_at == 0: appended after gap_sep
        _Chunk(src[30:86], 30, 86, 1),
        _Chunk("Gap chunk", 100, 109, 3),
        _Chunk(src[10:40], 10, 40, 2),  # covered by the first chunk: skipped
        _Chunk(src[0:50], 0, 50, 0),
        _Chunk("", 5, 60, 4),  # empty content is ignored
    ]
    assert merge_text_chunks(chunks, "\n") == src + "\n" + "Gap chunk" + "\n" + "no offsets"
    # A chunk without end sorted in the middle breaks the text overlap that follows it.
    chunks[0].start_at = 0
    assert merge_text_chunks(chunks, "\n") == (src[0:50] + "\nno offsets" + src[30:86] + "\nGap chunk")


def test_merge_text_chunks_edge_cases() -> None:
    assert merge_text_chunks([], "\n") == ""
    assert merge_text_chunks([_Chunk("", 0, 5, 0)], "\n") == ""
    # The first chunk has no end: every later chunk is a gap.
    assert merge_text_chunks([_Chunk("a", 0, 0, 0), _Chunk("b", 0, 3, 1)], "+") == "a+b"
    assert merge_text_chunks([_Chunk("abc", 0, 3, 0), _Chunk("def", 3, 6, 1)], "") == "abcdef"


# --- longest_overlap: the search join_chunk_content uses, against the plain loop ---------------


def _longest_overlap_loop(acc: str, nxt: str, min_overlap: int, max_overlap: int) -> int:
    for ov in range(max_overlap, min_overlap - 1, -1):
        if ov > 0 and acc.endswith(nxt[:ov]):
            return ov
    return 0


@given(
    st.text(alphabet="abc北", max_size=30),
    st.text(alphabet="abc北", max_size=30),
    st.integers(1, 6),
    st.integers(0, 40),
)
def test_longest_overlap_matches_the_plain_loop(acc: str, nxt: str, min_overlap: int, span: int) -> None:
    from rag_lab.searchutil.chunkmerge import longest_overlap

    max_ov = min(len(acc), len(nxt), span)
    assert longest_overlap(acc, nxt, min_overlap, max_ov) == _longest_overlap_loop(acc, nxt, min_overlap, max_ov)


def test_longest_overlap_examples() -> None:
    from rag_lab.searchutil.chunkmerge import longest_overlap

    assert longest_overlap("xx abcabc", "abcabc yy", 3, 9) == 6  # the longest of 3 and 6
    assert longest_overlap("xx abc", "abd", 3, 3) == 0
    assert longest_overlap("aaaa", "aaaa", 1, 4) == 4
