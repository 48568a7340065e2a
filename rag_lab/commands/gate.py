"""``rag-lab gate``: a run compared with a baseline report metric by metric and question by question
(:mod:`rag_lab.eval.gate`), or the baseline written again (``--update``); exit 1 on a regression."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.cliutil import QUIET, command, flag, many, opt, param_overrides
from rag_lab.commands import LIMIT, MAX_DOCS, SPEC, lab_from
from rag_lab.commands.eval_setup import suite_specs, with_language_metrics
from rag_lab.eval.metric_defs import GATE_TOLERANCE


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
                "suites": [with_language_metrics(s, args.ragas_metric) for s in suite_specs(args)],
                "ks": [1, 3, 5, 10],
                "ragas_metrics": list(args.ragas_metric or OFFLINE_METRICS),
                "params": params,
            }
        else:
            raw_spec: Mapping[str, object] = load_report(args.baseline).meta.get("spec") or {}
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
