"""Honest knobs: params that cannot change the outcome are named, impossible thresholds refused,
unknown names get a did-you-mean — in the functions, in Lab.ask, on the CLI, in sweeps and in
the widgets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.pipeline.knobs import (
    apply_overrides,
    changed_fields,
    check_score_range,
    param_warnings,
    rerank_warnings,
    sweep_warnings,
)
from rag_lab.types.params import ParamsError, PipelineParams, suggest_fields


def test_rrf_weight_zero_warns_that_it_falls_back():
    ws = param_warnings(PipelineParams(rrf_vector_weight=0.0))
    assert [w.field for w in ws] == ["rrf_vector_weight"]
    assert "falls back to 0.7" in ws[0].message and "0.01" in ws[0].message
    both = param_warnings(PipelineParams(rrf_vector_weight=0.0, rrf_keyword_weight=0.0))
    assert [w.field for w in both] == ["rrf_vector_weight", "rrf_keyword_weight"]
    assert all("both weights at 0 fall back to 0.7/0.3" in w.message for w in both)
    assert param_warnings(PipelineParams(rrf_vector_weight=0.01)) == []
    assert param_warnings(PipelineParams()) == []


def test_lambda_warns_only_when_mmr_has_nothing_to_choose():
    p = PipelineParams(mmr_lambda=0.5, rerank_top_k=10)
    few = rerank_warnings(p, {"ranked_ids": [f"c{i}" for i in range(10)]})
    assert [w.field for w in few] == ["mmr_lambda"]
    assert "10 candidate(s) passed" in few[0].message and "rerank_top_k < 10" in few[0].message
    assert rerank_warnings(p, {"ranked_ids": [f"c{i}" for i in range(11)]}) == []
    one = rerank_warnings(PipelineParams(mmr_lambda=0.5, rerank_top_k=1), {"ranked_ids": ["a", "b", "c"]})
    assert [w.field for w in one] == ["mmr_lambda"] and "rerank_top_k=1" in one[0].message
    # λ at its default was not turned: no warning
    assert rerank_warnings(PipelineParams(rerank_top_k=10), {"ranked_ids": ["a"]}) == []


def test_threshold_no_candidate_reached_is_named():
    p = PipelineParams(rerank_threshold=0.9)
    ws = rerank_warnings(p, {"outcome": "fallback_top1", "threshold_used": 0.9})
    assert [w.field for w in ws] == ["rerank_threshold"] and "top-1 fallback" in ws[0].message
    ws = rerank_warnings(p, {"outcome": "threshold_degraded", "threshold_used": 0.63})
    assert "retried at 0.63" in ws[0].message
    assert rerank_warnings(p, {"outcome": "ok"}) == []


def test_thresholds_outside_the_score_range_are_refused_with_the_range():
    with pytest.raises(ParamsError, match=r"rerank_threshold=7 is outside \[0, 1\], the score range of m"):
        check_score_range(PipelineParams(rerank_threshold=7), (0.0, 1.0), "m")
    with pytest.raises(ParamsError, match="every candidate passes it"):
        check_score_range(PipelineParams(rerank_threshold=-0.5), (0.0, 1.0), "m")
    check_score_range(PipelineParams(rerank_threshold=7), (-10.0, 10.0), "logits")  # a logit model
    check_score_range(PipelineParams(rerank_threshold=7), None)  # undeclared: not checked


@given(st.floats(-10, 10, allow_nan=False))
def test_score_range_check_is_exactly_the_interval(t):
    p = PipelineParams(rerank_threshold=t)
    if 0.0 <= t <= 1.0:
        check_score_range(p, (0.0, 1.0))
    else:
        with pytest.raises(ParamsError):
            check_score_range(p, (0.0, 1.0))


def test_did_you_mean():
    assert suggest_fields("mmr_lamda") == ["mmr_lambda"]
    assert suggest_fields("rerank_treshold")[0] == "rerank_threshold"
    with pytest.raises(
        ParamsError, match=r"--param: unknown param 'mmr_lamda' \(value 0.5\); did you mean 'mmr_lambda'\?"
    ):
        apply_overrides(PipelineParams(), {"mmr_lamda": 0.5}, source="--param")
    with pytest.raises(ParamsError, match="did you mean 'rerank_top_k'"):
        PipelineParams.from_mapping({"rerank_topk": 3}, source="lab.yaml")
    assert apply_overrides(PipelineParams(), {"mmr_lambda": 0.5}).mmr_lambda == 0.5
    assert changed_fields(PipelineParams(mmr_lambda=0.5)) == {"mmr_lambda"}


def test_changed_fields_asked_again_for_the_same_params():
    """The last answer against the defaults is kept for the same params object (a lab asks with
    its params question after question): the same sets, never one the caller could corrupt."""
    p = PipelineParams(mmr_lambda=0.5, rerank_top_k=3)
    first = changed_fields(p)
    assert first == {"mmr_lambda", "rerank_top_k"}
    first.add("corrupted")
    assert changed_fields(p) == {"mmr_lambda", "rerank_top_k"}
    assert changed_fields(PipelineParams(mmr_lambda=0.5, rerank_top_k=3)) == {"mmr_lambda", "rerank_top_k"}
    assert changed_fields(PipelineParams()) == set()
    assert changed_fields(p, PipelineParams(mmr_lambda=0.5)) == {"rerank_top_k"}
    assert changed_fields(p) == {"mmr_lambda", "rerank_top_k"}


def test_sweep_warnings_name_params_that_changed_nothing():
    rows = [
        {"config_index": 0, "mmr_lambda": 0.5, "rerank_top_k": 3},
        {"config_index": 1, "mmr_lambda": 0.9, "rerank_top_k": 3},
        {"config_index": 2, "mmr_lambda": 0.5, "rerank_top_k": 30},
        {"config_index": 3, "mmr_lambda": 0.9, "rerank_top_k": 30},
    ]
    same = {0: "a", 1: "a", 2: "b", 3: "b"}
    ws = sweep_warnings(["mmr_lambda", "rerank_top_k"], rows, same)
    assert len(ws) == 1 and ws[0].startswith("mmr_lambda: the values 0.5, 0.9 gave the same contexts")
    assert "lower rerank_top_k" in ws[0]
    # λ changed the outcome in one group: no warning
    assert sweep_warnings(["mmr_lambda", "rerank_top_k"], rows, {0: "a", 1: "c", 2: "b", 3: "b"}) == []


# -- where people meet the knobs ------------------------------------------------------------------
@pytest.fixture(scope="module")
def cli_ws(tmp_path_factory, docs_dir):
    from rag_lab.cli import main

    ws = str(tmp_path_factory.mktemp("knobs_ws"))
    assert main(["--workspace", ws, "ingest", str(docs_dir), "--kb", "demo", "--quiet"]) == 0
    return ws


def test_ask_refuses_a_threshold_outside_the_rerankers_range(cli_ws, capsys):
    from rag_lab.cli import main

    capsys.readouterr()
    assert main(["--workspace", cli_ws, "ask", "Who built it?", "--kb", "demo", "--param", "rerank_threshold=7"]) == 2
    err = capsys.readouterr().err
    assert "rerank_threshold=7 is outside [0, 1], the score range of the reranker embedding-rescorer:" in err


def test_ask_suggests_the_param_name(cli_ws, capsys):
    from rag_lab.cli import main

    capsys.readouterr()
    assert main(["--workspace", cli_ws, "ask", "q", "--kb", "demo", "--param", "mmr_lamda=0.5"]) == 2
    err = capsys.readouterr().err
    assert "--param: unknown param 'mmr_lamda' (value 0.5); did you mean 'mmr_lambda'?" in err


def test_ask_warns_when_lambda_cannot_matter(cli_ws, capsys):
    from rag_lab.cli import main

    capsys.readouterr()
    args = ["--workspace", cli_ws, "ask", "Who built the Brightwater lighthouse?", "--kb", "demo", "--quiet"]
    assert main([*args, "--param", "mmr_lambda=0.2", "--param", "rrf_keyword_weight=0"]) == 0
    err = capsys.readouterr().err
    assert "warning: mmr_lambda=0.2: no effect on this question" in err
    assert "warning: rrf_keyword_weight=0.0: a weight <= 0 falls back to 0.3" in err


def test_run_warnings_follow_the_candidates(tmp_path, docs_dir):
    """Lab.ask: with several candidates past the threshold, λ is flagged at rerank_top_k=30 (MMR
    keeps them all) and not at rerank_top_k=2 (MMR chooses)."""
    from tests.lab.data.make_capture import build_lab

    lab = build_lab(tmp_path / "ws", docs_dir)  # small chunks: several candidates reach MMR
    q = "Who built the Brightwater lighthouse?"
    try:
        keeps_all = lab.ask(q, kb="demo", params={"rerank_threshold": 0.1, "mmr_lambda": 0.2})
        n = len(keeps_all.state("chunk_rerank").state.diagnostics["rerank"]["ranked_ids"])
        assert n >= 3
        expect = f"mmr_lambda=0.2: no effect on this question: {n} candidate(s)"
        assert any(w.startswith(expect) for w in keeps_all.warnings)
        chooses = lab.ask(q, kb="demo", params={"rerank_threshold": 0.1, "mmr_lambda": 0.2, "rerank_top_k": 2})
        assert chooses.warnings == []
    finally:
        lab.workspace.close()


def test_the_widgets_say_when_a_knob_cannot_matter():
    pytest.importorskip("ipywidgets")
    from rag_lab.lab.capture import load_capture
    from rag_lab.lab.widgets import CompositeView, MMRView
    from tests.lab.data.make_capture import CAPTURE

    cap = load_capture(CAPTURE)  # 4 candidates pass, rerank_top_k 30: MMR keeps all of them
    view = MMRView(cap)
    view.slider.value = 0.2
    assert view.warnings and view.warnings[0].startswith("no effect on this question: 4 candidate(s) passed")
    assert "rag-lab-warning" in view.summary.value
    comp = CompositeView(cap)
    assert (comp.slider.min, comp.slider.max) == (0.0, 1.0)
    assert comp.warnings == []
    comp.slider.value = 0.95
    assert comp.warnings and "top-1 fallback" in comp.warnings[0]


def test_sweep_output_names_lambda_that_changed_nothing(cli_ws, tmp_path, capsys):
    """The README's own sweep shape on a tiny dataset: λ varies, the contexts do not."""
    import json

    from rag_lab.cli import main

    ds = tmp_path / "tiny"
    ds.mkdir()
    from tests.conftest import DOCS

    (ds / "corpus.jsonl").write_text(
        "".join(json.dumps({"id": n, "title": n, "text": t}) + "\n" for n, t in DOCS.items()), encoding="utf-8"
    )
    (ds / "queries.jsonl").write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "Who built the Brightwater lighthouse?",
                "answers": ["Mara Quill"],
                "gold_ids": ["lighthouse.md"],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    rc = main(
        [
            "--workspace",
            cli_ws,
            "sweep",
            "--dataset",
            str(ds),
            "--param",
            "mmr_lambda=0.5,0.9",
            "--quiet",
            "--no-cache",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert rc == 0
    cap = capsys.readouterr()
    assert "warning: mmr_lambda: the values 0.5, 0.9 gave the same contexts for every question" in cap.err
    assert "Knobs that changed nothing" in (tmp_path / "out" / "sweep.md").read_text()


def test_thresholds_that_empty_retrieval_warn_with_what_the_search_saw() -> None:
    """Issue 26: keyword_threshold=1000 with vector_threshold=0.95 retrieved nothing, silently."""
    from rag_lab.pipeline.knobs import run_warnings
    from rag_lab.types.diagnostics import SearchDiagnostics
    from rag_lab.types.params import PipelineParams

    p = PipelineParams(keyword_threshold=1000, vector_threshold=0.95)
    empty = {
        "search": SearchDiagnostics(calls=[{"kb": "k", "match_count": 30, "vector": [], "keyword": [], "fused": []}])
    }
    ws = {w.field: w.message for w in run_warnings(p, empty)}
    assert set(ws) == {"keyword_threshold", "vector_threshold"}
    assert (
        "does not apply it" in ws["keyword_threshold"] and "no keyword hit on this question" in ws["keyword_threshold"]
    )
    assert "retrieval came back empty" in ws["vector_threshold"]
    kw_only = {"search": {"calls": [{"vector": [], "keyword": [["c1", "d1", 2.5], ["c2", "d2", 1.0]]}]}}
    ws = {w.field: w.message for w in run_warnings(p, kw_only)}
    assert "the best keyword score was 2.5" in ws["keyword_threshold"]
    assert "only the 2 keyword hit(s) were retrieved" in ws["vector_threshold"]
    # a vector threshold that some hit reached, or untouched thresholds, say nothing
    some = {"search": {"calls": [{"vector": [["c1", "d1", 0.97]], "keyword": []}]}}
    assert [w.field for w in run_warnings(PipelineParams(vector_threshold=0.95), some)] == []
    assert run_warnings(PipelineParams(), empty) == []
