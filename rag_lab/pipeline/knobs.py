"""Honest knobs: say when a param cannot change the outcome, refuse values no model can reach.

A tuning session is only as good as its knobs. Three of them can silently do nothing:

* ``rrf_vector_weight`` / ``rrf_keyword_weight`` at 0 fall back to the spec's 0.7 / 0.3 (§1.10,
  upstream behaviour kept): a 0 does not switch a retriever off.
* ``mmr_lambda`` only matters when MMR has to choose: when the candidates that passed the rerank
  threshold are no more than ``rerank_top_k``, MMR keeps all of them whatever λ is.
* ``keyword_threshold`` is not applied by the BM25 keyword engines (spec §5, App. B.19), and a
  ``vector_threshold`` above every hit's similarity empties the vector list; with both, a
  question the keywords miss gets no retrieval at all (the search records only the hits that
  passed, so the warning says which list came back empty).
* a rerank threshold outside the reranker's score range either keeps everything or leaves only the
  fallback ladder (top-1 / degraded retry); such values are refused, naming the range.

Everything here is a pure function over :class:`~rag_lab.types.params.PipelineParams` and plain
data (the rerank stage's diagnostics, per-query outcomes of a sweep). ``rag-lab ask``, ``Lab.ask``
(``Run.warnings``), sweeps (``SweepResult.warnings``) and the widgets call these functions, so the
wording and the rules are the same everywhere. Unknown param names get a did-you-mean from
:func:`suggest_fields`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_lab.retrieval.fusion import DEFAULT_KEYWORD_WEIGHT, DEFAULT_VECTOR_WEIGHT
from rag_lab.types.params import ParamsError, PipelineParams, did_you_mean, suggest_fields

__all__ = [
    "SCORE_THRESHOLD_FIELDS",
    "KnobWarning",
    "apply_overrides",
    "changed_fields",
    "check_score_range",
    "param_warnings",
    "rerank_warnings",
    "run_warnings",
    "search_warnings",
    "suggest_fields",
    "sweep_warnings",
]

#: params compared with the reranker's scores (refused outside its declared range)
SCORE_THRESHOLD_FIELDS = ("rerank_threshold", "rerank_fallback_min_score")


@dataclass(frozen=True, slots=True)
class KnobWarning:
    """``field`` set to ``value`` cannot change the outcome (``message`` says why and what to do)."""

    field: str
    value: object
    message: str

    def __str__(self) -> str:
        return f"{self.field}={self.value!r}: {self.message}"


def apply_overrides(base: PipelineParams, overrides: Mapping[str, object], source: str = "params") -> PipelineParams:
    """``base`` with ``overrides`` applied and validated; an unknown name fails with the source,
    the name and a did-you-mean."""
    unknown = [k for k in overrides if k not in PipelineParams.model_fields]
    if unknown:
        raise ParamsError(
            "; ".join(f"{source}: unknown param '{k}' (value {overrides[k]!r}){did_you_mean(k)}" for k in unknown)
        )
    return PipelineParams.from_mapping({**base.model_dump(), **dict(overrides)}, source=source)


def changed_fields(params: PipelineParams, reference: PipelineParams | None = None) -> set[str]:
    """Fields of ``params`` that differ from ``reference`` (default: the spec's defaults), i.e.
    the knobs someone turned."""
    if reference is None:
        # params are frozen: the same object (a lab's params, asked question after question)
        # has the same answer
        last = _LAST_CHANGED[0]
        if last is not None and last[0] is params:
            return set(last[1])
        ref = _default_dump()
    else:
        ref = reference.model_dump()
    out = {k for k, v in params.model_dump().items() if ref.get(k) != v}
    if reference is None:
        _LAST_CHANGED[0] = (params, frozenset(out))
    return out


@functools.cache
def _default_dump() -> dict[str, object]:
    return PipelineParams().model_dump()


#: (params, its changed fields) of the last call against the defaults (held, so the id stays its own)
_LAST_CHANGED: list[tuple[PipelineParams, frozenset[str]] | None] = [None]


def check_score_range(
    params: PipelineParams, score_range: Sequence[float] | None, model_id: str = "the reranker"
) -> None:
    """Refuse rerank thresholds outside the reranker's declared score range ``(lo, hi)``: no
    candidate could ever reach (or miss) them. ``None``: the model declares no range."""
    if score_range is None:
        return
    lo, hi = float(score_range[0]), float(score_range[1])
    bad = []
    for name in SCORE_THRESHOLD_FIELDS:
        v = float(getattr(params, name))
        if not lo <= v <= hi:
            what = "no candidate can reach it" if v > hi else "every candidate passes it"
            bad.append(f"{name}={v:g} is outside [{lo:g}, {hi:g}], the score range of {model_id} ({what})")
    if bad:
        raise ParamsError("; ".join(bad))


def param_warnings(params: PipelineParams, changed: Iterable[str] | None = None) -> list[KnobWarning]:
    """Warnings that need no run: RRF weights at 0 (they fall back to the spec's defaults)."""
    turned = set(changed_fields(params) if changed is None else changed)
    out: list[KnobWarning] = []
    wv, wk = params.rrf_vector_weight, params.rrf_keyword_weight
    both = wv <= 0 and wk <= 0
    for name, v, default, other in (
        ("rrf_vector_weight", wv, DEFAULT_VECTOR_WEIGHT, "keyword"),
        ("rrf_keyword_weight", wk, DEFAULT_KEYWORD_WEIGHT, "vector"),
    ):
        if v <= 0 and (name in turned or both):
            why = "both weights at 0 fall back to 0.7/0.3" if both else f"a weight <= 0 falls back to {default:g}"
            out.append(
                KnobWarning(
                    name,
                    v,
                    f"{why} (spec §1.10), so this list still counts; to favour the {other} list give this "
                    "one a small positive weight (e.g. 0.01)",
                )
            )
    return out


def rerank_warnings(params: PipelineParams, diag: object, changed: Iterable[str] | None = None) -> list[KnobWarning]:
    """Warnings from one run's rerank diagnostics (``state.diagnostics["rerank"]``): λ when MMR
    had nothing to choose, a threshold no candidate reached (the fallback ladder decided)."""
    if diag is not None and not isinstance(diag, Mapping):  # a typed diagnostics record
        diag = {k: getattr(diag, k, None) for k in ("ranked_ids", "outcome", "threshold_used")}
    if not isinstance(diag, Mapping):
        return []
    turned = set(changed_fields(params) if changed is None else changed)
    out: list[KnobWarning] = []
    ranked = diag.get("ranked_ids")
    if "mmr_lambda" in turned and ranked is not None:
        n = len(ranked)
        if params.rerank_top_k <= 1 and n > 1:
            out.append(
                KnobWarning(
                    "mmr_lambda",
                    params.mmr_lambda,
                    "no effect: with rerank_top_k=1 MMR keeps the most relevant candidate whatever λ is "
                    "(redundancy only counts from the second pick on)",
                )
            )
        elif n <= max(1, params.rerank_top_k):
            fix = (
                f"λ matters when rerank_top_k < {n} (or with a lower rerank_threshold)"
                if n > 1
                else "λ matters when more candidates pass (a lower rerank_threshold)"
            )
            out.append(
                KnobWarning(
                    "mmr_lambda",
                    params.mmr_lambda,
                    f"no effect on this question: {n} candidate(s) passed the rerank threshold and "
                    f"rerank_top_k={params.rerank_top_k} keeps all of them, so MMR picks every one whatever λ is "
                    f"(only their order changes, and the merge re-sorts by score); {fix}",
                )
            )
    outcome = str(diag.get("outcome") or "")
    if "rerank_threshold" in turned and outcome in ("fallback_top1", "threshold_degraded"):
        used = diag.get("threshold_used", params.rerank_threshold)
        how = (
            "only the best candidate was kept by the top-1 fallback"
            if outcome == "fallback_top1"
            else f"the stage retried at {float(used):.2f}"
        )
        out.append(
            KnobWarning(
                "rerank_threshold",
                params.rerank_threshold,
                f"no candidate reached it on this question: {how}; any higher threshold gives the same result",
            )
        )
    return out


def search_warnings(params: PipelineParams, diag: object, changed: Iterable[str] | None = None) -> list[KnobWarning]:
    """Warnings from one run's search diagnostics (``state.diagnostics["search"]``): a turned
    ``keyword_threshold`` (the BM25 engines do not apply it) and a turned ``vector_threshold``
    that no vector hit reached (naming what the keyword list held, and when nothing was retrieved)."""
    calls = diag.get("calls") if isinstance(diag, Mapping) else getattr(diag, "calls", None)
    if not calls:
        return []
    turned = set(changed_fields(params) if changed is None else changed)
    n_vec = sum(len(c.get("vector") or []) for c in calls)
    n_kw = sum(len(c.get("keyword") or []) for c in calls)
    out: list[KnobWarning] = []
    if "keyword_threshold" in turned:
        best = max((float(h[2]) for c in calls for h in c.get("keyword") or []), default=None)
        seen = f"the best keyword score was {best:.3g}" if best is not None else "no keyword hit"
        out.append(
            KnobWarning(
                "keyword_threshold",
                params.keyword_threshold,
                "no effect: the BM25 keyword engine does not apply it (spec §5, App. B.19: BM25 scores "
                f"are unbounded), so every keyword match is kept whatever its value ({seen} on this question)",
            )
        )
    if "vector_threshold" in turned and n_vec == 0:
        tail = (
            f"only the {n_kw} keyword hit(s) were retrieved"
            if n_kw
            else "the keyword search matched nothing either, so retrieval came back empty"
        )
        out.append(
            KnobWarning(
                "vector_threshold",
                params.vector_threshold,
                "no vector hit reached it on this question (the search keeps only the hits above it, "
                f"cosine similarities; the embedder's good matches are usually 0.4-0.8): {tail}; "
                "lower it for the vector path to count",
            )
        )
    return out


def run_warnings(params: PipelineParams, diagnostics: Mapping[str, object] | None) -> list[KnobWarning]:
    """All warnings for one run: :func:`param_warnings`, :func:`search_warnings` and
    :func:`rerank_warnings`."""
    turned = changed_fields(params)
    diag = diagnostics.get("rerank") if diagnostics is not None else None
    search = diagnostics.get("search") if diagnostics is not None else None
    return (
        param_warnings(params, turned) + search_warnings(params, search, turned) + rerank_warnings(params, diag, turned)
    )


def sweep_warnings(
    param_names: Sequence[str], rows: Sequence[Mapping[str, object]], outcomes: Mapping[int, object]
) -> list[str]:
    """Swept params that never changed anything: for each one, configs that differ only in it
    gave the same outcome (``outcomes[config_index]``: e.g. the contexts of every question).
    Names the values tried and, where known, the reason (MMR with too few candidates, RRF weight
    fallback)."""
    out: list[str] = []
    for name in param_names:
        groups: dict[tuple[tuple[str, str], ...], list[Mapping[str, Any]]] = {}
        for r in rows:
            key = tuple((p, repr(r.get(p))) for p in param_names if p != name)
            groups.setdefault(key, []).append(r)
        compared = [g for g in groups.values() if len({repr(r.get(name)) for r in g}) > 1]
        if not compared:
            continue
        if all(len({repr(outcomes.get(r["config_index"])) for r in g}) == 1 for g in compared):
            values = sorted({r.get(name) for g in compared for r in g}, key=repr)
            reason = {
                "mmr_lambda": " (MMR keeps every candidate when no more than rerank_top_k pass the threshold: "
                "lower rerank_top_k for λ to matter)",
                "rrf_vector_weight": " (a weight of 0 falls back to 0.7, spec §1.10)",
                "rrf_keyword_weight": " (a weight of 0 falls back to 0.3, spec §1.10)",
            }.get(name, "")
            out.append(
                f"{name}: the values {', '.join(str(v) for v in values)} gave the same contexts for every "
                f"question{reason}"
            )
    return out
