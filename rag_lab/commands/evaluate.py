"""The evaluation commands of ``rag-lab``: eval, sweep, report, gate, convert.

:data:`EVAL_COMMANDS` are registered on the main parser (whose ``--config`` and ``--workspace``
they read); ``python -m rag_lab.commands.evaluate …`` runs them standalone with the same two
options. Every command returns an exit code: 0 success, 1 gate failure, 2 bad input (a
``ValueError`` / ``LookupError`` message printed as ``rag-lab <command>: …``).

Datasets are given as ``NAME_OR_PATH[:N_QUERIES[:MAX_DOCS[:SEED]]]`` (``--dataset`` repeatable):
``hotpotqa_hipporag100:30:150`` evaluates the first 30 questions against their gold documents
plus distractors up to 150 documents.

``eval --export trec|jsonl|ragas`` also writes the evaluated set (:mod:`rag_lab.eval.formats`);
``eval --mlflow`` / ``sweep --mlflow`` log the run to MLflow (:mod:`rag_lab.eval.tracking`).

Kept whole: the declarations and bodies of the eval subcommands (eval, report, sweep, gate,
convert), which share option groups and helpers.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from rag_lab.cliutil import (
    QUIET,
    command,
    command_parser,
    file_stem_arg,
    flag,
    many,
    number_arg,
    opt,
    param_overrides,
    run_command,
)
from rag_lab.commands import CACHE_DIR, DATASET, LIMIT, MAX_DOCS, OUT, RAGAS, SPEC, TRACKING, lab_from
from rag_lab.commands.calibrate import cmd_calibrate
from rag_lab.eval.formats import EXPORT_FORMATS
from rag_lab.eval.metric_defs import GATE_TOLERANCE

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.ragas_adapter import JudgeConfig
    from rag_lab.eval.report import EvalReport
    from rag_lab.eval.suite_spec import SuiteSpec
    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.lab.lab import Lab

_T = TypeVar("_T")

__all__ = ["EVAL_COMMANDS", "main"]


# --------------------------------------------------------------------------- helpers


def _suites(args: argparse.Namespace) -> list[SuiteSpec]:
    from rag_lab.eval.runner import SuiteSpec, parse_suite_spec

    specs = [parse_suite_spec(s) for s in args.dataset]
    if getattr(args, "limit", None) or getattr(args, "max_docs", None):
        specs = [
            SuiteSpec(s.dataset, args.limit or s.n_queries, args.max_docs or s.max_docs, s.seed, s.name, start=s.start)
            for s in specs
        ]
    return specs


def _with_language_metrics(spec: SuiteSpec, chosen: list[str] | None) -> dict[str, object]:
    """A suite spec as a dict; a Chinese dataset also gets the jieba-segmented answer metrics
    (``bleu_zh``, ``rouge_l_zh``) unless the metrics were chosen with --ragas-metric."""
    from rag_lab.eval.ragas_adapter import OFFLINE_METRICS, SEGMENTED_METRICS, contains_han

    d = spec.to_dict()
    if not chosen and spec.ragas_metrics is None:
        ds = spec.load()
        if any(contains_han(q.question) for q in ds.queries[:20]):
            d["ragas_metrics"] = list(OFFLINE_METRICS) + list(SEGMENTED_METRICS)
    return d


def _ragas_metrics(args: argparse.Namespace) -> list[str]:
    from rag_lab.eval.ragas_adapter import LLM_METRICS, OFFLINE_METRICS

    metrics: list[str] = list(args.ragas_metric or [])
    if args.ragas and not metrics:
        metrics = list(OFFLINE_METRICS)
    if args.ragas_llm:
        metrics += [m for m in LLM_METRICS if m not in metrics]
    return metrics


_positive_int = number_arg(int, lambda n: n >= 1, ">= 1")


def _check_arg(text: str) -> int | str:
    """``sweep --check``: ``all`` or N >= 0, the number of best configs re-run on the pipeline."""
    t = text.strip().lower()
    if t == "all" or (t.isascii() and t.isdigit()):
        return t if t == "all" else int(t)
    raise argparse.ArgumentTypeError(f"--check {text!r}: use N >= 0 (re-run the N best configs) or 'all'")


def _judge_for(args: argparse.Namespace, lab: Lab, metrics: list[str]) -> JudgeConfig | None:
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


def _tracking(args: argparse.Namespace) -> bool:
    """Whether to log to MLflow; fails before anything runs when MLflow is not installed."""
    wanted = bool(getattr(args, "mlflow", False) or getattr(args, "mlflow_uri", None))
    if wanted:
        from rag_lab.eval.tracking import require_mlflow

        require_mlflow()
    return wanted


def _log_run(
    args: argparse.Namespace, lab: Lab, log: Callable[..., str], result: EvalReport | SweepResult, **kw: Any
) -> None:
    """Log ``result`` with ``log`` (:func:`~rag_lab.eval.tracking.log_eval` / ``log_sweep``) to the
    ``--mlflow-*`` target and print where it went."""
    from rag_lab.eval.tracking import DEFAULT_EXPERIMENT, tracking_uri

    experiment = args.mlflow_experiment or DEFAULT_EXPERIMENT
    ws = lab.workspace.root
    run_id = log(result, uri=args.mlflow_uri, workspace=ws, experiment=experiment, config=lab.config, **kw)
    print(f"mlflow: run {run_id} in experiment {experiment!r} at {tracking_uri(args.mlflow_uri, ws)}")


def _run(coro_factory: Callable[..., Awaitable[_T]]) -> _T:
    from rag_lab.asyncutil import run_sync

    return run_sync(coro_factory)


# --------------------------------------------------------------------------- commands


def _warn_language(lab: Lab, suites: Sequence[SuiteSpec]) -> None:
    """A ``warning:`` line per dataset whose corpus is Chinese when the embedder its KB gets does
    not cover Chinese (also when its KB was ingested by an earlier run, which then said nothing)."""
    from rag_lab.searchutil.language import sample_text

    for spec in suites:
        ds = spec.load()
        w = lab.language_warning(sample_text(d.text for d in ds.corpus), f"dataset {spec.name!r}")
        if w:
            print(f"warning: {w}", file=sys.stderr)


def _project(
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


def _params_file(path: str | None) -> dict[str, Any]:
    """The ``params:`` of a YAML file (a sweep's ``<name>_best.yaml``, or a lab config's), as
    overrides; the names and values are checked as ``PipelineParams.from_yaml`` checks them."""
    if not path:
        return {}
    from rag_lab.types.params import PipelineParams

    PipelineParams.from_yaml(path)  # names the file, the bad field and value
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return dict(raw.get("params") or {}) if "params" in raw else dict(raw)


def _evaluate(
    args: argparse.Namespace, lab: Lab | None = None, extra: Mapping[str, object] | None = None
) -> EvalReport:
    from rag_lab.eval.runner import evaluate_suites

    params = {**_params_file(getattr(args, "params_file", None)), **param_overrides(args.param), **(extra or {})}
    lab = lab if lab is not None else lab_from(args)
    retrieval_only = bool(getattr(args, "retrieval_only", False))
    if retrieval_only:
        if _ragas_metrics(args):
            raise ValueError("--retrieval-only scores the search stage's list: ragas metrics need answers")
        lab.prepare_texts = False  # nothing will rerank or answer: ingest embeds the chunks alone
    if params:
        lab.resolve_params(params)  # the reranker's score range too: refused before the first question
    metrics = _ragas_metrics(args)
    judge = _judge_for(args, lab, metrics)  # fails here, before anything runs
    repeats = int(getattr(args, "judge_repeats", None) or 1)
    if repeats > 1 and judge is None:
        raise ValueError("--judge-repeats needs LLM judge metrics: add --ragas-llm or --ragas-metric faithfulness …")
    own: list[tuple[str, Dataset, str]] = []
    if getattr(args, "kb", None):
        from rag_lab.eval.own_kb import kb_dataset

        own = [(args.kb, kb_dataset(lab, args.kb, args.queries), args.kb)]
    specs = _suites(args) if args.dataset else []
    _project(args, lab, specs, params, judge=judge, ragas_metrics=metrics, judge_repeats=repeats)
    config = getattr(args, "config", None)
    return _run(
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


@command(
    "eval",
    "ingest datasets, score retrieval (and ragas metrics), write a report",
    *DATASET,
    opt(
        "--run",
        "score another system's outputs instead of rag_lab's pipeline: a TREC run, a samples JSONL or a ragas "
        "EvaluationDataset JSONL (gold from --qrels or --dataset); same metrics, report and gate, no funnel",
        metavar="FILE",
    ),
    opt("--run-format", "with --run (default: guessed)", choices=["trec", "jsonl", "ragas"]),
    opt("--qrels", "with --run: the gold as a TREC qrels file", metavar="FILE"),
    flag(
        "--retrieval-only",
        "stop after search: score the search stage's list (with its vector / keyword / fused stage metrics); "
        "no rerank, merge or answer, and ingest embeds the chunks alone",
    ),
    flag(
        "--per-turn",
        "retrieval metrics per conversation turn (1 + the turns history.jsonl replays before a question)",
    ),
    flag(
        "--rewrite-effect",
        "evaluate again without the query rewrite (enable_rewrite=false) and print, per turn, "
        "ndcg@10 and recall@10 with and without it and the difference's 95%% interval",
    ),
    opt(
        "--kb",
        "evaluate this knowledge base as it is (built by rag-lab ingest; nothing is re-ingested), with --queries",
        metavar="NAME",
    ),
    opt(
        "--queries",
        "with --kb: JSONL questions, each with its gold as document ids, source paths, file names or titles",
        metavar="FILE",
    ),
    opt(
        "--config",
        "apply the params: of this YAML (a sweep's <name>_best.yaml) to every question, under --param; "
        "the lab config stays `rag-lab --config LAB.yaml eval …`",
        dest="params_file",
        metavar="PARAMS.yaml",
    ),
    RAGAS,
    opt(
        "--judge-repeats",
        "score each sample N times with the LLM judge: per-question mean and spread, questions whose "
        "repeats spread wider than the gate's tolerance marked unstable (default 1)",
        type=_positive_int,
        default=1,
        metavar="N",
    ),
    OUT,
    opt("--name", "report file name under --out (default eval_<datasets>)", type=file_stem_arg()),
    flag("--all-formats", "also HTML and JUnit XML"),
    opt(
        "--allow-errors",
        "exit 0 when at most N questions errored or fell back and at most N judge calls failed "
        "(default 0: any such failure exits 3, degraded)",
        type=int,
        default=0,
        metavar="N",
    ),
    many(
        "--export",
        "also write the evaluated set: trec (<name>.run.trec + <name>.qrels.trec), jsonl "
        "(<name>.samples.jsonl, with context texts), ragas (<name>.ragas.jsonl, an EvaluationDataset); repeatable",
        choices=EXPORT_FORMATS,
    ),
    opt(
        "--concurrency",
        "questions in flight at once (default: 1 with the offline models, 8 when a model answers over HTTP; "
        "the lab config's eval.concurrency); results are the same at any N",
        type=_positive_int,
        metavar="N",
    ),
    TRACKING,
    flag(
        "--keep-sessions",
        "store each question and answer in <workspace>/sessions.sqlite, as a chat would (default: not)",
    ),
    QUIET,
)
def cmd_eval(args: argparse.Namespace) -> int:
    """Ingest the datasets, evaluate them, print the means and write <name>.json / .md (and the
    --export files); --mlflow logs the run."""
    from rag_lab.eval.report import suites_table
    from rag_lab.lab.outputs import write_report

    if args.run:
        return _eval_run(args)
    if bool(args.kb) != bool(args.queries):
        raise ValueError("--kb NAME and --queries FILE go together: the questions asked of that knowledge base")
    if not args.dataset and not args.kb:
        raise ValueError(
            "give --dataset NAME (rag_lab's pipeline on a dataset), --kb NAME --queries FILE (a knowledge base "
            "you built) or --run FILE (another system's outputs)"
        )
    track = _tracking(args)
    lab = lab_from(args)
    if args.rewrite_effect and "enable_rewrite" in param_overrides(args.param):
        raise ValueError("--rewrite-effect compares with and without the rewrite: drop --param enable_rewrite")
    report = _evaluate(args, lab)
    print(suites_table(report.suites))
    _print_saturation(report)
    turns = _turn_tables(args, lab, report)
    from rag_lab.eval.review import ALLOW_FLAG, unreviewed_count

    if unreviewed_count(report.meta):
        print(
            f"warning: {unreviewed_count(report.meta)} unreviewed synthetic question(s) in this evaluation: "
            f"review them before a baseline is built on them (rag-lab gate refuses without {ALLOW_FLAG})",
            file=sys.stderr,
        )
    name = args.name or "eval_" + "_".join(s.name for s in report.suites).replace("/", "_")
    formats = ["md", "html", "json", "junit"] if args.all_formats else ["json", "md"]
    paths = write_report(report, args.out, name, formats=formats)
    from rag_lab.eval.runs import record_run

    entry = record_run(lab.workspace.root, report, paths["json"])
    if not args.quiet:
        print(f"recorded as run {entry.id} (rag-lab runs list / compare)", file=sys.stderr)
    if args.export:
        from rag_lab.eval.formats import export_report

        paths.update(export_report(report, args.out, name, args.export))
    if turns:
        paths["turns"] = Path(args.out) / f"{name}.turns.json"
        paths["turns"].write_text(json.dumps(turns, indent=2) + "\n", encoding="utf-8")
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if track:
        from rag_lab.eval.tracking import log_eval

        _log_run(args, lab, log_eval, report, run_name=name, artifacts=paths.values())
    return _degraded_exit(report, args.allow_errors)


def _turn_tables(args: argparse.Namespace, lab: Lab, report: EvalReport) -> dict[str, object]:
    """``--per-turn`` / ``--rewrite-effect``: print the tables (:mod:`rag_lab.eval.turns`) and
    return them as JSON-ready data per suite ({} when neither flag is given)."""
    if not (args.per_turn or args.rewrite_effect):
        return {}
    from dataclasses import asdict

    from rag_lab.eval.turns import format_effect, format_turns, per_turn, rewrite_effect

    without = _evaluate(args, lab, {"enable_rewrite": False}) if args.rewrite_effect else None
    out: dict[str, object] = {}
    for i, suite in enumerate(report.suites):
        rows = per_turn(suite.retrieval.rows, suite.records)
        print(f"{suite.name}, per turn:\n{format_turns(rows)}")
        entry: dict[str, object] = {"per_turn": [asdict(r) for r in rows]}
        if without is not None:
            other = without.suites[i]
            for metric in ("ndcg@10", "recall@10"):
                effect = rewrite_effect(
                    suite.retrieval.rows, suite.records, other.retrieval.rows, other.records, metric
                )
                print(format_effect(effect, metric))
                entry[f"rewrite_effect.{metric}"] = [asdict(e) for e in effect]
        out[suite.name] = entry
    return out


def _eval_run(args: argparse.Namespace) -> int:
    """``eval --run FILE``: another system's outputs scored into a report (:mod:`rag_lab.eval.external`)."""
    from rag_lab.eval.external import evaluate_run
    from rag_lab.eval.ragas_adapter import LLM_METRICS
    from rag_lab.eval.report import suites_table
    from rag_lab.lab.outputs import write_report

    if args.param or args.params_file:
        raise ValueError("--run scores outputs that are already made: --param and --config do not apply")
    if args.dataset and len(args.dataset) > 1:
        raise ValueError("--run takes one --dataset (the questions and gold of that run)")
    metrics = _ragas_metrics(args)
    judged = [m for m in metrics if m in LLM_METRICS]
    if judged:
        raise ValueError(f"--run scores with the offline metrics; {', '.join(judged)} need rag_lab's judge run")
    dataset = _suites(args)[0].load() if args.dataset else None
    name = args.name or "eval_" + Path(args.run).name.split(".")[0]
    suite = dataset.name if dataset is not None else "run"  # the same for every run of a system: gated suite by suite
    report = evaluate_run(
        args.run, suite, fmt=args.run_format, qrels=args.qrels, dataset=dataset, ragas_metrics=metrics
    )
    print(suites_table(report.suites))
    _print_saturation(report)
    formats = ["md", "html", "json", "junit"] if args.all_formats else ["json", "md"]
    paths = write_report(report, args.out, name, formats=formats)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _print_saturation(report: EvalReport) -> None:
    """One ``saturation:`` line per suite (:mod:`rag_lab.eval.saturation`): how many questions sit
    at each headline metric's ceiling, i.e. cannot show an improvement."""
    from rag_lab.eval.saturation import saturation_line

    for s in report.suites:
        prefix = f"{s.name}: " if len(report.suites) > 1 else ""
        print(prefix + saturation_line(s.saturation()))


