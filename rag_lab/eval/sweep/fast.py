"""The sweep's fast path: configs evaluated by :class:`rag_lab.tuning.FastEvaluator` from stage
inputs captured once, audited against the full pipeline on request (``check``).

* Configs are grouped by their retrieval part (:func:`rag_lab.tuning.params.split_config`: search
  settings, BM25 index settings, anything not post-retrieval). Each distinct retrieval config is
  captured once: one pipeline run per question (:func:`rag_lab.tuning.capture.acapture_questions`)
  keeps what the post-retrieval stages read. Questions whose search ran query expansion are
  captured again for each ``rerank_top_k`` (the expansion's top-k reads it).
* Every config is then evaluated without the event pipeline: final contexts → the same
  :class:`~rag_lab.eval.records.QueryRecord` fields the pipeline fills (contexts, their ids and
  documents) → the same metrics.
* ``check`` (``--check``, default 0) audits it: the ``check`` best configs by the objective
  (``"all"``: every config) run through the full pipeline too; any difference in any question's
  contexts (ids, documents, texts, final scores within :data:`SCORE_REL_TOL`) or in the metrics
  raises :class:`~rag_lab.eval.sweep.specs.SweepError` naming every config, question and field
  that differ, and nothing is written.

Answers are not written on the fast path, so objectives and ragas metrics that read the answer
(``chrf``, ``bleu``, ``latency_ms``, …) use the full pipeline; :func:`fast_path_reason` says why.
Latency in a fast row is that of the capture runs (the pipeline at the retrieval config), marked
by ``evaluated_by = "fast"`` and said in ``latency_of``; ``fast_eval_ms`` is the config's own time
in the fast evaluator per question. Checked rows carry the pipeline's own latency.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rag_lab.eval.sweep.specs import INDEX_PARAMS, LATENCY_OF_CAPTURE, LATENCY_OF_PIPELINE, SweepError, p95

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.cache.captures import CaptureRequest
    from rag_lab.eval.datasets import Dataset, QueryItem
    from rag_lab.eval.metrics import RetrievalReport
    from rag_lab.eval.runner import EvalResult
    from rag_lab.eval.sweep.runners import _Evaluator, _Suite
    from rag_lab.tuning import FastEvaluator, QuestionInputs
    from rag_lab.types.params import PipelineParams
    from rag_lab.types.search_result import SearchResult

__all__ = [
    "CONTEXT_METRICS",
    "LATENCY_OF_CAPTURE",
    "LATENCY_OF_PIPELINE",
    "SCORE_REL_TOL",
    "FastSweep",
    "RetrievalMemo",
    "check_description",
    "fast_path_reason",
]


#: ragas offline metrics that read only the contexts (not the answer)
CONTEXT_METRICS = ("id_context_recall", "id_context_precision", "nonllm_context_recall", "nonllm_context_precision")

#: final scores of the fast evaluator and the pipeline agree to this relative tolerance (the same
#: float64 formulas; a vectorised sum may add in another order)
SCORE_REL_TOL = 1e-9


def check_description(n_checked: int, n_configs: int) -> str:
    """What ``--check`` re-ran, in words: ``none (--check 0)``, ``all 27 configs``, ``the 3 best of
    540 configs``."""
    if n_checked == 0:
        return "none (--check 0)"
    if n_checked >= n_configs:
        return f"all {n_configs} configs" if n_configs > 1 else "the only config"
    return f"the {f'{n_checked} ' if n_checked > 1 else ''}best of {n_configs} configs"


def fast_path_reason(objective: str, ragas_metrics: Sequence[str]) -> str:
    """``""`` when the fast path can serve this sweep, else why not."""
    if objective in ("latency_ms", "p95_latency_ms"):
        return f"objective {objective} is measured on the pipeline"
    from rag_lab.eval.ragas_adapter import OFFLINE_METRICS, SEGMENTED_METRICS

    answer_metrics = [m for m in [objective, *ragas_metrics] if m in OFFLINE_METRICS + SEGMENTED_METRICS]
    answer_metrics = [m for m in answer_metrics if m not in CONTEXT_METRICS]
    if answer_metrics:
        return f"{', '.join(dict.fromkeys(answer_metrics))} read the answer, which the fast path does not write"
    return ""


class RetrievalMemo:
    """:func:`rag_lab.eval.metrics.evaluate_retrieval` with each question's row computed once per
    distinct ranking (configs that retrieve the same documents for a question share it); ``grades``
    (``Dataset.graded_qrels()``) make nDCG graded, as in the pipeline's evaluation."""

    def __init__(
        self,
        qrels: Mapping[str, Collection[str]],
        ks: Sequence[int] = (1, 3, 5, 10),
        grades: Mapping[str, Mapping[str, int]] | None = None,
    ) -> None:
        self.qrels = {qid: frozenset(g) for qid, g in qrels.items()}
        self.ks = tuple(ks)
        self.grades = dict(grades or {})
        self._rows: dict[tuple[str, tuple[str, ...]], dict[str, float | int | str]] = {}

    def report(self, runs: Mapping[str, Sequence[str]]) -> RetrievalReport:
        from rag_lab.eval.metrics import RetrievalReport, evaluate_retrieval

        rows: list[dict[str, float | int | str]] = []
        excluded: list[str] = []
        for qid, gold in self.qrels.items():
            if not gold:
                excluded.append(qid)
                continue
            ranking = tuple(runs.get(qid, ()))
            key = (qid, ranking)
            row = self._rows.get(key)
            if row is None:
                g = {qid: self.grades[qid]} if qid in self.grades else None
                row = evaluate_retrieval({qid: list(ranking)}, {qid: gold}, ks=self.ks, grades=g).rows[0]
                self._rows[key] = row
            rows.append(row)
        excluded.extend(qid for qid in runs if qid not in self.qrels)
        return RetrievalReport(ks=self.ks, rows=rows, excluded_queries=excluded)


