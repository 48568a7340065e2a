"""diff(): chunks added / dropped / moved with score deltas, rewritten fields, DataFrame and HTML."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.lab.diff import diff, diff_lists
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.search_result import SearchResult
from tests.lab.data.make_capture import QUESTION, build_lab


def _r(cid: str, score: float, text: str = "", title: str = "") -> SearchResult:
    return SearchResult(id=cid, score=score, content=text or f"text of {cid}", knowledge_title=title)


def _chat(search=(), rerank=(), merge=(), **state) -> ChatManage:
    c = ChatManage()
    c.state.search_result = list(search)
    c.state.rerank_result = list(rerank)
    c.state.merge_result = list(merge)
    for k, v in state.items():
        setattr(c.state, k, v)
    return c


def test_added_dropped_moved_and_score_deltas():
    a = _chat(search=[_r("A", 0.9), _r("B", 0.8), _r("C", 0.7), _r("D", 0.6)])
    b = _chat(search=[_r("A", 0.9), _r("C", 0.75), _r("D", 0.6), _r("B", 0.5), _r("E", 0.4)])
    d = diff(a, b)
    rows = {c.id: c for c in d.chunks if c.list == "search_result"}
    assert (rows["A"].status, rows["A"].rank_a, rows["A"].rank_b, rows["A"].score_delta) == ("same", 1, 1, 0.0)
    assert (rows["B"].status, rows["B"].rank_a, rows["B"].rank_b) == ("moved", 2, 4)
    assert rows["B"].rank_delta == -2 and rows["B"].score_delta == pytest.approx(-0.3)
    assert (rows["C"].status, rows["C"].rank_delta, rows["C"].score_delta) == ("same", 1, pytest.approx(0.05))
    assert (rows["E"].status, rows["E"].rank_a, rows["E"].rank_b, rows["E"].score_a) == ("added", None, 5, None)
    assert d.added() == ["E"] and d.dropped() == [] and d.moved("search_result") == ["B"]
    assert d.summary()["search_result"] == {
        "added": 1,
        "dropped": 0,
        "moved": 1,
        "same": 3,
        "rescored": 2,
        "text_changed": 0,
    }
    assert d.summary()["rerank_result"]["same"] == 0 and not d.is_empty
    back = diff(b, a)
    assert back.dropped() == ["E"] and back.added() == []


def test_an_insertion_at_the_top_moves_nothing():
    a = _chat(rerank=[_r("A", 0.9), _r("B", 0.8)])
    b = _chat(rerank=[_r("Z", 0.95), _r("A", 0.9), _r("B", 0.8)])
    d = diff(a, b, lists=["rerank_result"])
    assert [(c.id, c.status, c.rank_a, c.rank_b) for c in d.chunks] == [
        ("Z", "added", None, 1),
        ("A", "same", 1, 2),
        ("B", "same", 2, 3),
    ]
    assert d.lists == ["rerank_result"]


def test_repeated_ids_match_occurrence_by_occurrence():
    d = diff_lists([_r("A", 0.9), _r("A", 0.5), _r("B", 0.4)], [_r("A", 0.9), _r("B", 0.4)], "merge_result")
    assert [(c.id, c.occurrence, c.status, c.rank_a) for c in d] == [
        ("A", 0, "same", 1),
        ("B", 0, "same", 3),
        ("A", 1, "dropped", 2),
    ]


def test_rewritten_fields_and_text_changes():
    ctx_a = "<document>\nalpha\nbeta\n</document>"
    ctx_b = "<document>\nalpha\ngamma\n</document>"
    a = _chat(merge=[_r("A", 0.9, "short")], rewrite_query="who built it", intent="", rendered_contexts=ctx_a)
    b = _chat(
        merge=[_r("A", 0.9, "short, then expanded")],
        rewrite_query="who built the lighthouse",
        intent="kb_search",
        rendered_contexts=ctx_b,
        user_content="Q?",
    )
    b.state.diagnostics["rerank"] = {"outcome": "ok"}
    d = diff(a, b)
    assert d.changed_fields == [
        "state.rewrite_query",
        "state.intent",
        "state.user_content",
        "state.rendered_contexts",
        "state.diagnostics.rerank",
    ]
    assert d.field_change("state.rewrite_query").before == "who built it"
    assert d.field_change("state.rewrite_query").after == "who built the lighthouse"
    assert d.field_change("state.diagnostics.rerank").after == {"outcome": "ok"}
    (chunk,) = [c for c in d.chunks if c.list == "merge_result"]
    assert chunk.status == "same" and chunk.content_changed and d.summary()["merge_result"]["text_changed"] == 1
    html = d.to_html()
    assert "<code>state.rendered_contexts</code>" in html
    assert "-beta" in html and "+gamma" in html  # a line diff for multi-line text
    assert d._repr_html_() == html
    text = str(d)
    assert "= A #1 score 0.9000 text changed" in text and "~ state.intent:  → kb_search" in text


def test_params_changes_are_reported_per_field():
    from rag_lab.types.params import PipelineParams

    a, b = _chat(), _chat()
    b.request.params = PipelineParams().with_changes(mmr_lambda=0.2, rerank_threshold=0.5)
    b.request.rerank_threshold = 0.5
    d = diff(a, b)
    assert d.changed_fields == [
        "request.rerank_threshold",
        "request.params.rerank_threshold",
        "request.params.mmr_lambda",
    ]
    assert (d.field_change("request.params.mmr_lambda").before, d.field_change("request.params.mmr_lambda").after) == (
        0.7,
        0.2,
    )


def test_identical_snapshots_and_dict_views():
    a = _chat(search=[_r("A", 0.9)], rewrite_query="q")
    d = diff(a, a.snapshot())
    assert d.is_empty and d.fields == [] and d.summary()["search_result"]["same"] == 1
    assert diff(a.to_dict(), a).is_empty
    with pytest.raises(TypeError, match="expected a ChatManage snapshot"):
        diff("a", a)
    with pytest.raises(ValueError, match="unknown result list 'results'"):
        diff(a, a, lists=["results"])


def test_frame_and_html_escape():
    a = _chat(search=[_r("<script>x</script>", 0.9, title="T & <b>")])
    b = _chat()
    d = diff(a, b, fields=False)
    df = d.frame()
    assert list(df.columns) == [
        "list",
        "id",
        "status",
        "rank_a",
        "rank_b",
        "rank_delta",
        "score_a",
        "score_b",
        "score_delta",
        "content_changed",
        "title",
    ]
    assert df.iloc[0]["status"] == "dropped" and df.iloc[0]["rank_a"] == 1
    html = d.to_html()
    assert "<script>x</script>" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    assert d.fields_frame().empty


def test_cross_list_diff_of_one_run(tmp_path, docs_dir):
    lab = build_lab(tmp_path / "ws", docs_dir)
    try:
        loose = lab.ask(QUESTION, kb="demo", params={"rerank_threshold": 0.1})
        strict = lab.ask(QUESTION, kb="demo", params={"rerank_threshold": 0.3})
    finally:
        lab.workspace.close()
    # same stage, two runs: the stricter threshold drops the volcano chunk from the rerank result
    d = diff(loose.state("chunk_rerank"), strict.state("chunk_rerank"), labels=("t=0.1", "t=0.3"))
    assert [c.split(":")[1] for c in d.dropped("rerank_result")] == ["volcano.html#c0"]
    assert d.added("rerank_result") == [] and d.dropped("search_result") == []
    assert d.field_change("request.params.rerank_threshold").after == 0.3
    assert d.field_change("request.rerank_threshold").before == 0.1
    assert "t=0.1 → t=0.3" in d.to_html()
    # one run, two stages: what rerank + merge did to the searched chunks
    d2 = diff(
        loose.state("chunk_search_parallel"), loose.state("chunk_merge"), lists=[("search_result", "merge_result")]
    )
    assert d2.lists == ["search_result→merge_result"]
    assert sorted(c.split(":")[1] for c in d2.dropped()) == ["lighthouse.md#c1", "lighthouse.md#c2"]
    kept = {c.id.split(":")[1]: c for c in d2.chunks if c.status != "dropped"}
    assert kept["lighthouse.md#c0"].content_changed and kept["volcano.html#c0"].rank_b == 2


def _lcs(x: list[str], y: list[str]) -> int:
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i in range(len(x)):
        for j in range(len(y)):
            table[i + 1][j + 1] = table[i][j] + 1 if x[i] == y[j] else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


_ids = st.lists(st.sampled_from("ABCDEFGHIJ"), unique=True, max_size=10)


@given(a=_ids, b=_ids)
def test_diff_properties(a, b):
    ra = [_r(x, 1.0 - i / 20) for i, x in enumerate(a)]
    rb = [_r(x, 0.9 - i / 30) for i, x in enumerate(b)]
    changes = diff_lists(ra, rb)
    assert {c.id for c in changes if c.status == "added"} == set(b) - set(a)
    assert {c.id for c in changes if c.status == "dropped"} == set(a) - set(b)
    # ranks point back into the lists
    for c in changes:
        if c.rank_a is not None:
            assert a[c.rank_a - 1] == c.id
        if c.rank_b is not None:
            assert b[c.rank_b - 1] == c.id
    # non-dropped chunks come out in b's order
    assert [c.id for c in changes if c.status != "dropped"] == b
    # the chunks left in place form a longest common subsequence of the shared order
    same = [c.id for c in changes if c.status == "same"]
    assert len(same) == _lcs([x for x in a if x in b], [x for x in b if x in a])
    assert [x for x in a if x in same] == [x for x in b if x in same]
    swapped = diff_lists(rb, ra)
    assert {c.id for c in swapped if c.status == "added"} == {c.id for c in changes if c.status == "dropped"}


def test_changes_show_the_values_that_differ_not_the_whole_json():
    from rag_lab.lab.diff import FieldChange, SnapshotDiff
    from rag_lab.lab.diff.model import leaf_changes

    before = {"mmr_lambda": 0.7, "rows": [{"id": "a", "s": 0.5}, {"id": "b", "s": 0.4}], "k": 4}
    after = {"mmr_lambda": 1.0, "rows": [{"id": "a", "s": 0.5}, {"id": "b", "s": 0.45}], "k": 4, "new": True}
    assert leaf_changes("x", before, after) == [
        ("x.mmr_lambda", 0.7, 1.0),
        ("x.new", "—", True),
        ("x.rows[1].s", 0.4, 0.45),
    ]
    assert leaf_changes("x", [1, 2], [1, 2, 3]) == [("x", [1, 2], [1, 2, 3])]  # lengths differ: one leaf
    assert leaf_changes("x", before, dict(before)) == []
    a = _chat(search=[_r("kb:A", 0.9), _r("kb:B", 0.8)])
    b = _chat(search=[_r("kb:B", 0.85), _r("kb:C", 0.2)])
    d = diff(a, b)
    d = SnapshotDiff(d.chunks, [FieldChange("state.diagnostics.rerank", before, after)], d.lists, "a", "b")
    rows = d.changes()
    assert rows.to_dict("records") == [
        {"change": "rescored", "what": "search_result: B", "before": "#2 (0.8000)", "after": "#1 (0.8500)"},
        {"change": "added", "what": "search_result: C", "before": "", "after": "#2 (0.2000)"},
        {"change": "dropped", "what": "search_result: A", "before": "#1 (0.9000)", "after": ""},
        {"change": "field", "what": "state.diagnostics.rerank.mmr_lambda", "before": 0.7, "after": 1.0},
        {"change": "field", "what": "state.diagnostics.rerank.new", "before": "—", "after": True},
        {"change": "field", "what": "state.diagnostics.rerank.rows[1].s", "before": 0.4, "after": 0.45},
    ]
    html = d.to_html()
    assert "rows[1].s" in html and '"id": "a"' not in html  # the leaves, not the JSON of the rows
    assert len(d.changes(max_leaves=1)) == 3 + 2  # one leaf, then "2 more"


def test_a_dict_that_appears_shows_its_keys():
    from rag_lab.lab.diff.model import leaf_changes

    assert leaf_changes("d", None, {"after": 4, "cut": ["a"]}) == [("d.after", "—", 4), ("d.cut", "—", ["a"])]
    assert leaf_changes("d", {"k": 1}, None) == [("d.k", 1, "—")]
