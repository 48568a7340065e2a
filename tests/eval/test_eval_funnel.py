"""The gold funnel: per-question traces built from the stages' records (a hand-built question with
known ranks at every stage), stage recall against pytrec_eval, the funnel from captures equal to the
funnel from the pipeline, the pure aggregation functions, and the funnel metrics in metric
definitions, reports, sweeps and the gate."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.funnel import (
    funnel_metric_names,
    funnel_section,
    lost_passages,
    parse_funnel_metric,
    question_value,
    stage_recall,
)
from rag_lab.eval.metric_defs import metric
from rag_lab.eval.records import QueryRecord
from rag_lab.tuning.funnel import CHAIN, STAGES, build_funnel, doc_ranks
from rag_lab.types.diagnostics import FilterTopKDiagnostics, MergeDiagnostics, RerankDiagnostics, SearchDiagnostics
from rag_lab.types.search_result import SearchResult


# --------------------------------------------------------------------------- a hand-built question
def _row(cid: str, doc: str, base: float, model: float | None, final: float | None, selected: bool) -> dict[str, Any]:
    return {
        "id": cid,
        "knowledge_id": doc,
        "base_score": base,
        "model_score": model,
        "composite_score": final,
        "final_score": final,
        "passed_threshold": final is not None,
        "kept_by": "",
        "selected": selected,
    }


def _hand_built() -> tuple[dict[str, Any], list[SearchResult]]:
    """Docs: A kept at rank 1; B dropped by the threshold; C has two chunks, c1 merged into c0; D cut
    by FILTER_TOP_K; E beyond the match count (3); F nowhere. Document G (not gold) fills ranks."""
    vector = [["a0", "A", 0.9], ["g0", "G", 0.8], ["c1", "C", 0.7], ["e0", "E", 0.2]]
    keyword = [["b0", "B", 5.0], ["a0", "A", 4.0], ["c0", "C", 3.0], ["d0", "D", 2.0]]
    fused = [["a0", "A", 1.0], ["b0", "B", 0.9], ["c0", "C", 0.8], ["d0", "D", 0.7], ["c1", "C", 0.6], ["e0", "E", 0.1]]
    search = SearchDiagnostics(
        calls=[{"kb": "kb", "match_count": 5, "vector": vector, "keyword": keyword, "fused": fused}],
        results=[h for h in fused[:5]],
    )
    rows = [
        _row("a0", "A", 1.0, 0.9, 0.95, True),
        _row("b0", "B", 0.9, 0.1, None, False),
        _row("c0", "C", 0.8, 0.7, 0.75, True),
        _row("d0", "D", 0.7, 0.6, 0.65, True),
        _row("c1", "C", 0.6, 0.5, 0.55, True),
    ]
    rerank = RerankDiagnostics(
        outcome="ok",
        threshold=0.3,
        threshold_used=0.3,
        mmr_k=4,
        ranked_ids=["a0", "c0", "d0", "c1"],
        rows=rows,
        mmr=[{"step": 0, "index": 0}, {"step": 1, "index": 1}, {"step": 2, "index": 3}, {"step": 3, "index": 2}],
    )
    merge = MergeDiagnostics(
        steps=[
            {"step": "input", "source": "rerank_result", "ids": ["a0", "c0", "c1", "d0"]},
            {"step": "merge", "into": "c0", "id": "c1", "action": "join"},
            {"step": "expand", "id": "a0", "prev": [], "next": ["a1"], "length": 90},
        ]
    )
    top = FilterTopKDiagnostics(field="merge_result", before=3, after=2, cut_ids=["d0"], cut_doc_ids=["D"])
    refs = [SearchResult(id="a0", knowledge_id="A", score=0.95), SearchResult(id="c0", knowledge_id="C", score=0.75)]
    return {"search": search, "rerank": rerank, "merge": merge, "filter_top_k": top}, refs


def test_the_funnel_of_a_hand_built_question_is_exact() -> None:
    diags, refs = _hand_built()
    f = build_funnel(diags, refs, ["A", "B", "C", "D", "E", "F"])
    assert f.stages == {
        "vector": ["A", "G", "C", "E"],
        "keyword": ["B", "A", "C", "D"],
        "fused": ["A", "B", "C", "D", "E"],
        "search": ["A", "B", "C", "D"],
        "rerank": ["A", "C", "D"],
        "mmr": ["A", "C", "D"],
        "merge": ["A", "C", "D"],
        "final": ["A", "C"],
    }
    by = {g.id: g for g in f.gold}
    assert by["A"].ranks == {s: 1 for s in STAGES} | {"keyword": 2}
    assert (by["A"].lost_at, by["A"].why) == ("", "")
    assert by["A"].detail["merge"] == {"expanded": True, "chunk": "a0"}
    assert by["A"].detail["mmr"] == {"pick": 1}

    b = by["B"]
    assert b.ranks == {"vector": None, "keyword": 1, "fused": 2, "search": 2, "rerank": None, "mmr": None,
                       "merge": None, "final": None}  # fmt: skip
    assert b.lost_at == "rerank"
    assert b.why == "model score 0.1 below the threshold 0.3"
    assert b.detail["rerank"] == {
        "chunk": "b0", "model": 0.1, "composite": None, "final": None, "passed": False, "kept_by": "",
        "threshold": 0.3, "outcome": "ok",
    }  # fmt: skip

    c = by["C"]  # two chunks: the document at its best one (vector: c1 at chunk rank 3, document rank 2 ... of G)
    assert c.ranks == {"vector": 3, "keyword": 3, "fused": 3, "search": 3, "rerank": 2, "mmr": 2, "merge": 2,
                       "final": 2}  # fmt: skip
    assert c.detail["vector"] == {"rank": 3, "chunk": "c1", "score": 0.7}
    assert c.detail["merge"] == {"merged_into": "c0", "chunk": "c1"}
    assert c.detail["mmr"] == {"pick": 2}
    assert c.lost_at == ""

    d = by["D"]
    assert (d.ranks["merge"], d.ranks["final"], d.lost_at) == (3, None, "final")
    assert d.why == "cut by FILTER_TOP_K (top 2 of 3)"
    assert d.detail["top_k"] == {"cut": True, "k": 2}
    assert d.detail["mmr"] == {"pick": 4}  # after c1, the second chunk of C

    e = by["E"]
    assert (e.ranks["vector"], e.ranks["fused"], e.ranks["search"], e.lost_at) == (4, 5, None, "search")
    assert e.detail["fused"] == {"rank": 5, "chunk": "e0", "score": 0.1, "cut": 5, "chunk_rank": 6}
    assert e.why == "cut by the match count (5) at fused rank 5"

    f_ = by["F"]
    assert all(r is None for r in f_.ranks.values())
    assert (f_.lost_at, f_.why) == ("fused", "not retrieved by the vector or the keyword search")

    rec = f.to_dict()
    assert rec["sizes"] == {s: len(v) for s, v in f.stages.items()}
    assert question_value(rec, "fused.recall@5") == pytest.approx(5 / 6)
    assert question_value(rec, "final.recall@10") == pytest.approx(2 / 6)
    assert question_value(rec, "keyword.hit@1") == 1.0
    assert question_value(rec, "vector.ar@50") == 0.0
    assert question_value(rec, "funnel.lost_at.rerank") == pytest.approx(1 / 6)
    assert question_value(rec, "funnel.kept") == pytest.approx(2 / 6)


def test_a_stage_that_did_not_run_passes_its_input_on() -> None:
    diags, refs = _hand_built()
    diags["rerank"] = RerankDiagnostics(outcome="model_error", error="boom")
    f = build_funnel(diags, refs, ["B"])
    assert f.stages["rerank"] == f.stages["mmr"] == f.stages["search"]
    assert f.gold[0].detail["rerank"] == {"outcome": "model_error"}
    assert f.gold[0].lost_at == "merge"  # in the merge's input, not in its output
    no_paths = build_funnel({}, refs, ["A"])  # a searcher that records no paths: those stages unknown
    assert list(no_paths.stages) == ["final"] and no_paths.gold[0].ranks == {"final": 1}


# --------------------------------------------------------------------------- on the real lab
@pytest.fixture(scope="module")
def lab_runs(eval_lab, small_spec, small_ds):
    """The slice's runs under a config that drops, merges and cuts (threshold 0.5, top-K 2)."""
    params = {"rerank_threshold": 0.5, "rerank_top_k": 2}
    runs = {
        q.id: eval_lab.ask(q.question, kb=small_spec.kb_name, snapshots=False, params=params) for q in small_ds.queries
    }
    return params, runs