#: exit code of an evaluation some of whose questions or judge calls failed (as ``rag-lab ask``'s fallback)
DEGRADED_EXIT = 3


def _degraded_exit(report: EvalReport, allowed: int) -> int:
    """0, or :data:`DEGRADED_EXIT` with one line on stderr when more than ``allowed`` questions
    errored or fell back on a model fault, or more than ``allowed`` judge calls failed (HTTP
    failures, or samples of an LLM metric the judge could not score): the count and the first
    reason."""
    from rag_lab.eval.ragas_adapter import LLM_METRICS

    failed = [(s.name, r) for s in report.suites for r in s.records if r.error]
    http_failed = sum(int((s.ragas.judge or {}).get("failed") or 0) for s in report.suites if s.ragas is not None)
    unscored = [
        (s.name, q, m, s.ragas.reasons.get(m, {}).get(q, "no reason recorded"))
        for s in report.suites
        if s.ragas is not None
        for m, qids in s.ragas.failed.items()
        if m in LLM_METRICS
        for q in qids
    ]
    n_judge = max(http_failed, len(unscored))
    parts = []
    if failed:
        suite, rec = failed[0]
        kind = "fell back" if rec.is_fallback else "errored"
        n_q = sum(len(s.records) for s in report.suites)
        parts.append(
            f"{len(failed)} of {n_q} questions errored or fell back (first: {suite}/{rec.qid} {kind}: {rec.error})"
        )
    if n_judge:
        first = f" (first: {unscored[0][0]}/{unscored[0][1]} {unscored[0][2]}: {unscored[0][3]})" if unscored else ""
        parts.append(f"{n_judge} judge call(s) failed{first}")
    if not parts:
        return 0
    if len(failed) <= allowed and n_judge <= allowed:
        print(f"warning: {'; '.join(parts)}; within --allow-errors {allowed}", file=sys.stderr)
        return 0
    print(f"degraded: {'; '.join(parts)}; the report was written (--allow-errors N accepts up to N)", file=sys.stderr)
    return DEGRADED_EXIT


