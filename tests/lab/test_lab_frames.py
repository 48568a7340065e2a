"""frames: search / fusion / rerank / merge / final tables, the threshold ladder and MMR re-selection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.lab.capture import Capture, load_capture
from rag_lab.lab.frames import (
    final_rows,
    frame,
    fusion_rows,
    fusion_trace,
    merge_rows,
    mmr_inputs,
    mmr_selection,
    rerank_rows,
    rerank_threshold_outcome,
    search_rows,
    short_id,
    threshold_outcome,
)
from rag_lab.reranking.composite import composite_score
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.search_result import SearchResult
from tests.lab.data.make_capture import CAPTURE, PARAMS, QUESTION, build_lab


@pytest.fixture(scope="module")
def live(tmp_path_factory, docs_dir):
    lab = build_lab(tmp_path_factory.mktemp("ws_frames"), docs_dir)
    run = lab.ask(QUESTION, kb="demo", params=PARAMS)
    yield lab, run
    lab.workspace.close()


def _id(run, name: str) -> str:
    return next(r.id for r in run.state("chunk_search_parallel").state.search_result if r.id.endswith(name))


# -- search and fusion ------------------------------------------------------------------------
def test_search_frame_with_fusion_ranks(live):
    lab, run = live
    fusion = fusion_trace(lab, run)
    assert len(fusion) == 1 and fusion[0]["fusion"] == "rrf" and fusion[0]["rrf_k"] == 60
    df = frame(run, "search", fusion=fusion)
    searched = run.state("chunk_search_parallel").state.search_result
    assert list(df["id"]) == [r.id for r in searched] and list(df["rank"]) == [1, 2, 3, 4]
    assert list(df["score"]) == [r.score for r in searched]
    # the fused list is what the search returned, in the same order
    assert [h["chunk_id"] for h in fusion[0]["fused"]] == [r.id for r in searched]
    assert list(df["vector_rank"]) == [1, 2, 3, 4] and list(df["origin"]) == ["search"] * 4
    lighthouse0 = df[df["id"] == _id(run, "lighthouse.md#c0")].iloc[0]
    assert lighthouse0["keyword_rank"] == 1 and lighthouse0["score"] == 1.0  # first in both lists
    without = search_rows(run)
    assert without[0]["vector_rank"] is None and without[0]["origin"] is None


def test_fusion_rows_recompute_the_rrf(live):
    lab, run = live
    rows = fusion_rows(run, fusion_trace(lab, run))
    k, wv, wk = 60.0, 0.7, 0.3
    top = wv / (k + 1) + wk / (k + 1)
    for r in rows:
        expect = (wv / (k + r["vector_rank"]) if r["vector_rank"] else 0.0) + (
            wk / (k + r["keyword_rank"]) if r["keyword_rank"] else 0.0
        )
        assert r["rrf_raw"] == pytest.approx(expect)
        assert r["fused_score"] == pytest.approx(expect / top)  # the searcher's normalised score
        assert r["rrf_normalized"] == pytest.approx(r["fused_score"])
        assert r["returned"] and r["in_search_result"]
    with pytest.raises(ValueError, match=r"no fusion trace for this run.*fusion_trace\(lab, run\)"):
        fusion_rows(run)


def test_fusion_rows_with_one_retriever():
    record = {
        "fusion": "dedup_vector",
        "rrf_k": 60,
        "vector_weight": 0.7,
        "keyword_weight": 0.3,
        "match_count": 1,
        "vector": [{"chunk_id": "a", "score": 0.9}, {"chunk_id": "b", "score": 0.4}],
        "keyword": [],
        "fused": [{"chunk_id": "a", "score": 0.9}, {"chunk_id": "b", "score": 0.4}],
    }
    rows = fusion_rows(ChatManage(), record)
    assert [(r["chunk_id"], r["vector_rank"], r["rrf_raw"], r["fused_rank"], r["returned"]) for r in rows] == [
        ("a", 1, None, 1, True),
        ("b", 2, None, 2, False),
    ]


# -- rerank ---------------------------------------------------------------------------------
def test_rerank_frame_score_components(live):
    _, run = live
    rows = rerank_rows(run)
    p = run.params
    searched = {r.id: r for r in run.state("chunk_search_parallel").state.search_result}
    assert [r["id"] for r in rows] == list(searched)
    for r in rows:
        res = searched[r["id"]]
        assert r["base_score"] == res.score
        assert r["model_part"] == pytest.approx(0.6 * r["model_score"])
        assert r["base_part"] == pytest.approx(0.3 * r["base_score"]) and r["source_part"] == pytest.approx(0.1)
        assert r["final_score"] == composite_score(res, r["model_score"], r["base_score"], p)
        assert r["model_part"] + r["base_part"] + r["source_part"] == pytest.approx(r["final_score"])
        assert r["composite_score"] == pytest.approx(r["final_score"], abs=5e-5)  # stored with 4 decimals
        assert r["passed_threshold"] == (r["model_score"] >= 0.1) and r["faq_factor"] == 1.0
    # MMR order follows the rerank result, and the stored step values are attached
    picked = sorted((r for r in rows if r["mmr_order"]), key=lambda r: r["mmr_order"])
    assert [r["id"] for r in picked] == [r.id for r in run.state("chunk_rerank").state.rerank_result]
    assert picked[0]["mmr_redundancy"] == 0.0 and picked[0]["mmr_value"] == pytest.approx(
        0.7 * picked[0]["final_score"]
    )
    assert sorted(r["model_rank"] for r in rows) == [1, 2, 3, 4]


def test_rerank_frame_from_a_snapshot_and_a_capture(live):
    _, run = live
    assert rerank_rows(run.state("chunk_rerank")) == rerank_rows(run)
    stored = load_capture(CAPTURE)
    assert [r["id"].split(":")[1] for r in rerank_rows(stored)] == [
        "lighthouse.md#c0",
        "lighthouse.md#c1",
        "lighthouse.md#c2",
        "volcano.html#c0",
    ]


def test_threshold_ladder_replays_the_stage(live):
    _, run = live
    rows = rerank_rows(run)
    same = rerank_threshold_outcome(run)
    assert (
        same.threshold == 0.1
        and same.outcome == run.state("chunk_rerank").state.diagnostics["rerank"]["outcome"] == "ok"
    )
    assert [rows[i]["id"] for i in same.kept] == [r["id"] for r in rows if r["passed_threshold"]]
    high = rerank_threshold_outcome(run, 0.7)
    assert [rows[i]["id"] for i in high.kept] == [_id(run, "lighthouse.md#c0")] and high.outcome == "ok"
    top1 = rerank_threshold_outcome(run, 0.95)  # nobody passes; the best alone is >= 0.15
    assert top1.outcome == "fallback_top1" and top1.kept == high.kept


def test_threshold_outcome_ladder():
    # passing scores, in candidate order
    assert threshold_outcome([0.2, 0.6, None, 0.5], 0.5, 0.15, 0.7, 0.3).kept == (1, 3)
    # nobody passes: the best alone when >= fallback_min (first max on ties)
    o = threshold_outcome([0.2, 0.4, 0.4], 0.5, 0.15, 0.7, 0.3)
    assert (o.outcome, o.kept, o.threshold_used) == ("fallback_top1", (1,), 0.5)
    # below the fallback floor: one retry at max(0.5 * 0.7, 0.3) = 0.35
    o = threshold_outcome([0.38, 0.1], 0.5, 0.4, 0.7, 0.3)
    assert (o.outcome, o.kept, o.threshold_used) == ("threshold_degraded", (0,), pytest.approx(0.35))
    o = threshold_outcome([0.2, 0.1], 0.5, 0.4, 0.7, 0.3)
    assert (o.outcome, o.kept) == ("all_below_threshold", ())
    # at or below the floor there is no retry
    o = threshold_outcome([0.2], 0.3, 0.4, 0.7, 0.3)
    assert (o.outcome, o.threshold_used) == ("all_below_threshold", 0.3)


@given(scores=st.lists(st.floats(0, 1), min_size=1, max_size=12), t=st.floats(0, 1))
def test_threshold_outcome_keeps_exactly_the_passing_scores(scores, t):
    o = threshold_outcome(scores, t, 0.15, 0.7, 0.3)
    passing = tuple(i for i, s in enumerate(scores) if s >= t)
    if passing:
        assert o.kept == passing and o.outcome == "ok"
    else:
        assert len(o.kept) <= 1 and o.outcome != "ok"


# -- MMR ----------------------------------------------------------------------------------------
def test_mmr_inputs_reproduce_the_stage(live):
    _, run = live
    inputs = mmr_inputs(run)
    assert inputs["k"] == 4 and inputs["lambda"] == 0.7 and len(inputs["tokens"]) == 4
    again = mmr_selection(inputs, 0.7)
    assert [s["id"] for s in again] == [r.id for r in run.state("chunk_rerank").state.rerank_result]
    assert [(s["index"], s["relevance"], s["redundancy"], s["mmr"]) for s in again] == [
        (s["index"], s["relevance"], s["redundancy"], s["mmr"]) for s in inputs["trace"]
    ]
    # λ = 0 is redundancy alone: the volcano chunk overtakes lighthouse c1, which repeats more of c0
    diverse = [short_id(s["id"]) for s in mmr_selection(inputs, 0.0)]
    assert diverse == ["lighthouse.md#c0", "lighthouse.md#c2", "volcano.html#c0", "lighthouse.md#c1"]
    assert [short_id(s["id"]) for s in mmr_selection(inputs, 0.7)][2:] == ["lighthouse.md#c1", "volcano.html#c0"]
    with pytest.raises(ValueError, match="outside"):
        mmr_selection(inputs, 1.5)
    stored = load_capture(CAPTURE)
    assert mmr_inputs(stored) is stored.extras["mmr_inputs"]


@given(scores=st.lists(st.floats(0, 1), min_size=1, max_size=10), data=st.data())
def test_mmr_at_lambda_one_is_relevance_order(scores, data):
    tokens = data.draw(
        st.lists(st.lists(st.sampled_from("abcdef"), max_size=4), min_size=len(scores), max_size=len(scores))
    )
    inputs = {"ids": [f"c{i}" for i in range(len(scores))], "scores": scores, "tokens": tokens, "k": len(scores)}
    picks = [s["index"] for s in mmr_selection(inputs, 1.0)]
    assert picks == sorted(range(len(scores)), key=lambda i: (-scores[i], i))


# -- merge and final ------------------------------------------------------------------------------
def test_merge_frame_from_a_run(live):
    _, run = live
    rows = {short_id(r["id"]): r for r in merge_rows(run)}
    assert set(rows) == {"lighthouse.md#c0", "lighthouse.md#c1", "lighthouse.md#c2", "volcano.html#c0"}
    c0, c1 = rows["lighthouse.md#c0"], rows["lighthouse.md#c1"]
    assert (
        c1["fate"] == "merged" and c1["merge_action"] == "extend" and short_id(c1["merged_into"]) == "lighthouse.md#c0"
    )
    assert [short_id(x) for x in c0["absorbed"]] == ["lighthouse.md#c1", "lighthouse.md#c2"]
    out = run.state("chunk_merge").state.merge_result
    assert c0["fate"] == "kept" and c0["text_out"] == out[0].content and c0["length_out"] == len(out[0].content)
    assert c0["length_in"] < c0["length_out"] and c0["text_out"].startswith(c0["text_in"])
    assert rows["volcano.html#c0"]["fate"] == "kept" and rows["volcano.html#c0"]["output_rank"] == 2


def _r(cid: str, text: str, score: float = 0.5) -> SearchResult:
    return SearchResult(id=cid, content=text, score=score, knowledge_id=cid.split("#")[0])


def test_merge_frame_fates_on_a_constructed_snapshot():
    chat = ChatManage()
    chat.state.merge_result = [_r("a#1", "alpha beta gamma", 0.9), _r("h#1", "old answer", 0.3)]
    chat.state.diagnostics["merge"] = [
        {"step": "input", "source": "rerank_result", "ids": ["a#1", "a#2", "b#1", "c#1", "c#1"]},
        {"step": "history", "id": "h#1", "action": "injected", "overlap": 0.5},
        {"step": "history", "id": "h#2", "action": "dropped", "overlap": 0.1},
        {"step": "parent", "id": "a#1", "parent": "a#p"},
        {"step": "merge", "into": "a#1", "id": "a#2", "action": "join_text"},
        {"step": "expand", "id": "a#1", "prev": ["a#0"], "next": []},
        {"step": "overlap", "id": "b#1", "action": "dropped"},
    ]
    rows = {r["id"]: r for r in merge_rows(chat)}
    assert {k: v["fate"] for k, v in rows.items()} == {
        "a#1": "kept",
        "a#2": "merged",
        "b#1": "dropped (overlap)",
        "c#1": "dropped (duplicate)",
        "h#1": "kept",
        "h#2": "dropped (history overlap)",
    }
    assert (
        rows["a#1"]["parent"] == "a#p"
        and rows["a#1"]["expanded_prev"] == ["a#0"]
        and rows["a#1"]["absorbed"] == ["a#2"]
    )
    assert rows["h#1"]["origin"] == "history" and rows["h#1"]["output_rank"] == 2
    assert rows["c#1"]["input_rank"] == 5  # the second occurrence: the dedup dropped it
    with pytest.raises(ValueError, match="no merge decisions"):
        merge_rows(ChatManage())


def test_final_frame_marks_citations(live):
    _, run = live
    df = frame(run, "final")
    assert list(df["id"]) == [r.id for r in run.references]
    assert list(df["cited"]) == [r.id in run.cited_chunk_ids for r in run.references]
    assert df.iloc[0]["cited"] and df.iloc[0]["citation"] == 1 and df.iloc[0]["sub_chunks"] == 2
    # a snapshot has no answer: citations unknown
    assert final_rows(run.state("final"))[0]["cited"] is None


def test_frame_errors(live, lab):
    _, run = live
    with pytest.raises(ValueError, match="unknown frame 'nope'; choose one of search, fusion, rerank, merge, final"):
        frame(run, "nope")
    bare = lab.ask(QUESTION, kb="demo", snapshots=False)
    with pytest.raises(KeyError, match="needs a snapshot after chunk_rerank; this run has: none"):
        frame(bare, "rerank")
    with pytest.raises(TypeError, match="expected a Run, a Capture or a ChatManage, got str"):
        frame("run", "search")
    with pytest.raises(ValueError, match="no rerank score rows"):
        rerank_rows(Capture(snapshots={"chunk_rerank": ChatManage()}))