def test_stage_recall_equals_pytrec_eval_on_the_stage_list(lab_runs, small_ds) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    _, runs = lab_runs
    checked = 0
    for q in small_ds.queries:
        f = build_funnel(runs[q.id].diagnostics, runs[q.id].references, q.gold_ids)
        rec = f.to_dict()
        assert set(f.stages) == set(STAGES)
        for stage, docs in f.stages.items():
            if not docs:
                assert question_value(rec, f"{stage}.recall@10") == 0.0
                continue
            trec = pytrec_eval.RelevanceEvaluator(
                {q.id: {g: 1 for g in q.gold_ids}}, {"recall.5,10,50", "ndcg_cut.5,10", "map"}
            ).evaluate({q.id: {d: float(len(docs) - i) for i, d in enumerate(docs)}})[q.id]
            for k in (5, 10, 50):
                assert question_value(rec, f"{stage}.recall@{k}") == pytest.approx(trec[f"recall_{k}"], abs=1e-12)
            for k in (5, 10):  # first-stage figures as the literature reports them
                assert question_value(rec, f"{stage}.ndcg@{k}") == pytest.approx(trec[f"ndcg_cut_{k}"], abs=1e-12)
            assert question_value(rec, f"{stage}.map") == pytest.approx(trec["map"], abs=1e-12)
            checked += 1
    assert checked > 50


