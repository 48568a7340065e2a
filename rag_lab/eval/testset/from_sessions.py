"""A test set from the questions asked in the lab's sessions (``rag-lab testset --kb KB
--from-sessions``): what people really asked the served pipeline, with the passages it retrieved
then.

Every user message of every session becomes a candidate question; the assistant message that
answered it holds the references the pipeline cited then. The gold is a guess from those
references (their documents in the order the answer listed them, the ones in the KB only): the
first is the gold, the first three are kept as ``gold_candidates`` for the labelling panel, so
every question is written ``"synthetic": true, "reviewed": false`` with ``"origin": "sessions"``
and its ``session_id``. A question asked later in a conversation keeps its earlier turns in
``history.jsonl``, so an evaluation replays them before asking it. Dropped, counted in the
report: duplicates (after normalising case, spaces and punctuation, the first asked is kept),
questions never answered (no assistant message after them) and answers that cited nothing of the
KB (small talk, another KB, a fallback).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets import HISTORY_FILE, load_dataset
from rag_lab.eval.datasets.schema import QueryItem
from rag_lab.eval.testset.pipeline import first_asked, kb_sources, keep_asked, write_testset
from rag_lab.eval.testset.report import TestsetReport

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.lab.lab import Lab
    from rag_lab.session.sqlite_store import SQLiteSessionStore

__all__ = ["AskedQuestion", "asked_questions", "build_from_sessions"]


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    """One user message, the documents its answer cited as (knowledge base id, document id), in
    the answer's order, each once, and the conversation before it as (question, answer) pairs."""

    question: str
    session_id: str
    cited_docs: tuple[tuple[str, str], ...]
    earlier: tuple[tuple[str, str], ...]
    answered: bool


def asked_questions(sessions: SQLiteSessionStore) -> list[AskedQuestion]:
    """Every user message of every session of the store, oldest session first, in order."""
    out: list[AskedQuestion] = []
    for sid in sessions.all_session_ids():
        messages = sessions.list_messages(sid)
        earlier: list[tuple[str, str]] = []
        for i, m in enumerate(messages):
            if m.role != "user" or not m.content.strip():
                continue
            reply = next((n for n in messages[i + 1 :] if n.role in ("assistant", "user")), None)
            answered = reply is not None and reply.role == "assistant"
            refs = reply.knowledge_references if answered and reply is not None else []
            docs = list(dict.fromkeys((r.knowledge_base_id, r.knowledge_id) for r in refs if r.knowledge_id))
            out.append(AskedQuestion(m.content.strip(), sid, tuple(docs), tuple(earlier), answered))
            earlier.append((m.content.strip(), reply.content if answered and reply is not None else ""))
    return out


def build_from_sessions(
    lab: Lab, kb_name: str, out_dir: str | Path, overwrite: bool = False
) -> tuple[Dataset, TestsetReport]:
    """The questions asked in the lab's sessions about KB ``kb_name`` as an unreviewed dataset
    under ``out_dir`` (the module docstring says how)."""
    kb = lab.kb(kb_name, create=False)
    docs, _ = kb_sources(lab, kb)
    in_kb = {d.id for d in docs}
    asked = asked_questions(lab.sessions)
    report = TestsetReport(kb=kb_name, seed=0, requested=len(asked), generator="sessions")
    kept: list[QueryItem] = []
    history: dict[str, list[dict[str, str]]] = {}
    for a in first_asked(asked, lambda a: a.question, report):
        if not a.answered:
            report.dropped["never answered"] += 1
            continue
        cited = list(dict.fromkeys(d for k, d in a.cited_docs if k == kb.id and d in in_kb))
        if not cited:
            report.dropped["cited nothing of the KB"] += 1
            continue
        qid = keep_asked(kept, report, "session", a.question, cited, {"origin": "sessions", "session_id": a.session_id})
        if a.earlier:
            history[qid] = [{"question": q, "answer": ans} for q, ans in a.earlier]
    ds = write_testset(docs, kept, out_dir, report, overwrite=overwrite)
    if history:
        lines = [json.dumps({"query_id": q, "turns": t}, ensure_ascii=False) for q, t in history.items()]
        (Path(out_dir) / HISTORY_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
        ds = load_dataset(out_dir)
    return ds, report
