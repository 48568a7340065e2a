"""``rag-lab sweep``: a grid or optuna search over ``PipelineParams`` fields, in this process, on
Ray, or with a held-out check (:mod:`rag_lab.eval.sweep`); CSV, plots, the best config as YAML and
a summary under ``--out``."""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.asyncutil import run_sync
from rag_lab.cliutil import QUIET, command, file_stem_arg, flag, many, opt, param_overrides
from rag_lab.commands import CACHE_DIR, LIMIT, MAX_DOCS, OUT, SPEC, TRACKING, lab_from
from rag_lab.commands.eval_setup import log_run, positive_int, project, suite_specs, wants_mlflow

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.suite_spec import SuiteSpec


def _check_arg(text: str) -> int | str:
    """``sweep --check``: ``all`` or N >= 0, the number of best configs re-run on the pipeline."""
    t = text.strip().lower()
    if t == "all" or (t.isascii() and t.isdigit()):
        return t if t == "all" else int(t)
    raise argparse.ArgumentTypeError(f"--check {text!r}: use N >= 0 (re-run the N best configs) or 'all'")


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
        type=positive_int,
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
    track = wants_mlflow(args)
    lab = lab_from(args)
    cache_dir = None if args.no_cache else (args.cache_dir or Path(lab.workspace.root) / "stage_cache")
    suites = suite_specs(args)
    n_configs = args.optuna_trials or math.prod(max(1, len(getattr(s, "values", None) or [])) for s in spaces)
    project(args, lab, suites, base, repeat=n_configs)
    metrics = list(args.ragas_metric or [])
    from rag_lab.eval.sweep.distributed import choose_executor, run_sweep_on_ray
    from rag_lab.eval.sweep.fast import fast_path_reason
    from rag_lab.eval.sweep.specs import SweepOptions

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
    common = SweepOptions(
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
            held: float | list[SuiteSpec] = float(args.holdout)
        except ValueError:
            from rag_lab.eval.runner import parse_suite_spec

            held = [parse_suite_spec(args.holdout)]
        if args.folds > 1 and not isinstance(held, float):
            raise ValueError("--folds K needs --holdout F (a fraction): a held-out SPEC is one fixed split")
        tune = functools.partial(
            run_holdout, lab, suites, spaces, args.objective, held, n_trials=args.optuna_trials, **common
        )
        folds = [run_sync(functools.partial(tune, seed=args.seed + k)) for k in range(args.folds)]
        result, holdout = folds[0]
        if args.folds > 1:
            from rag_lab.eval.sweep.holdout import folds_summary

            result.holdout = {**(result.holdout or {}), "folds": [ho.to_dict() for _, ho in folds]}
            fold_line = folds_summary([ho for _, ho in folds])
    elif choice.kind == "ray":
        result = run_sync(
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
        result = run_sync(
            lambda: run_optuna(lab, suites, spaces, args.optuna_trials, args.objective, seed=args.seed, **common)
        )
    else:
        result = run_sync(lambda: run_grid(lab, suites, spaces, args.objective, **common))
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

        log_run(
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