def test_the_funnel_from_captures_equals_the_funnel_of_the_pipeline(eval_lab, lab_runs, small_spec, small_ds) -> None:
    from rag_lab.tuning import FastEvaluator
    from rag_lab.tuning.capture import CaptureQuestion, acapture_questions

    params, runs = lab_runs
    caps = asyncio.run(
        acapture_questions(eval_lab, [CaptureQuestion(q.id, q.question) for q in small_ds.queries], small_spec.kb_name)
    )
    fe = FastEvaluator(caps, eval_lab.params)
    p = fe.params_for(params)
    lost: set[str] = set()
    for q, cap in zip(small_ds.queries, caps):
        _, refs, diags = fe.trace(cap, p)
        fast = build_funnel(diags, refs, q.gold_ids).to_dict()
        slow = build_funnel(runs[q.id].diagnostics, runs[q.id].references, q.gold_ids).to_dict()
        assert fast == slow, q.id
        lost |= {g["lost_at"] for g in slow["gold"]}
    assert {"rerank", "mmr"} <= lost  # the config drops by the threshold and picks 2


def test_run_frame_funnel_shows_every_stage_of_each_gold_document(lab_runs, small_ds) -> None:
    _, runs = lab_runs
    q = small_ds.queries[0]
    df = runs[q.id].frame("funnel", gold_ids=q.gold_ids)
    assert list(df.columns[:4]) == ["gold_id", "stage", "rank", "of"]
    assert len(df) == len(set(q.gold_ids)) * len(STAGES)
    assert df["lost_here"].sum() == sum(1 for g in set(q.gold_ids) if g not in runs[q.id].retrieved_doc_ids)


# --------------------------------------------------------------------------- pure aggregation
_docs = st.sampled_from(list("ABCDEFGH"))
_hits = st.lists(st.tuples(st.sampled_from([f"c{i}" for i in range(12)]), _docs), max_size=20)


@settings(max_examples=150)
@given(hits=_hits)
def test_doc_ranks_count_each_document_once_at_its_best_chunk(hits: list[tuple[str, str]]) -> None:
    ranks = doc_ranks(hits)
    assert sorted(ranks.values()) == list(range(1, len(ranks) + 1))
    for doc, r in ranks.items():
        first = next(i for i, h in enumerate(hits) if h[1] == doc)
        assert r == len({h[1] for h in hits[:first]}) + 1 <= first + 1


_rank = st.one_of(st.none(), st.integers(1, 60))


