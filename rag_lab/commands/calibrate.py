"""``rag-lab calibrate``: the rerank threshold from a labelled slice (:mod:`rag_lab.eval.calibration`),
registered beside the eval commands (:data:`rag_lab.commands.evaluate.EVAL_COMMANDS`).

::

    rag-lab calibrate --dataset hotpotqa_distractor40:30:300 [--target-precision 0.5] [--target-recall 0.9]
    rag-lab calibrate --check reports/calibration.json     # is the lab's reranker the calibrated one?
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rag_lab.cliutil import QUIET, command, flag, many, number_arg, opt, param_overrides
from rag_lab.commands import CACHE_DIR, MAX_DOCS, OUT, PARAM, SPEC, lab_from

__all__ = ["cmd_calibrate"]


_fraction = number_arg(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")


@command(
    "calibrate",
    "rerank threshold from a labelled slice: score distributions, PR curve, end-to-end effect",
    many("--dataset", metavar=SPEC),
    opt("--limit", "first N questions", type=int),
    MAX_DOCS,
    opt("--kb", "an ingested KB holding the dataset's documents (default: ingest it)"),
    PARAM,
    opt("--target-precision", type=_fraction, metavar="P"),
    opt("--target-recall", type=_fraction, metavar="R"),
    opt(
        "--check",
        "warn when the lab's reranker (and, with --dataset, its score range) is not the one RESULT.json was made with",
        metavar="RESULT.json",
    ),
    CACHE_DIR,
    flag("--no-cache"),
    OUT,
    opt("--name", "file name (default calibration_<dataset>)"),
    QUIET,
)
def cmd_calibrate(args: argparse.Namespace) -> int:
    """Calibrate on ``--dataset`` and write <name>.json / .md / .png; or ``--check`` a result."""
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.calibration import acalibrate, check_calibration, load_calibration
    from rag_lab.eval.gate.provenance import lab_models
    from rag_lab.eval.suite_spec import SuiteSpec, parse_suite_spec
    from rag_lab.lab.outputs import write_calibration

    if not args.dataset and not args.check:
        raise ValueError("give --dataset (to calibrate) or --check RESULT.json (to compare the lab's reranker)")
    lab = lab_from(args)
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
