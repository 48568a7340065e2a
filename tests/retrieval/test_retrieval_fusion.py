from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.retrieval.base import HitRows, IndexWithScore, RetrieveResult
from rag_lab.retrieval.fusion import (
    Ranked,
    clamp01,
    dedup_by_score,
    fuse_hits,
    fuse_ranked,
    normalize_engine_scores,
    normalize_rrf_scores,
    normalize_vector_score,
    ranked_hits,
    resolve_rrf_k,
    resolve_rrf_weights,
    rrf_max_score,
    rrf_ranked,
    weighted_rrf,
)


def hit(chunk: str, score: float, mt: int = 0, entry: str | None = None, content: str = "") -> IndexWithScore:
    return IndexWithScore(
        id=entry or chunk,
        content=content or f"text {chunk}",
        chunk_id=chunk,
        knowledge_id="k",
        knowledge_base_id="kb",
        score=score,
        match_type=mt,
    )


def test_rrf_spec_example_and_normalisation():
    vec = [hit("A", 0.9), hit("B", 0.8)]
    kw = [hit("B", 7.0, 1), hit("A", 5.0, 1)]
    raw = {h.chunk_id: h.score for h in weighted_rrf(vec, kw, 60, 0.7, 0.3)}
    assert raw["A"] == pytest.approx(0.7 / 61 + 0.3 / 62, abs=1e-15)  # vector rank 1, keyword rank 2
    assert raw["B"] == pytest.approx(0.7 / 62 + 0.3 / 61, abs=1e-15)
    fused = fuse_hits(vec, kw, 60, 0.7, 0.3)
    assert [h.chunk_id for h in fused] == ["A", "B"]
    assert fused[0].score == pytest.approx((0.7 / 61 + 0.3 / 62) / (1.0 / 61), abs=1e-12)
    assert fused[0].score == pytest.approx(0.995161290322580, abs=1e-12)
    assert fused[1].score == pytest.approx((0.7 / 62 + 0.3 / 61) * 61, abs=1e-12)
    # the representative hit is the vector hit (content and match type kept)
    assert fused[0].match_type == 0 and fused[0].content == "text A"


def test_rrf_single_list_members_and_representatives():
    vec = [hit("A", 0.5), hit("A", 0.9, entry="A#q1", content="best q"), hit("C", 0.4)]
    kw = [hit("B", 3.0, 1), hit("C", 2.0, 1), hit("B", 1.0, 1)]
    fused = {h.chunk_id: h for h in weighted_rrf(vec, kw)}
    # rank = first occurrence: A is rank 1 even though its best hit is at position 2
    assert fused["A"].score == pytest.approx(0.7 / 61)
    assert fused["A"].id == "A#q1" and fused["A"].content == "best q"  # best vector hit represents
    assert fused["B"].score == pytest.approx(0.3 / 61) and fused["B"].match_type == 1
    assert fused["C"].score == pytest.approx(0.7 / 63 + 0.3 / 62) and fused["C"].match_type == 0
    assert vec[0].score == 0.5  # inputs untouched


def test_fuse_hits_falls_back_to_dedup():
    vec = [hit("x", 0.2), hit("y", 0.6), hit("x", 0.7)]
    assert [(h.chunk_id, h.score) for h in fuse_hits(vec, [])] == [("x", 0.7), ("y", 0.6)]
    kw = [hit("k", 3.5, 1)]
    assert [(h.chunk_id, h.score) for h in fuse_hits([], kw)] == [("k", 3.5)]
    assert fuse_hits([], []) == []


def test_dedup_by_score_examples():
    hits = [hit("b", 0.5), hit("a", 0.5), hit("c", 0.9), hit("b", 0.8, entry="b#2"), hit("a", 0.1)]
    out = dedup_by_score(hits)
    assert [(h.chunk_id, h.id, h.score) for h in out] == [("c", "c", 0.9), ("b", "b#2", 0.8), ("a", "a", 0.5)]
    tie = dedup_by_score([hit("z", 0.3), hit("m", 0.3), hit("m", 0.3, entry="m#second")])
    assert [(h.chunk_id, h.id) for h in tie] == [("m", "m"), ("z", "z")]  # first max kept, ties by id


