"""Scoring: every sample on every metric (:func:`ascore_samples`, :func:`score_samples`), failures
kept as NaN with their reasons and counted."""

from __future__ import annotations

import asyncio
import logging
import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rag_lab.asyncutil import synchronous
from rag_lab.eval.ragas_adapter.judge import JudgeConfig, judge_summary
from rag_lab.eval.ragas_adapter.samples import (
    ALL_METRICS,
    LLM_METRICS,
    OFFLINE_METRICS,
    RagasError,
    RagasResult,
    RagasSample,
    _MissingInput,
)
from rag_lab.eval.ragas_adapter.scorers import _clamp, _import_ragas, _llm_scorers, _offline_scorers

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.models.base import Embedder
    from rag_lab.observability.ledger import Ledger

#: LLM metrics whose every value lies in [0, 1] (answer relevancy, a cosine, may be below 0)
UNIT_METRICS = frozenset({"faithfulness", "llm_context_precision"})


class _NoContextNotice(logging.Filter):
    """ragas' ID-based context precision logs a warning for each sample with no retrieved context
    ids; the score is NaN and recorded with its reason here, so the notice is dropped while
    rag_lab scores (only that message, only that logger)."""

    LOGGER = "ragas.metrics._context_precision"

    def filter(self, record: logging.LogRecord) -> bool:  # noqa: A003 - logging's name
        return "No retrieved context IDs" not in record.getMessage()


def _check_metric_names(metrics: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(metrics))
    unknown = [m for m in names if m not in ALL_METRICS]
    if unknown:
        raise RagasError(f"unknown ragas metric(s) {', '.join(unknown)}; known: {', '.join(ALL_METRICS)}")
    return names


async def ascore_samples(
    samples: Sequence[RagasSample],
    metrics: Sequence[str] = OFFLINE_METRICS,
    judge: JudgeConfig | None = None,
    embedder: Embedder | None = None,
    ledger: Ledger | None = None,
) -> RagasResult:
    """Score every sample on every metric (see the package docstring for names and policies).

    With LLM metrics every judge HTTP attempt is recorded in ``ledger`` (a fresh
    :class:`~rag_lab.observability.ledger.Ledger` when None) and summed in ``RagasResult.judge``."""
    names = _check_metric_names(metrics)
    llm_wanted = [m for m in names if m in LLM_METRICS]
    if llm_wanted and judge is None:
        raise RagasError(
            f"LLM metric(s) {', '.join(llm_wanted)} need a judge: set models.judge in the lab config "
            "or pass a JudgeConfig"
        )
    _import_ragas()
    scorers = _offline_scorers() if any(m not in LLM_METRICS for m in names) else {}
    prompts: dict[str, str] = {}
    if llm_wanted:
        assert judge is not None
        if ledger is None:
            from rag_lab.observability.ledger import Ledger

            ledger = Ledger()
        scorers.update(_llm_scorers(judge, embedder, llm_wanted, ledger, prompts))
    values: dict[str, list[float]] = {m: [math.nan] * len(samples) for m in names}
    reasons: dict[str, dict[str, str]] = {m: {} for m in names}
    failed: dict[str, list[str]] = {m: [] for m in names}
    sem = asyncio.Semaphore(judge.concurrency if judge else 1)

    async def one(metric: str, i: int, s: RagasSample) -> None:
        fn = scorers[metric]
        try:
            if metric in LLM_METRICS:
                async with sem:
                    v = _clamp(await fn(s))
            else:
                v = _clamp(await fn(s))
        except _MissingInput as exc:
            reasons[metric][s.qid] = f"missing input: {exc}"
            failed[metric].append(s.qid)
            return
        except Exception as exc:  # a metric or judge failure: NaN, counted, with the reason
            reasons[metric][s.qid] = f"{type(exc).__name__}: {str(exc)[:300]}"
            failed[metric].append(s.qid)
            return
        if metric in UNIT_METRICS and math.isfinite(v) and not 0.0 <= v <= 1.0:
            # a judge verdict outside 0/1 (e.g. 10000000000) weighs ragas' average: not a score
            reasons[metric][s.qid] = f"the metric returned {v:g}, outside [0, 1] (a judge verdict other than 0 or 1)"
            failed[metric].append(s.qid)
            return
        values[metric][i] = v
        if not math.isfinite(v):
            reasons[metric][s.qid] = "the metric returned NaN"

    notice, quiet = logging.getLogger(_NoContextNotice.LOGGER), _NoContextNotice()
    notice.addFilter(quiet)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            for metric in names:
                if metric in LLM_METRICS:
                    await asyncio.gather(*(one(metric, i, s) for i, s in enumerate(samples)))
                else:
                    for i, s in enumerate(samples):
                        await one(metric, i, s)
    finally:
        notice.removeFilter(quiet)
    for m in names:
        order = {s.qid: i for i, s in enumerate(samples)}
        failed[m].sort(key=lambda q: order.get(q, 0))
    return RagasResult(
        names,
        [s.qid for s in samples],
        values,
        {m: r for m, r in reasons.items() if r},
        {m: f for m, f in failed.items() if f},
        {**judge_summary(ledger), "model": judge.model, "prompt_hash": prompts}
        if judge and llm_wanted and ledger is not None  # a ledger is made above for LLM metrics
        else {},
    )


async def ascore_repeated(
    samples: Sequence[RagasSample],
    metrics: Sequence[str],
    judge: JudgeConfig | None,
    repeats: int,
    embedder: Embedder | None = None,
    ledger: Ledger | None = None,
) -> RagasResult:
    """:func:`ascore_samples` with every LLM metric scored ``repeats`` times (the offline metrics,
    deterministic, once): ``RagasResult.repeats`` holds each sample's scores, ``values`` their mean
    over the finite ones (NaN when none; the reason of the first failure kept), and ``judge`` the
    totals of every call (one ledger across the repeats)."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise RagasError(f"judge repeats must be an integer >= 1, got {repeats!r}")
    names = _check_metric_names(metrics)
    llm = [m for m in names if m in LLM_METRICS]
    if repeats == 1 or not llm:
        return await ascore_samples(samples, names, judge, embedder, ledger)
    if ledger is None:
        from rag_lab.observability.ledger import Ledger

        ledger = Ledger()
    offline = [m for m in names if m not in LLM_METRICS]
    base = await ascore_samples(samples, offline, None, embedder) if offline else None
    runs = [await ascore_samples(samples, llm, judge, embedder, ledger) for _ in range(repeats)]
    values = dict(base.values) if base else {}
    reasons = dict(base.reasons) if base else {}
    failed = dict(base.failed) if base else {}
    reps: dict[str, list[list[float]]] = {}
    for m in llm:
        reps[m] = [[r.values[m][i] for r in runs] for i in range(len(samples))]
        means = []
        for row in reps[m]:
            ok = [v for v in row if math.isfinite(v)]
            means.append(math.fsum(ok) / len(ok) if ok else math.nan)
        values[m] = means
        never = [s.qid for s, mean in zip(samples, means) if not math.isfinite(mean)]
        why = {q: w for r in reversed(runs) for q, w in r.reasons.get(m, {}).items() if q in never}
        if why:
            reasons[m] = why
        lost = [q for q in never if any(q in r.failed.get(m, []) for r in runs)]
        if lost:
            failed[m] = lost
    return RagasResult(
        [m for m in names],
        [s.qid for s in samples],
        {m: values[m] for m in names},
        reasons,
        failed,
        runs[-1].judge,
        reps,
    )


score_samples = synchronous(ascore_samples)
