"""``rag-lab judge serve`` (the local judge server, :mod:`rag_lab.eval.judge_server`) and ``rag-lab judge
calibrate``: the LLM judge against human labels (:mod:`rag_lab.eval.judge.calibrate`).

::

    rag-lab judge calibrate --labels labels.jsonl --report reports/eval_mykb.json
    rag-lab judge calibrate --labels labels.jsonl --dataset datasets/mykb --judge-model M --judge-base-url URL
    rag-lab judge calibrate --labels labels.jsonl --report R.json --attach reports/baseline.json

With ``--report`` the judge scores already in an evaluation report (its ragas values) are
compared; with ``--dataset`` the questions are evaluated now and the labelled metrics scored by the
judge (``--judge-*`` or the lab config's ``models.judge``). The result is written as JSON (``--out``,
default ``reports/judge_calibration.json``) and, with ``--attach``, stored in that report as
``meta.judge_calibration`` (the report is checked against the schema before it is rewritten).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.cliutil import QUIET, Command, command, group, opt
from rag_lab.commands import DATASET, JUDGE, lab_from
from rag_lab.eval.judge_server import DEFAULT_CTX

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report import EvalReport

__all__ = ["JUDGE_COMMAND"]


def _judge_info(report: EvalReport, base_url: str = "") -> dict[str, object]:
    """The judge model and prompt hashes a report's ragas results record (first suite that has them)."""
    info: dict[str, object] = {"model": "", "base_url": base_url, "prompt_hash": {}}
    for s in report.suites:
        j = (s.ragas.judge if s.ragas is not None else None) or {}
        if j.get("model"):
            info["model"] = j["model"]
            info["prompt_hash"] = dict(j.get("prompt_hash") or {})
            break
    return info


def _attach(result: dict[str, object], target: str) -> None:
    from rag_lab.eval.report import EvalReport, ReportError

    path = Path(target)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: file not found (--attach needs an existing report)") from None
    except ValueError as exc:
        raise ReportError(f"{path}: cannot read report JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("meta", {}), dict):
        raise ReportError(f"{path}: not a rag_lab evaluation report")
    data.setdefault("meta", {})["judge_calibration"] = result
    EvalReport.from_dict(data, source=str(path))  # the whole report, calibration included, is checked
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")


@command(
    "calibrate",
    "agreement of the LLM judge with human labels (κ, α, Spearman, bias)",
    opt("--labels", "human labels, JSONL (docs/gate.md)", required=True, metavar="FILE"),
    opt("--report", "take the judge scores from this report", metavar="REPORT.json"),
    *DATASET,
    group("judge (with --dataset; default: the lab config's models.judge)", *JUDGE),
    opt("--out", "the result JSON", default="reports/judge_calibration.json"),
    opt("--attach", "store the result in this report's meta", metavar="REPORT.json"),
    QUIET,
)
def cmd_judge_calibrate(args: argparse.Namespace) -> int:
    from rag_lab.eval.judge.calibrate import calibrate, calibration_table, report_scores
    from rag_lab.eval.judge.labels import labels_digest, read_labels
    from rag_lab.eval.report import load_report

    labels = read_labels(args.labels)
    if bool(args.report) == bool(args.dataset):
        raise ValueError("give either --report REPORT.json (scores already there) or --dataset (score now)")
    metrics = list(dict.fromkeys(lab.metric for lab in labels))
    if args.report:
        report = load_report(args.report)
        have = {m for s in report.suites if s.ragas is not None for m in s.ragas.metrics}
        lacking = [m for m in metrics if m not in have]
        if lacking:
            raise ValueError(
                f"{args.report}: has no judge scores for {', '.join(lacking)} (labelled in {args.labels}); "
                "evaluate with --ragas-llm, or give --dataset to score now"
            )
        source, base_url = f"report {args.report}", ""
    else:
        from rag_lab.commands.eval_setup import run_evaluation

        args.ragas_metric, args.ragas, args.ragas_llm = metrics, False, False  # what run_evaluation scores
        lab = lab_from(args)
        report = run_evaluation(args, lab)
        source = "judge run on " + ", ".join(s.name for s in report.suites)
        base_url = args.judge_base_url or str(((lab.config.get("models") or {}).get("judge") or {}).get("base_url", ""))
    info = _judge_info(report, base_url)
    if args.judge_model and not info["model"]:
        info["model"] = args.judge_model
    result = calibrate(labels, report_scores(report), info, source, str(args.labels), labels_digest(args.labels))
    print(calibration_table(result))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False, allow_nan=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    if args.attach:
        _attach(result, args.attach)
        print(f"stored as meta.judge_calibration in {args.attach}")
    return 0


@command(
    "serve",
    "start llama-server on a free loopback port and print its config",
    opt("--port", "port on 127.0.0.1 (default: a free one)", type=int, default=0),
    opt("--threads", "CPU threads (default 1; 2 only on an idle machine)", type=int, default=1),
    opt("--ctx-size", f"context tokens (default {DEFAULT_CTX}: default params fit)", type=int, default=DEFAULT_CTX),
)
def cmd_judge_serve(args: argparse.Namespace) -> int:
    """``rag-lab judge serve [--port N] [--threads N] [--ctx-size N]`` (:mod:`rag_lab.eval.judge_server`)."""
    from rag_lab.eval.judge_server import serve

    return serve(args.port, args.threads, args.ctx_size)


JUDGE_COMMAND = Command(
    "judge",
    "a local LLM judge (llama-server with SmolLM2-135M); its agreement with human labels",
    subcommands=(cmd_judge_serve, cmd_judge_calibrate),
)