@st.composite
def _funnels(draw: Any) -> dict[str, Any]:
    golds = draw(st.lists(_docs, max_size=5, unique=True))
    gold = []
    for g in golds:
        ranks = {s: draw(_rank) for s in STAGES}
        gold.append({"id": g, "ranks": ranks, "lost_at": draw(st.sampled_from(["", *CHAIN]))})
    return {"sizes": {s: 60 for s in STAGES}, "gold": gold}


@settings(max_examples=150)
@given(f=_funnels(), k=st.integers(1, 60))
def test_aggregates_are_ordered_and_shares_sum_to_one(f: dict[str, Any], k: int) -> None:
    for s in STAGES:
        r, h, a = (question_value(f, f"{s}.{m}@{k}") for m in ("recall", "hit", "ar"))
        if not f["gold"]:  # empty gold: no value
            assert math.isnan(r) and math.isnan(h) and math.isnan(a)
            continue
        assert a <= r <= h and 0.0 <= r <= 1.0  # ties of ranks never count twice
        assert question_value(f, f"{s}.recall@{k + 1}") >= r
    if f["gold"]:
        total = sum(question_value(f, f"funnel.lost_at.{s}") for s in CHAIN) + question_value(f, "funnel.kept")
        assert total == pytest.approx(1.0)


@given(ranks=st.lists(_rank, max_size=8), k=st.integers(1, 60))
def test_stage_recall_is_the_share_within_k(ranks: list[int | None], k: int) -> None:
    got = stage_recall(ranks, k)
    if not ranks:
        assert math.isnan(got)
    else:
        assert got * len(ranks) == pytest.approx(sum(1 for r in ranks if r is not None and r <= k))


def test_a_question_with_no_results_and_a_failed_run() -> None:
    empty = build_funnel({"search": SearchDiagnostics(calls=[{"match_count": 5, "vector": [], "keyword": [],
                                                                "fused": []}], results=[])}, [], ["A"]).to_dict()  # fmt: skip
    assert question_value(empty, "fused.hit@10") == 0.0 and question_value(empty, "funnel.lost_at.fused") == 1.0
    failed = {"error": True, "n_gold": 2}
    assert question_value(failed, "search.recall@50") == 0.0 and question_value(failed, "funnel.lost_at.fused") == 1.0
    recs = [
        QueryRecord("q1", "?", ["A"], [], funnel=empty),
        QueryRecord("q2", "?", ["A", "B"], [], error="boom", funnel=failed),
    ]
    sec = funnel_section(recs)
    assert sec is not None and sec["n_gold"] == 3 and sec["n_lost"]["fused"] == 3
    assert [r["qid"] for r in lost_passages(recs)] == ["q1", "q2", "q2"]
    assert funnel_section([QueryRecord("q", "?", ["A"], [])]) is None  # reports before the funnel


# --------------------------------------------------------------------------- names everywhere
def test_funnel_metric_names_resolve_with_direction() -> None:
    for name in funnel_metric_names():
        m = metric(name)
        assert m.family == "funnel" and m.bounds == (0.0, 1.0)
    assert metric("search.recall@50").k == 50 and metric("fused.hit@10").higher_is_better
    assert not metric("funnel.lost_at.rerank").higher_is_better
    assert parse_funnel_metric("nowhere.recall@5") is None and parse_funnel_metric("funnel.lost_at.vector") is None
    from rag_lab.eval.sweep.specs import objective_direction

    assert objective_direction("search.recall@50") == "maximize"
    assert objective_direction("funnel.lost_at.rerank") == "minimize"


