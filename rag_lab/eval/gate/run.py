"""Running the gate: re-run a baseline's own spec in a fresh lab that the caller builds
(:func:`evaluate_spec`), load and
compare (:func:`run_gate`), and parse ``--metric name[:tolerance]`` options."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from rag_lab.eval.gate.compare import compare_reports
from rag_lab.eval.gate.result import GateError, GatePolicy, GateResult
from rag_lab.eval.report import EvalReport, ReportError, load_report

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.ragas_adapter import JudgeConfig
    from rag_lab.lab.lab import Lab


def baseline_spec(baseline: EvalReport) -> dict[str, object]:
    spec = baseline.meta.get("spec")
    if not isinstance(spec, Mapping) or not spec.get("suites"):
        raise GateError("the baseline has no meta.spec.suites: it was not written by rag-lab (cannot re-run it)")
    return dict(spec)


class SpecRunOptions(TypedDict, total=False):
    """The keyword options of :func:`evaluate_spec` (``lab_factory`` is needed to run a spec)."""

    params: Mapping[str, object] | None
    lab_factory: Callable[[Path], Lab]
    config: str | Path | Mapping[str, object] | None
    workspace: str | Path | None
    close_lab: bool
    progress: bool
    judge: JudgeConfig | None


def evaluate_spec(
    spec: Mapping[str, Any],
    *,
    params: Mapping[str, object] | None = None,
    lab_factory: Callable[[Path], Lab],
    config: str | Path | Mapping[str, object] | None = None,
    workspace: str | Path | None = None,
    close_lab: bool = False,
    progress: bool = False,
    judge: JudgeConfig | None = None,
) -> EvalReport:
    """Run a report spec (suites, ks, ragas metrics, params) in a fresh lab and return the report.

    ``params`` are applied on top of the spec's params. ``lab_factory(workspace_path)`` builds the
    lab (the command line passes ``Lab.from_config(config, workspace=...)``); ``config`` is only
    recorded in the report's meta. The lab belongs to the caller unless ``close_lab`` is set, when
    its workspace is closed after the run.
    """
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.runner import SuiteSpec, evaluate_suites

    suites = [SuiteSpec.from_dict(s) for s in spec["suites"]]
    merged = {**dict(spec.get("params") or {}), **dict(params or {})}
    ks = tuple(spec.get("ks") or (1, 3, 5, 10))
    ragas_metrics = list(spec.get("ragas_metrics") or [])
    judge_repeats = int(spec.get("judge_repeats") or 1)

    def run(ws: Path) -> EvalReport:
        lab = lab_factory(ws)
        try:
            return run_sync(
                lambda: evaluate_suites(
                    lab,
                    suites,
                    params=merged or None,
                    ragas_metrics=ragas_metrics,
                    judge=judge,
                    judge_repeats=judge_repeats,
                    ks=ks,
                    progress=progress,
                    meta={"config": str(config) if isinstance(config, (str, Path)) else None},
                )
            )
        finally:
            if close_lab:
                lab.workspace.close()

    if workspace is not None:
        return run(Path(workspace))
    with tempfile.TemporaryDirectory(prefix="rag_lab_gate_") as tmp:
        return run(Path(tmp))


def run_gate(
    baseline: str | Path | EvalReport,
    current: str | Path | EvalReport | None = None,
    policy: GatePolicy | None = None,
    **evaluate_kwargs: Unpack[SpecRunOptions],
) -> GateResult:
    """Load the baseline, get the current report (given, or by re-running the baseline's spec with
    :func:`evaluate_spec` and ``evaluate_kwargs``) and compare them.

    >>> from rag_lab.eval.metrics import evaluate_retrieval
    >>> from rag_lab.eval.records import QueryRecord
    >>> from rag_lab.eval.report import EvalReport, SuiteResult
    >>> qrels = {f"q{i}": {f"d{i}"} for i in range(8)}
    >>> def report(runs):
    ...     recs = [QueryRecord(q, "?", sorted(g), [], retrieved_doc_ids=runs[q]) for q, g in qrels.items()]
    ...     rr = evaluate_retrieval(runs, qrels, ks=(1, 5, 10))
    ...     return EvalReport([SuiteResult("s", "demo", "kb", {}, {}, rr, recs)])
    >>> good = report({q: [next(iter(g)), "x"] for q, g in qrels.items()})
    >>> worse = report({q: ["x", "y"] for q in qrels})
    >>> run_gate(good, good).passed, run_gate(good, worse).exit_code
    (True, 1)
    >>> all(c.current < c.baseline for c in run_gate(good, worse).failures())  # what regressed
    True
    """
    try:
        base = baseline if isinstance(baseline, EvalReport) else load_report(baseline)
        if current is None:
            cur = evaluate_spec(baseline_spec(base), **evaluate_kwargs)
        else:
            cur = current if isinstance(current, EvalReport) else load_report(current)
    except ReportError as exc:
        raise GateError(str(exc)) from None
    return compare_reports(base, cur, policy)


def parse_metric_tolerances(items: Iterable[str]) -> tuple[list[str], dict[str, float]]:
    """``["ndcg@10", "mrr:0.05"]`` → metrics and per-metric tolerances."""
    metrics: list[str] = []
    tols: dict[str, float] = {}
    for item in items:
        name, _, tol = item.partition(":")
        name = name.strip()
        if not name:
            raise GateError(f"--metric {item!r}: empty metric name")
        metrics.append(name)
        if tol:
            try:
                tols[name] = float(tol)
            except ValueError:
                raise GateError(f"--metric {item!r}: tolerance {tol!r} is not a number") from None
    return metrics, tols
