"""Tuning that holds on unseen questions: choose the best config on one part of the questions,
report it on the other.

``rag-lab sweep --holdout F`` keeps a seeded fraction ``F`` of each dataset's questions out of the
sweep (:func:`split_questions`; the held-out part shares the corpus and KB, so only the questions
differ); ``--holdout SPEC`` holds out another dataset spec instead (e.g. ``name@50-100`` after
tuning on ``name:50``). The sweep (grid or optuna, the fast path and its ``check`` as usual)
sees the tuning part only; its best config and the default config (the sweep's ``--set``
overrides, no swept value) then run **through the full pipeline** on the held-out part.

Reported (:class:`HoldoutResult`): the objective of the chosen config on the tuning part and on
the held-out part, the default's on the held-out part, the paired per-question difference
(chosen − default) with the one-sided sign-flip permutation p-values that the chosen config is
better and that it is worse and the 95 % bootstrap CI of the mean difference
(:func:`rag_lab.eval.gate.stats.paired_test`), the **optimism** (tuning-part score minus held-out
score of the chosen config: how much of the sweep's best was picked out of the noise of those
particular questions), and the **verdict**:

* ``better``: the whole interval lies on the better side of 0 (above it for a maximised
  objective, below it for a minimised one) — the tuned config is the one to apply;
* ``worse``: the whole interval lies on the worse side;
* ``not better``: the interval holds 0.

Only ``better`` makes the tuned params the sweep's ``<name>_best.yaml``; otherwise that file keeps
the default config and the tuned one goes to ``<name>_tuned.yaml``
(:func:`rag_lab.lab.outputs.write_sweep_outputs`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Unpack

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.metrics import RetrievalReport
    from rag_lab.eval.records import QueryRecord
    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.eval.sweep.runners import SuiteInput, _Suite
    from rag_lab.eval.sweep.specs import ParamSpace, TuneOptions
    from rag_lab.lab.lab import Lab

__all__ = [
    "HoldoutResult",
    "folds_summary",
    "hold_out",
    "holdout_verdict",
    "per_question_values",
    "split_dataset",
    "split_questions",
]

VERDICTS = ("better", "not better", "worse")


def holdout_verdict(ci: tuple[float, float], direction: str) -> str:
    """``better`` / ``worse`` when the interval of (chosen − default) lies wholly on that side of
    0 for an objective maximised or minimised (``direction``), else ``not better``.

    >>> holdout_verdict((-0.0181, -0.0009), "maximize"), holdout_verdict((-0.0181, -0.0009), "minimize")
    ('worse', 'better')
    >>> holdout_verdict((-0.01, 0.02), "maximize"), holdout_verdict((0.0, 0.02), "maximize")
    ('not better', 'not better')
    """
    lo, hi = (ci[0], ci[1]) if direction == "maximize" else (-ci[1], -ci[0])
    if lo > 0:
        return "better"
    if hi < 0:
        return "worse"
    return "not better"


def split_questions(n: int, fraction: float, seed: int = 0) -> tuple[list[int], list[int]]:
    """``(tune, held)`` positions of ``n`` questions: a seeded random ``fraction`` held out (at
    least one question on each side), both in question order. Depends on ``n``, ``fraction`` and
    ``seed`` only, never on the questions' content."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"--holdout fraction must be in (0, 1), got {fraction:g}")
    if n < 2:
        raise ValueError(f"--holdout needs at least 2 questions to split, got {n}")
    k = min(n - 1, max(1, round(fraction * n)))
    held = set(random.Random(seed).sample(range(n), k))
    return [i for i in range(n) if i not in held], sorted(held)


def split_dataset(ds: Dataset, fraction: float, seed: int = 0) -> tuple[Dataset, Dataset]:
    """The tuning and held-out parts of a dataset: same corpus and FAQ, the questions (and their
    history) split by :func:`split_questions`."""
    tune, held = split_questions(len(ds.queries), fraction, seed)

    def part(idx: Sequence[int], tag: str) -> Dataset:
        qs = [ds.queries[i] for i in idx]
        hist = {q.id: ds.history[q.id] for q in qs if q.id in ds.history}
        return replace(ds, name=f"{ds.name}[{tag}]", queries=qs, history=hist)

    return part(tune, "tune"), part(held, "held-out")


def per_question_values(records: Sequence[QueryRecord], report: RetrievalReport, metric: str) -> dict[str, float]:
    """Each question's value of ``metric`` (a retrieval metric of the report rows, or a funnel
    metric of the records)."""
    rows = {str(r["qid"]): float(r[metric]) for r in report.rows if metric in r}
    if rows or not records:
        return rows
    from rag_lab.eval.funnel import funnel_values

    return {qid: float(v) for qid, v in funnel_values(records, [metric]).get(metric, {}).items()}


