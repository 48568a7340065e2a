"""The gold funnel in a report: the per-stage table (recall / hit / all-recall, share of the gold
lost at each stage) and, per question, the stage that lost each gold passage, worst first
(:func:`rag_lab.eval.funnel.lost_passages`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rag_lab.eval.funnel import AR_KS, RECALL_KS, FunnelSection, funnel_section, lost_passages

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.report.model import SuiteResult

__all__ = ["funnel_markdown", "funnel_tables", "is_funnel_metric"]

_NOTE = (
    "Ranks are document ranks at each stage (a document at its best chunk, each once). *lost here*: share of "
    "the gold documents last seen at the stage before (fused: never retrieved). See docs/evaluation.md, "
    '"How to read the funnel".'
)


def is_funnel_metric(name: str) -> bool:
    """A gold-funnel metric (shown in the funnel table, not the summary table)."""
    from rag_lab.eval.funnel import parse_funnel_metric

    return parse_funnel_metric(name) is not None


def _f(v: float | None) -> str:
    return "" if v is None else ("NaN" if isinstance(v, float) and not math.isfinite(v) else f"{v:.3f}")


def _rows(fs: FunnelSection) -> tuple[list[str], list[list[str]]]:
    head = ["stage", *(f"recall@{k}" for k in RECALL_KS), *(f"hit@{k}" for k in RECALL_KS), *(f"AR@{k}" for k in AR_KS)]
    head.append("lost here")
    rows = []
    for s in fs["stages"]:
        lost = fs["lost_at"].get(s)
        rows.append(
            [
                s,
                *(_f(fs["recall"][s][str(k)]) for k in RECALL_KS),
                *(_f(fs["hit"][s][str(k)]) for k in RECALL_KS),
                *(_f(fs["ar"][s][str(k)]) for k in AR_KS),
                _f(lost) if s in fs["lost_at"] else "",
            ]
        )
    return head, rows


def funnel_tables(suite: SuiteResult) -> dict[str, object] | None:
    """The suite's funnel as the report page shows it (``None`` when its records carry no funnel):
    gold count, share kept, the note, the per-stage table (``head``, ``rows``) and the lost
    passages, worst questions first."""
    fs = funnel_section(suite.records)
    if fs is None:
        return None
    head, rows = _rows(fs)
    return {
        "n_gold": fs["n_gold"],
        "kept": _f(fs["kept"]),
        "note": _NOTE,
        "head": head,
        "rows": rows,
        "lost": lost_passages(suite.records),
    }


def funnel_markdown(suite: SuiteResult, max_rows: int = 200) -> list[str]:
    """Markdown lines of the suite's funnel (none when its records carry no funnel)."""
    fs = funnel_section(suite.records)
    if fs is None:
        return []
    head, rows = _rows(fs)
    out = ["", f"### Gold funnel ({fs['n_gold']} gold documents; {_f(fs['kept'])} reach the final contexts)", ""]
    out += [_NOTE, "", "| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    lost = lost_passages(suite.records)
    out += ["", f"#### Where the gold was lost ({len(lost)} passages, worst questions first)", ""]
    if not lost:
        return out + ["none"]
    out += ["| qid | question | gold document | lost at | why |", "|---|---|---|---|---|"]
    for r in lost[:max_rows]:
        q = r["question"].replace("|", "\\|").replace("\n", " ")
        q = q if len(q) <= 80 else q[:79] + "…"
        out.append(f"| {r['qid']} | {q} | {r['gold']} | {r['lost_at']} | {r['why'].replace('|', '/')} |")
    return out
