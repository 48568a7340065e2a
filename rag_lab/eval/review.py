"""Unreviewed synthetic questions: generated (``rag-lab testset`` writes ``"synthetic": true,
"reviewed": false`` in each question's metadata) and not yet checked by a person.

Every report records them per suite under ``meta.provenance.unreviewed_synthetic``
(:func:`unreviewed_section`, only suites that have some), the eval report and the gate flag their
number, and the gate refuses to build, update or compare against a baseline built on them unless
``--allow-unreviewed`` (:func:`refuse_unreviewed`): a baseline is what every change is judged by,
and nobody has said these questions and their gold ids are right.

A question counts as reviewed once its metadata says ``"reviewed": true`` (what the labelling
panel, :mod:`rag_lab.eval.labelling`, writes with who and when).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset

__all__ = [
    "ALLOW_FLAG",
    "refuse_unreviewed",
    "spec_unreviewed",
    "unreviewed_count",
    "unreviewed_qids",
    "unreviewed_section",
    "unreviewed_warnings",
]

ALLOW_FLAG = "--allow-unreviewed"


def unreviewed_qids(dataset: Dataset) -> list[str]:
    """Ids of the dataset's questions marked synthetic and not reviewed."""
    out = []
    for q in dataset.queries:
        meta = getattr(q, "metadata", None) or {}
        if meta.get("synthetic") is True and meta.get("reviewed") is not True:
            out.append(q.id)
    return out


class UnreviewedSuite(TypedDict):
    """A suite's unreviewed synthetic questions: how many, of how many, their ids."""

    count: int
    of: int
    qids: list[str]


def unreviewed_section(datasets: Iterable[tuple[str, Dataset]]) -> dict[str, UnreviewedSuite]:
    """``{suite: {"count", "of", "qids"}}`` for the suites with unreviewed synthetic questions."""
    out: dict[str, UnreviewedSuite] = {}
    for name, ds in datasets:
        qids = unreviewed_qids(ds)
        if qids:
            out[name] = {"count": len(qids), "of": len(ds.queries), "qids": qids}
    return out


def _section(meta: Mapping[str, object] | None) -> Mapping[str, object]:
    prov = (meta or {}).get("provenance")
    sec = prov.get("unreviewed_synthetic") if isinstance(prov, Mapping) else None
    return sec if isinstance(sec, Mapping) else {}


def unreviewed_count(meta: Mapping[str, object] | None) -> int:
    """How many unreviewed synthetic questions a report's metadata records (0 for reports written
    before the field existed)."""
    return sum(int(v.get("count", 0)) for v in _section(meta).values() if isinstance(v, Mapping))


def _describe(section: Mapping[str, Any]) -> str:
    parts = []
    for suite, v in sorted(section.items()):
        e = f", e.g. {v['qids'][0]}" if v.get("qids") else ""
        parts.append(f"suite {suite!r}: {v.get('count')} of {v.get('of')}{e}")
    return "; ".join(parts)


def refuse_unreviewed(meta_or_section: Mapping[str, object], what: str) -> str:
    """The error message of a refusal: ``what`` (e.g. "the baseline reports/b.json is") and the counts."""
    section = _section(meta_or_section) or meta_or_section
    n = sum(int(v.get("count", 0)) for v in section.values() if isinstance(v, Mapping))
    return (
        f"{what.strip()} built on {n} unreviewed synthetic question(s) ({_describe(section)}): they were "
        "generated (rag-lab testset) and nobody checked them or their gold ids. Review them (the labelling "
        'panel, rag_lab.lab.label_panel.LabelPanel, or "reviewed": true in their metadata in queries.jsonl) '
        f"or pass {ALLOW_FLAG} to use them anyway"
    )


def unreviewed_warnings(bmeta: Mapping[str, object], cmeta: Mapping[str, object], allowed: bool) -> list[str]:
    """The gate's lines about unreviewed synthetic questions on either side."""
    out = []
    for side, meta in (("the baseline", bmeta), ("the current run", cmeta)):
        sec = _section(meta)
        if sec:
            n = unreviewed_count(meta)
            tail = f" (allowed by {ALLOW_FLAG})" if side == "the baseline" and allowed else ""
            out.append(f"{side} has {n} unreviewed synthetic question(s) ({_describe(sec)}){tail}")
    return out


def spec_unreviewed(spec: Mapping[str, Any]) -> dict[str, UnreviewedSuite]:
    """:func:`unreviewed_section` of a report spec's suites (their dataset slices, loaded)."""
    from rag_lab.eval.suite_spec import SuiteSpec

    loaded = []
    for raw in spec.get("suites") or []:
        s = raw if isinstance(raw, SuiteSpec) else SuiteSpec.from_dict(raw)
        loaded.append((s.name, s.load()))
    return unreviewed_section(loaded)
