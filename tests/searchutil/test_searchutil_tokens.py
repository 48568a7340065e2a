"""searchutil.tokens: token sets cached by content, versioned with the tokenizer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.searchutil.text import tokenize_simple
from rag_lab.searchutil.tokens import (
    TOKENIZER_VERSION,
    TokenSetCache,
    cached_token_ids,
    cached_token_set,
    token_cache,
    token_key,
)

_PIECES = list("ab cd,.!\n\t") + ["北京", "大学", "清华", "的", "Hé", "İ", "ΣΑ", "\u3000", "—"]
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join)


@settings(max_examples=300)
@given(st.lists(_TEXT, min_size=1, max_size=4))
def test_every_cached_set_is_tokenize_simple_of_its_exact_text(texts: list[str]) -> None:
    cache = TokenSetCache()
    joined = "\n\n".join(texts)
    for t in [*texts, joined, *texts]:  # second sight of a text is a hit
        got = cache.get(t)
        assert got == tokenize_simple(t) and isinstance(got, frozenset)
        ids = cache.ids(t).tolist()
        assert {t2 for t2, i in cache.vocabulary.items() if i in set(ids)} == got
        assert ids == sorted(set(ids))
    for text, tokens in cache.items():
        assert tokens == tokenize_simple(text)
    assert cache.hits >= len(texts)


def test_a_joined_text_is_tokenised_as_itself_not_as_the_union_of_its_parts() -> None:
    # jieba segments a joined text differently from its parts: the cache keys the exact text
    a, b = "北京大", "学生活"
    joined = a + b
    assert cached_token_set(joined) == tokenize_simple(joined)
    assert cached_token_set(joined) != cached_token_set(a) | cached_token_set(b)
    assert cached_token_ids(joined).size == len(tokenize_simple(joined))
    assert joined in token_cache


def test_keys_are_versioned_and_the_cache_is_bounded() -> None:
    assert TOKENIZER_VERSION.startswith("tokenize_simple/") and "jieba-0.42.1" in TOKENIZER_VERSION
    assert token_key("a b") == token_key("a b") != token_key("a  b")
    assert len(token_key("x")) == 32
    cache = TokenSetCache(max_entries=10)
    for i in range(25):
        cache.get(f"word{i} other")
    assert len(cache) <= 10 and "word24 other" in cache and "word0 other" not in cache
    assert cache.get("word0 other") == {"word0", "other"}
    cache.clear()
    assert len(cache) == 0 and cache.hits == cache.misses == 0