def test_reports_carry_the_funnel_and_the_gate_reads_its_metrics(eval_lab, small_spec, tmp_path) -> None:
    from rag_lab.eval.gate import GatePolicy, compare_reports
    from rag_lab.eval.report import load_report
    from rag_lab.eval.runner import evaluate_suites
    from rag_lab.lab.outputs import write_report

    rep = asyncio.run(evaluate_suites(eval_lab, [small_spec], progress=False))
    paths = write_report(rep, tmp_path, "r", formats=["json", "md", "html"])
    back = load_report(paths["json"])  # validated against the schema
    suite = back.suites[0]
    assert "fused.recall@10" in suite.metric_names()
    assert suite.summary()["final.recall@10"] == pytest.approx(suite.summary()["recall@10"])
    for m in ("ndcg@10", "map"):  # the final list's nDCG and MAP are the report's
        assert suite.summary()[f"final.{m}"] == pytest.approx(suite.summary()[m]), m
    assert "vector.ndcg@10" in suite.metric_names() and "keyword.map" in suite.metric_names()
    data = rep.to_dict()["suites"][0]["funnel"]
    assert set(data["lost_at"]) == set(CHAIN) and data["stages"] == list(STAGES)
    md = paths["md"].read_text(encoding="utf-8")
    assert "### Gold funnel" in md and "| rerank |" in md and "Where the gold was lost" in md
    res = compare_reports(back, back, GatePolicy(metrics=["fused.recall@10", "funnel.lost_at.rerank"]))
    assert {c.metric for c in res.checks} >= {"fused.recall@10", "funnel.lost_at.rerank"}


def test_the_search_stage_records_the_paths_of_its_hybrid_search(eval_lab, small_spec, small_ds) -> None:
    from rag_lab.asyncutil import run_sync
    from rag_lab.pipeline.plugins.search import target_searches

    run = eval_lab.ask(small_ds.queries[1].question, kb=small_spec.kb_name)
    diag = run.diagnostics["search"]
    assert isinstance(diag, SearchDiagnostics) and len(diag.calls) == 1
    snap = run.state("chunk_search_parallel")
    req = snap.request
    ((primary, sp),) = target_searches(req, list(req.search_targets), snap.state.rewrite_query.strip())
    results, trace = run_sync(lambda: eval_lab.services.searcher.with_params(req.params).search_with_trace(primary, sp))
    call = diag.calls[0]
    assert call["vector"] == [[h.chunk_id, h.knowledge_id, h.score] for h in trace.vector_hits]
    assert call["keyword"] == [[h.chunk_id, h.knowledge_id, h.score] for h in trace.keyword_hits]
    assert call["fused"] == [[h.chunk_id, h.knowledge_id, h.score] for h in trace.fused]
    assert call["match_count"] == trace.match_count and call["vector"] and call["keyword"]
    assert diag.results == [[r.id, r.knowledge_id, r.score] for r in snap.state.search_result]
    assert SearchDiagnostics.from_dict(diag.to_dict()) == diag  # the JSON form captures store


def test_a_sweep_ranks_by_a_funnel_objective_on_both_paths(eval_lab, small_ds, small_spec, tmp_path) -> None:
    from rag_lab.eval.sweep import parse_param, run_grid

    spaces = [parse_param("rerank_threshold=0.2,0.6"), parse_param("rerank_top_k=2,5")]
    kw = dict(objective="rerank.recall@10", cache_dir=tmp_path / "cache", progress=False)
    fast = asyncio.run(run_grid(eval_lab, [(small_ds, small_spec.kb_name)], spaces, check="all", **kw))
    slow = asyncio.run(run_grid(eval_lab, [(small_ds, small_spec.kb_name)], spaces, fast=False, **kw))
    names = ["rerank.recall@10", *(f"funnel.lost_at.{s}" for s in CHAIN), "funnel.kept"]
    assert [[r[m] for m in names] for r in fast.rows] == [[r[m] for m in names] for r in slow.rows]
    assert len({r["rerank.recall@10"] for r in slow.rows}) > 1  # the threshold moves it
    assert {r["evaluated_by"] for r in fast.rows} == {"fast, checked"}


def test_the_funnel_modules_examples_run() -> None:
    import doctest

    import rag_lab.eval.funnel as funnel_mod
    import rag_lab.eval.metric_defs as defs_mod

    for mod in (funnel_mod, defs_mod):
        assert doctest.testmod(mod).failed == 0


