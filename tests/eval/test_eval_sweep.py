"""Sweeps: --param parsing within declared ranges, grids, objectives, Pareto front, and grid / optuna
runs on the real pipeline with the stage cache (CSV, plots, best-config YAML)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.sweep import (
    ParamSpace,
    SweepError,
    SweepResult,
    grid_configs,
    objective_direction,
    parse_param,
    run_grid,
    run_optuna,
)
from rag_lab.lab.outputs import write_sweep_outputs
from rag_lab.types.params import PipelineParams


def test_parse_ranges_lists_and_types() -> None:
    s = parse_param("rerank_threshold=0.1:0.9:0.1")
    assert (s.kind, s.low, s.high, s.step) == ("float", 0.1, 0.9, 0.1)
    assert s.values == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert parse_param("rerank_top_k=5:20:5").values == [5, 10, 15, 20]
    assert parse_param("rerank_top_k=3:5").values == [3, 4, 5]  # an int range without step is every integer
    cont = parse_param("mmr_lambda=0.2:0.8")
    assert cont.values is None and (cont.low, cont.high) == (0.2, 0.8)
    assert parse_param("mmr_lambda=0.5, 0.9,0.5").values == [0.5, 0.9]
    assert parse_param("enable_query_expansion=true,false").values == [True, False]
    assert parse_param("fallback_strategy=fixed").values == ["fixed"]
    assert parse_param("bm25_method=robertson,lucene").values == ["robertson", "lucene"]
    assert parse_param("bm25_k1=0.9:1.5:0.3").values == [0.9, 1.2, 1.5]


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("rerank_threshold", "expected NAME=SPEC"),
        ("rerank_treshold=0.1", "not a PipelineParams field.*did you mean .rerank_threshold."),
        ("mmr_lambda=0.5:1.5:0.5", r"mmr_lambda=1.5 is outside the declared range \[0.0, 1.0\]"),
        ("mmr_lambda=-0.1", r"outside the declared range"),
        ("rerank_top_k=1.5", "must be an integer"),
        ("rerank_top_k=10:5", "high 5 < low 10"),
        ("mmr_lambda=0.1:0.5:0", "step must be > 0"),
        ("mmr_lambda=a", "'a' is not a number"),
        ("citation_enabled=maybe", "'maybe' is not a boolean"),
        ("fallback_strategy=smart", "'smart' is not one of fixed, model"),
        ("fallback_response=x", "cannot be swept"),
        ("mmr_lambda=", "empty value spec"),
    ],
)
def test_parse_errors_name_the_param(spec: str, pattern: str) -> None:
    with pytest.raises(SweepError, match=pattern):
        parse_param(spec)


@settings(max_examples=80)
@given(
    st.sampled_from(
        sorted(
            n
            for n, (lo, hi) in PipelineParams.field_ranges().items()
            if lo is not None and hi is not None and PipelineParams.model_fields[n].annotation is float
        )
    ),
    st.floats(0, 1),
    st.floats(0, 1),
    st.integers(1, 12),
)
def test_grid_values_stay_in_declared_ranges(name: str, a: float, b: float, n: int) -> None:
    lo, hi = PipelineParams.field_ranges()[name]
    x, y = sorted((lo + a * (hi - lo), lo + b * (hi - lo)))
    step = (y - x) / n
    wide = step > 0  # not so: equal ends, or a gap so small (5e-324) that a part of it is 0.0
    s = parse_param(f"{name}={x!r}:{y!r}:{step if wide else 1.0!r}")
    assert s.values and all(lo <= v <= hi for v in s.values)
    assert len(s.values) in (n, n + 1) or not wide
    PipelineParams().with_changes(**{name: s.values[-1]})  # every value validates


def test_grid_product_order_and_errors() -> None:
    a, b = ParamSpace("mmr_lambda", "float", [0.5, 0.9]), ParamSpace("rerank_top_k", "int", [5, 10, 20])
    cfgs = grid_configs([a, b])
    assert cfgs[:4] == [
        {"mmr_lambda": 0.5, "rerank_top_k": 5},
        {"mmr_lambda": 0.5, "rerank_top_k": 10},
        {"mmr_lambda": 0.5, "rerank_top_k": 20},
        {"mmr_lambda": 0.9, "rerank_top_k": 5},
    ]
    assert len(cfgs) == 6
    with pytest.raises(SweepError, match="continuous: give a step"):
        grid_configs([parse_param("mmr_lambda=0.1:0.9")])
    with pytest.raises(SweepError, match="given twice"):
        grid_configs([a, a])


def test_objectives() -> None:
    assert objective_direction("ndcg@10") == objective_direction("mrr") == objective_direction("chrf") == "maximize"
    assert objective_direction("latency_ms") == "minimize"
    with pytest.raises(SweepError, match="needs an LLM judge"):
        objective_direction("faithfulness")
    with pytest.raises(SweepError, match="unknown objective 'ndcg@x'"):
        objective_direction("ndcg@x")


def _row(i: int, q: float, lat: float) -> dict[str, Any]:
    return {"config_index": i, "mmr_lambda": i / 10, "ndcg@10": q, "latency_ms": lat}


@settings(max_examples=80)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(1, 100)), min_size=1, max_size=25))
def test_pareto_front_is_exactly_the_non_dominated_set(pts: list[tuple[float, float]]) -> None:
    res = SweepResult(["mmr_lambda"], "ndcg@10", "maximize", [_row(i, q, c) for i, (q, c) in enumerate(pts)])
    front = res.pareto_front()
    ids = {r["config_index"] for r in front}

    def dominated(r: dict[str, Any]) -> bool:
        return any(
            o["ndcg@10"] >= r["ndcg@10"]
            and o["latency_ms"] <= r["latency_ms"]
            and (o["ndcg@10"], o["latency_ms"]) != (r["ndcg@10"], r["latency_ms"])
            for o in res.rows
        )

    for r in res.rows:
        if r["config_index"] in ids:
            assert not dominated(r)
        elif not any(
            o["config_index"] in ids and (o["ndcg@10"], o["latency_ms"]) == (r["ndcg@10"], r["latency_ms"])
            for o in res.rows
        ):
            assert dominated(r)
    assert [r["latency_ms"] for r in front] == sorted(r["latency_ms"] for r in front)


def test_best_ignores_nan_and_breaks_ties_by_order() -> None:
    res = SweepResult(
        ["mmr_lambda"], "ndcg@10", "maximize", [_row(0, math.nan, 5), _row(1, 0.7, 9), _row(2, 0.7, 3), _row(3, 0.2, 1)]
    )
    assert res.best()["config_index"] == 1
    low = SweepResult(["mmr_lambda"], "latency_ms", "minimize", res.rows)
    assert low.best()["config_index"] == 3
    with pytest.raises(SweepError, match="no config has a finite ndcg@10"):
        SweepResult(["mmr_lambda"], "ndcg@10", "maximize", [_row(0, math.nan, 1)]).best()


@pytest.mark.slow
async def test_grid_sweep_on_the_pipeline(eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path) -> None:
    spaces = [parse_param("rerank_threshold=0.2,0.95"), parse_param("mmr_lambda=0.5,0.9")]
    res = await run_grid(
        eval_lab,
        [(small_ds, small_spec.kb_name)],
        spaces,
        "recall@5",
        ragas_metrics=["id_context_recall"],
        cache_dir=tmp_path / "cache",
        progress=False,
        fast=False,
    )
    assert [(r["rerank_threshold"], r["mmr_lambda"]) for r in res.rows] == [
        (0.2, 0.5),
        (0.2, 0.9),
        (0.95, 0.5),
        (0.95, 0.9),
    ]
    by = {(r["rerank_threshold"], r["mmr_lambda"]): r for r in res.rows}
    assert by[(0.2, 0.5)]["recall@5"] > by[(0.95, 0.5)]["recall@5"]  # the high threshold filters gold chunks
    assert all(r["errors"] == 0 and r["latency_ms"] > 0 for r in res.rows)
    assert res.best()["rerank_threshold"] == 0.2
    n_q = len(small_ds.queries)
    # the warm-up fills the cache; the four configs only read search results and rerank scores
    assert res.cache_stats["rerank"]["misses"] == n_q and res.cache_stats["rerank"]["hits"] >= 4 * n_q
    assert getattr(eval_lab, "_stage_cache_handle", None) is None  # the sweep put the lab back
    paths = write_sweep_outputs(res, tmp_path / "out", "s")
    df = __import__("pandas").read_csv(paths["csv"])
    assert list(df["rerank_threshold"]) == [0.2, 0.2, 0.95, 0.95] and "id_context_recall" in df.columns
    for key in ("metric_vs_param", "pareto"):
        assert paths[key].read_bytes().startswith(b"\x89PNG")
    best = PipelineParams.from_yaml(paths["best_yaml"])
    assert best.rerank_threshold == 0.2 and best.mmr_lambda == res.best()["mmr_lambda"]
    assert "best of 4 configs by recall@5" in paths["best_yaml"].read_text(encoding="utf-8")
    assert "| rerank_threshold | mmr_lambda | recall@5 |" in paths["md"].read_text(encoding="utf-8")


@pytest.mark.slow
async def test_optuna_sweep_is_seeded(eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path) -> None:
    pytest.importorskip("optuna")
    spaces = [parse_param("rerank_threshold=0.1:0.9:0.2"), parse_param("mmr_lambda=0.3:0.9")]
    kw = dict(seed=3, cache_dir=tmp_path / "cache", progress=False)
    a = await run_optuna(eval_lab, [(small_ds, small_spec.kb_name)], spaces, 3, "ndcg@10", **kw)
    b = await run_optuna(eval_lab, [(small_ds, small_spec.kb_name)], spaces, 3, "ndcg@10", **kw)
    cfg = lambda r: (r["rerank_threshold"], r["mmr_lambda"])  # noqa: E731
    assert [cfg(r) for r in a.rows] == [cfg(r) for r in b.rows]
    assert [r["ndcg@10"] for r in a.rows] == [r["ndcg@10"] for r in b.rows]
    for r in a.rows:
        assert r["rerank_threshold"] in (0.1, 0.3, 0.5, 0.7, 0.9) and 0.3 <= r["mmr_lambda"] <= 0.9


@pytest.mark.slow
def test_sweep_cli(eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    ws = str(eval_lab.workspace.root)
    code = main(
        [
            "--workspace",
            ws,
            "sweep",
            "--dataset",
            f"{small_spec.dataset}:{small_spec.n_queries}:{small_spec.max_docs}",
            "--param",
            "rerank_threshold=0.2:0.6:0.4",
            "--objective",
            "mrr",
            "--out",
            str(tmp_path),
            "--quiet",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "best mrr = " in out and "stage cache: " in out
    assert "re-checked on the full pipeline: none (--check 0)\n" in out  # the default: no re-run
    assert {p.name for p in tmp_path.iterdir()} >= {
        "sweep.csv",
        "sweep_best.yaml",
        "sweep_pareto.png",
        "sweep_metric_vs_param.png",
        "sweep.md",
    }
    dataset = f"{small_spec.dataset}:{small_spec.n_queries}:{small_spec.max_docs}"
    args = ["--param", "rerank_threshold=0.2:0.6:0.4", "--out", str(tmp_path), "--quiet", "--check", "all"]
    assert main(["--workspace", ws, "sweep", "--dataset", dataset, *args]) == 0
    assert (
        "re-checked on the full pipeline: all 2 configs (configs 0, 1): identical contexts, scores and metrics\n"
        in capsys.readouterr().out
    )
    assert main(["--workspace", ws, "sweep", "--dataset", "hotpotqa_hipporag100:2:10", "--param", "mmr_lambda=2"]) == 2
    assert "mmr_lambda=2.0 is outside the declared range" in capsys.readouterr().err


@pytest.mark.slow
async def test_bm25_settings_sweep_uses_cached_indexes_and_restores_the_kb(
    eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path
) -> None:
    ws = eval_lab.workspace
    kb = ws.get_kb(small_spec.kb_name)
    own = ws.keyword_index(kb)
    res = await run_grid(
        eval_lab,
        [(small_ds, small_spec.kb_name)],
        [parse_param("bm25_k1=0.5,1.5"), parse_param("bm25_method=robertson,lucene")],
        "recall@5",
        cache_dir=tmp_path / "c",
        progress=False,
    )
    assert [(r["bm25_k1"], r["bm25_method"]) for r in res.rows] == [
        (0.5, "robertson"),
        (0.5, "lucene"),
        (1.5, "robertson"),
        (1.5, "lucene"),
    ]
    assert all(r["errors"] == 0 for r in res.rows)
    # one index per settings (the warm-up builds the first), then read back for every later use
    assert res.cache_stats["bm25"]["misses"] == 4
    # BM25 settings are part of the search key: every config searched anew
    assert res.cache_stats["search"]["misses"] >= 4 * len(small_ds.queries)
    restored = ws.keyword_index(kb)
    assert restored.params == own.params and restored.params["k1"] == 1.5 and restored.params["method"] == "robertson"
    yaml_text = write_sweep_outputs(res, tmp_path / "o")["best_yaml"].read_text(encoding="utf-8")
    assert "# KB index settings (not PipelineParams)" in yaml_text and "bm25" not in yaml_text.split("params:")[1]
