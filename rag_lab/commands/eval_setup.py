"""What the evaluation commands set up alike before they run: the suite specs of ``--dataset`` /
``--limit`` / ``--max-docs`` and the Chinese answer metrics of a baseline's suites, the ragas
metrics and the judge they need, MLflow logging (``--mlflow``), the projected cost printed and
checked against ``--budget``, and the evaluation run itself (:func:`run_evaluation`, shared by
``eval``, ``report`` and ``judge calibrate``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from rag_lab.asyncutil import run_sync
from rag_lab.cliutil import number_arg, param_overrides
from rag_lab.commands import lab_from

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.ragas_adapter import JudgeConfig
    from rag_lab.eval.report import EvalReport
    from rag_lab.eval.suite_spec import SuiteSpec
    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.lab.lab import Lab


def suite_specs(args: argparse.Namespace) -> list[SuiteSpec]:
    """The ``--dataset`` specs, cut by ``--limit`` / ``--max-docs`` when given."""
    from rag_lab.eval.runner import SuiteSpec, parse_suite_spec

    specs = [parse_suite_spec(s) for s in args.dataset]
    if getattr(args, "limit", None) or getattr(args, "max_docs", None):
        specs = [
            SuiteSpec(s.dataset, args.limit or s.n_queries, args.max_docs or s.max_docs, s.seed, s.name, start=s.start)
            for s in specs
        ]
    return specs


def with_language_metrics(spec: SuiteSpec, chosen: list[str] | None) -> dict[str, object]:
    """A suite spec as a dict; a Chinese dataset also gets the jieba-segmented answer metrics
    (``bleu_zh``, ``rouge_l_zh``) unless the metrics were chosen with --ragas-metric."""
    from rag_lab.eval.ragas_adapter import OFFLINE_METRICS, SEGMENTED_METRICS, contains_han

    d = spec.to_dict()
    if not chosen and spec.ragas_metrics is None:
        ds = spec.load()
        if any(contains_han(q.question) for q in ds.queries[:20]):
            d["ragas_metrics"] = list(OFFLINE_METRICS) + list(SEGMENTED_METRICS)
    return d


positive_int = number_arg(int, lambda n: n >= 1, ">= 1")


def wants_mlflow(args: argparse.Namespace) -> bool:
    """Whether to log to MLflow; fails before anything runs when MLflow is not installed."""
    wanted = bool(getattr(args, "mlflow", False) or getattr(args, "mlflow_uri", None))
    if wanted:
        from rag_lab.eval.tracking import require_mlflow

        require_mlflow()
    return wanted


def log_run(
    args: argparse.Namespace, lab: Lab, log: Callable[..., str], result: EvalReport | SweepResult, **kw: object
) -> None:
    """Log ``result`` with ``log`` (:func:`~rag_lab.eval.tracking.log_eval` / ``log_sweep``) to the
    ``--mlflow-*`` target and print where it went."""
    from rag_lab.eval.tracking import DEFAULT_EXPERIMENT, tracking_uri

    experiment = args.mlflow_experiment or DEFAULT_EXPERIMENT
    ws = lab.workspace.root
    run_id = log(result, uri=args.mlflow_uri, workspace=ws, experiment=experiment, config=lab.config, **kw)
    print(f"mlflow: run {run_id} in experiment {experiment!r} at {tracking_uri(args.mlflow_uri, ws)}")


def _warn_language(lab: Lab, suites: Sequence[SuiteSpec]) -> None:
    """A ``warning:`` line per dataset whose corpus is Chinese when the embedder its KB gets does
    not cover Chinese (also when its KB was ingested by an earlier run, which then said nothing)."""
    from rag_lab.searchutil.language import sample_text

    for spec in suites:
        ds = spec.load()
        w = lab.language_warning(sample_text(d.text for d in ds.corpus), f"dataset {spec.name!r}")
        if w:
            print(f"warning: {w}", file=sys.stderr)


def project(
    args: argparse.Namespace,
    lab: Lab,
    suites: Sequence[SuiteSpec],
    params: Mapping[str, object] | None = None,
    repeat: int = 1,
    judge: JudgeConfig | None = None,
    ragas_metrics: Sequence[str] = (),
    judge_repeats: int = 1,
) -> None:
    """Print the projected model calls / tokens / cost (the LLM judge's included); refuse to start
    over --budget."""
    from rag_lab.eval.ragas_adapter import add_judge_projection
    from rag_lab.observability.projection import project_suites

    p = lab.params.with_changes(**params) if params else lab.params
    _warn_language(lab, suites)
    projection = project_suites(lab, suites, p, repeat=repeat)
    add_judge_projection(projection, lab, suites, judge, ragas_metrics, p, repeat * judge_repeats)
    if not getattr(args, "quiet", False):
        print("projected: " + projection.describe(), file=sys.stderr)
    projection.check_budget(getattr(args, "budget", None))


def ragas_metrics_of(args: argparse.Namespace) -> list[str]:
    from rag_lab.eval.ragas_adapter import LLM_METRICS, OFFLINE_METRICS

    metrics: list[str] = list(args.ragas_metric or [])
    if args.ragas and not metrics:
        metrics = list(OFFLINE_METRICS)
    if args.ragas_llm:
        metrics += [m for m in LLM_METRICS if m not in metrics]
    return metrics


def judge_for(args: argparse.Namespace, lab: Lab, metrics: list[str]) -> JudgeConfig | None:
    """The judge the LLM metrics among ``metrics`` need (``--judge-*``, else ``models.judge``);
    None without LLM metrics. A missing judge is an error before anything is ingested or asked."""
    from rag_lab.eval.ragas_adapter import LLM_METRICS, JudgeConfig, RagasError, judge_from_lab_config

    wanted = [m for m in metrics if m in LLM_METRICS]
    if not wanted:
        return None
    if getattr(args, "judge_model", None) or getattr(args, "judge_base_url", None):
        cfg: dict[str, object] = {"model": args.judge_model, "base_url": args.judge_base_url}
        if args.judge_api_key_env:
            cfg["api_key_env"] = args.judge_api_key_env
        return JudgeConfig.from_mapping(cfg, source="--judge-*")
    judge = judge_from_lab_config(lab.config)
    if judge is None:
        raise RagasError(
            f"LLM metric(s) {', '.join(wanted)} need a judge: set models.judge in the lab config "
            "(see docs/evaluation.md) or give --judge-model and --judge-base-url"
        )
    return judge


def params_file(path: str | None) -> dict[str, object]:
    """The ``params:`` of a YAML file (a sweep's ``<name>_best.yaml``, or a lab config's), as
    overrides; the names and values are checked as ``PipelineParams.from_yaml`` checks them."""
    if not path:
        return {}
    from rag_lab.types.params import PipelineParams

    PipelineParams.from_yaml(path)  # names the file, the bad field and value
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return dict(raw.get("params") or {}) if "params" in raw else dict(raw)


def run_evaluation(
    args: argparse.Namespace, lab: Lab | None = None, extra: Mapping[str, object] | None = None
) -> EvalReport:
    from rag_lab.eval.runner import evaluate_suites

    params = {**params_file(getattr(args, "params_file", None)), **param_overrides(args.param), **(extra or {})}
    lab = lab if lab is not None else lab_from(args)
    retrieval_only = bool(getattr(args, "retrieval_only", False))
    if retrieval_only:
        if ragas_metrics_of(args):
            raise ValueError("--retrieval-only scores the search stage's list: ragas metrics need answers")
        lab.prepare_texts = False  # nothing will rerank or answer: ingest embeds the chunks alone
    if params:
        lab.resolve_params(params)  # the reranker's score range too: refused before the first question
    metrics = ragas_metrics_of(args)
    judge = judge_for(args, lab, metrics)  # fails here, before anything runs
    repeats = int(getattr(args, "judge_repeats", None) or 1)
    if repeats > 1 and judge is None:
        raise ValueError("--judge-repeats needs LLM judge metrics: add --ragas-llm or --ragas-metric faithfulness …")
    own: list[tuple[str, Dataset, str]] = []
    if getattr(args, "kb", None):
        from rag_lab.eval.own_kb import kb_dataset

        own = [(args.kb, kb_dataset(lab, args.kb, args.queries), args.kb)]
    specs = suite_specs(args) if args.dataset else []
    project(args, lab, specs, params, judge=judge, ragas_metrics=metrics, judge_repeats=repeats)
    config = getattr(args, "config", None)
    return run_sync(
        lambda: evaluate_suites(
            lab,
            specs,
            loaded=own,
            retrieval_only=retrieval_only,
            params=params or None,
            ragas_metrics=metrics,
            judge=judge,
            progress=not args.quiet,
            meta={"config": config},
            concurrency=getattr(args, "concurrency", None),
            keep_sessions=bool(getattr(args, "keep_sessions", False)),
            judge_repeats=repeats,
        )
    )
