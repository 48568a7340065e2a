"""Capture the post-retrieval stage inputs of questions from a Lab (what the fast evaluator of
:mod:`rag_lab.tuning` replays): each question runs once through the whole pipeline under the
capture params; the snapshot the last search stage leaves is kept, the rerank model is asked once
for the candidates' scores, and the run's own final contexts are kept for the first equivalence
check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_lab.tuning.inputs import QuestionInputs, StoreMemo, capture_question
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.events import EventType
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = ["CaptureQuestion", "acapture_questions"]


@dataclass(frozen=True)
class CaptureQuestion:
    """A question to capture: its id, text and the session holding its history (may be empty)."""

    qid: str
    question: str
    session_id: str = ""


async def acapture_questions(
    lab: Lab,
    questions: Sequence[CaptureQuestion],
    kb: str | list[str],
    params: PipelineParams | Mapping[str, object] | None = None,
    store_memo: StoreMemo | None = None,
) -> list[QuestionInputs]:
    """One capture run per question (see the module doc); a run that fails keeps its error."""
    p = lab._params(params)
    ws = lab.workspace
    memo = store_memo if store_memo is not None else StoreMemo(ws.store)
    out: list[QuestionInputs] = []
    for q in questions:
        seen: dict[str, ChatManage] = {}

        async def pause(event: EventType, snap: ChatManage, seen: dict[str, ChatManage] = seen) -> None:
            if "rerank" in seen:
                return
            if event == EventType.CHUNK_RERANK:
                seen["rerank"] = snap
            else:
                seen["before_rerank"] = snap

        run = await lab.aask(q.question, kb=kb, params=p, snapshots=False, session_id=q.session_id, pause=pause)
        before = seen.get("before_rerank")
        if before is None or (run.error and "rerank" not in seen):
            out.append(
                QuestionInputs(
                    qid=q.qid,
                    query=q.question,
                    needs_retrieval=False,
                    search_result=[],
                    history=[],
                    rerank=None,
                    expanded=False,
                    wiki_in_scope=False,
                    vector_threshold=p.vector_threshold,
                    rerank_top_k=p.rerank_top_k,
                    store=memo,
                    references=list(run.references),
                    error=run.error or "no search stage ran",
                    latency_ms=run.total_ms,
                )
            )
            continue
        captured = await capture_question(q.qid, before, lab.services, memo, references=run.references)
        captured.latency_ms = run.total_ms
        out.append(captured)
    return out
