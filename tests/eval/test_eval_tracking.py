"""MLflow logging of eval and sweep runs (rag_lab.eval.tracking), read back with MlflowClient,
and the eval command's --export files (pytrec_eval reproduces the report from the TREC export)."""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.tracking import TrackingError, changed_params, mlflow_key, model_params, tracking_uri


def _need_mlflow() -> None:
    """``make test`` installs the tracking extra: there (and in CI) a missing mlflow fails."""
    if os.environ.get("RAG_LAB_REQUIRE_EXTRAS") or os.environ.get("CI"):
        import mlflow  # noqa: F401
    else:
        pytest.importorskip("mlflow")


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _runs(client: Any, experiment: str) -> list[Any]:
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r}"
    return list(client.search_runs([exp.experiment_id]))


def test_tracking_uri_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RAG_LAB_MLFLOW_URI", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    # the default store is SQLite: a stock MlflowClient reads it without MLFLOW_ALLOW_FILE_STORE
    assert tracking_uri(workspace=tmp_path) == f"sqlite:///{(tmp_path / 'mlflow.db').resolve()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert tracking_uri(workspace=tmp_path) == "http://127.0.0.1:5000"
    monkeypatch.setenv("RAG_LAB_MLFLOW_URI", str(tmp_path / "runs"))
    assert tracking_uri(workspace=tmp_path) == (tmp_path / "runs").as_uri()
    assert tracking_uri("sqlite:///x.db", tmp_path) == "sqlite:///x.db"


def test_names_and_params() -> None:
    assert [mlflow_key(k) for k in ("recall@5", "a:ndcg@10", "x y/z", "p(95)")] == [
        "recall_at_5",
        "a:ndcg_at_10",
        "x y/z",
        "p_95_",
    ]
    assert changed_params({"rerank_top_k": 30, "mmr_lambda": 0.5, "no_such_field": 1}) == {
        "mmr_lambda": 0.5,
        "no_such_field": 1,
    }
    cfg = {
        "models": {"chat": {"type": "openai", "model": "m", "api_key": "sk-x", "api_key_env": "K"}, "reranker": None}
    }
    assert model_params(cfg) == {
        "models.chat.type": "openai",
        "models.chat.model": "m",
        "models.chat.api_key_env": "K",
        "models.reranker": "none",
    }


