"""The fast evaluator's captured stage inputs (:class:`rag_lab.tuning.QuestionInputs`) in the
stage cache, so that a second sweep or tuning panel over the same questions skips the capture runs.

One entry per question under the ``capture`` stage, keyed by everything a capture depends on: the
question text and the history turns replayed before it, each searched KB as the search stage's
cache keys it (settings, content version, BM25 index settings, engine), every :class:`~rag_lab.types.params.PipelineParams`
field the capture ran with (its own final contexts, kept for the first equivalence check, depend on
the post-retrieval ones too), the lab's models (id and class of each chat and rerank model) and the
code version of the whole pipeline (the import closure of the module defining the lab's class, for
:class:`~rag_lab.lab.lab.Lab` every stage it wires, and of the capture modules). Captures that failed are not stored: the next run tries again.

A capture is plain JSON: search results, history and candidates as their fields, arrays as lists
(floats round-trip exactly). Reading one back gives the same evaluation as the capture it stores
(``tests/eval/test_capture_cache.py`` checks the fast evaluator's references for every config of a
grid).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.eval.cache.keys import code_version_for
from rag_lab.eval.cache.store import StageCache
from rag_lab.eval.cache.wrappers import _search_result_from_payload, _search_result_payload

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab
    from rag_lab.tuning.capture import CaptureQuestion
    from rag_lab.tuning.inputs import QuestionInputs, StoreMemo
    from rag_lab.types.params import PipelineParams

__all__ = ["CAPTURE_STAGE", "CaptureRequest", "acapture_cached", "inputs_from_payload", "inputs_payload"]

CAPTURE_STAGE = "capture"
#: bumped when the payload's shape changes
CAPTURE_FORMAT = 1
_ARRAYS = {
    "model_index": np.intp,
    "model_score": np.float64,
    "search_score": np.float64,
    "is_graph": bool,
    "is_web": bool,
    "is_faq": bool,
    "is_wiki": bool,
}


@dataclass(frozen=True)
class CaptureRequest:
    """A question to capture: its id, its text and the earlier turns (question, answer) replayed
    into a fresh session before it (empty: no history)."""

    qid: str
    question: str
    history: tuple[tuple[str, str], ...] = ()


# -- payloads ---------------------------------------------------------------------------------
def _float(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def inputs_payload(q: QuestionInputs) -> dict[str, object]:
    """``q`` as JSON-ready data (the store memo is left out: the reader brings its own)."""
    out: dict[str, object] = {"format": CAPTURE_FORMAT}
    for f in fields(q):
        v = getattr(q, f.name)
        if f.name == "store":
            continue
        if f.name in ("search_result", "references"):
            v = [_search_result_payload(r) for r in v]
        elif f.name == "history":
            v = [
                {
                    "query": h.query,
                    "answer": h.answer,
                    "create_at": h.create_at,
                    "knowledge_references": [_search_result_payload(r) for r in h.knowledge_references],
                }
                for h in v
            ]
        elif f.name == "rerank" and v is not None:
            v = {g.name: _rerank_field(g.name, getattr(v, g.name)) for g in fields(v)}
        elif f.name == "latency_ms":
            v = _float(v)
        elif f.name == "search_paths" and v is not None:
            v = v.to_dict()
        out[f.name] = v
    return out


def _rerank_field(name: str, value: Any) -> object:
    if name == "candidates":
        return [_search_result_payload(r) for r in value]
    return np.asarray(value).tolist() if name in _ARRAYS or name == "jaccard" else value


def inputs_from_payload(d: Mapping[str, Any], store: StoreMemo | None) -> QuestionInputs:
    """The inverse of :func:`inputs_payload`, with ``store`` as the memo merge loads through."""
    from rag_lab.tuning.inputs import CapturedRerank, QuestionInputs
    from rag_lab.types.chat_manage import History

    body = {k: v for k, v in d.items() if k != "format"}
    body["search_result"] = [_search_result_from_payload(r) for r in body["search_result"]]
    body["references"] = [_search_result_from_payload(r) for r in body.get("references", [])]
    body["history"] = [
        History(
            query=h["query"],
            answer=h["answer"],
            create_at=h["create_at"],
            knowledge_references=[_search_result_from_payload(r) for r in h["knowledge_references"]],
        )
        for h in body["history"]
    ]
    rr = body.get("rerank")
    if rr is not None:
        arrays = {k: np.asarray(rr[k], dtype=t) for k, t in _ARRAYS.items()}
        n = len(rr["candidates"])
        jac = np.asarray(rr["jaccard"], dtype=np.float64).reshape(n, n)
        body["rerank"] = CapturedRerank(
            candidates=[_search_result_from_payload(r) for r in rr["candidates"]],
            error=rr["error"],
            pictorial=list(rr["pictorial"]),
            images_scored=rr["images_scored"],
            recall_override=rr["recall_override"],
            jaccard=jac,
            **arrays,
        )
    if body.get("latency_ms") is None:
        body["latency_ms"] = math.nan
    if body.get("search_paths") is not None:
        from rag_lab.types.diagnostics import SearchDiagnostics

        body["search_paths"] = SearchDiagnostics.from_dict(body["search_paths"])
    return QuestionInputs(store=store, **body)


# -- keys -------------------------------------------------------------------------------------
def _models(lab: Lab) -> dict[str, list[str]]:
    """Each chat and rerank model: class, the source version of its class, its model name."""
    s = lab.services
    objs = {
        **{f"chat:{k}": m for k, m in s.chat_models.items()},
        **{f"rerank:{k}": m for k, m in s.rerank_models.items()},
    }
    out: dict[str, list[str]] = {}
    for k, m in sorted(objs.items()):
        name = next((str(v) for a in ("model_key", "model", "model_id") if (v := getattr(m, a, None))), "")
        out[k] = [f"{type(m).__module__}.{type(m).__qualname__}", code_version_for("rerank", m), name]
    return out


def capture_key(
    req: CaptureRequest, kbs: Mapping[str, object], params: PipelineParams, models: Mapping[str, object], code: str
) -> dict[str, object]:
    """The key of one question's capture (see the module doc)."""
    return {
        "format": CAPTURE_FORMAT,
        "question": req.question,
        "history": [list(t) for t in req.history],
        "kbs": kbs,
        "params": params.model_dump(mode="json"),
        "models": models,
        "code": code,
    }


