"""searchutil.dedup: ID/signature dedup and partial-overlap removal (§6.5, §6.6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.searchutil import dedup
from rag_lab.searchutil.dedup import remove_duplicate_results, remove_partial_overlaps
from rag_lab.types import SearchResult


def _both_ways(results: list[SearchResult], threshold: float) -> list[str]:
    """The ids :func:`remove_partial_overlaps` keeps, computed pair by pair (few results) and as
    arrays (many); both must agree, and the caller compares them with the reference."""
    small = [r.id for r in remove_partial_overlaps(results, threshold)] if len(results) <= dedup.SMALL_N else None
    saved = dedup.SMALL_N
    dedup.SMALL_N = 0  # every size through the arrays
    try:
        arrays = [r.id for r in remove_partial_overlaps(results, threshold)]
    finally:
        dedup.SMALL_N = saved
    assert small is None or small == arrays, (small, arrays)
    return arrays


def _r(id: str, content: str, score: float = 0.5) -> SearchResult:
    return SearchResult(id=id, content=content, score=score)


def test_remove_duplicate_results() -> None:
    rows = [
        _r("a", "Hello  World"),
        _r("a", "other text"),  # repeated ID
        _r("b", " hello\nworld "),  # same signature as "a": skipped, and its ID is not remembered
        _r("c", "   "),  # blank content is never deduplicated by signature
        _r("d", ""),
        _r("b", "a new text"),  # "b" was never kept, so this one is
    ]
    assert [(r.id, r.content) for r in remove_duplicate_results(rows)] == [
        ("a", "Hello  World"),
        ("c", "   "),
        ("d", ""),
        ("b", "a new text"),
    ]


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from(["x y", "X  y", "z", "", " "])), max_size=12))
def test_remove_duplicate_results_properties(pairs: list[tuple[str, str]]) -> None:
    rows = [_r(i, c) for i, c in pairs]
    out = remove_duplicate_results(rows)
    ids = [r.id for r in out]
    assert len(ids) == len(set(ids))
    assert all(any(o is r for r in rows) for o in out)
    assert remove_duplicate_results(out) == out


def test_remove_partial_overlaps_containment_and_scores() -> None:
    short = _r("s", "the quick brown fox", 0.5)
    long_ = _r("l", "The quick brown fox jumps over the lazy dog", 0.4)
    # The short one is contained; its score is strictly higher, so the long one goes.
    assert [r.id for r in remove_partial_overlaps([short, long_])] == ["s"]
    short.score = 0.4  # equal scores: the short one goes
    assert [r.id for r in remove_partial_overlaps([short, long_])] == ["l"]
    assert remove_partial_overlaps([short]) == [short]
    assert remove_partial_overlaps([]) == []


def test_remove_partial_overlaps_token_ratio_threshold() -> None:
    a = _r("a", "w1 w2 w3 w4 w5 w6 w7", 0.5)
    b = _r("b", "w7 w6 w5 w4 w3 w2 x1 extra", 0.5)  # 6/7 = 0.857 of a's tokens
    assert [r.id for r in remove_partial_overlaps([a, b])] == ["b"]
    assert [r.id for r in remove_partial_overlaps([a, b], threshold=0.9)] == ["a", "b"]
    c = _r("c", "w7 w6 w5 w4 w3 x1 x2 extra", 0.5)  # 5/7 = 0.714
    assert [r.id for r in remove_partial_overlaps([a, c])] == ["a", "c"]


def test_remove_partial_overlaps_keeps_upstream_quirk() -> None:
    # x is contained in y and loses to it, yet x still knocks out z afterwards (§6.6 quirk):
    # z overlaps x fully (7/7 of x's tokens) and x has the higher score, so the long z goes.
    x = _r("x", "a1 b1 c1 d1 e1 f1 g1", 0.8)
    y = _r("y", "a1 b1 c1 d1 e1 f1 g1 y1 y2 y3 y4", 0.9)
    z = _r("z", "g1 f1 e1 d1 c1 b1 a1 z1 z2 z3 z4 z5", 0.1)
    assert [r.id for r in remove_partial_overlaps([x, y, z])] == ["y"]
    # Without x, z survives next to y (7/11 < 0.85, not contained).
    assert [r.id for r in remove_partial_overlaps([y, z])] == ["y", "z"]


def test_remove_partial_overlaps_tie_on_bytes_makes_i_short() -> None:
    i = _r("i", "abc def", 0.5)
    j = _r("j", "ABC DEF", 0.5)  # same normalised text and byte length: i is short, i goes
    assert [r.id for r in remove_partial_overlaps([i, j])] == ["j"]


def _remove_partial_overlaps_reference(results: list[SearchResult], threshold: float) -> list[SearchResult]:
    """§6.6 written plainly with set intersections (what the cached-token version must equal)."""
    from rag_lab.searchutil.text import content_overlap_ratio, is_content_contained, normalize_content, utf8_len

    n = len(results)
    norms = [normalize_content(r.content) for r in results]
    removed = [False] * n
    for i in range(n):
        if removed[i]:
            continue
        for j in range(i + 1, n):
            if removed[j]:
                continue
            short, long_ = (j, i) if utf8_len(norms[i]) > utf8_len(norms[j]) else (i, j)
            contained = is_content_contained(norms[short], norms[long_])
            ratio = content_overlap_ratio(results[short].content, results[long_].content)
            if not contained and ratio < threshold:
                continue
            removed[long_ if results[short].score > results[long_].score else short] = True
    return [r for r, gone in zip(results, removed) if not gone]


@settings(max_examples=200)  # the first example loads jieba's dictionary
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["w1", "w2", "w3", "W1", "北京", "大学", "x", "!!", "w4 w5"]), max_size=7).map(
                " ".join
            ),
            st.sampled_from([0.1, 0.5, 0.5, 0.9]),
        ),
        max_size=16,
    ),
    st.sampled_from([0.0, 0.5, 0.85, 1.0]),
)
def test_remove_partial_overlaps_matches_the_plain_version(rows: list[tuple[str, float]], threshold: float) -> None:
    results = [_r(str(i), c, s) for i, (c, s) in enumerate(rows)]
    got = _both_ways(results, threshold)
    assert got == [r.id for r in _remove_partial_overlaps_reference(results, threshold)]


_BASE = "Hé said the Red  bridge\tat dawn, Über 北京大学 river-side tower of steel lamps"


@st.composite
def _piece(draw: st.DrawFn) -> str:
    """A slice of one text (cut inside words, so contained texts share all but their end tokens),
    re-spaced or re-cased at times, or a text of its own."""
    a = draw(st.integers(0, len(_BASE)))
    b = draw(st.integers(a, len(_BASE)))
    text = _BASE[a:b]
    style = draw(st.sampled_from(["as is", "upper", "spaced", "other"]))
    if style == "upper":
        return text.upper()
    if style == "spaced":
        return text.replace(" ", "\n  ")
    if style == "other":
        return " ".join(draw(st.lists(st.sampled_from(["lamp", "Tower", "北京", "x", "dawn,"]), max_size=5)))
    return text


@settings(max_examples=400)
@given(
    st.lists(st.tuples(_piece(), st.sampled_from([0.1, 0.5, 0.5, 0.9])), max_size=15),
    st.sampled_from([0.5, 0.85, 1.0, 2.0]),
)
def test_containment_found_as_the_plain_version_finds_it(rows: list[tuple[str, float]], threshold: float) -> None:
    """Slices of one text: containment decides most pairs (threshold 2.0: containment alone)."""
    results = [_r(str(i), c, s) for i, (c, s) in enumerate(rows)]
    got = _both_ways(results, threshold)
    assert got == [r.id for r in _remove_partial_overlaps_reference(results, threshold)]


def test_han_text_contained_though_jieba_segments_it_apart() -> None:
    """jieba cuts "实在理他说的确" into tokens the longer text never yields: containment is still
    tested (and found) for Han text, whatever the token counts say."""
    long_, short = _r("l", "他说的确实在理他说的确实在理由"), _r("s", "实在理他说的确")
    assert _both_ways([long_, short], 2.0) == ["l"]
    assert [r.id for r in _remove_partial_overlaps_reference([long_, short], 2.0)] == ["l"]
