from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rank_bm25 import BM25Okapi

from rag_lab.retrieval.keyword_index import KeywordIndex, KeywordIndexError, StaleKeywordIndex, top_positions
from rag_lab.retrieval.tokenization import Tokenizer

CORPUS = {
    "c1": "the cat sat on the mat",
    "c2": "a dog chased the cat around the garden",
    "c3": "dogs and cats are pets pets pets",
    "c4": "stock markets fell sharply today",
    "c5": "the garden has a cat and a dog and a bird",
    "c6": "bird songs at dawn in the garden",
    "c7": "机器学习 和 深度学习",
}


@pytest.mark.parametrize("k1, b", [(1.5, 0.75), (1.2, 0.5), (0.9, 1.0)])
def test_bm25s_times_k1_plus_1_equals_rank_bm25(k1, b):
    idx = KeywordIndex(k1=k1, b=b)
    ids = sorted(CORPUS)
    idx.add(ids, [CORPUS[i] for i in ids])
    tok = idx.tokenizer
    ref = BM25Okapi([tok(CORPUS[i]) for i in ids], k1=k1, b=b, epsilon=0)
    for query in ["cat garden", "dog bird dawn", "pets", "markets cat cat", "学习", "zebra"]:
        ours = idx.scores(query)
        theirs = ref.get_scores(tok(query))
        for cid, expected in zip(ids, theirs):
            assert ours[cid] * (k1 + 1) == pytest.approx(expected, abs=1e-6), (query, cid)


def test_search_order_zero_scores_and_ties():
    idx = KeywordIndex()
    idx.add(["b", "a", "c", "d", "e"], ["apple pie", "apple pie", "banana split", "cherry tart", "plum jam"])
    hits = idx.search("apple", 10)
    assert [h[0] for h in hits] == ["a", "b"]  # equal scores: chunk id order
    assert hits[0][1] == hits[1][1] > 0
    assert idx.search("zebra", 10) == []  # nothing with a zero score
    assert idx.search("", 10) == [] and idx.search("apple", 0) == []
    assert idx.search("apple", 1) == [("a", hits[0][1])]
    assert [h[0] for h in idx.search("apple", 10, allowed_ids={"b", "c"})] == ["b"]


def test_token_common_to_half_the_corpus_scores_zero():
    # robertson idf clamps log((N - df + .5)/(df + .5)) at 0: here df = 2 of N = 4
    idx = KeywordIndex()
    idx.add(["1", "2", "3", "4"], ["x y", "x z", "w", "v"])
    assert idx.search("x", 5) == []
    assert idx.search("y", 5)[0][0] == "1"


def test_remove_and_readd(tmp_path):
    idx = KeywordIndex(tmp_path / "bm25")
    idx.add(list(CORPUS), list(CORPUS.values()))
    assert idx.search("markets", 3)[0][0] == "c4"
    assert idx.remove_chunks(["c4", "missing"]) == 1
    assert idx.search("markets", 3) == []
    assert "c4" not in idx.chunk_ids() and len(idx) == 6


def test_persistence_and_stale_tokenizer(tmp_path):
    path = tmp_path / "bm25"
    idx = KeywordIndex(path)
    idx.add(list(CORPUS), list(CORPUS.values()))
    idx.save()
    before = idx.search("cat garden", 5)
    loaded = KeywordIndex.load(path)
    assert loaded.search("cat garden", 5) == before
    # other BM25 params: rebuilt from the stored tokens, scores change accordingly
    other = KeywordIndex.load(path, k1=0.5)
    assert [h[0] for h in other.search("cat garden", 5)] and other.search("cat garden", 5) != before
    # adding to a loaded index works (tokens are read lazily)
    loaded.add(["c9"], ["zebra crossing"])
    assert loaded.search("zebra", 1)[0][0] == "c9"
    with pytest.raises(StaleKeywordIndex, match="tokenizer"):
        KeywordIndex.load(path, tokenizer=Tokenizer(stopwords=["cat"]))


def test_bad_settings():
    with pytest.raises(KeywordIndexError, match="method='bm42'"):
        KeywordIndex(method="bm42")
    with pytest.raises(KeywordIndexError, match="b=1.5"):
        KeywordIndex(b=1.5)
    with pytest.raises(KeywordIndexError, match="2 chunk ids for 1 texts"):
        KeywordIndex().add(["a", "b"], ["x"])


def test_empty_index_and_stopword_only_docs():
    idx = KeywordIndex()
    assert idx.search("anything", 3) == []
    # a document with no token left after stop words is indexed (and never matches)
    idx.add(["a", "b", "c"], ["the of and", "real words here", "other stuff"])
    assert [h[0] for h in idx.search("words", 3)] == ["b"]
    assert idx.search("the", 3) == []


@settings(max_examples=400)
@given(
    scores=st.lists(st.sampled_from([0.0, -1.0, 0.5, 1.25, 2.0, 3.5, 7.0]) | st.floats(-2, 9), max_size=80),
    top_k=st.integers(-1, 90),
)
def test_top_positions_is_the_first_top_k_of_a_full_stable_sort(scores, top_k):
    """Scores with many ties and zeros: the partial selection returns exactly the positions a
    stable sort of every positive score returns first (ties by position)."""
    arr = np.asarray(scores, dtype=np.float64)
    full = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
    assert top_positions(arr, top_k).tolist() == full[: max(top_k, 0)]
