"""``rag-lab calibrate``: the rerank threshold from a labelled slice (:mod:`rag_lab.eval.calibration`),
registered beside the eval commands by :func:`rag_lab.commands.evaluate.add_eval_commands`.

::

    rag-lab calibrate --dataset hotpotqa_distractor40:30:300 [--target-precision 0.5] [--target-recall 0.9]
    rag-lab calibrate --check reports/calibration.json     # is the lab's reranker the calibrated one?
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rag_lab.cliutil import param_overrides

__all__ = ["add_calibrate_command", "cmd_calibrate"]


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Calibrate on ``--dataset`` and write <name>.json / .md / .png; or ``--check`` a result."""
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.calibration import acalibrate, check_calibration, load_calibration
    from rag_lab.eval.gate.provenance import lab_models
    from rag_lab.eval.suite_spec import SuiteSpec, parse_suite_spec
    from rag_lab.lab.outputs import write_calibration

    if not args.dataset and not args.check:
        raise ValueError("give --dataset (to calibrate) or --check RESULT.json (to compare the lab's reranker)")
    lab = _lab(args)
    params = param_overrides(args.param)
    model_id = lab_models(lab).get("reranker", "none")
    previous = load_calibration(args.check) if args.check else None
    if previous is not None and not args.dataset:
        warnings = check_calibration(previous, model_id)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        if not warnings:
            print(f"{args.check}: made with the lab's reranker {model_id!r}")
        return 0
    if len(args.dataset) != 1:
        raise ValueError("calibrate takes one --dataset")
    spec = parse_suite_spec(args.dataset[0])
    if args.limit or args.max_docs:
        spec = SuiteSpec(
            spec.dataset, args.limit or spec.n_queries, args.max_docs or spec.max_docs, spec.seed, spec.name
        )
    ds = spec.load()
    if args.kb:
        kb = args.kb
        lab.workspace.get_kb(kb)  # a missing KB fails here, naming it
    else:
        from rag_lab.eval.runner import ingest_dataset

        kb = spec.kb_name
        ingest_dataset(lab, ds, kb, progress=not args.quiet)
    handle = None
    if not args.no_cache:
        from rag_lab.eval.cache import enable_stage_cache

        handle = enable_stage_cache(lab, args.cache_dir or Path(lab.workspace.root) / "stage_cache")
    try:
        cal = run_sync(
            lambda: acalibrate(
                lab,
                ds,
                kb,
                params=params,
                target_precision=args.target_precision,
                target_recall=args.target_recall,
                suite=spec.name,
            )
        )
    finally:
        if handle is not None:
            handle.disable()
    if previous is not None:
        for w in check_calibration(previous, cal.model_id, cal.score_range):
            print(f"warning: {w}", file=sys.stderr)
    name = args.name or f"calibration_{spec.name}"
    paths = write_calibration(cal, args.out, name)
    print(cal.markdown())
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _lab(args: argparse.Namespace) -> Any:
    from rag_lab.lab.lab import Lab

    ws = getattr(args, "workspace", None)
    return Lab.from_config(getattr(args, "config", None), **({"workspace": ws} if ws else {}))


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 < v <= 1.0:
        raise argparse.ArgumentTypeError(f"{v:g} must be in (0, 1]")
    return v


def add_calibrate_command(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "calibrate", help="rerank threshold from a labelled slice: score distributions, PR curve, end-to-end effect"
    )
    p.add_argument("--dataset", action="append", default=None, metavar="NAME[:N[:MAX_DOCS[:SEED]]]")
    p.add_argument("--limit", type=int, default=None, help="first N questions")
    p.add_argument("--max-docs", type=int, default=None)
    p.add_argument("--kb", default=None, help="an ingested KB holding the dataset's documents (default: ingest it)")
    p.add_argument("--param", action="append", metavar="FIELD=VALUE", help="PipelineParams override (repeatable)")
    p.add_argument("--target-precision", type=_fraction, default=None, metavar="P")
    p.add_argument("--target-recall", type=_fraction, default=None, metavar="R")
    p.add_argument(
        "--check",
        default=None,
        metavar="RESULT.json",
        help="warn when the lab's reranker (and, with --dataset, its score range) is not the one RESULT.json was made with",
    )
    p.add_argument("--cache-dir", default=None, help="stage cache folder (default <workspace>/stage_cache)")
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--out", default="reports")
    p.add_argument("--name", default=None, help="file name (default calibration_<dataset>)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=cmd_calibrate)