@command(
    "report",
    "write Markdown, HTML, JSON and JUnit XML reports",
    opt("--from", "re-render a report JSON", dest="from_json", metavar="REPORT.json"),
    *DATASET,
    RAGAS,
    OUT,
    opt("--name", "report file name under --out", type=file_stem_arg()),
    flag("--include-texts", "keep context texts in the JSON"),
    opt("--sort", "per-query rows by this metric, lowest first", metavar="METRIC"),
    QUIET,
)
def cmd_report(args: argparse.Namespace) -> int:
    """Write Markdown, HTML, JSON and JUnit XML: from a report JSON (--from) or a fresh evaluation."""
    from rag_lab.eval.report import load_report, suites_table
    from rag_lab.lab.outputs import write_report

    if args.from_json:
        report = load_report(args.from_json)
        name = args.name or Path(args.from_json).name.removesuffix(".json")
    else:
        if not args.dataset:
            raise ValueError("give --dataset (to evaluate) or --from REPORT.json (to re-render)")
        report = _evaluate(args)
        name = args.name or "report"
    paths = write_report(report, args.out, name, include_texts=args.include_texts, sort_by=args.sort)
    print(suites_table(report.suites))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


@command(
    "sweep",
    "grid / optuna sweep over PipelineParams fields",
    many("--dataset", required=True, metavar=SPEC),
    LIMIT,
    MAX_DOCS,
    many("--param", "a swept parameter (repeatable)", required=True, metavar="NAME=LO:HI:STEP|LO:HI|A,B,C"),
    many("--set", "fixed override for every config", metavar="FIELD=VALUE"),
    opt(
        "--objective",
        "metric to rank configs by: a retrieval metric, an offline ragas metric, latency_ms, or a "
        "gold-funnel metric (search.recall@50, rerank.hit@10, funnel.lost_at.rerank, …)",
        default="ndcg@10",
    ),
    many("--ragas-metric", "offline ragas metric to compute too", metavar="NAME"),
    opt("--optuna-trials", "use optuna (TPE) with N trials instead of the grid", type=int, default=0),
    opt("--seed", type=int, default=0),
    CACHE_DIR,
    flag("--no-cache", "re-run every stage for every config"),
    flag(
        "--no-fast",
        "run every config through the full pipeline (default: the fast evaluator for post-retrieval params)",
    ),
    opt(
        "--check",
        "audit the fast evaluator: re-run the N best configs by the objective (or all) through the full "
        "pipeline; any difference fails the sweep and nothing is written (default 0: none)",
        type=_check_arg,
        default=0,
        metavar="N|all",
    ),
    opt(
        "--budget",
        "refuse to start when the projected model cost (all configs, no cache) is over this",
        type=float,
        metavar="USD",
    ),
    opt(
        "--ray",
        "run the configs on Ray Tune (extra 'distributed'): no ADDRESS = a local cluster started for the run, "
        "'auto' = this machine's cluster, 'ray://head:10001' = a remote one",
        nargs="?",
        const="local",
        metavar="ADDRESS",
    ),
    opt(
        "--holdout",
        "choose the best config on the other questions and report it on a seeded fraction F of each dataset's "
        "questions (or on the dataset spec SPEC, e.g. NAME@50-100): held-out score against the default config, "
        "CI, optimism and a verdict better | not better | worse; only 'better' writes the tuned params to "
        "NAME_best.yaml (else it keeps the default and the tuned config goes to NAME_tuned.yaml)",
        metavar="F|SPEC",
    ),
    flag("--fail-if-not-better", "with --holdout: exit 1 when the held-out verdict is not 'better'"),
    opt(
        "--folds",
        "with --holdout F: repeat the tune / held-out split with K seeds (--seed, --seed+1, …) and print the "
        "spread of the verdict; the outputs are the first split's",
        type=_positive_int,
        default=1,
        metavar="K",
    ),
    opt("--ray-workers", "concurrent trials (CPUs of a local cluster)", type=int, default=2),
    opt(
        "--ray-min-configs",
        "smaller sweeps stay in-process even with --ray (0 = always Ray)",
        type=int,
        default=8,
        metavar="N",
    ),
    OUT,
    opt("--name", "output file names under --out", default="sweep", type=file_stem_arg()),
    opt("--top", type=int, default=10),
    TRACKING,
    QUIET,
)
def cmd_sweep(args: argparse.Namespace) -> int:
    """Grid (or optuna) sweep; CSV, plots, best-config YAML and a summary under --out."""
    from rag_lab.eval.sweep import parse_param, run_grid, run_optuna
    from rag_lab.lab.outputs import write_sweep_outputs

    spaces = [parse_param(s) for s in args.param]
    base = param_overrides(args.set)
    track = _tracking(args)
    lab = lab_from(args)
    cache_dir = None if args.no_cache else (args.cache_dir or Path(lab.workspace.root) / "stage_cache")
    suites = _suites(args)
    n_configs = args.optuna_trials or math.prod(max(1, len(getattr(s, "values", None) or [])) for s in spaces)
    _project(args, lab, suites, base, repeat=n_configs)
    metrics = list(args.ragas_metric or [])
    from rag_lab.eval.sweep.distributed import choose_executor, run_sweep_on_ray
    from rag_lab.eval.sweep.fast import fast_path_reason

    n_q = sum(s.n_queries or 0 for s in suites)
    address = None if args.ray == "local" else args.ray
    choice = choose_executor(
        n_configs,
        n_q,
        address,
        requested=args.ray is not None,
        workers=args.ray_workers,
        min_configs=args.ray_min_configs,
        fast=not args.no_fast and not args.optuna_trials and not fast_path_reason(args.objective, metrics),
    )
    if args.ray is not None or not args.quiet:
        print(choice, file=sys.stderr)
    holdout = None
    fold_line = ""
    if (args.fail_if_not_better or args.folds > 1) and args.holdout is None:
        raise ValueError("--fail-if-not-better and --folds need --holdout")
    # what every runner takes alike
    common: dict[str, Any] = dict(
        ragas_metrics=metrics,
        base_params=base,
        cache_dir=cache_dir,
        progress=not args.quiet,
        fast=not args.no_fast,
        check=args.check,
    )
    if args.holdout is not None:
        from rag_lab.eval.sweep.holdout import run_holdout

        if args.ray is not None:
            raise ValueError("--holdout runs in this process: leave out --ray")
        try:
            held: Any = float(args.holdout)
        except ValueError:
            from rag_lab.eval.runner import parse_suite_spec

            held = [parse_suite_spec(args.holdout)]
        if args.folds > 1 and not isinstance(held, float):
            raise ValueError("--folds K needs --holdout F (a fraction): a held-out SPEC is one fixed split")
        folds = []
        for k in range(args.folds):
            folds.append(
                _run(
                    lambda seed=args.seed + k: run_holdout(
                        lab, suites, spaces, args.objective, held, seed=seed, n_trials=args.optuna_trials, **common
                    )
                )
            )
        result, holdout = folds[0]
        if args.folds > 1:
            from rag_lab.eval.sweep.holdout import folds_summary

            result.holdout = {**(result.holdout or {}), "folds": [ho.to_dict() for _, ho in folds]}
            fold_line = folds_summary([ho for _, ho in folds])
    elif choice.kind == "ray":
        result = _run(
            lambda: run_sweep_on_ray(
                lab,
                suites,
                spaces,
                args.objective,
                n_trials=args.optuna_trials,
                seed=args.seed,
                ray_address=address,
                workers=args.ray_workers,
                **common,
            )
        )
    elif args.optuna_trials:
        result = _run(
            lambda: run_optuna(lab, suites, spaces, args.optuna_trials, args.objective, seed=args.seed, **common)
        )
    else:
        result = _run(lambda: run_grid(lab, suites, spaces, args.objective, **common))
    paths = write_sweep_outputs(result, args.out, args.name)
    with_errors = [r for r in result.rows if r["errors"]]
    if with_errors:
        print(
            f"warning: {len(with_errors)} of {len(result.rows)} configs had pipeline errors (scored 0), e.g. "
            f"{with_errors[0]['first_error']}",
            file=sys.stderr,
        )
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    best = result.best()
    print(result.markdown(top=args.top))
    print(
        f"best {args.objective}{' on the tuning part' if holdout is not None else ''} = "
        f"{best[args.objective]:.4f} with " + ", ".join(f"{k}={best[k]}" for k in result.param_names)
    )
    stats = dict(result.cache_stats)
    fast = stats.pop("fast_path", None)
    if stats:
        print("stage cache: " + ", ".join(f"{k} {v['hits']} hits / {v['misses']} misses" for k, v in stats.items()))
    if fast is not None:
        checked = fast["checked_configs"]
        audit = f" (configs {', '.join(map(str, checked))}): identical contexts, scores and metrics" if checked else ""
        print(
            f"fast evaluator: {len(result.rows)} configs in {fast['evaluate_s']:.3f} s after {fast['captures']} "
            f"capture(s) ({fast['capture_s']:.1f} s); re-checked on the full pipeline: {fast['check_plan']}{audit}"
        )
    if holdout is not None:
        print(holdout.line())
        if fold_line:
            print(fold_line)
        print(holdout.decision(args.name))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if track:
        from rag_lab.eval.tracking import log_sweep

        _log_run(
            args,
            lab,
            log_sweep,
            result,
            run_name=args.name,
            lab_params=lab.params.model_dump(mode="json"),
            suites=[s.to_dict() for s in suites],
            artifacts=paths.values(),
        )
    if holdout is not None and args.fail_if_not_better and not holdout.applies:
        return 1
    return 0