# -- capture through the cache ---------------------------------------------------------------
async def acapture_cached(
    lab: Lab, requests: Sequence[CaptureRequest], kb: str | list[str], params: PipelineParams
) -> list[QuestionInputs]:
    """:func:`rag_lab.tuning.capture.acapture_questions` for ``requests`` (histories replayed
    into fresh sessions). When the lab has the stage cache on (:func:`enable_stage_cache`), each
    question's capture is read from it and written to it; results in request order."""
    from rag_lab.eval.cache.wrappers import CachingSearcher
    from rag_lab.tuning.capture import acapture_questions
    from rag_lab.tuning.inputs import StoreMemo

    memo = StoreMemo(lab.workspace.store)
    handle = getattr(lab, "_stage_cache_handle", None)
    searcher = lab.services.searcher
    cache: StageCache | None = None
    out: list[QuestionInputs | None] = [None] * len(requests)
    keys: list[dict[str, object]] = []
    if handle is not None and isinstance(searcher, CachingSearcher):
        cache = handle.cache
        ws = lab.workspace
        # the KBs as the search stage's cache sees them: settings, content version, BM25 index, engine
        kbs = {k: searcher.kb_entry(ws, ws.get_kb(k)) for k in ([kb] if isinstance(kb, str) else kb)}
        models, code = _models(lab), code_version_for(CAPTURE_STAGE, lab)
        keys = [capture_key(r, kbs, params, models, code) for r in requests]
        for i, key in enumerate(keys):
            found = cache.get(CAPTURE_STAGE, key)
            out[i] = inputs_from_payload(found, memo) if isinstance(found, dict) else None
    todo = [i for i, got in enumerate(out) if got is None]
    fresh = await acapture_questions(lab, [_question(lab, requests[i]) for i in todo], kb, params, memo) if todo else []
    for i, captured in zip(todo, fresh):
        out[i] = captured
        if cache is not None and not captured.error:
            cache.put(CAPTURE_STAGE, keys[i], inputs_payload(captured))
    return [q for q in out if q is not None]


def _question(lab: Lab, req: CaptureRequest) -> CaptureQuestion:
    """The request as a :class:`~rag_lab.tuning.capture.CaptureQuestion`, its history replayed
    into a fresh session."""
    from types import SimpleNamespace

    from rag_lab.eval.ingest import _replay_history
    from rag_lab.tuning.capture import CaptureQuestion

    turns = [SimpleNamespace(question=q, answer=a) for q, a in req.history]
    return CaptureQuestion(req.qid, req.question, _replay_history(lab, turns) if turns else "")