def test_rrf_k_resolution_rule():
    """§1.10: any k > 0 is used as configured (1 and 0.5 included); 0, negative or unset fall back to 60."""
    assert resolve_rrf_k(1) == 1 and resolve_rrf_k(0.5) == 0.5 and resolve_rrf_k(60) == 60
    assert resolve_rrf_k(0) == 60 and resolve_rrf_k(-3) == 60


def test_weights_resolution_rule():
    assert resolve_rrf_weights(0, 0) == (0.7, 0.3)
    assert resolve_rrf_weights(None, None) == (0.7, 0.3)
    assert resolve_rrf_weights(0.5, 0) == (0.5, 0.3)
    assert resolve_rrf_weights(-1, 0.9) == (0.7, 0.9)
    assert resolve_rrf_weights(0.2, 0.8) == (0.2, 0.8)


def test_engine_score_normalisation():
    assert clamp01(math.nan) == 0.0 and clamp01(-0.2) == 0.0 and clamp01(1.7) == 1.0 and clamp01(0.25) == 0.25
    assert normalize_vector_score("milvus", 0.0) == 0.5
    assert normalize_vector_score("Milvus", -1.0) == 0.0
    assert normalize_vector_score("faiss+bm25s", 0.4) == 0.4
    assert normalize_vector_score("something-new", 1.3) == 1.0
    one = [RetrieveResult([hit("a", -0.5)], "faiss+bm25s", "vector")]
    assert normalize_engine_scores(one)[0].hits[0].score == -0.5  # one engine type: untouched
    two = [
        RetrieveResult([hit("a", -0.5)], "faiss+bm25s", "vector"),
        RetrieveResult([hit("b", 0.2)], "milvus", "vector"),
        RetrieveResult([hit("c", 9.0, 1)], "milvus", "keywords"),
    ]
    out = normalize_engine_scores(two)
    assert [r.hits[0].score for r in out] == [0.0, 0.6, 9.0]  # keyword scores never normalised


def test_normalize_rrf_requires_positive_weights():
    with pytest.raises(ValueError, match="maximum score of 0"):
        normalize_rrf_scores([hit("a", 0.1)], 60, 0, 0)
    assert rrf_max_score(60, 0.7, 0.3) == pytest.approx(1 / 61)


# -- properties ------------------------------------------------------------------------------
chunk_ids = st.sampled_from([f"c{i}" for i in range(12)])
hit_lists = st.lists(st.tuples(chunk_ids, st.floats(-1, 10, allow_nan=False)), max_size=25).map(
    lambda xs: [hit(c, s) for c, s in xs]
)


@settings(max_examples=300)
@given(hits=hit_lists)
def test_dedup_by_score_properties(hits):
    out = dedup_by_score(hits)
    ids = [h.chunk_id for h in out]
    assert len(ids) == len(set(ids)) and set(ids) == {h.chunk_id for h in hits}
    for h in out:
        assert h.score == max(x.score for x in hits if x.chunk_id == h.chunk_id)
    assert [(-h.score, h.chunk_id) for h in out] == sorted((-h.score, h.chunk_id) for h in out)
    # the input order never changes which chunks / scores come out, nor their order
    again = dedup_by_score(list(reversed(hits)))
    assert [(h.chunk_id, h.score) for h in again] == [(h.chunk_id, h.score) for h in out]


