"""``rag-lab testset --from-sessions``: the questions asked in the lab's sessions, with the passages
their answers cited as the gold guess, earlier turns as history, duplicates and unanswered or
uncited questions dropped and counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.eval.testset.from_sessions import asked_questions, build_from_sessions
from rag_lab.lab import Lab


@pytest.fixture
def served(tmp_path: Path, docs_dir: Path) -> Lab:
    lab = Lab.from_config(workspace=tmp_path / "ws")
    lab.ingest(docs_dir, kb="demo", progress=False)
    first = lab.ask("Who built the Brightwater lighthouse?", kb="demo", snapshots=False)
    lab.ask("How far away can its lamp be seen?", kb="demo", session_id=first.session_id, snapshots=False)
    lab.ask("who built the Brightwater lighthouse", kb="demo", snapshots=False)  # a duplicate, elsewhere
    lab.ask("What makes sourdough bread rise?", kb="demo", snapshots=False)
    lone = lab.sessions.create_session(user_id="lab")
    lab.sessions.add_message(lone.id, "user", "Is anyone there?", "r-lone")  # never answered
    return lab


def test_every_question_asked_with_what_its_answer_cited(served: Lab) -> None:
    asked = asked_questions(served.sessions)
    assert [a.question for a in asked] == [
        "Who built the Brightwater lighthouse?",
        "How far away can its lamp be seen?",
        "who built the Brightwater lighthouse",
        "What makes sourdough bread rise?",
        "Is anyone there?",
    ]
    assert asked[1].earlier[0][0] == "Who built the Brightwater lighthouse?" and asked[1].earlier[0][1]
    assert asked[0].earlier == () and all(a.answered for a in asked[:4]) and not asked[4].answered
    docs = {d.id: d.title for d in served.workspace.store.list_knowledge(served.kb("demo").id)}
    kb_id, doc = asked[0].cited_docs[0]
    assert kb_id == served.kb("demo").id and docs[doc] == "The Brightwater Lighthouse"


def test_build_from_sessions_writes_an_unreviewed_set_with_history(served: Lab, tmp_path: Path) -> None:
    ds, report = build_from_sessions(served, "demo", tmp_path / "asked")
    assert [q.question for q in ds.queries] == [
        "Who built the Brightwater lighthouse?",
        "How far away can its lamp be seen?",
        "What makes sourdough bread rise?",
    ]
    assert dict(report.dropped) == {"duplicate": 1, "never answered": 1}
    q1, q2, q3 = ds.queries
    titles = {d.id: d.title for d in ds.corpus}
    assert titles[q1.gold_ids[0]] == "The Brightwater Lighthouse" and "bread" in titles[q3.gold_ids[0]].lower()
    assert q1.metadata["origin"] == "sessions" and q1.metadata["reviewed"] is False
    assert q1.metadata["gold_candidates"][0] == q1.gold_ids[0] and len(q1.metadata["gold_candidates"]) <= 3
    assert [t.question for t in ds.history[q2.id]] == ["Who built the Brightwater lighthouse?"]
    assert q1.id not in ds.history
    saved = json.loads((tmp_path / "asked" / "testset_report.json").read_text(encoding="utf-8"))
    assert saved["kept"] == 3 and saved["dropped"] == {"duplicate": 1, "never answered": 1}


def test_answers_citing_another_kb_are_dropped(served: Lab, tmp_path: Path, docs_dir: Path) -> None:
    served.ingest(docs_dir, kb="other", progress=False)
    with pytest.raises(ValueError, match="cited nothing of the KB: 3, duplicate: 1, never answered: 1"):
        build_from_sessions(served, "other", tmp_path / "other")  # every answer cited KB "demo"