@dataclass
class HoldoutResult:
    objective: str
    direction: str
    chosen: dict[str, object]  # the best config of the tuning part (swept params)
    base: dict[str, object]  # the fixed overrides (the default config)
    n_tune: int
    n_held: int
    tuned_score: float  # chosen config, tuning part (the sweep's best)
    held_score: float  # chosen config, held-out part
    default_held_score: float  # default config, held-out part
    delta: float  # held_score - default_held_score
    ci: tuple[float, float]
    p_value: float  # one-sided: the chosen config is better than the default on the held-out part
    optimism: float  # tuned_score - held_score (maximised objective; the reverse when minimised)
    moved: int  # held-out questions whose value differs between the two configs
    per_question: dict[str, list[float]] = field(default_factory=dict)  # qid -> [chosen, default]
    verdict: str = "not better"  # :func:`holdout_verdict` of ``ci``
    p_worse: float = math.nan  # one-sided: the chosen config is worse than the default

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["ci"] = list(self.ci)
        return d

    @property
    def applies(self) -> bool:
        """Whether the tuned config is the one to apply (verdict ``better``)."""
        return self.verdict == "better"

    def line(self) -> str:
        """The one-line summary the CLI prints and notebook 06 shows."""
        return (
            f"held out: tuned {self.held_score:.4f} vs default {self.default_held_score:.4f} ({self.objective}, "
            f"{self.n_held} of {self.n_tune + self.n_held} questions), Δ {self.delta:+.4f}, 95% CI "
            f"[{self.ci[0]:+.4f}, {self.ci[1]:+.4f}], verdict {self.verdict} (tuning part {self.tuned_score:.4f}, "
            f"optimism {self.optimism:+.4f}; p better {self.p_value:.4g}, p worse {self.p_worse:.4g}; "
            f"{self.moved} questions moved)"
        )

    def decision(self, name: str = "sweep") -> str:
        """What the sweep's outputs do with the tuned config, in one sentence."""
        if self.applies:
            return f"the tuned config beats the default on held-out questions: {name}_best.yaml holds it"
        return (
            f"the tuned config is {self.verdict} than the default on held-out questions: {name}_best.yaml keeps "
            f"the default, the tuned config is in {name}_tuned.yaml"
        )

    def markdown(self) -> str:
        cfg = ", ".join(f"{k}={v}" for k, v in self.chosen.items()) or "(the default)"
        return "\n".join(
            [
                "## Held-out check",
                "",
                f"Chosen on {self.n_tune} questions: {cfg}. Verdict: **{self.verdict}**.",
                "",
                "| | tuning part | held out |",
                "|---|---|---|",
                f"| chosen config | {self.tuned_score:.4f} | {self.held_score:.4f} |",
                f"| default config | | {self.default_held_score:.4f} |",
                "",
                f"Optimism (tuning − held out): {self.optimism:+.4f}. Chosen − default on the held-out part: "
                f"{self.delta:+.4f}, 95 % bootstrap CI [{self.ci[0]:+.4f}, {self.ci[1]:+.4f}], one-sided paired "
                f"permutation p = {self.p_value:.4g} that it is better, {self.p_worse:.4g} that it is worse "
                f"({self.moved} of {self.n_held} questions moved). Better only when the whole interval is on "
                "the better side of 0.",
                "",
            ]
        )


def folds_summary(results: Sequence[HoldoutResult]) -> str:
    """One line: the verdicts of K tune / held-out splits and the range of their Δ."""
    counts = {v: sum(1 for r in results if r.verdict == v) for v in VERDICTS}
    deltas = sorted(r.delta for r in results)
    return (
        f"{len(results)} splits: "
        + ", ".join(f"{v} {n}" for v, n in counts.items())
        + f"; Δ from {deltas[0]:+.4f} to {deltas[-1]:+.4f}"
    )


#: ``tune(tuning parts) -> SweepResult``; ``score(config, held-out parts) -> {suite: {qid: value}}``
Tune = Callable[[list["_Suite"]], Awaitable["SweepResult"]]
Score = Callable[[Mapping[str, object], list["_Suite"]], Awaitable[dict[str, dict[str, float]]]]