@settings(max_examples=300)
@given(vec=hit_lists, kw=hit_lists, k=st.integers(1, 200), wv=st.floats(0.01, 1), wk=st.floats(0.01, 1))
def test_weighted_rrf_properties(vec, kw, k, wv, wk):
    raw = weighted_rrf(vec, kw, k, wv, wk)
    norm = normalize_rrf_scores(raw, k, wv, wk)
    # normalising in the same pass (fuse_hits' path) gives the two-pass result exactly
    assert weighted_rrf(vec, kw, k, wv, wk, normalize=True) == norm
    if vec and kw:
        assert fuse_hits(vec, kw, k, wv, wk) == norm
    assert {h.chunk_id for h in raw} == {h.chunk_id for h in vec} | {h.chunk_id for h in kw}
    assert [h.chunk_id for h in norm] == [h.chunk_id for h in raw]  # normalising keeps the order
    for h in norm:
        assert 0.0 < h.score <= 1.0
    rv = {}
    for i, h in enumerate(vec, 1):
        rv.setdefault(h.chunk_id, i)
    rk = {}
    for i, h in enumerate(kw, 1):
        rk.setdefault(h.chunk_id, i)
    for h in raw:
        expected = (wv / (k + rv[h.chunk_id]) if h.chunk_id in rv else 0) + (
            wk / (k + rk[h.chunk_id]) if h.chunk_id in rk else 0
        )
        assert h.score == pytest.approx(expected, rel=1e-12)
    # first in both lists ⇒ normalised score exactly 1
    if vec and kw and vec[0].chunk_id == kw[0].chunk_id:
        top = next(h for h in norm if h.chunk_id == vec[0].chunk_id)
        assert top.score == pytest.approx(1.0, abs=1e-12)


def _reference_rrf(vec, kw, k, wv, wk):
    """Weighted RRF by the spec's words (§5.12), written for clarity: first ranks, the best vector
    hit (else the first keyword hit) as a chunk's representative, order by (-score, chunk, id)."""
    from dataclasses import replace

    rank_v = {h.chunk_id: i for i, h in reversed(list(enumerate(vec, 1)))}
    rank_k = {h.chunk_id: i for i, h in reversed(list(enumerate(kw, 1)))}
    rep = {}
    for h in vec:
        if h.chunk_id not in rep or h.score > rep[h.chunk_id].score:
            rep[h.chunk_id] = h
    for h in kw:
        rep.setdefault(h.chunk_id, h)
    scored = [
        (
            (wv / (k + rank_v[c]) if c in rank_v else 0.0) + (wk / (k + rank_k[c]) if c in rank_k else 0.0),
            h,
        )
        for c, h in rep.items()
    ]
    scored.sort(key=lambda x: (-x[0], x[1].chunk_id, x[1].id))
    return [replace(h, score=s) for s, h in scored]


@settings(max_examples=300)
@given(
    vec=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), st.floats(-1, 1)), max_size=25),
    kw=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), st.floats(0, 10)), max_size=25),
    k=st.integers(1, 200),
    wv=st.floats(0.01, 3),
    wk=st.floats(0.01, 3),
)
def test_weighted_rrf_equals_the_reference(vec, kw, k, wv, wk):
    """Every field of every fused hit, in order, ties included (two entries per chunk, equal scores)."""
    v = [hit(c, s, 0, entry=f"{c}#{e}") for c, e, s in vec]
    w = [hit(c, s, 1, entry=f"{c}#{e}") for c, e, s in kw]
    assert weighted_rrf(v, w, k, wv, wk) == _reference_rrf(v, w, k, wv, wk)


tied_scores = st.sampled_from([0.0, 0.25, 0.5, 0.5, 1.0]) | st.floats(-1, 10, allow_nan=False)