class FastSweep:
    """Fast evaluation of configs for one :class:`_Evaluator` (its lab, suites, base params)."""

    def __init__(self, ev: _Evaluator, check: int | str = 0) -> None:
        if not (check == "all" or (isinstance(check, int) and not isinstance(check, bool) and check >= 0)):
            raise SweepError(f"--check must be 'all' or an integer >= 0, got {check!r}")
        self.ev = ev
        self.check = check
        self.n_configs = 0  # of the sweep, set by :meth:`select`
        self._groups: dict[tuple[tuple[str, object], ...], dict[str, FastEvaluator]] = {}
        self._recaptured: dict[tuple[str, str, int, tuple[tuple[str, object], ...]], QuestionInputs] = {}
        self.fast_records: dict[int, tuple[dict[str, object], list[tuple[_Suite, EvalResult]]]] = {}
        self.capture_seconds = 0.0
        self.eval_seconds = 0.0
        self.checked: list[int] = []
        self._metrics: dict[str, RetrievalMemo] = {}

    # -- capture ----------------------------------------------------------------------------------
    def _split(self, config: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
        from rag_lab.tuning.params import split_config

        post, other = split_config({**self.ev.base_params, **config})
        return post, other

    async def _capture(
        self, suite: _Suite, params: PipelineParams, only: set[str] | None = None
    ) -> list[QuestionInputs]:
        """Captures through the stage cache when the sweep has it on (``cache_dir``)."""
        from rag_lab.eval.cache.captures import acapture_cached
        from rag_lab.eval.runner import faq_kb_name

        ds = suite.dataset
        requests = capture_requests(ds, [q for q in ds.queries if only is None or q.id in only])
        kbs = [suite.kb] + ([faq_kb_name(suite.kb)] if ds.faq else [])
        return await acapture_cached(self.ev.lab, requests, kbs, params)

    async def _group(self, other: dict[str, object]) -> dict[str, FastEvaluator]:
        from rag_lab.tuning import FastEvaluator

        key = tuple(sorted(other.items()))
        found = self._groups.get(key)
        if found is not None:
            return found
        t0 = time.perf_counter()
        params = {k: v for k, v in other.items() if k not in INDEX_PARAMS}
        self.ev._apply_index({k: v for k, v in other.items() if k in INDEX_PARAMS})
        try:
            p = self.ev.lab.params.with_changes(**params)
        except ValueError as exc:
            raise SweepError(f"config {other}: {exc}") from None
        group: dict[str, FastEvaluator] = {}
        for suite in self.ev.suites:
            group[suite.name] = FastEvaluator(await self._capture(suite, p), p)
        self._groups[key] = group
        self.capture_seconds += time.perf_counter() - t0
        return group

    async def _recapture(
        self, suite: _Suite, fe: FastEvaluator, q: QuestionInputs, post: Mapping[str, Any]
    ) -> QuestionInputs:
        """``q`` captured again under ``rerank_top_k`` (its search ran query expansion)."""
        top_k = int(post.get("rerank_top_k", fe.base.rerank_top_k))
        key = (suite.name, q.qid, top_k, tuple(sorted((k, v) for k, v in fe.base.model_dump().items())))
        found = self._recaptured.get(key)
        if found is None:
            t0 = time.perf_counter()
            (found,) = await self._capture(suite, fe.base.with_changes(rerank_top_k=top_k), only={q.qid})
            self._recaptured[key] = found
            self.capture_seconds += time.perf_counter() - t0
        return found

    # -- evaluation ---------------------------------------------------------------------------------
    async def results(self, config: Mapping[str, object]) -> list[tuple[_Suite, EvalResult]]:
        """``(suite, EvalResult)`` of ``config`` from the fast evaluator."""
        from rag_lab.eval.records import QueryRecord
        from rag_lab.eval.runner import EvalResult
        from rag_lab.tuning import FastEvaluator, doc_ids

        post, other = self._split(config)
        group = await self._group(other)
        out: list[tuple[_Suite, EvalResult]] = []
        for suite in self.ev.suites:
            fe = group[suite.name]
            t0 = time.perf_counter()
            p = fe.params_for(post)
            refs: dict[str, list[SearchResult]] = {}
            outcomes: dict[str, str] = {}
            diags: dict[str, dict[str, object]] = {}
            funnel = self.ev.funnel_objective  # the funnel's records cost time: only when ranked by them
            for q in fe.inputs:
                if fe.needs_recapture(q, p):
                    q2 = await self._recapture(suite, fe, q, post)
                    one = FastEvaluator([q2], fe.base)
                    if funnel:
                        outcomes[q.qid], refs[q.qid], diags[q.qid] = one.trace(q2, p)
                    else:
                        outcomes[q.qid], refs[q.qid] = one.references(q2, p)
                elif funnel:
                    outcomes[q.qid], refs[q.qid], diags[q.qid] = fe.trace(q, p)
                else:
                    outcomes[q.qid], refs[q.qid] = fe.references(q, p)
            titles = {d.id: d.title for d in suite.dataset.corpus}
            by_id = {q.qid: q for q in fe.inputs}
            records = []
            for dq in suite.dataset.queries:
                r = refs[dq.id]
                captured = by_id[dq.id]
                records.append(
                    QueryRecord(
                        qid=dq.id,
                        question=dq.question,
                        gold_ids=list(dq.gold_ids),
                        answers=list(dq.answers),
                        retrieved_doc_ids=doc_ids(r),
                        context_ids=[x.id for x in r],
                        context_doc_ids=[x.knowledge_id for x in r],
                        contexts=[x.content for x in r],
                        context_titles=[x.knowledge_title for x in r],
                        context_scores=[float(x.score) for x in r],
                        gold_titles=[titles.get(g, "") for g in dq.gold_ids],
                        latency_ms=captured.latency_ms,
                        error=captured.error,
                        is_fallback=outcomes[dq.id] == "nothing"
                        or (captured.needs_retrieval and not captured.search_result and not captured.error),
                        funnel=_funnel(captured, diags.get(dq.id), r, dq.gold_ids) if funnel else {},
                    )
                )
            memo = self._metrics.get(suite.name)
            if memo is None:
                memo = self._metrics[suite.name] = RetrievalMemo(
                    {q.id: set(q.gold_ids) for q in suite.dataset.queries}, self.ev.ks, suite.dataset.graded_qrels()
                )
            report = memo.report({r.qid: r.retrieved_doc_ids for r in records})
            self.eval_seconds += time.perf_counter() - t0
            res = EvalResult(dataset=suite.dataset.name, kb=suite.kb, report=report, records=records, params=dict(post))
            out.append((suite, res))
            if self.ev.pbar is not None:
                self.ev.pbar.update(len(records))
        return out

    async def evaluate(self, config: Mapping[str, object]) -> dict[str, Any]:
        """Record ``config``'s row from the fast evaluator (``evaluated_by = "fast"``). Its
        ``latency_ms`` is the capture runs' (``latency_of``); ``fast_eval_ms`` is this config's own
        time in the fast evaluator per question (a recapture it needed included)."""
        t0, captured = time.perf_counter(), self.capture_seconds
        results = await self.results(config)
        n_q = sum(len(res.records) for _, res in results)
        own_s = time.perf_counter() - t0 - (self.capture_seconds - captured)  # a first capture is not this config's
        own_ms = own_s * 1000.0 / max(1, n_q)
        index = len(self.ev.rows)
        row = await self.ev.record(config, results)
        row["evaluated_by"] = "fast"
        row["latency_of"] = LATENCY_OF_CAPTURE
        row["fast_eval_ms"] = own_ms
        self.fast_records[index] = (dict(config), results)
        return row

    def select(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """The configs ``check`` re-runs, ascending: every one (``"all"``) or the ``check`` best by
        the objective (NaN last, ties by index)."""
        from rag_lab.eval.sweep.specs import objective_direction

        self.n_configs = len(rows)
        if self.check == "all":
            return list(range(len(rows)))
        sign = -1.0 if objective_direction(self.ev.objective) == "maximize" else 1.0

        def key(i: int) -> tuple[bool, float, int]:
            v = float(rows[i].get(self.ev.objective, math.nan))
            return (not math.isfinite(v), sign * v if math.isfinite(v) else 0.0, i)

        return sorted(sorted(range(len(rows)), key=key)[: int(self.check)])

    async def verify(self, indices: Sequence[int] | None = None) -> list[int]:
        """Run the configs ``check`` selects (:meth:`select`; or ``indices`` of the fast rows)
        through the full pipeline and compare every question's contexts (ids, documents, texts,
        final scores within :data:`SCORE_REL_TOL`), ranking and metrics; raise :class:`SweepError`
        listing every disagreement. Checked rows get ``evaluated_by = "fast, checked"`` and the
        pipeline's latency."""
        rows = self.ev.rows
        chosen = list(indices) if indices is not None else self.select(rows)
        problems: list[str] = []
        bad = 0
        for i in chosen:
            row = rows[i]
            config, fast_results = self.fast_records[i]
            pipeline = await self.ev.pipeline_results(config)
            found = [p for (suite, f), (_, slow) in zip(fast_results, pipeline) for p in _differences(suite, f, slow)]
            problems += [f"config {config}: {p}" for p in found[:3]]
            bad += bool(found)
            lat = sorted(r.latency_ms for _, res in pipeline for r in res.records if not r.error)
            row["latency_ms"] = sum(lat) / len(lat) if lat else math.nan
            row["p95_latency_ms"] = p95(lat)
            row["evaluated_by"] = "fast, checked"
            row["latency_of"] = LATENCY_OF_PIPELINE
        self.checked = chosen
        if problems:
            raise SweepError(
                f"fast evaluator and pipeline disagree on {bad} of {len(chosen)} checked configs (nothing written):\n  "
                + "\n  ".join(problems[:12])
                + (f"\n  … {len(problems) - 12} more" if len(problems) > 12 else "")
            )
        return chosen


def _funnel(
    captured: QuestionInputs,
    diagnostics: Mapping[str, object] | None,
    refs: Sequence[SearchResult],
    gold_ids: Sequence[str],
) -> dict[str, object]:
    """The gold funnel of one question from the fast evaluator's records (as the pipeline's from
    its run's: a failed capture keeps what its search recorded, as the failed run does)."""
    from rag_lab.tuning.funnel import build_funnel

    return build_funnel(diagnostics or {}, refs, gold_ids).to_dict()


def _differences(suite: _Suite, fast: EvalResult, slow: EvalResult) -> list[str]:
    """What differs between the fast and the pipeline result of one suite, question by question."""
    out: list[str] = []
    for a, b in zip(slow.records, fast.records):
        for name in ("context_ids", "context_doc_ids", "contexts", "retrieved_doc_ids"):
            if getattr(a, name) != getattr(b, name):
                out.append(
                    f"{suite.name} question {a.qid}: {name} {getattr(a, name)!r} (pipeline) vs {getattr(b, name)!r} (fast)"
                )
        sa, sb = a.context_scores, b.context_scores
        if len(sa) != len(sb) or any(
            not math.isclose(x, y, rel_tol=SCORE_REL_TOL, abs_tol=1e-12) for x, y in zip(sa, sb)
        ):
            out.append(f"{suite.name} question {a.qid}: context_scores {sa!r} (pipeline) vs {sb!r} (fast)")
    if slow.summary() != fast.summary():
        out.append(f"{suite.name} metrics: {slow.summary()} (pipeline) vs {fast.summary()} (fast)")
    return out


def capture_requests(dataset: Dataset, queries: Sequence[QueryItem]) -> list[CaptureRequest]:
    """One :class:`~rag_lab.eval.cache.captures.CaptureRequest` per query, with the dataset's
    earlier turns of its conversation."""
    from rag_lab.eval.cache.captures import CaptureRequest

    return [
        CaptureRequest(q.id, q.question, tuple((t.question, t.answer) for t in dataset.history.get(q.id, ())))
        for q in queries
    ]
