"""Tuning that holds: the held-out split never reaches the choice (property test and a real sweep),
range slices (``NAME@START-END``), ``rag-lab eval --config best.yaml`` and the sweep rows' own
latency columns."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.eval.datasets.schema import Dataset, QueryItem
from rag_lab.eval.suite_spec import SuiteSpec, parse_suite_spec
from rag_lab.eval.sweep.holdout import hold_out, split_dataset, split_questions
from rag_lab.eval.sweep.outputs import SweepResult
from rag_lab.eval.sweep.runners import _Suite

CONFIGS = [{"rerank_threshold": t} for t in (0.1, 0.2, 0.3, 0.4)]


def _ds(n: int, golds: list[int]) -> Dataset:
    qs = [QueryItem(f"q{i}", f"question {i}", [], [f"d{golds[i]}"]) for i in range(n)]
    return Dataset("toy", Path("."), [], qs)


async def _fake_tune(parts: list[Any], seen: list[str]) -> SweepResult:
    """A 'sweep' whose scores depend on every question it is given (so a leak would move them)."""
    qs = [q for s in parts for q in s.dataset.queries]
    seen.extend(q.id for q in qs)
    rows = []
    for i, cfg in enumerate(CONFIGS):
        score = sum((int(q.gold_ids[0][1:]) * (i + 1) + len(q.question)) % 7 for q in qs) / max(1, len(qs))
        rows.append({"config_index": i, **cfg, "recall@5": score, "latency_ms": 1.0})
    return SweepResult(["rerank_threshold"], "recall@5", "maximize", rows)


async def _fake_score(config: Any, parts: list[Any]) -> dict[str, dict[str, float]]:
    t = config.get("rerank_threshold", 0.3)
    return {s.name: {q.id: (int(q.gold_ids[0][1:]) * t) % 1.0 for q in s.dataset.queries} for s in parts}


@settings(max_examples=60)
@given(
    st.lists(st.integers(0, 50), min_size=2, max_size=30),
    st.floats(0.1, 0.9),
    st.integers(0, 5),
    st.data(),
)
def test_held_out_questions_never_influence_the_choice(golds: list[int], frac: float, seed: int, data: Any) -> None:
    n = len(golds)
    ds = _ds(n, golds)
    tune_pos, held_pos = split_questions(n, frac, seed)
    assert sorted(tune_pos + held_pos) == list(range(n)) and tune_pos and held_pos
    # change every held-out question's text and gold: the split and the choice must not move
    changed = list(ds.queries)
    for i in held_pos:
        changed[i] = replace(
            changed[i], question=data.draw(st.text(max_size=20)), gold_ids=[f"d{data.draw(st.integers(0, 99))}"]
        )
    ds2 = replace(ds, queries=changed)
    chosen = []
    for d in (ds, ds2):
        tune, held = split_dataset(d, frac, seed)
        assert [q.id for q in tune.queries] == [f"q{i}" for i in tune_pos]
        seen: list[str] = []
        result, ho = asyncio.run(
            hold_out(
                [_Suite(tune.name, tune, "kb")],
                [_Suite(held.name, held, "kb")],
                lambda parts, seen=seen: _fake_tune(parts, seen),
                _fake_score,
                {},
            )
        )
        assert set(seen).isdisjoint({f"q{i}" for i in held_pos})
        assert ho.n_held == len(held_pos) and ho.optimism == pytest.approx(ho.tuned_score - ho.held_score)
        chosen.append((ho.chosen, result.rows))
    assert chosen[0] == chosen[1]


def test_holdout_sweep_on_the_lab_ignores_held_out_gold(eval_lab: Any, small_ds: Any, small_spec: Any) -> None:
    from rag_lab.eval.sweep import parse_param
    from rag_lab.eval.sweep.holdout import run_holdout

    spaces = [parse_param("rerank_threshold=0.1,0.3,0.5")]
    _, held_pos = split_questions(len(small_ds.queries), 0.4, 3)
    bad = [replace(q, gold_ids=["nope"]) if i in held_pos else q for i, q in enumerate(small_ds.queries)]
    got = []
    for ds in (small_ds, replace(small_ds, queries=bad)):
        result, ho = asyncio.run(
            run_holdout(
                eval_lab, [(ds, small_spec.kb_name)], spaces, "recall@5", 0.4, seed=3, progress=False, cache_dir=None
            )
        )
        rows = [{k: v for k, v in r.items() if "latency" not in k and k != "fast_eval_ms"} for r in result.rows]
        got.append((ho.chosen, rows, ho))
        assert all(r["latency_of"].startswith(("capture runs", "pipeline")) for r in result.rows)
        assert all(r["fast_eval_ms"] >= 0 for r in result.rows)
    assert got[0][:2] == got[1][:2]  # the choice and the tuning rows: identical
    assert got[1][2].held_score == 0.0 and got[0][2].n_held == 4 and got[0][2].n_tune == 6


def test_range_slices() -> None:
    s = parse_suite_spec("hotpotqa_hipporag100@10-30:80:3")
    assert (s.dataset, s.start, s.n_queries, s.max_docs, s.seed, s.name) == (
        "hotpotqa_hipporag100",
        10,
        20,
        80,
        3,
        "hotpotqa_hipporag100@10-30",
    )
    ds = s.load()
    from rag_lab.eval.datasets import load_dataset

    full = load_dataset("hotpotqa_hipporag100")
    assert [q.id for q in ds.queries] == [q.id for q in full.queries[10:30]] and len(ds.corpus) == 80
    assert SuiteSpec.from_dict(s.to_dict()) == s and "start" not in parse_suite_spec("x:3").to_dict()
    assert parse_suite_spec("a/b@c/ds:5").dataset == "a/b@c/ds"  # an @ inside a path is no range
    assert parse_suite_spec("x:10:30").n_queries == 10  # the count form is unchanged
    for text, msg in [
        ("x@30-10", "END (10) must be greater than START (30)"),
        ("x@a-b", "a question range is NAME@START-END with 0-based integers, END excluded (e.g. x@10-30)"),
        ("x@10-30:1:2:3", "after NAME@START-END come only [:MAX_DOCS[:SEED]]"),
    ]:
        with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
            parse_suite_spec(text)
    with pytest.raises(ValueError, match=r"questions 90 to 129 asked, but hotpotqa_hipporag100 has 100 questions"):
        parse_suite_spec("hotpotqa_hipporag100@90-130").load()


def test_eval_config_applies_a_sweeps_best_yaml(tmp_path: Path, capsys: Any) -> None:
    from rag_lab.commands.evaluate import main

    best = SweepResult(
        ["rerank_threshold"],
        "recall@5",
        "maximize",
        [{"config_index": 0, "rerank_threshold": 0.9, "recall@5": 1.0, "latency_ms": 1.0}],
    )
    path = best.export_best_yaml(tmp_path / "s_best.yaml")
    ws, out = str(tmp_path / "ws"), str(tmp_path / "out")
    argv = ["--workspace", ws, "eval", "--config", str(path), "--dataset", "hotpotqa_hipporag100@2-4:8", "--quiet"]
    assert main([*argv, "--out", out, "--name", "e"]) == 0
    rep = json.loads((tmp_path / "out" / "e.json").read_text())
    assert rep["meta"]["spec"]["params"] == {"rerank_threshold": 0.9}
    assert rep["meta"]["spec"]["suites"][0]["start"] == 2
    assert rep["meta"]["provenance"]["rerank_scores"]["hotpotqa_hipporag100@2-4"]["questions"] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("params:\n  rerank_treshold: 0.5\n")
    assert main([*argv[:3], "--config", str(bad), *argv[5:], "--out", out]) == 2
    assert "did you mean 'rerank_threshold'" in capsys.readouterr().err