@command(
    "gate",
    "compare with a baseline report; exit 1 on regression or NaN",
    opt("--baseline", required=True),
    opt("--current", "a report JSON (default: re-run the baseline's spec)"),
    many("--param", "override for the re-run", metavar="FIELD=VALUE"),
    many(
        "--metric",
        "gated metric (default: the usual set; gold-funnel metrics such as fused.recall@10 too)",
        metavar="NAME[:TOL]",
    ),
    opt("--tolerance", type=float, default=GATE_TOLERANCE),
    opt("--alpha", type=float, default=0.05),
    opt("--test", choices=("permutation", "bootstrap"), default="permutation"),
    opt("--resamples", type=int, default=10_000),
    opt("--seed", type=int, default=0),
    flag(
        "--fail-on-change",
        "fail when any question's ranking, contexts or answer changed (deterministic setups)",
    ),
    opt("--ci-level", "confidence level of the deltas' bootstrap CIs", type=float, default=0.95),
    flag(
        "--allow-underpowered",
        "pass inconclusive checks (mean within the tolerance, a drop of it not ruled out); never a probable "
        "regression (mean drop beyond the tolerance)",
    ),
    opt(
        "--correction",
        "correction of the p-values across the checks (default holm)",
        choices=("holm", "none"),
        default="holm",
    ),
    opt(
        "--max-baseline-age-days",
        "warn when the baseline is older (0: never)",
        type=float,
        default=90.0,
        metavar="DAYS",
    ),
    opt(
        "--summary-md",
        "append a short Markdown summary (e.g. $GITHUB_STEP_SUMMARY, a PR comment)",
        metavar="PATH",
    ),
    flag(
        "--allow-unreviewed",
        "build, update or compare against a baseline whose questions include unreviewed synthetic ones "
        "(rag-lab testset output nobody checked); refused without it",
    ),
    opt("--headroom", argparse.SUPPRESS),  # ignored since every metric is gated
    opt("--out", "write gate.json, gate.md, gate.html, gate.junit.xml and the current report here"),
    flag("--update", "re-run and write the baseline instead of gating"),
    many("--dataset", "with --update: the suites of a new baseline", metavar=SPEC),
    LIMIT,
    MAX_DOCS,
    many("--ragas-metric", "with --update: ragas metrics", metavar="NAME"),
    QUIET,
)
def cmd_gate(args: argparse.Namespace) -> int:
    """Compare with the baseline (re-running its spec unless --current); non-zero on regression."""
    from rag_lab.eval.gate import GatePolicy, evaluate_spec, parse_metric_tolerances, run_gate
    from rag_lab.eval.report import load_report
    from rag_lab.lab.outputs import write_gate, write_report

    params = param_overrides(args.param)
    if args.update:
        if args.dataset:
            from rag_lab.eval.ragas_adapter import OFFLINE_METRICS

            spec = {
                "suites": [_with_language_metrics(s, args.ragas_metric) for s in _suites(args)],
                "ks": [1, 3, 5, 10],
                "ragas_metrics": list(args.ragas_metric or OFFLINE_METRICS),
                "params": params,
            }
        else:
            raw_spec: Any = load_report(args.baseline).meta.get("spec") or {}
            spec = dict(raw_spec)
            if not spec:
                raise ValueError(f"{args.baseline}: has no spec; give --dataset to create a baseline")
            old_params: Any = spec.get("params") or {}
            spec["params"] = {**dict(old_params), **params}
        from rag_lab.eval.review import refuse_unreviewed, spec_unreviewed

        unreviewed = spec_unreviewed(spec)
        if unreviewed and not args.allow_unreviewed:
            raise ValueError(refuse_unreviewed(unreviewed, f"the baseline {args.baseline} would be"))
        report = evaluate_spec(
            spec,
            lab_factory=lambda ws: lab_from(args, ws),
            config=args.config,
            workspace=args.workspace,
            close_lab=True,
            progress=not args.quiet,
        )
        out = Path(args.baseline)
        if out.is_file() and not args.dataset:  # a refreshed baseline keeps its judge calibration
            old = load_report(out).meta.get("judge_calibration")
            if old is not None:
                report.meta["judge_calibration"] = old
        paths = write_report(report, out.parent, out.name.removesuffix(".json"), formats=["json"])
        print(f"baseline written: {paths['json']}")
        return 0
    if args.current and params:
        raise ValueError("--param applies to a re-run of the baseline's spec, not to --current")
    metrics, tols = parse_metric_tolerances(args.metric or [])
    policy = GatePolicy(
        metrics=metrics or None,
        tolerance=args.tolerance,
        tolerances=tols,
        alpha=args.alpha,
        test=args.test,
        n_resamples=args.resamples,
        seed=args.seed,
        fail_on_change=args.fail_on_change,
        ci_level=args.ci_level,
        allow_underpowered=args.allow_underpowered,
        correction=args.correction,
        max_age_days=args.max_baseline_age_days,
        allow_unreviewed=args.allow_unreviewed,
    )
    if args.headroom is not None:
        print(
            "warning: --headroom is ignored: every metric is gated against drops, saturated ones included "
            "(a metric at its ceiling is reported as such)",
            file=sys.stderr,
        )
    result = run_gate(
        args.baseline,
        args.current,
        policy,
        params=params,
        lab_factory=lambda ws: lab_from(args, ws),
        config=args.config,
        workspace=args.workspace,
        close_lab=True,
        progress=not args.quiet,
    )
    print(result.table())
    if args.summary_md:
        summary = Path(args.summary_md)
        summary.parent.mkdir(parents=True, exist_ok=True)
        with summary.open("a", encoding="utf-8") as fh:  # appended, as $GITHUB_STEP_SUMMARY expects
            fh.write(result.summary_markdown())
    if args.out:
        out = Path(args.out)
        write_gate(result, out)
        if result.current is not None and args.current is None:
            write_report(result.current, out, "gate_current", formats=["json", "md"])
    return result.exit_code


