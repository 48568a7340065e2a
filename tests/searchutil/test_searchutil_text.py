"""searchutil.text: tokenisation, Jaccard, normalisation, signatures, keyword scores (§6.1–§6.7)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.searchutil.text import (
    build_content_signature,
    contains_han,
    content_overlap_ratio,
    go_fields,
    go_lower,
    go_trim,
    html_escape5,
    is_content_contained,
    jaccard,
    normalize_content,
    normalize_keyword_scores,
    tokenize_simple,
    utf8_len,
)

# --- Go string helpers (§0) -------------------------------------------------------------------


def test_go_trim_and_fields_use_go_whitespace() -> None:
    # U+001C..U+001F are whitespace for Python's str.strip/split but not for Go.
    assert go_trim("\x1c a \x1c") == "\x1c a \x1c"
    assert go_trim("\u3000\u00a0 a b \u2029\n") == "a b"
    assert go_fields(" a\tb\u3000c\x1cd ") == ["a", "b", "c\x1cd"]
    assert go_fields("   ") == []


def test_go_lower_is_simple_case_mapping() -> None:
    assert go_lower("ΟΔΟΣ") == "οδοσ"  # Python's str.lower gives a final sigma "οδος"
    assert go_lower("İstanbul") == "istanbul"  # Python gives "i̇stanbul" (two code points)
    assert go_lower("ABC Éé") == "abc éé"


def test_utf8_len_counts_bytes() -> None:
    assert utf8_len("abc") == 3
    assert utf8_len("é") == 2
    assert utf8_len("中文") == 6


def test_html_escape5_escapes_exactly_five_characters() -> None:
    assert html_escape5("<a href=\"x\">'&'</a>") == "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;"
    assert html_escape5("&amp;") == "&amp;amp;"
    assert html_escape5("plain / text = ok") == "plain / text = ok"


# --- §6.1 tokenize_simple --------------------------------------------------------------------


def test_tokenize_simple_whitespace_mode() -> None:
    assert tokenize_simple("Hello World! a ,, --") == {"hello", "world!"}
    assert tokenize_simple("$$ ++ 12") == {"12"}
    assert tokenize_simple("ΟΔΟΣ İstanbul") == {"οδοσ", "istanbul"}
    assert tokenize_simple("a\u3000bb\tcc") == {"bb", "cc"}


def test_tokenize_simple_empty() -> None:
    assert tokenize_simple("") == set()
    assert tokenize_simple(" \n\t ") == set()


def test_tokenize_simple_han_uses_jieba_search_mode() -> None:
    assert contains_han("北京大学") and not contains_han("hello, world")
    assert tokenize_simple("北京大学") == {"北京", "大学", "北京大学"}
    # The whole string goes through jieba once it holds a Han character; still lower-cased.
    assert tokenize_simple("Hello 世界 world") == {"hello", "世界", "world"}


def test_tokenize_simple_drops_single_runes_and_punctuation() -> None:
    toks = tokenize_simple("我，是。。学生！")
    assert all(len(t) > 1 for t in toks)
    assert "。。" not in toks
    assert "学生" in toks


# --- §6.2 jaccard -----------------------------------------------------------------------------


def test_jaccard_values() -> None:
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 0.0
    assert jaccard({"a"}, set()) == 0.0
    assert jaccard({"a", "b"}, {"a", "b"}) == 1.0


_tokens = st.sets(st.sampled_from("abcdefghij"), max_size=8)


@given(_tokens, _tokens)
def test_jaccard_symmetric_and_bounded(a: set[str], b: set[str]) -> None:
    assert jaccard(a, b) == jaccard(b, a)
    assert 0.0 <= jaccard(a, b) <= 1.0
    if a and a == b:
        assert jaccard(a, b) == 1.0


# --- §6.3 normalisation and containment -------------------------------------------------------


def test_normalize_content() -> None:
    assert normalize_content("  Hello\t\n  WORLD  ") == "hello world"
    assert normalize_content("") == ""
    assert normalize_content(" \n ") == ""


def test_is_content_contained() -> None:
    assert is_content_contained("b c", "a b c d")
    assert not is_content_contained("", "a")
    assert not is_content_contained("a", "")
    assert not is_content_contained("éé", "abc")  # 4 bytes > 3 bytes
    assert not is_content_contained("x y", "a b c d")
    assert is_content_contained("abc", "abc")


def test_content_overlap_ratio() -> None:
    assert content_overlap_ratio("alpha beta gamma", "alpha beta delta epsilon") == pytest.approx(2 / 3)
    # Same token count: a's set is the small one.
    assert content_overlap_ratio("x1 y1", "x1 z1") == 0.5
    assert content_overlap_ratio("", "alpha beta") == 0.0
    assert content_overlap_ratio("a b c", "alpha") == 0.0  # single-rune tokens are dropped


# --- §6.4 build_content_signature --------------------------------------------------------------


def test_build_content_signature() -> None:
    assert build_content_signature(" Hello   World \n") == "5eb63bbbe01eeed093cb22bb8f5acdc3"
    assert build_content_signature("hello world") == hashlib.md5(b"hello world").hexdigest()
    assert build_content_signature("") == ""
    assert build_content_signature(" \t\n") == ""


_word = st.text(alphabet=st.sampled_from("abcXYZ中文é-!"), min_size=1, max_size=6)
_ws = st.text(alphabet=st.sampled_from(" \t\n\r\u3000\u00a0"), min_size=1, max_size=3)


@given(st.lists(_word, min_size=1, max_size=6), st.data())
def test_signature_invariant_under_whitespace(words: list[str], data: st.DataObject) -> None:
    seps = [data.draw(_ws) for _ in words]
    lead = data.draw(st.one_of(st.just(""), _ws))
    spaced = lead + "".join(w + s for w, s in zip(words, seps))
    assert build_content_signature(spaced) == build_content_signature(" ".join(words))
    assert build_content_signature(spaced.upper()) == build_content_signature(" ".join(words).upper())


# --- §6.7 normalize_keyword_scores ---------------------------------------------------------------


def _rows(scores: list[float], kind: str = "kw") -> list[SimpleNamespace]:
    return [SimpleNamespace(score=s, kind=kind) for s in scores]


def _is_kw(r: SimpleNamespace) -> bool:
    return r.kind == "kw"


def test_normalize_keyword_scores_small_lists() -> None:
    rows = _rows([])
    normalize_keyword_scores(rows, _is_kw)
    one = _rows([7.5])
    normalize_keyword_scores(one, _is_kw)
    assert one[0].score == 1.0
    three = _rows([1.0, 3.0, 5.0]) + _rows([42.0], kind="vec")
    normalize_keyword_scores(three, _is_kw)
    assert [r.score for r in three] == [0.0, 0.5, 1.0, 42.0]
    same = _rows([2.0, 2.0])
    normalize_keyword_scores(same, _is_kw)
    assert [r.score for r in same] == [1.0, 1.0]


def test_normalize_keyword_scores_percentile_bounds() -> None:
    # n = 20: lower bound = sorted[1] = 1, upper bound = sorted[19] = 19.
    rows = _rows([float(x) for x in range(20)])
    normalize_keyword_scores(rows, _is_kw)
    assert rows[0].score == 0.0  # clamped up to the lower bound
    assert rows[1].score == 0.0
    assert rows[10].score == pytest.approx(0.5)
    assert rows[19].score == 1.0
    # n = 10 with an outlier: lower = sorted[0], upper = sorted[9] (10*95//100 = 9).
    rows = _rows([0.0] * 9 + [100.0])
    normalize_keyword_scores(rows, _is_kw)
    assert [r.score for r in rows] == [0.0] * 9 + [1.0]
    # n = 21, bounds sorted[1] = sorted[19] = 5: the range is 0, every score becomes 1.0.
    rows = _rows([5.0] * 20 + [100.0])
    normalize_keyword_scores(rows, _is_kw)
    assert [r.score for r in rows] == [1.0] * 21
    # n = 21, bounds 5 and 100: 200 is clamped to the upper bound.
    rows = _rows([5.0] * 19 + [100.0, 200.0])
    normalize_keyword_scores(rows, _is_kw)
    assert [r.score for r in rows[-3:]] == [0.0, 1.0, 1.0]


@settings(max_examples=60)
@given(st.lists(st.floats(-100, 100, allow_nan=False), max_size=30))
def test_normalize_keyword_scores_in_unit_interval(scores: list[float]) -> None:
    rows = _rows(scores)
    normalize_keyword_scores(rows, _is_kw)
    assert all(0.0 <= r.score <= 1.0 for r in rows)
