"""The evaluation commands of ``rag-lab``: ``eval`` and ``report`` here, ``sweep`` (:mod:`.sweep`),
``gate`` (:mod:`.gate`), ``calibrate`` (:mod:`.calibrate`) and ``convert``; what several of them
set up alike (suites, metrics, judge, MLflow, the projected cost, the evaluation run) is
:mod:`.eval_setup`.

:data:`EVAL_COMMANDS` are registered on the main parser (whose ``--config`` and ``--workspace``
they read); ``python -m rag_lab.commands.evaluate …`` runs them standalone with the same two
options. Every command returns an exit code: 0 success, 1 gate failure, 2 bad input (a
``ValueError`` / ``LookupError`` message printed as ``rag-lab <command>: …``), 3 degraded.

Datasets are given as ``NAME_OR_PATH[:N_QUERIES[:MAX_DOCS[:SEED]]]`` (``--dataset`` repeatable):
``hotpotqa_hipporag100:30:150`` evaluates the first 30 questions against their gold documents
plus distractors up to 150 documents. ``eval --export trec|jsonl|ragas`` also writes the evaluated
set (:mod:`rag_lab.eval.formats`); ``eval --mlflow`` / ``sweep --mlflow`` log the run to MLflow
(:mod:`rag_lab.eval.tracking`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.cliutil import QUIET, command, command_parser, file_stem_arg, flag, many, opt, param_overrides, run_command
from rag_lab.commands import DATASET, OUT, RAGAS, TRACKING, lab_from
from rag_lab.commands.calibrate import cmd_calibrate
from rag_lab.commands.eval_setup import (
    log_run,
    positive_int,
    ragas_metrics_of,
    run_evaluation,
    suite_specs,
    wants_mlflow,
)
from rag_lab.commands.gate import cmd_gate
from rag_lab.commands.sweep import cmd_sweep
from rag_lab.eval.formats import EXPORT_FORMATS

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report import EvalReport
    from rag_lab.lab.lab import Lab

__all__ = ["EVAL_COMMANDS", "main"]


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
        type=positive_int,
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
        type=positive_int,
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
    track = wants_mlflow(args)
    lab = lab_from(args)
    if args.rewrite_effect and "enable_rewrite" in param_overrides(args.param):
        raise ValueError("--rewrite-effect compares with and without the rewrite: drop --param enable_rewrite")
    report = run_evaluation(args, lab)
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

        log_run(args, lab, log_eval, report, run_name=name, artifacts=paths.values())
    return _degraded_exit(report, args.allow_errors)


def _turn_tables(args: argparse.Namespace, lab: Lab, report: EvalReport) -> dict[str, object]:
    """``--per-turn`` / ``--rewrite-effect``: print the tables (:mod:`rag_lab.eval.turns`) and
    return them as JSON-ready data per suite ({} when neither flag is given)."""
    if not (args.per_turn or args.rewrite_effect):
        return {}
    from dataclasses import asdict

    from rag_lab.eval.turns import format_effect, format_turns, per_turn, rewrite_effect

    without = run_evaluation(args, lab, {"enable_rewrite": False}) if args.rewrite_effect else None
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
    metrics = ragas_metrics_of(args)
    judged = [m for m in metrics if m in LLM_METRICS]
    if judged:
        raise ValueError(f"--run scores with the offline metrics; {', '.join(judged)} need rag_lab's judge run")
    dataset = suite_specs(args)[0].load() if args.dataset else None
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
        report = run_evaluation(args)
        name = args.name or "report"
    paths = write_report(report, args.out, name, include_texts=args.include_texts, sort_by=args.sort)
    print(suites_table(report.suites))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


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