@command(
    "convert",
    "convert SQuAD-style JSON, a BEIR folder, ragas/HF JSONL or TREC topics+qrels to the dataset format",
    opt("layout", choices=("squad", "beir", "ragas", "trec")),
    opt("source", "the SQuAD JSON file, the BEIR folder, the ragas JSONL or the TREC topics file"),
    opt("--qrels", "trec: the qrels file (grades kept for graded nDCG)"),
    opt("--corpus", "trec (required) / ragas (optional): corpus.jsonl or a dataset folder"),
    opt("--out", "output dataset folder", required=True),
    opt("--split", "BEIR qrels split", default="test"),
    opt("--min-score", "BEIR: minimum relevance score of a gold document", type=int, default=1),
    flag("--skip-impossible", "SQuAD 2.0: drop unanswerable questions"),
    flag("--overwrite"),
)
def cmd_convert(args: argparse.Namespace) -> int:
    """SQuAD-style JSON or a BEIR folder → corpus.jsonl + queries.jsonl."""
    from rag_lab.eval.datasets import convert_beir, convert_squad

    if args.layout in ("ragas", "trec"):
        from rag_lab.eval.datasets import read_ragas_jsonl, read_trec, write_dataset

        if args.layout == "trec" and not (args.qrels and args.corpus):
            raise ValueError("convert trec: --qrels and --corpus are required (the source is the topics file)")
        read = (
            read_ragas_jsonl(args.source, corpus=args.corpus)
            if args.layout == "ragas"
            else read_trec(args.source, args.qrels, args.corpus)
        )
        ds = write_dataset(read.corpus, read.queries, args.out, overwrite=args.overwrite)
        for line in read.skipped_lines:
            print(line)
    elif args.layout == "squad":
        ds = convert_squad(args.source, args.out, skip_impossible=args.skip_impossible, overwrite=args.overwrite)
    else:
        ds = convert_beir(args.source, args.out, split=args.split, min_score=args.min_score, overwrite=args.overwrite)
    print(f"wrote {ds.path}: {len(ds.corpus)} documents, {len(ds.queries)} queries")
    return 0


# --------------------------------------------------------------------------- entry point

#: the evaluation commands, in the help's order
EVAL_COMMANDS = (cmd_eval, cmd_report, cmd_sweep, cmd_gate, cmd_convert, cmd_calibrate)


def main(argv: list[str] | None = None) -> int:
    """``python -m rag_lab.commands.evaluate …``: the ``rag-lab`` evaluation commands (same options, same errors)."""
    return run_command(command_parser("rag-lab evaluation commands", *EVAL_COMMANDS), argv)


if __name__ == "__main__":
    raise SystemExit(main())
