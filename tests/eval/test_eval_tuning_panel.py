"""The live tuning panel (lab.tuning_widget) on a real lab: sliders drive the fast evaluator, the
table and plot follow, the best config exports as YAML that PipelineParams loads."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def panel(eval_lab: Any, small_ds: Any, small_spec: Any) -> Any:
    from rag_lab.lab.tuning_widget import tuning_panel

    return tuning_panel(eval_lab, small_ds, small_spec.kb_name, n_questions=6, metrics=("ndcg@10", "mrr"))


def test_sliders_drive_the_fast_evaluator(panel: Any, eval_lab: Any, small_ds: Any, small_spec: Any) -> None:
    import asyncio

    from rag_lab.eval.runner import evaluate_lab

    assert list(panel.sliders) == [
        "rerank_threshold",
        "mmr_lambda",
        "rerank_top_k",
        "composite_model_weight",
        "composite_base_weight",
        "overlap_threshold",
    ]
    assert panel.base_metrics == panel.metrics_of({k: getattr(eval_lab.params, k) for k in panel.sliders})
    panel.set("rerank_top_k", 1)
    panel.set("mmr_lambda", 0.3)
    assert panel.config["rerank_top_k"] == 1 and panel.focus == "mmr_lambda"
    # the panel's metrics are the pipeline's for the same config on the same questions
    res = asyncio.run(
        evaluate_lab(eval_lab, small_ds, small_spec.kb_name, n_queries=6, progress=False, params=dict(panel.config))
    )
    assert {m: res.summary()[m] for m in ("ndcg@10", "mrr")} == panel.metrics_of(panel.config)
    assert "<svg" in panel.plot.value and "mmr_lambda" in panel.plot.value
    assert "<td>ndcg@10</td>" in panel.table.value
    assert panel.last_redraw_ms > 0


def test_curve_and_best_yaml(panel: Any, tmp_path: Any) -> None:
    from rag_lab.types import PipelineParams

    curve = panel.curve("rerank_threshold")
    assert [v for v, _ in curve] == [0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0]  # 9 points on the 0.05 step
    assert panel.curve("rerank_threshold") is curve  # cached while the other knobs stay
    config, metrics = panel.best()
    assert metrics["ndcg@10"] == max(m["ndcg@10"] for _, m in panel.history)
    path = panel.export_best(str(tmp_path / "best.yaml"))
    text = open(path, encoding="utf-8").read()
    assert text.startswith("# best of ") and "by ndcg@10" in text
    loaded = PipelineParams.from_yaml(path)
    assert all(getattr(loaded, k) == v for k, v in config.items())
    with pytest.raises(KeyError, match="no slider 'nope'"):
        panel.set("nope", 1)
