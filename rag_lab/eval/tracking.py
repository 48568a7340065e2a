"""Optional MLflow logging of evaluation and sweep runs (extra ``tracking``: ``mlflow-skinny``).

``rag-lab eval --mlflow`` and ``rag-lab sweep --mlflow`` call :func:`log_eval` /
:func:`log_sweep`, so runs can be compared over time in MLflow (``mlflow ui``, or
``MlflowClient``):

* an **eval** is one run: params = every :class:`~rag_lab.types.params.PipelineParams` field as the
  run used it (the lab's params with the run's overrides: a default run has ``rerank_threshold``
  too), each suite's dataset and slice (``dataset.<suite>`` =
  ``NAME:N_QUERIES:MAX_DOCS:SEED``), the models of the lab config (``models.chat.type`` …);
  metrics = every suite mean of the report (retrieval and ragas), plus latency, errors and cost;
  artifacts = the files written (report JSON / Markdown / HTML, TREC run and qrels, JSONL).
* a **sweep** is a parent run (every effective param but the swept ones, datasets, models, objective; metric
  ``best_<objective>``; the CSV, plots, best-config YAML and summary as artifacts) with one nested
  child run per config: its swept values and the fixed params that differ from the defaults as
  params, its row's metrics (objective, the other
  metrics, latency, cost, errors), tags ``config_index`` and ``best``; the sweep's warnings (knobs
  that changed nothing) are the parent's tag ``rag_lab.warnings``.

MLflow names allow letters, digits, ``_ - . : /`` and spaces, so ``@`` becomes ``_at_``
(``ndcg@10`` is logged as ``ndcg_at_10``; :func:`mlflow_key`); the run's tag
``rag_lab.metric_names`` maps each such alias back to rag_lab's name (JSON). With several suites a
metric is logged per suite as ``<suite>/<metric>`` and the mean over suites under the plain name.

Where runs go (:func:`tracking_uri`): ``--mlflow-uri``, else ``RAG_LAB_MLFLOW_URI``, else
``MLFLOW_TRACKING_URI``, else a SQLite store ``<workspace>/mlflow.db`` with the artifacts in
``<workspace>/mlartifacts`` — what a stock ``MlflowClient(tracking_uri="sqlite:///…")`` and
``mlflow ui --backend-store-uri sqlite:///…`` read. A plain path names a file store (a ``file:``
URI); MLflow 3 keeps that store in maintenance mode behind ``MLFLOW_ALLOW_FILE_STORE``, which
logging to it sets (unless it is set already). Any other URI MLflow takes (``http://…``) is used
as is.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report import EvalReport
    from rag_lab.eval.sweep.outputs import SweepResult

__all__ = [
    "DEFAULT_EXPERIMENT",
    "TrackingError",
    "changed_params",
    "log_eval",
    "log_sweep",
    "mlflow_key",
    "model_params",
    "require_mlflow",
    "tracking_uri",
]

DEFAULT_EXPERIMENT = "rag_lab"
#: the default store's database file and artifact folder, under the workspace
DEFAULT_DB, DEFAULT_ARTIFACTS = "mlflow.db", "mlartifacts"
URI_ENV = "RAG_LAB_MLFLOW_URI"
_MAX_PARAM_LEN = 6000  # MLflow's limit on a param value
_MAX_TAG_LEN = 8000  # and on a tag value
_PARAMS_PER_BATCH, _METRICS_PER_BATCH = 100, 1000
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_NOT_ALLOWED = re.compile(r"[^\w\-. :/]")
_SECRET = re.compile(r"key|secret|password|token", re.IGNORECASE)
#: row fields of a sweep that are tags of the child run, not metrics
_ROW_TAGS = ("contexts_digest", "first_error", "evaluated_by")


class TrackingError(ValueError):
    """MLflow is missing or refused the run (the message says what to do)."""


def require_mlflow() -> ModuleType:
    """The ``mlflow`` module, or a :class:`TrackingError` naming the extra to install."""
    try:
        import mlflow
    except ImportError:
        raise TrackingError(
            "MLflow logging needs the 'tracking' extra: pip install 'rag_lab[tracking]' (mlflow-skinny)"
        ) from None
    return mlflow


def tracking_uri(uri: str | None = None, workspace: str | Path | None = None) -> str:
    """Where runs are logged: ``uri``, else ``$RAG_LAB_MLFLOW_URI``, else ``$MLFLOW_TRACKING_URI``,
    else the SQLite store ``<workspace>/mlflow.db`` (``./mlflow.db`` without a workspace). A path
    becomes a ``file:`` URI.

    >>> tracking_uri("/tmp/runs")
    'file:///tmp/runs'
    >>> tracking_uri("sqlite:///runs.db")
    'sqlite:///runs.db'
    'sqlite:////tmp/ws/mlflow.db'
    """
    chosen = uri or os.environ.get(URI_ENV) or os.environ.get("MLFLOW_TRACKING_URI")
    if not chosen:
        db = Path(workspace if workspace is not None else ".").expanduser().resolve() / DEFAULT_DB
        return f"sqlite:///{db}"
    if chosen == "databricks" or _SCHEME.match(chosen):
        return chosen
    return Path(chosen).expanduser().resolve().as_uri()


def mlflow_key(name: str) -> str:
    """A metric or param name MLflow accepts: ``@`` → ``_at_``, other odd characters → ``_``.

    >>> mlflow_key("ndcg@10"), mlflow_key("hotpot:recall@5"), mlflow_key("bleu_zh")
    ('ndcg_at_10', 'hotpot:recall_at_5', 'bleu_zh')
    """
    return _NOT_ALLOWED.sub("_", name.replace("@", "_at_"))


def _param_value(v: object) -> str:
    s = v if isinstance(v, str) else repr(v) if isinstance(v, float) else str(v)
    return s if len(s) <= _MAX_PARAM_LEN else s[: _MAX_PARAM_LEN - 1] + "…"


def changed_params(params: Mapping[str, object]) -> dict[str, object]:
    """The fields of ``params`` (a PipelineParams dump, or overrides) whose value differs from the
    :class:`~rag_lab.types.params.PipelineParams` default; unknown keys are kept.

    >>> changed_params({"rerank_top_k": 5, "mmr_lambda": 0.7, "bm25_k1": 1.2})
    {'rerank_top_k': 5, 'bm25_k1': 1.2}
    """
    from rag_lab.types.params import PipelineParams

    defaults = PipelineParams().model_dump(mode="json")
    return {k: v for k, v in params.items() if k not in defaults or defaults[k] != v}


def model_params(config: Mapping[str, Any] | None) -> dict[str, str]:
    """``models.<role>.<field>`` of a lab config's ``models`` section (type, model, base URL …;
    secret-looking fields other than ``*_env`` names left out)."""
    out: dict[str, str] = {}
    for role, spec in dict((config or {}).get("models") or {}).items():
        if spec is None:
            out[f"models.{role}"] = "none"
            continue
        if not isinstance(spec, Mapping):
            out[f"models.{role}"] = str(spec)
            continue
        for k, v in spec.items():
            if _SECRET.search(str(k)) and not str(k).endswith("_env"):
                continue
            if isinstance(v, (str, int, float, bool)) or v is None:
                out[f"models.{role}.{k}"] = str(v)
    return out


def _slice(spec: Mapping[str, object]) -> str:
    parts = [spec.get("dataset", "?"), spec.get("n_queries"), spec.get("max_docs"), spec.get("seed", 0)]
    return ":".join("" if p is None else str(p) for p in parts)


def _metric(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


class _Logger:
    """An MLflow client on one experiment (created when missing)."""

    def __init__(self, uri: str | None, workspace: str | Path | None, experiment: str) -> None:
        mlflow = require_mlflow()
        from mlflow.tracking import MlflowClient

        self.uri = tracking_uri(uri, workspace)
        self.mlflow = mlflow
        artifacts = None
        folder = None
        if self.uri.startswith("file:"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            folder = Path(self.uri.removeprefix("file://"))
        elif self.uri.startswith("sqlite:///"):  # artifacts beside the database, not in the working folder
            folder = Path(self.uri.removeprefix("sqlite:///")).parent
            artifacts = (folder / DEFAULT_ARTIFACTS).as_uri()
        if folder is not None:
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise TrackingError(f"MLflow at {self.uri}: cannot create the store folder ({exc})") from None
        with self.refused():
            self.client = MlflowClient(tracking_uri=self.uri)
            exp = self.client.get_experiment_by_name(experiment)
            self.experiment_id = (
                exp.experiment_id
                if exp is not None
                else self.client.create_experiment(experiment, artifact_location=artifacts)
            )
        self.experiment = experiment

    @contextmanager
    def refused(self) -> Iterator[None]:
        """An MLflow error inside the block becomes a :class:`TrackingError` naming the store."""
        try:
            yield
        except self.mlflow.exceptions.MlflowException as exc:
            raise TrackingError(f"MLflow at {self.uri}: {exc.message}") from None

    def start(self, name: str, tags: Mapping[str, str], parent: str | None = None) -> str:
        t = {"rag_lab.version": _version(), **tags}
        if parent is not None:
            t["mlflow.parentRunId"] = parent
        return str(self.client.create_run(self.experiment_id, run_name=name, tags=t).info.run_id)

    def log(self, run_id: str, params: Mapping[str, object], metrics: Mapping[str, float]) -> None:
        from mlflow.entities import Metric, Param

        ps = [Param(mlflow_key(k), _param_value(v)) for k, v in params.items()]
        ts = _now_ms()
        ms = [Metric(mlflow_key(k), v, ts, 0) for k, v in metrics.items()]
        for i in range(0, len(ps), _PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=ps[i : i + _PARAMS_PER_BATCH])
        for i in range(0, len(ms), _METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=ms[i : i + _METRICS_PER_BATCH])
        renamed = {mlflow_key(k): k for k in metrics if mlflow_key(k) != k}
        if renamed:
            self.client.set_tag(run_id, "rag_lab.metric_names", json.dumps(renamed, sort_keys=True)[:_MAX_TAG_LEN])

    def artifacts(self, run_id: str, paths: Iterable[str | Path]) -> None:
        for p in paths:
            if Path(p).is_file():
                self.client.log_artifact(run_id, str(p))

    def end(self, run_id: str, ok: bool = True) -> None:
        self.client.set_terminated(run_id, "FINISHED" if ok else "FAILED")


def _version() -> str:
    import rag_lab

    return str(rag_lab.__version__)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


@contextmanager
def _ending(logger: _Logger, run_id: str) -> Iterator[str]:
    """End ``run_id`` FINISHED when the block completes, FAILED when it raises."""
    try:
        yield run_id
    except BaseException:
        with suppress(Exception):  # the store may be what failed: keep the first error
            logger.end(run_id, ok=False)
        raise
    logger.end(run_id)


def _suite_metrics(report: EvalReport) -> dict[str, float]:
    """Suite means (retrieval, ragas), mean latency, errors, fallbacks and cost; per suite as
    ``<suite>/<name>`` when there are several, and the mean over suites under the plain name."""
    per: list[dict[str, float]] = []
    for s in report.suites:
        m = {k: float(v) for k, v in s.summary().items()}
        led = s.ledger_totals()
        m.update(
            latency_ms=s.mean_latency_ms,
            errors=float(s.errors),
            fallbacks=float(s.fallbacks),
            cost_usd=float(led["cost_usd"]),
            n_queries=float(len(s.records)),
        )
        per.append(m)
    if len(per) == 1:
        return per[0]
    out: dict[str, float] = {}
    for s, m in zip(report.suites, per):
        out.update({f"{s.name}/{k}": v for k, v in m.items()})
    for k in dict.fromkeys(k for m in per for k in m):
        vs = [m[k] for m in per if k in m]
        out[k] = sum(vs) / len(vs) if all(math.isfinite(v) for v in vs) else math.nan
    return out


def log_eval(
    report: EvalReport,
    *,
    uri: str | None = None,
    workspace: str | Path | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    run_name: str | None = None,
    config: Mapping[str, Any] | None = None,
    artifacts: Iterable[str | Path] = (),
    tags: Mapping[str, str] | None = None,
) -> str:
    """Log an evaluation report as one MLflow run; returns its run id. ``config``: the lab config
    (its ``models`` section becomes params); ``artifacts``: files to attach (missing ones skipped)."""
    logger = _Logger(uri, workspace, experiment)
    lab_params: Mapping[str, object] = report.meta.get("lab_params") or {}
    params: dict[str, object] = {}
    for s in report.suites:
        params.update({**lab_params, **s.params})  # every effective param, defaults included
    for s in report.suites:
        params[f"dataset.{s.name}"] = _slice(s.spec)
    ragas = (report.meta.get("spec") or {}).get("ragas_metrics") or []
    if ragas:
        params["ragas_metrics"] = ",".join(ragas)
    params.update(model_params(config))
    with logger.refused():
        run_id = logger.start(
            run_name or "eval_" + "_".join(s.name for s in report.suites),
            {"rag_lab.kind": "eval", **dict(tags or {})},
        )
        with _ending(logger, run_id):
            logger.log(run_id, params, _suite_metrics(report))
            logger.artifacts(run_id, artifacts)
    return run_id


def log_sweep(
    result: SweepResult,
    *,
    uri: str | None = None,
    workspace: str | Path | None = None,
    experiment: str = DEFAULT_EXPERIMENT,
    run_name: str | None = None,
    config: Mapping[str, Any] | None = None,
    lab_params: Mapping[str, object] | None = None,
    suites: Sequence[Mapping[str, object]] = (),
    artifacts: Iterable[str | Path] = (),
    tags: Mapping[str, str] | None = None,
) -> str:
    """Log a sweep: a parent run and one nested child run per config; returns the parent's id.
    ``lab_params``: the lab's PipelineParams dump (with the sweep's fixed params, the changed ones
    are logged on the parent and on every child); ``suites``: the SuiteSpec dicts (dataset slices)."""
    from rag_lab.eval.sweep.specs import SweepError

    logger = _Logger(uri, workspace, experiment)
    effective = {
        k: v for k, v in {**dict(lab_params or {}), **result.base_params}.items() if k not in result.param_names
    }
    fixed = changed_params(effective)  # on every child, beside its swept values
    parent_params: dict[str, object] = {
        **effective,
        "objective": result.objective,
        "direction": result.direction,
        "swept": ",".join(result.param_names),
        "n_configs": len(result.rows),
    }
    for s in suites:
        parent_params[f"dataset.{s.get('name') or s.get('dataset')}"] = _slice(s)
    if not suites:
        parent_params["datasets"] = ",".join(result.suites)
    parent_params.update(model_params(config))
    try:
        best: dict[str, Any] | None = result.best()
    except SweepError:  # no config has a finite objective
        best = None
    parent_metrics = {"seconds": float(result.seconds), "n_configs": float(len(result.rows))}
    if best is not None:
        parent_metrics[f"best_{result.objective}"] = float(best[result.objective])
        parent_metrics["best_config_index"] = float(best["config_index"])
    skip = set(result.param_names) | {"config_index", *_ROW_TAGS}
    parent_tags = {"rag_lab.kind": "sweep", **dict(tags or {})}
    warnings = result.warnings  # knobs that could not change anything (as in the sweep's summary)
    if warnings:
        parent_tags["rag_lab.warnings"] = "\n".join(warnings)[:_MAX_TAG_LEN]
    with logger.refused():
        parent = logger.start(run_name or "sweep", parent_tags)
        with _ending(logger, parent):
            logger.log(parent, parent_params, parent_metrics)
            for row in result.rows:
                child_tags = {
                    "rag_lab.kind": "sweep-config",
                    "config_index": str(row["config_index"]),
                    "best": str(best is not None and row["config_index"] == best["config_index"]).lower(),
                }
                child_tags.update({k: str(row[k]) for k in _ROW_TAGS if row.get(k) not in (None, "")})
                label = ", ".join(f"{k}={row[k]}" for k in result.param_names)
                child = logger.start(f"{run_name or 'sweep'} #{row['config_index']} {label}"[:250], child_tags, parent)
                with _ending(logger, child):
                    metrics = {k: m for k, v in row.items() if k not in skip and (m := _metric(v)) is not None}
                    logger.log(child, {**fixed, **{k: row[k] for k in result.param_names}}, metrics)
            logger.artifacts(parent, artifacts)
    return parent