@settings(max_examples=300)
@given(
    vec=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), tied_scores), max_size=25),
    kw=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), tied_scores), max_size=25),
    k=st.sampled_from([1, 60]) | st.integers(1, 200),
    wv=st.sampled_from([0.3, 0.7]) | st.floats(0.01, 3),
    wk=st.sampled_from([0.3, 0.7]) | st.floats(0.01, 3),
    normalize=st.booleans(),
)
def test_fuse_ranked_pairs_are_the_input_hits_with_the_reference_scores(vec, kw, k, wv, wk, normalize):
    """The pair form: the input hit objects themselves (never copied, never changed) with the
    reference fusion's scores, in its order, duplicates and tied scores included; the list form
    is the same hits with those scores."""
    v = [hit(c, s, 0, entry=f"{c}#{e}") for c, e, s in vec]
    w = [hit(c, s, 1, entry=f"{c}#{e}") for c, e, s in kw]
    before = [(h.id, h.score) for h in v + w]
    ranked = fuse_ranked(v, w, k, wv, wk, normalize)
    if v and w:
        ref = _reference_rrf(v, w, k, wv, wk)
        if normalize:
            ref = normalize_rrf_scores(ref, k, wv, wk)
    else:
        ref = dedup_by_score(v or w)
    assert [(h.chunk_id, h.id, h.match_type, s) for h, s in ranked] == [
        (r.chunk_id, r.id, r.match_type, r.score) for r in ref
    ]
    assert all(any(h is x for x in v + w) for h, _ in ranked)
    assert ranked_hits(ranked) == ref == fuse_hits(v, w, k, wv, wk, normalize)
    assert [(h.id, h.score) for h in v + w] == before


def _rows_of(hits, made):
    """``hits`` as HitRows whose rows hold each hit; ``made`` collects the hits made."""
    return HitRows([(h.chunk_id, h.score, h.id, h) for h in hits], lambda row: made.append(row[3]) or row[3])


@settings(max_examples=300)
@given(
    vec=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), tied_scores), max_size=25),
    kw=st.lists(st.tuples(chunk_ids, st.sampled_from(["a", "b"]), tied_scores), max_size=25),
    normalize=st.booleans(),
    cut=st.integers(0, 30),
)
def test_fusing_hit_rows_makes_only_the_hits_read(vec, kw, normalize, cut):
    """HitRows fuse as the hits they hold (same pairs, same order, duplicates and ties
    included), and reading the first ``cut`` pairs makes only those pairs' hits, once each."""
    v = [hit(c, s, 0, entry=f"{c}#{e}") for c, e, s in vec]
    w = [hit(c, s, 1, entry=f"{c}#{e}") for c, e, s in kw]
    made: list[IndexWithScore] = []
    rows_v, rows_w = _rows_of(v, made), _rows_of(w, made)
    ranked = fuse_ranked(rows_v, rows_w, 60, 0.7, 0.3, normalize)
    assert made == []  # fusing reads the rows only
    top = ranked[:cut]
    assert sorted(map(id, made)) == sorted({id(h) for h, _ in top})
    assert top == fuse_ranked(v, w, 60, 0.7, 0.3, normalize)[:cut]
    assert list(ranked) == list(fuse_ranked(v, w, 60, 0.7, 0.3, normalize))
    assert dedup_by_score(rows_v) == dedup_by_score(v) and dedup_by_score(iter(v)) == dedup_by_score(v)


def test_hit_rows_are_a_sequence_of_hits_made_once():
    hits = [hit("a", 0.5), hit("b", 0.4), hit("c", 0.3)]
    made: list[IndexWithScore] = []
    rows = _rows_of(hits, made)
    assert len(rows) == 3 and made == []
    assert rows[-1] is hits[2] and rows[0] is hits[0] and rows[0] is hits[0]
    assert made == [hits[2], hits[0]]  # each made once, when first read
    assert rows[1:] == hits[1:] and list(rows) == hits and list(reversed(rows)) == hits[::-1]
    assert made == [hits[2], hits[0], hits[1]] and hits[1] in rows and rows.index(hits[2]) == 2
    with pytest.raises(IndexError):
        rows[3]
    assert "HitRows([" in repr(rows)


def test_rescored_copies_every_field():
    from dataclasses import asdict

    from rag_lab.retrieval.fusion import rescored

    h = IndexWithScore("e", "text", "c", "k", "kb", 0.5, 1, "src", "faq", "tag", False)
    out = rescored(h, 0.25)
    assert asdict(out) == {**asdict(h), "score": 0.25} and out is not h and h.score == 0.5