def test_a_lab_fusion_record_under_search_is_not_read_as_paths() -> None:
    """Captures that stored fusion records (hits as dicts) under ``diagnostics["search"]`` keep
    their fusion views; the funnel does not mistake them for the stage's per-path lists."""
    from rag_lab.lab.frames.search import fusion_data
    from rag_lab.types import ChatManage
    from rag_lab.types.diagnostics import diagnostics_from_dict

    old = [
        {
            "fused": [{"chunk_id": "a0", "score": 1.0}],
            "vector": [{"chunk_id": "a0", "knowledge_id": "A", "score": 0.9}],
            "keyword": [],
        }
    ]
    diags = diagnostics_from_dict({"search": old})
    f = build_funnel(diags, [SearchResult(id="a0", knowledge_id="A", score=1.0)], ["A"])
    assert list(f.stages) == ["final"]
    chat = ChatManage()
    chat.state.diagnostics = diags
    assert fusion_data(chat) == old


def test_the_stage_cache_serves_the_search_paths(eval_lab, small_ds, small_spec, tmp_path) -> None:
    from rag_lab.eval.cache import enable_stage_cache
    from rag_lab.eval.runner import evaluate_lab

    def funnels() -> list[dict[str, Any]]:
        res = asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, progress=False))
        return [r.funnel for r in res.records]

    plain = funnels()
    handle = enable_stage_cache(eval_lab, tmp_path / "cache")
    try:
        first, again = funnels(), funnels()
        st = handle.stats()["search"]
    finally:
        handle.disable()
    assert plain == first == again
    assert st.hits >= len(small_ds.queries) and all("vector" in f["sizes"] for f in again)


def _funnel(run: Any, gold: Any) -> Any:
    from rag_lab.lab.frames.funnel import funnel_of

    return funnel_of(run, gold)


def test_the_workbench_has_a_gold_funnel_tab(lab_runs, small_ds) -> None:
    """``workbench(run, gold_ids=...)`` adds the funnel of the question's gold documents, read from
    the run (the same rows as ``run.frame("funnel")``)."""
    pytest.importorskip("ipywidgets")
    from rag_lab.lab.frames.funnel import funnel_rows
    from rag_lab.lab.widgets import workbench

    _, runs = lab_runs
    q = next(q for q in small_ds.queries if any(f.lost_at for f in _funnel(runs[q.id], q.gold_ids).gold))
    run = runs[q.id]
    tab = workbench(run, gold_ids=q.gold_ids)
    assert tab.titles[-1] == "Gold funnel"
    html_text = tab.children[-1].children[1].value
    rows = funnel_rows(run, q.gold_ids)
    assert rows and all(r["gold_id"] in html_text for r in rows)
    head = tab.children[-1].children[0].value
    lost = [r for r in rows if r["lost_here"]]
    assert ("lost:" in head) == bool(lost) and "Gold funnel" not in workbench(run).titles


def test_demoted_gold_is_counted_where_it_fell_below_the_cut() -> None:
    """Kept but pushed below rank 10: a loss the lost-at share does not show."""
    from rag_lab.eval.funnel import demoted_at, funnel_metric_names

    f = {
        "sizes": {s: 20 for s in STAGES},
        "gold": [
            {
                "id": "a",
                "ranks": {"fused": 3, "search": 3, "rerank": 14, "mmr": 14, "merge": 14, "final": 14},
                "lost_at": "",
            },
            {
                "id": "b",
                "ranks": {"fused": 2, "search": 2, "rerank": 2, "mmr": 2, "merge": 2, "final": 2},
                "lost_at": "",
            },
            {
                "id": "c",
                "ranks": {"fused": 12, "search": 12, "rerank": 15, "mmr": 15, "merge": None, "final": None},
                "lost_at": "merge",
            },
            {
                "id": "d",
                "ranks": {"fused": 10, "search": 11, "rerank": 9, "mmr": 9, "merge": 9, "final": 9},
                "lost_at": "",
            },
        ],
    }
    assert [demoted_at(g) for g in f["gold"]] == ["rerank", "", "", "search"]  # rank 10 is inside, 11 below
    assert (
        question_value(f, "funnel.demoted_at.rerank") == 0.25 and question_value(f, "funnel.demoted_at.search") == 0.25
    )
    assert question_value(f, "funnel.demoted_at.final") == 0.0 and question_value(f, "funnel.lost_at.merge") == 0.25
    assert (
        "funnel.demoted_at.rerank" in funnel_metric_names() and "funnel.demoted_at.fused" not in funnel_metric_names()
    )