async def hold_out(
    tune_parts: list[_Suite],
    held_parts: list[_Suite],
    tune: Tune,
    score: Score,
    base: Mapping[str, object],
    seed: int = 0,
    n_resamples: int = 10_000,
) -> tuple[SweepResult, HoldoutResult]:
    """Run the sweep on ``tune_parts`` alone, then score its best config and the default on
    ``held_parts`` (the suites' per-question values, in question order, pooled over suites)."""
    from rag_lab.eval.gate.stats import paired_test

    result = await tune(tune_parts)
    best = result.best()
    chosen = result.best_config()
    objective, direction = result.objective, result.direction
    mine = await score({**dict(base), **chosen}, held_parts)
    theirs = await score(dict(base), held_parts)
    pairs: dict[str, list[float]] = {}
    for suite in mine:
        for qid, v in mine[suite].items():
            pairs[f"{suite}/{qid}" if len(mine) > 1 else qid] = [v, theirs[suite][qid]]
    diffs = [a - b for a, b in pairs.values() if math.isfinite(a) and math.isfinite(b)]
    sign = 1.0 if direction == "maximize" else -1.0

    def mean(xs: Sequence[float]) -> float:
        return sum(xs) / len(xs) if xs else math.nan

    held = mean([a for a, _ in pairs.values()])
    default = mean([b for _, b in pairs.values()])
    ci, p_better, p_worse = (math.nan, math.nan), 1.0, 1.0
    if diffs:
        t = paired_test(diffs, n_resamples=n_resamples, seed=seed)
        ci = t.ci
        # "better" is a rise of a maximised objective and a fall of a minimised one
        p_better, p_worse = (t.p_up, t.p_drop) if sign > 0 else (t.p_drop, t.p_up)
    return result, HoldoutResult(
        objective=objective,
        direction=direction,
        chosen=chosen,
        base=dict(base),
        n_tune=sum(len(s.dataset.queries) for s in tune_parts),
        n_held=len(pairs),
        tuned_score=float(best[objective]),
        held_score=held,
        default_held_score=default,
        delta=held - default,
        ci=ci,
        p_value=float(p_better),
        optimism=sign * (float(best[objective]) - held),
        moved=sum(1 for d in diffs if abs(d) > 1e-9),
        per_question=pairs,
        verdict=holdout_verdict(ci, direction) if diffs else "not better",
        p_worse=float(p_worse),
    )


def _parts(lab: Lab, suites: Sequence[SuiteInput], progress: bool) -> list[_Suite]:
    from rag_lab.eval.sweep.runners import _prepare

    return _prepare(lab, suites, progress)


async def run_holdout(
    lab: Lab,
    suites: Sequence[SuiteInput],
    spaces: Sequence[ParamSpace],
    objective: str,
    holdout: float | Sequence[SuiteInput],
    *,
    seed: int = 0,
    n_trials: int = 0,
    base_params: Mapping[str, object] | None = None,
    progress: bool = True,
    **sweep_kw: Unpack[TuneOptions],
) -> tuple[SweepResult, HoldoutResult]:
    """:func:`hold_out` with the lab: ``holdout`` a fraction of each suite's questions (split
    with ``seed``) or held-out suites (SuiteSpecs / ``(dataset, kb)``); the sweep is
    :func:`~rag_lab.eval.sweep.runners.run_grid` (or ``run_optuna`` with ``n_trials``) on the
    tuning part, the held-out part runs through the full pipeline. Returns the sweep's result
    (its ``holdout`` set) and the :class:`HoldoutResult`."""
    from rag_lab.eval.runner import evaluate_lab
    from rag_lab.eval.sweep.runners import run_grid, run_optuna
    from rag_lab.eval.sweep.specs import INDEX_PARAMS, SweepError, objective_direction

    objective_direction(objective)  # a bad objective fails before anything is ingested
    if any(s.name in INDEX_PARAMS for s in spaces) or any(k in INDEX_PARAMS for k in base_params or {}):
        raise SweepError("--holdout does not take BM25 index params (bm25_k1, bm25_b, bm25_method) yet")
    prepared = _parts(lab, suites, progress)
    if isinstance(holdout, (int, float)) and not isinstance(holdout, bool):
        try:
            split = [(s, *split_dataset(s.dataset, float(holdout), seed)) for s in prepared]
        except ValueError as exc:
            raise SweepError(str(exc)) from None
        tune_parts = [type(s)(t.name, t, s.kb) for s, t, _ in split]
        held_parts = [type(s)(h.name, h, s.kb) for s, _, h in split]
    else:
        tune_parts, held_parts = prepared, _parts(lab, list(holdout), progress)  # type: ignore[arg-type]
        tune_ids = {(s.dataset.name, q.id) for s in tune_parts for q in s.dataset.queries}
        shared = [q for s in held_parts for q in s.dataset.queries if (s.dataset.name, q.id) in tune_ids]
        if shared:
            raise SweepError(
                f"--holdout: {len(shared)} held-out questions are also tuned on (e.g. {shared[0].id}); "
                "hold out another range (NAME@START-END)"
            )

    async def tune(parts: list[_Suite]) -> SweepResult:
        pairs = [(s.dataset, s.kb) for s in parts]
        if n_trials:
            return await run_optuna(
                lab,
                pairs,
                spaces,
                n_trials,
                objective,
                seed=seed,
                base_params=base_params,
                progress=progress,
                **sweep_kw,
            )
        return await run_grid(lab, pairs, spaces, objective, base_params=base_params, progress=progress, **sweep_kw)

    async def score(config: Mapping[str, object], parts: list[_Suite]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for s in parts:
            res = await evaluate_lab(lab, s.dataset, s.kb, progress=False, params=dict(config), keep_runs=False)
            values = per_question_values(res.records, res.report, objective)
            if not values:
                raise SweepError(f"--holdout: {objective} is not a per-question retrieval or funnel metric")
            out[s.name] = values
        return out

    result, ho = await hold_out(tune_parts, held_parts, tune, score, base_params or {}, seed=seed)
    result.holdout = ho.to_dict()
    result.holdout["line"] = ho.line()
    result.holdout["markdown"] = ho.markdown()
    return result, ho