# -- what mutation testing found untested (scripts/mutation.py run fusion) ----------------------


def test_weights_fall_back_one_by_one_at_exactly_zero_or_one():
    assert resolve_rrf_weights(0, 0.9) == (0.7, 0.9)  # only the unset one falls back
    assert resolve_rrf_weights(0, 1.0) == (0.7, 1.0)
    assert resolve_rrf_weights(1.0, 0) == (1.0, 0.3)
    assert resolve_rrf_weights(0.0, -0.5) == (0.7, 0.3)


def test_rrf_k_must_be_positive_and_the_error_says_so():
    with pytest.raises(ValueError, match=r"^rrf k=0 must be > 0$"):
        weighted_rrf([hit("a", 0.9)], [hit("a", 3.0, 1)], 0)
    with pytest.raises(ValueError, match=r"give a maximum score of 0$"):
        normalize_rrf_scores([hit("a", 0.1)], 60, 0, 0)


def test_normalised_rrf_scores_are_capped_at_1():
    """A score above the best attainable (a hit fused elsewhere) normalises to 1, not beyond."""
    top = rrf_max_score(60, 0.7, 0.3)
    out = normalize_rrf_scores([hit("a", 3 * top), hit("b", top / 2)], 60, 0.7, 0.3)
    assert [h.score for h in out] == [1.0, pytest.approx(0.5)]


def test_engine_score_normalisation_goes_on_after_a_keyword_result():
    two = [
        RetrieveResult([hit("c", 9.0, 1)], "milvus", "keywords"),
        RetrieveResult([hit("a", -0.5)], "faiss+bm25s", "vector"),
        RetrieveResult([hit("b", 0.2)], "milvus", "vector"),
    ]
    assert [r.hits[0].score for r in normalize_engine_scores(two)] == [9.0, 0.0, 0.6]


def test_ranked_reads_each_hit_from_its_own_list():
    """Positions below len(vector hits) read the vector list, the others the keyword list."""
    vec = [hit("A", 0.9), hit("B", 0.8)]
    kw = [hit("C", 9.0, 1), hit("A", 5.0, 1)]
    ranked = rrf_ranked(vec, kw, 60, 0.7, 0.3)
    assert ranked.positions == [0, 1, 2]  # A (vector rank 1 + keyword rank 2), B, C (keyword hit 0)
    assert [(h.chunk_id, h.match_type) for h, _ in ranked] == [("A", 0), ("B", 0), ("C", 1)]
    assert ranked[2] == (kw[0], pytest.approx(0.3 / 61)) and ranked[-1][0] is kw[0]
    assert ranked[0] == (vec[0], pytest.approx(0.7 / 61 + 0.3 / 62))
    assert ranked[1:] == [(vec[1], ranked.scores[1]), (kw[0], ranked.scores[2])]
    assert ranked.hits(2) == [vec[0], vec[1]]
    kept = Ranked.of([kw[1], vec[1]])
    assert list(kept) == [(kw[1], 5.0), (vec[1], 0.8)] and kept[1] == (vec[1], 0.8)


def test_equal_scores_are_ordered_by_chunk_id_not_by_entry_id():
    hits = [hit("b", 0.5, entry="a-entry"), hit("a", 0.5, entry="z-entry"), hit("b", 0.5, entry="0-entry")]
    out = dedup_by_score(hits)
    assert [(h.chunk_id, h.id) for h in out] == [("a", "z-entry"), ("b", "a-entry")]  # b's first hit kept


def test_the_list_forms_carry_their_own_names_and_point_at_their_ranked_form():
    assert (fuse_hits.__name__, weighted_rrf.__name__) == ("fuse_hits", "weighted_rrf")
    assert fuse_hits.__qualname__ == "fuse_hits"
    assert fuse_hits.__doc__.startswith(":func:`fuse_ranked` as hits") and ">>> " in fuse_hits.__doc__
    assert weighted_rrf.__doc__ == ":func:`rrf_ranked` as hits (:func:`ranked_hits`)."
