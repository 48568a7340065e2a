"""Where a report comes from, and the gate's warnings when a baseline does not match the run it is
compared with: its age, the code version, the models and the content of each suite's dataset slice.

:func:`report_provenance` is what :func:`rag_lab.eval.runner.evaluate_suites` stores under
``meta["provenance"]``; :func:`provenance_warnings` compares two reports' (a warning, never a
failure: a baseline made by another code version is what every change is gated against, but a
baseline made with another embedder or on other questions compares things that differ by design).
"""

from __future__ import annotations

import datetime
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.report import EvalReport
    from rag_lab.lab.lab import Lab

__all__ = ["code_version", "dataset_digest", "lab_models", "provenance_warnings", "report_provenance"]


def code_version() -> str:
    """``"<rag_lab version>+<12 hex>"``: the hash of every module of the package (and the vendored
    model files), so two reports made by the same tree carry the same version."""
    import rag_lab
    from rag_lab.importgraph import PACKAGE_ROOT

    h = hashlib.sha256()
    files = (p for p in PACKAGE_ROOT.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for path in sorted(files):
        if path.suffix == ".py" or "_vendor" in path.parts:
            h.update(b"\0" + path.relative_to(PACKAGE_ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{rag_lab.__version__}+{h.hexdigest()[:12]}"


def dataset_digest(dataset: Dataset) -> str:
    """SHA-256 (16 hex) of a dataset slice's content: corpus documents (id, title, text, metadata),
    questions (id, question, answers, gold ids), FAQ entries and history turns."""
    h = hashlib.sha256()

    def add(obj: object) -> None:
        h.update(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8") + b"\n")

    for d in dataset.corpus:
        add(["doc", d.id, d.title, d.text, d.metadata])
    for q in dataset.queries:
        add(["query", q.id, q.question, list(q.answers), list(q.gold_ids)])
    for f in getattr(dataset, "faq", []) or []:
        add(["faq", f.id, f.question, list(f.answers), list(f.similar_questions), list(f.negative_questions)])
    for qid, turns in sorted((getattr(dataset, "history", {}) or {}).items()):
        add(["history", qid, [[t.question, t.answer] for t in turns]])
    return h.hexdigest()[:16]


def lab_models(lab: Lab) -> dict[str, str]:
    """The model ids a lab answers with: embedder key, reranker and chat model."""

    def inner(m: object) -> object:
        return getattr(m, "inner", m)

    out: dict[str, str] = {}
    emb = getattr(lab, "embedder", None)
    if emb is not None:
        out["embedder"] = str(getattr(emb, "model_key", type(inner(emb)).__name__))
    rr = getattr(lab, "reranker", None)
    out["reranker"] = str(getattr(inner(rr), "model_id", type(inner(rr)).__name__)) if rr is not None else "none"
    chat = getattr(lab, "chat_model", None)
    if chat is not None:
        out["chat"] = str(getattr(inner(chat), "model_id", type(inner(chat)).__name__))
    return out


def report_provenance(lab: Lab, datasets: Iterable[tuple[str, Dataset]]) -> dict[str, object]:
    """``{"code_version", "models", "datasets": {suite: digest}}`` of a run, plus
    ``unreviewed_synthetic`` when some suite has unreviewed synthetic questions (:mod:`rag_lab.eval.review`)."""
    from rag_lab.eval.review import unreviewed_section

    pairs = list(datasets)
    out: dict[str, object] = {
        "code_version": code_version(),
        "models": lab_models(lab),
        "datasets": {name: dataset_digest(ds) for name, ds in pairs},
    }
    unreviewed = unreviewed_section(pairs)
    if unreviewed:
        out["unreviewed_synthetic"] = unreviewed
    return out


def _parse_time(text: object) -> datetime.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        t = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=datetime.UTC)


def provenance_warnings(
    baseline: EvalReport, current: EvalReport, max_age_days: float = 90.0, now: datetime.datetime | None = None
) -> list[str]:
    """One line per mismatch between the baseline's provenance and the current report's."""
    out: list[str] = []
    bmeta: Mapping[str, object] = baseline.meta or {}
    cmeta: Mapping[str, object] = current.meta or {}
    created = _parse_time(bmeta.get("created_at"))
    if max_age_days and created is not None:
        age = ((now or datetime.datetime.now(datetime.UTC)) - created).total_seconds() / 86400
        if age > max_age_days:
            out.append(
                f"the baseline is {age:.0f} days old (created {created.date().isoformat()}, limit "
                f"{max_age_days:g} days): refresh it with `rag-lab gate --update`"
            )
    bp, cp = bmeta.get("provenance"), cmeta.get("provenance")
    if not isinstance(bp, Mapping):
        out.append(
            "the baseline records no provenance (code version, models, dataset content): refresh it with "
            "`rag-lab gate --update` to have them checked"
        )
        return out
    if not isinstance(cp, Mapping):
        return out
    if bp.get("code_version") != cp.get("code_version"):
        out.append(
            f"the baseline was made by another code version ({bp.get('code_version')} → {cp.get('code_version')}): "
            "expected while a change is gated; refresh the baseline once the change is intended"
        )
    bm, cm = dict(bp.get("models") or {}), dict(cp.get("models") or {})
    for role in sorted(set(bm) | set(cm)):
        if bm.get(role) != cm.get(role):
            out.append(
                f"the {role} model differs from the baseline's ({bm.get(role)!r} → {cm.get(role)!r}): scores "
                "on other scales are not comparable"
                + (
                    "; rerank_threshold and rerank_fallback_min_score were set for the old one's scores"
                    if role == "reranker"
                    else ""
                )
            )
    from rag_lab.eval.score_range import range_warning

    br, cr = dict(bp.get("rerank_scores") or {}), dict(cp.get("rerank_scores") or {})
    for suite in sorted(set(br) & set(cr)):
        w = range_warning("the baseline", br[suite], cr[suite])
        if w:
            out.append(f"suite {suite!r}: {w}")
    bd, cd = dict(bp.get("datasets") or {}), dict(cp.get("datasets") or {})
    for suite in sorted(set(bd) & set(cd)):
        if bd[suite] != cd[suite]:
            out.append(
                f"suite {suite!r}: its dataset content differs from the baseline's ({bd[suite]} → {cd[suite]}): "
                "the questions, gold ids or corpus changed"
            )
    return out