def test_missing_mlflow_names_the_extra(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main
    from rag_lab.eval.tracking import require_mlflow

    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    with pytest.raises(TrackingError, match=r"'tracking' extra: pip install 'rag_lab\[tracking\]'"):
        require_mlflow()
    # the CLI fails before it loads or ingests anything (the dataset does not even exist)
    assert main(["eval", "--dataset", "no_such_dataset", "--mlflow"]) == 2
    assert "rag-lab eval: MLflow logging needs the 'tracking' extra" in capsys.readouterr().err


@pytest.mark.slow
def test_eval_logs_to_mlflow_and_exports(
    eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pytrec_eval

    from rag_lab.commands.evaluate import main
    from rag_lab.eval.formats import read_samples_jsonl, read_trec_qrels, read_trec_run
    from rag_lab.eval.report import load_report

    _need_mlflow()
    ws = str(eval_lab.workspace.root)
    slice_ = f"{small_spec.dataset}:{small_spec.n_queries}:{small_spec.max_docs}"
    out = tmp_path / "out"
    store = tmp_path / "store"
    argv = ["--workspace", ws, "eval", "--dataset", slice_, "--param", "rerank_top_k=5", "--out", str(out)]
    argv += ["--name", "run1", "--export", "trec", "--export", "jsonl", "--export", "ragas", "--quiet"]
    code = main([*argv, "--mlflow-uri", str(store), "--mlflow-experiment", "exp-a"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f"in experiment 'exp-a' at {store.resolve().as_uri()}" in printed
    report = load_report(out / "run1.json")
    (suite,) = report.suites
    summary = suite.summary()

    client = _client(store.resolve().as_uri())
    (run,) = _runs(client, "exp-a")
    assert run.info.status == "FINISHED" and run.info.run_name == "run1"
    assert run.data.tags["rag_lab.kind"] == "eval"
    p = run.data.params
    assert p["rerank_top_k"] == "5"
    assert p["rerank_threshold"] == repr(eval_lab.params.rerank_threshold)  # a default, logged too
    assert len([k for k in p if not k.startswith(("dataset.", "models.", "ragas"))]) == len(
        eval_lab.params.model_dump()
    )
    assert p[f"dataset.{suite.name}"] == f"{slice_}:0"
    assert p["models.embedder"] == "auto" and p["models.chat.type"] == "extractive"
    m = run.data.metrics
    for name, value in summary.items():
        assert m[mlflow_key(name)] == pytest.approx(value, nan_ok=True), name
    assert m["ndcg_at_10"] == pytest.approx(summary["ndcg@10"]) and 0 < m["recall_at_10"] <= 1
    names = json.loads(run.data.tags["rag_lab.metric_names"])  # each MLflow alias back to rag_lab's name
    assert names["ndcg_at_10"] == "ndcg@10" and names["recall_at_5"] == "recall@5" and "mrr" not in names
    assert m["n_queries"] == small_spec.n_queries and m["errors"] == 0
    assert m["latency_ms"] == pytest.approx(suite.mean_latency_ms)
    artifacts = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"run1.json", "run1.md", "run1.run.trec", "run1.qrels.trec", "run1.samples.jsonl"} <= artifacts

    # the TREC export: pytrec_eval gives the report's per-question values and means
    run_file = read_trec_run(out / "run1.run.trec")
    qrels = read_trec_qrels(out / "run1.qrels.trec")
    assert qrels == {r.qid: {g: 1 for g in r.gold_ids} for r in suite.records}
    te = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_5", "recip_rank", "map"}).evaluate(run_file)
    ours = {str(row["qid"]): row for row in suite.retrieval.rows}
    pairs = {"ndcg_cut_10": "ndcg@10", "recall_5": "recall@5", "recip_rank": "mrr", "map": "map"}
    for te_name, name in pairs.items():
        # trec_eval leaves out a question with nothing retrieved; the report counts it as 0
        per_q = [te[q][te_name] if q in te else 0.0 for q in ours]
        assert sum(per_q) / len(per_q) == pytest.approx(summary[name], abs=1e-9), name
        for q in te:
            assert te[q][te_name] == pytest.approx(ours[q][name], abs=1e-9)

    # JSONL: the evaluated set with its context texts; ragas: an EvaluationDataset
    back = read_samples_jsonl(out / "run1.samples.jsonl")
    assert [(b.qid, b.question, b.answer, b.context_ids, b.gold_ids) for b in back] == [
        (r.qid, r.question, r.answer, r.context_ids, r.gold_ids) for r in suite.records
    ]
    from rag_lab.eval.datasets import load_dataset

    # the whole corpus: other tests of the session may have ingested more of it into this KB
    doc_text = {d.id: d.text for d in load_dataset(small_spec.dataset).corpus}
    for b in back:  # the report JSON leaves the texts out; the export has each context's chunk text
        assert len(b.contexts) == len(b.context_ids) > 0
        assert all(c.strip() and c.strip()[:40] in doc_text[d] for c, d in zip(b.contexts, b.context_doc_ids))
    from ragas import EvaluationDataset

    ds = EvaluationDataset.from_jsonl(str(out / "run1.ragas.jsonl"))
    assert [s.user_input for s in ds.samples] == [r.question for r in suite.records]
    assert ds.samples[0].reference_contexts == [doc_text[g] for g in suite.records[0].gold_ids]
    assert [s.retrieved_contexts for s in ds.samples] == [b.contexts for b in back]

    # a second run lands in the same experiment: runs can be compared over time
    assert main([*argv[:-1], "--param", "rerank_top_k=3", "--mlflow-uri", str(store), "--quiet"]) == 0
    capsys.readouterr()
    # (no --mlflow-experiment: the default experiment)
    assert len(_runs(client, "rag_lab")) == 1 and len(_runs(client, "exp-a")) == 1


@pytest.mark.slow
def test_sweep_logs_a_parent_and_one_child_per_config(
    eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_lab.commands.evaluate import main

    _need_mlflow()
    monkeypatch.delenv("RAG_LAB_MLFLOW_URI", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    ws = Path(eval_lab.workspace.root)
    code = main(
        [
            "--workspace",
            str(ws),
            "sweep",
            "--dataset",
            f"{small_spec.dataset}:{small_spec.n_queries}:{small_spec.max_docs}",
            "--param",
            "rerank_threshold=0.2,0.95",
            "--param",
            "rerank_top_k=3,10",
            "--set",
            "mmr_lambda=0.5",
            "--objective",
            "recall@5",
            "--out",
            str(tmp_path),
            "--name",
            "sw",
            "--mlflow",
            "--quiet",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    uri = f"sqlite:///{(ws / 'mlflow.db').resolve()}"  # the default store, beside its artifacts
    assert (ws / "mlartifacts").is_dir() and not (Path.cwd() / "mlruns").exists()
    assert f"at {uri}" in printed
    with (tmp_path / "sw.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4

    client = _client(uri)
    runs = _runs(client, "rag_lab")
    (parent,) = [r for r in runs if r.data.tags["rag_lab.kind"] == "sweep"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 5 and len(children) == 4
    pp = parent.data.params
    assert (pp["objective"], pp["direction"], pp["swept"]) == ("recall@5", "maximize", "rerank_threshold,rerank_top_k")
    assert pp["mmr_lambda"] == "0.5" and "rerank_threshold" not in pp  # swept: on the children
    assert pp["vector_threshold"] == "0.2"  # every fixed param is on the parent, defaults too
    assert pp[f"dataset.{small_spec.name}"] == f"{small_spec.dataset}:{small_spec.n_queries}:{small_spec.max_docs}:0"
    best_value = max(float(r["recall@5"]) for r in rows)
    assert parent.data.metrics["best_recall_at_5"] == pytest.approx(best_value)
    by_index = {int(c.data.tags["config_index"]): c for c in children}
    assert sorted(by_index) == [0, 1, 2, 3]
    for row in rows:
        child = by_index[int(row["config_index"])]
        assert child.info.status == "FINISHED"
        assert float(child.data.params["rerank_threshold"]) == float(row["rerank_threshold"])
        assert int(child.data.params["rerank_top_k"]) == int(row["rerank_top_k"])
        assert child.data.params["mmr_lambda"] == "0.5"
        for col in ("recall@5", "ndcg@10", "mrr", "latency_ms", "errors"):
            assert child.data.metrics[mlflow_key(col)] == pytest.approx(float(row[col]), rel=1e-9), col
        assert child.data.tags["contexts_digest"] == row["contexts_digest"]
    best = [c for c in children if c.data.tags["best"] == "true"]
    assert len(best) == 1 and best[0].data.metrics["recall_at_5"] == pytest.approx(best_value)
    artifacts = {f.path for f in client.list_artifacts(parent.info.run_id)}
    assert {"sw.csv", "sw.md", "sw_best.yaml", "sw_pareto.png", "sw_metric_vs_param.png"} <= artifacts
    assert parent.data.metrics["n_configs"] == 4 and parent.data.metrics["seconds"] > 0
    summary = (tmp_path / "sw.md").read_text(encoding="utf-8")
    warned = parent.data.tags.get("rag_lab.warnings", "")
    assert bool(warned) == ("Knobs that changed nothing" in summary)
    assert all(f"- {w}" in summary for w in warned.splitlines())


def test_log_sweep_keeps_warnings_and_nan_rows(tmp_path: Path) -> None:
    """A synthetic sweep: a weight at 0 (falls back) and two configs with the same contexts warn;
    the parent keeps the warnings, a NaN objective is logged as NaN and never marked best."""
    _need_mlflow()
    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.eval.tracking import log_sweep

    rows = [
        {"config_index": 0, "rrf_vector_weight": 0.0, "ndcg@10": 0.5, "errors": 0, "contexts_digest": "a"},
        {"config_index": 1, "rrf_vector_weight": 0.5, "ndcg@10": 0.6, "errors": 0, "contexts_digest": "a"},
        {"config_index": 2, "rrf_vector_weight": 0.9, "ndcg@10": math.nan, "errors": 3, "first_error": "q1: boom"},
    ]
    result = SweepResult(["rrf_vector_weight"], "ndcg@10", "maximize", rows, {"rerank_top_k": 5}, ["s"], {}, 1.5)
    assert result.warnings, "the synthetic sweep should warn"
    uri = (tmp_path / "store").as_uri()
    parent_id = log_sweep(result, uri=uri, experiment="syn", run_name="syn", lab_params={"rerank_top_k": 30})
    client = _client(uri)
    parent = client.get_run(parent_id)
    assert parent.data.tags["rag_lab.warnings"] == "\n".join(result.warnings)
    assert parent.data.params["rerank_top_k"] == "5" and parent.data.params["datasets"] == "s"
    assert parent.data.metrics["best_ndcg_at_10"] == 0.6 and parent.data.metrics["best_config_index"] == 1
    children = {int(r.data.tags["config_index"]): r for r in _runs(client, "syn") if r.info.run_id != parent_id}
    assert [children[i].data.tags["best"] for i in range(3)] == ["false", "true", "false"]
    assert math.isnan(children[2].data.metrics["ndcg_at_10"]) and children[2].data.metrics["errors"] == 3
    assert children[2].data.tags["first_error"] == "q1: boom"
    assert children[0].data.params == {"rrf_vector_weight": "0.0", "rerank_top_k": "5"}


def test_store_errors_are_tracking_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that cannot be created, or one that fails mid-run, gives a TrackingError naming the
    store (the CLI prints it and exits 2), and the run left behind is marked FAILED."""
    _need_mlflow()
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.eval.tracking import log_sweep

    result = SweepResult(["mmr_lambda"], "mrr", "maximize", [{"config_index": 0, "mmr_lambda": 0.5, "mrr": 0.4}])
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    with pytest.raises(TrackingError, match=r"MLflow at file://.*a_file: cannot create the store folder"):
        log_sweep(result, uri=str(tmp_path / "a_file"))

    def refuse(self: Any, run_id: str, **kw: Any) -> None:
        raise MlflowException("the store is full")

    monkeypatch.setattr(MlflowClient, "log_batch", refuse)
    uri = (tmp_path / "store").as_uri()
    with pytest.raises(TrackingError, match=r"MLflow at file://.*store: the store is full"):
        log_sweep(result, uri=uri, experiment="e")
    (run,) = _runs(_client(uri), "e")
    assert run.info.status == "FAILED"
