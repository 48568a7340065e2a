"""Gold-funnel metrics: recall, hit and all-recall at every stage, and where the gold is lost.

Pure functions of the per-question funnels a :class:`~rag_lab.eval.records.QueryRecord` keeps
(``record.funnel``, the compact form of :class:`~rag_lab.tuning.funnel.QuestionFunnel`: the rank of
each gold document at each stage and the stage that lost it). Names:

* ``<stage>.recall@K`` — share of the question's gold documents at rank <= K of the stage's list;
* ``<stage>.hit@K`` — 1 when any gold document is at rank <= K;
* ``<stage>.ar@K`` — all-recall: 1 when *every* gold document is at rank <= K (HippoRAG's AR@K);
* ``<stage>.ndcg@K`` — binary nDCG@K of the stage's document list (gain 1 per gold document at
  rank <= K, discount log2(rank + 1), ideal from min(|gold|, K)), and ``<stage>.map`` — average
  precision over the whole list: what trec_eval's ``ndcg_cut_K`` and ``map`` give for that list, so
  ``vector.ndcg@10`` and ``keyword.ndcg@10`` compare with published first-stage figures;
* ``funnel.lost_at.<stage>`` — share of the question's gold documents lost at that stage (lower
  is better); ``funnel.demoted_at.<stage>`` — share *demoted* there: kept, but pushed from within
  the top :data:`DEMOTE_K` of the previous stage's list to below it (lower is better; a loss the
  lost-at share does not show, since the document is still in the list); ``funnel.kept`` — share that reaches the final contexts (the lost shares and the
  kept share of a question sum to 1).

``<stage>`` is one of :data:`~rag_lab.tuning.funnel.STAGES` (``vector``, ``keyword``, ``fused``,
``search``, ``rerank``, ``mmr``, ``merge``, ``final``); lost-at stages are
:data:`~rag_lab.tuning.funnel.CHAIN`. Ranks are document ranks (a document at its best chunk,
each document once), so ``final.recall@K`` equals ``recall@K``. A question with no gold document
has no value (NaN, left out of the means); a question whose run failed has an empty funnel: 0 at
every stage, its gold lost at ``fused``. Suite values are means over questions.

>>> f = {"sizes": {"fused": 3, "final": 1}, "gold": [
...     {"id": "a", "ranks": {"fused": 1, "final": 1}, "lost_at": ""},
...     {"id": "b", "ranks": {"fused": 3, "final": None}, "lost_at": "final"}]}
>>> question_value(f, "fused.recall@2"), question_value(f, "fused.ar@3"), question_value(f, "funnel.lost_at.final")
(0.5, 1.0, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from rag_lab.tuning.funnel import CHAIN, STAGES

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.records import QueryRecord

__all__ = [
    "AR_KS",
    "DEMOTE_K",
    "FAMILIES",
    "NDCG_K",
    "RECALL_KS",
    "funnel_metric_names",
    "funnel_section",
    "funnel_summary",
    "funnel_table",
    "funnel_values",
    "has_funnel",
    "demoted_at",
    "known_stages",
    "lost_passages",
    "parse_funnel_metric",
    "question_value",
    "stage_recall",
]

#: the cut-offs a report carries for recall and hit, and for all-recall
RECALL_KS = (5, 10, 50)
AR_KS = (2, 5)
FAMILIES = {
    "recall": "share of the gold documents at rank <= k",
    "hit": "1 when any gold document is at rank <= k",
    "ar": "all-recall: 1 when every gold document is at rank <= k",
    "ndcg": "binary nDCG@k (gain 1 per gold document)",
}
#: the nDCG cut-off every report carries per stage (``<stage>.map`` too)
NDCG_K = 10
#: the rank a demoted gold document falls below (``funnel.demoted_at.<stage>``)
DEMOTE_K = 10


def parse_funnel_metric(name: str) -> tuple[str, str, int | None] | None:
    """``(stage, family, k)`` of a funnel metric name (family ``lost_at`` or ``kept``, k ``None``),
    or ``None`` when ``name`` is not one."""
    if name == "funnel.kept":
        return ("final", "kept", None)
    if name.endswith(".map") and name.removesuffix(".map") in STAGES:
        return (name.removesuffix(".map"), "map", None)
    for family in ("lost_at", "demoted_at"):
        if name.startswith(f"funnel.{family}."):
            stage = name.removeprefix(f"funnel.{family}.")
            return (stage, family, None) if stage in CHAIN else None
    stage, dot, rest = name.partition(".")
    family, at, k = rest.partition("@")
    if dot and at and stage in STAGES and family in FAMILIES and k.isdigit() and not k.startswith("0"):
        return (stage, family, int(k))
    return None


def stage_recall(ranks: Iterable[int | None], k: int) -> float:
    """Share of the ranks that are <= ``k`` (NaN for no gold)."""
    rs = list(ranks)
    return sum(1 for r in rs if r is not None and r <= k) / len(rs) if rs else math.nan


def has_funnel(funnel: Mapping[str, object] | None) -> bool:
    """The record carries a funnel (a failed run's empty funnel counts)."""
    return funnel is not None and ("gold" in funnel or bool(funnel.get("error")))


def known_stages(funnels: Iterable[Mapping[str, Any]]) -> list[str]:
    """The stages every funnel knows (a failed run's knows them all), in stage order."""
    known = set(STAGES)
    for f in funnels:
        if has_funnel(f) and not f.get("error"):
            known &= set(f.get("sizes") or {})
    return [s for s in STAGES if s in known]


def question_value(funnel: Mapping[str, Any], name: str) -> float:
    """One question's value of funnel metric ``name`` (see the module doc)."""
    parsed = parse_funnel_metric(name)
    if parsed is None:
        raise KeyError(f"{name!r} is not a funnel metric")
    stage, family, k = parsed
    gold = list(funnel.get("gold") or [])
    if funnel.get("error"):
        n = int(funnel.get("n_gold") or 0)
        if not n:
            return math.nan
        return 1.0 if family == "lost_at" and stage == CHAIN[0] else 0.0
    if not gold:
        return math.nan
    if family == "lost_at":
        return sum(1 for g in gold if g.get("lost_at") == stage) / len(gold)
    if family == "demoted_at":
        return sum(1 for g in gold if demoted_at(g) == stage) / len(gold)
    if family == "kept":
        return sum(1 for g in gold if not g.get("lost_at")) / len(gold)
    if stage not in (funnel.get("sizes") or {}):
        return math.nan
    ranks = [(g.get("ranks") or {}).get(stage) for g in gold]
    if family == "map":
        found = sorted(r for r in ranks if r is not None)
        return float(sum((j + 1) / r for j, r in enumerate(found)) / len(ranks))
    assert k is not None
    if family == "recall":
        return stage_recall(ranks, k)
    if family == "ndcg":
        dcg = sum(1.0 / math.log2(r + 1) for r in ranks if r is not None and r <= k)
        return dcg / sum(1.0 / math.log2(i + 2) for i in range(min(len(ranks), k)))
    inside = [r is not None and r <= k for r in ranks]
    return float(any(inside)) if family == "hit" else float(all(inside))


def funnel_metric_names(stages: Sequence[str] = STAGES) -> list[str]:
    """The funnel metrics a report carries for ``stages``: recall and hit at :data:`RECALL_KS`,
    all-recall at :data:`AR_KS`, nDCG at :data:`NDCG_K` and MAP, then the lost-at shares and the
    kept share."""
    out = [f"{s}.{fam}@{k}" for s in stages for fam in ("recall", "hit") for k in RECALL_KS]
    out += [f"{s}.ar@{k}" for s in stages for k in AR_KS]
    out += [m for s in stages for m in (f"{s}.ndcg@{NDCG_K}", f"{s}.map")]
    return (
        out + [f"funnel.lost_at.{s}" for s in CHAIN] + [f"funnel.demoted_at.{s}" for s in CHAIN[1:]] + ["funnel.kept"]
    )


def demoted_at(gold: Mapping[str, Any]) -> str:
    """The first stage of :data:`CHAIN` that keeps a gold document but moves it from within the
    top :data:`DEMOTE_K` of the previous stage to below it (``""``: never demoted). Stages the
    funnel does not know are skipped.

    >>> demoted_at({"ranks": {"fused": 3, "search": 3, "rerank": 14, "final": None}})
    'rerank'
    >>> demoted_at({"ranks": {"fused": 12, "search": 12, "rerank": 14}}), demoted_at({"ranks": {"fused": 2, "final": 2}})
    ('', '')
    """
    ranks = gold.get("ranks") or {}
    known = [s for s in CHAIN if s in ranks]
    for before, stage in zip(known, known[1:]):
        prev, now = ranks[before], ranks[stage]
        if prev is not None and prev <= DEMOTE_K and now is not None and now > DEMOTE_K:
            return stage
    return ""


def funnel_values(records: Sequence[QueryRecord], names: Iterable[str] | None = None) -> dict[str, dict[str, float]]:
    """``{metric: {qid: value}}`` over records with a funnel (``names``: default
    :func:`funnel_metric_names` of the stages every record knows; empty when none has one)."""
    funnels = [(r.qid, r.funnel) for r in records if has_funnel(r.funnel)]
    if not funnels:
        return {}
    chosen = list(names) if names is not None else funnel_metric_names(known_stages(f for _, f in funnels))
    return {n: {qid: question_value(f, n) for qid, f in funnels} for n in chosen}


def _mean(values: Iterable[float]) -> float:
    vs = [v for v in values if math.isfinite(v)]
    return sum(vs) / len(vs) if vs else math.nan


def funnel_summary(records: Sequence[QueryRecord], names: Iterable[str] | None = None) -> dict[str, float]:
    """Means over questions of :func:`funnel_values` (NaN values left out)."""
    return {n: _mean(per.values()) for n, per in funnel_values(records, names).items()}


def funnel_table(summary: Mapping[str, float], k: int = 10, wide: int = 50) -> str:
    """The per-stage table people read: recall@k, hit@k, recall@wide and ar@5 of each stage, and
    the share of gold lost at it (plain text, aligned)."""
    stages = [s for s in STAGES if f"{s}.recall@{k}" in summary]
    head = ["stage", f"recall@{k}", f"hit@{k}", f"recall@{wide}", "ar@5", f"ndcg@{NDCG_K}", "map", "lost here"]
    head.append(f"demoted below {DEMOTE_K}")
    rows = [head]
    for s in stages:
        lost = summary.get(f"funnel.lost_at.{s}")
        rows.append(
            [
                s,
                *(
                    _fmt(summary.get(f"{s}.{m}"))
                    for m in (f"recall@{k}", f"hit@{k}", f"recall@{wide}", "ar@5", f"ndcg@{NDCG_K}", "map")
                ),
                _fmt(lost) if lost is not None else "",
                _fmt(summary.get(f"funnel.demoted_at.{s}")) if f"funnel.demoted_at.{s}" in summary else "",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    kept = summary.get("funnel.kept")
    if kept is not None:
        lines.append(f"gold reaching the final contexts: {_fmt(kept)}")
    return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "" if v is None else ("nan" if not math.isfinite(v) else f"{v:.3f}")


class FunnelSection(TypedDict):
    """A report suite's ``funnel`` section (:func:`funnel_section`); values per stage, per cut-off
    (null: not computed)."""

    stages: list[str]
    recall: dict[str, dict[str, float | None]]
    hit: dict[str, dict[str, float | None]]
    ar: dict[str, dict[str, float | None]]
    lost_at: dict[str, float | None]
    kept: float | None
    n_gold: int
    n_lost: dict[str, int]


class LostPassage(TypedDict):
    """A gold document that did not reach the final contexts (:func:`lost_passages`)."""

    qid: str
    question: str
    gold: str
    lost_at: str
    why: str


def funnel_section(records: Sequence[QueryRecord]) -> FunnelSection | None:
    """The ``funnel`` section of a report suite: the known stages, recall / hit / all-recall per
    stage and cut-off, and how many gold documents each stage lost (``None`` without funnels)."""
    summ = funnel_summary(records)
    if not summ:
        return None
    stages = [s for s in STAGES if f"{s}.recall@{RECALL_KS[0]}" in summ]
    golds = [g for r in records if has_funnel(r.funnel) for g in r.funnel.get("gold") or []]
    failed = sum(int(r.funnel.get("n_gold") or 0) for r in records if has_funnel(r.funnel) and r.funnel.get("error"))
    lost = {s: sum(1 for g in golds if g.get("lost_at") == s) for s in CHAIN}
    lost[CHAIN[0]] += failed

    def per(family: str, ks: Sequence[int]) -> dict[str, dict[str, float | None]]:
        return {s: {str(k): _none(summ.get(f"{s}.{family}@{k}")) for k in ks} for s in stages}

    return {
        "stages": stages,
        "recall": per("recall", RECALL_KS),
        "hit": per("hit", RECALL_KS),
        "ar": per("ar", AR_KS),
        "lost_at": {s: _none(summ.get(f"funnel.lost_at.{s}")) for s in CHAIN},
        "kept": _none(summ.get("funnel.kept")),
        "n_gold": len(golds) + failed,
        "n_lost": lost,
    }


def _none(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else v


def lost_passages(records: Sequence[QueryRecord]) -> list[LostPassage]:
    """One row per gold document that did not reach the final contexts: question, document,
    the stage that lost it and why; worst questions first (most of their gold lost, then the
    earliest stage), then question order."""
    rows: list[tuple[tuple[float, int, int], LostPassage]] = []
    for n, r in enumerate(records):
        f = r.funnel
        if not has_funnel(f):
            continue
        gold = list(f.get("gold") or [])
        if f.get("error"):
            gold = [{"id": g, "lost_at": CHAIN[0], "why": f"the run failed: {r.error}"} for g in r.gold_ids]
        lost = [g for g in gold if g.get("lost_at")]
        if not lost:
            continue
        share = len(lost) / len(gold)
        first = min(CHAIN.index(g["lost_at"]) for g in lost if g["lost_at"] in CHAIN)
        for g in sorted(lost, key=lambda g: CHAIN.index(g["lost_at"]) if g["lost_at"] in CHAIN else 99):
            rows.append(
                (
                    (-share, first, n),
                    {
                        "qid": r.qid,
                        "question": r.question,
                        "gold": g["id"],
                        "lost_at": g["lost_at"],
                        "why": g.get("why", ""),
                    },
                )
            )
    rows.sort(key=lambda t: t[0])
    return [row for _, row in rows]
