"""The labelling model without a browser or a lab: accept / edit / reject / grade → queries.jsonl →
reload gives the same state; the loader sets rejected questions aside; the gate's check stops
refusing once every synthetic question is reviewed; graded labels reach nDCG; saves are atomic,
never lose rows and refuse a file changed by someone else; bad rows name file, line and field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_lab.eval.datasets import CorpusDoc, DatasetError, QueryItem, load_dataset, write_dataset
from rag_lab.eval.labelling import LabelSession, PassageRef, parse_commands
from rag_lab.eval.labelling.session import quote_text
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.review import spec_unreviewed, unreviewed_qids

GEN = {"synthetic": True, "reviewed": False, "generator": "keyphrase", "source_chunk_id": "c-d1"}
AT = "2026-12-02T05:00:00Z"
DOCS = [
    CorpusDoc("d1", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"),
    CorpusDoc("d2", "Mara Quill trained as a shipwright before she designed lighthouses.", "Mara Quill"),
    CorpusDoc("d3", "Sourdough bread rises thanks to a starter of wild yeast.", "Bread"),
]
SHOWN = [PassageRef("c-d1", "d1"), PassageRef("c-d2", "d2"), PassageRef("c-d3", "d3")]


def _folder(tmp_path: Path) -> Path:
    out = tmp_path / "mine"
    write_dataset(
        DOCS,
        [
            QueryItem("gen-1", "lighthouse 1874 engineer", [], ["d1"], metadata=dict(GEN)),
            QueryItem("gen-2", "shipwright lighthouses", [], ["d2"], metadata=dict(GEN, source_chunk_id="c-d2")),
            QueryItem("gen-3", "wild yeast starter", ["yeast"], ["d3"], metadata=dict(GEN, source_chunk_id="c-d3")),
            QueryItem("h-1", "Who built the Brightwater lighthouse?", ["Mara Quill"], ["d1"]),
        ],
        out,
    )
    return out


def _session(folder: Path, who: str = "ana") -> LabelSession:
    return LabelSession(folder, who=who, clock=lambda: AT)


def test_accept_edit_reject_grade_round_trip_through_the_files(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    corpus_before = (folder / "corpus.jsonl").read_bytes()
    s = _session(folder)
    assert s.apply("gen-1", "a 12", SHOWN) == 0  # accept; d1 partly, d2 relevant
    assert s.apply("gen-2", 'e "Who trained as a shipwright?"', SHOWN) == 0
    assert s.apply("gen-3", "r n", SHOWN) == 1
    s.save()
    assert (folder / "corpus.jsonl").read_bytes() == corpus_before  # only queries.jsonl is written

    again = _session(folder, who="someone else")
    assert again.states() == s.states()
    q1, q2, q3 = (again.question(q) for q in ("gen-1", "gen-2", "gen-3"))
    assert (q1.status, q1.by, q1.at) == ("accepted", "ana", AT)
    assert q1.relevance() == {"d1": 1, "d2": 2} and q1.gold_ids() == ["d1", "d2"]
    assert (q2.status, q2.text, q2.original_question) == (
        "edited",
        "Who trained as a shipwright?",
        "shipwright lighthouses",
    )
    assert q3.status == "rejected"

    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["gen-1", "gen-2", "gen-3", "h-1"]  # nothing deleted, order kept
    assert rows[0]["relevance"] == {"d1": 1, "d2": 2}
    assert rows[0]["metadata"]["labels"][1] == {"passage": "c-d2", "doc_id": "d2", "grade": 2, "by": "ana", "at": AT}
    assert rows[0]["metadata"]["reviewed"] is True and rows[0]["metadata"]["generator"] == "keyphrase"
    assert rows[1]["question"] == "Who trained as a shipwright?"
    assert rows[1]["metadata"]["review"]["original"]["question"] == "shipwright lighthouses"
    assert rows[2]["metadata"]["review"]["status"] == "rejected"
    assert rows[3] == {
        "id": "h-1",
        "question": "Who built the Brightwater lighthouse?",
        "answers": ["Mara Quill"],
        "gold_ids": ["d1"],
    }

    ds = load_dataset(folder)  # what eval reads: the rejected question is set aside, not scored
    assert [q.id for q in ds.queries] == ["gen-1", "gen-2", "h-1"] and [q.id for q in ds.rejected] == ["gen-3"]
    assert ds.graded_qrels() == {"gen-1": {"d1": 1, "d2": 2}, "gen-2": {"d2": 1}, "h-1": {"d1": 1}}


def test_grades_change_gold_and_can_be_changed_again(tmp_path: Path) -> None:
    s = _session(_folder(tmp_path))
    s.apply("gen-1", "02", SHOWN)  # the generated gold d1 judged not relevant, d2 relevant
    q = s.question("gen-1")
    assert q.gold_ids() == ["d2"] and q.relevance() == {"d1": 0, "d2": 2} and not q.reviewed
    s.save()
    s = _session(s.folder)
    s.apply("gen-1", "1=2 2=-", SHOWN)  # regraded from the original, not from the last save
    q = s.question("gen-1")
    assert q.gold_ids() == ["d1"] and q.relevance() == {"d1": 2} and q.original_gold_ids == ["d1"]
    s.save()
    assert load_dataset(s.folder).queries[0].relevance == {"d1": 2}


def test_graded_labels_reach_ndcg(tmp_path: Path) -> None:
    s = _session(_folder(tmp_path))
    s.apply("gen-1", "a 12", SHOWN)
    s.save()
    ds = load_dataset(s.folder)
    qrels, grades = ds.qrels(), ds.graded_qrels()
    run = {"gen-1": ["d1", "d2"]}
    report = evaluate_retrieval(run, {"gen-1": qrels["gen-1"]}, ks=[2], grades=grades)
    # DCG = 1/log2(2) + 2/log2(3); ideal order d2 (2) then d1 (1)
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert report.summary()["ndcg@2"] == pytest.approx(expected) == pytest.approx(0.8597186998521972)
    binary = evaluate_retrieval(run, {"gen-1": qrels["gen-1"]}, ks=[2])
    assert binary.summary()["ndcg@2"] == pytest.approx(1.0)


def test_the_gate_stops_refusing_once_every_synthetic_question_is_reviewed(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    spec = {"suites": [{"dataset": str(folder)}]}
    assert spec_unreviewed(spec)["mine"]["count"] == 3
    s = _session(folder)
    s.apply("gen-1", "a", SHOWN)
    s.apply("gen-2", "r", SHOWN)
    s.save()
    assert unreviewed_qids(load_dataset(folder)) == ["gen-3"]
    assert s.counts() == {
        "unreviewed": 2,
        "accepted": 1,
        "edited": 0,
        "rejected": 1,
        "unreviewed_synthetic": 1,
        "graded_passages": 0,
    }
    s.apply("gen-3", "e 'What makes sourdough rise?'", SHOWN)
    s.save()
    assert spec_unreviewed(spec) == {}


def test_a_bad_command_line_changes_nothing() -> None:
    assert [c.kind for c in parse_commands("A 21 3=- N")] == ["accept", "grade", "grade", "clear", "next"]
    assert parse_commands('e  " What is it? " ')[0].text == "What is it?"
    with pytest.raises(ValueError, match=r"'x' is not a command"):
        parse_commands("a x")
    # the text is quoted, so digits after it are grades, not part of the question
    cmds = parse_commands('e "What is 2 \\"and\\" 3?" 210 n')
    assert [(c.kind, c.text, c.position, c.grade) for c in cmds] == [
        ("edit", 'What is 2 "and" 3?', 0, 0),
        ("grade", "", 1, 2),
        ("grade", "", 2, 1),
        ("grade", "", 3, 0),
        ("next", "", 0, 0),
    ]
    assert [c.kind for c in parse_commands("a e")] == ["accept", "edit_box"]  # e alone: the text box
    with pytest.raises(
        ValueError, match=r'quote the new text, so that what follows is read as commands: e "What… 2000"'
    ):
        parse_commands("e What… 2000")
    with pytest.raises(ValueError, match="needs the new question text in the quotes"):
        parse_commands('e "  "')


def test_a_bad_line_is_refused_whole(tmp_path: Path) -> None:
    s = _session(_folder(tmp_path))
    with pytest.raises(ValueError, match=r"passage 4 asked, but 3 passage\(s\) are shown"):
        s.apply("gen-1", "a 2 4=1", SHOWN)
    assert s.question("gen-1").status == "unreviewed" and not s.question("gen-1").labels
    with pytest.raises(ValueError, match="not in .*corpus.jsonl"):
        s.grade("gen-1", "c-x", "nope", 2)
    with pytest.raises(ValueError, match="must not be empty"):
        s.edit("gen-1", "   ")


def test_a_file_changed_since_it_was_read_is_not_overwritten(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    a, b = _session(folder, "ana"), _session(folder, "bo")
    a.apply("gen-1", "a", SHOWN)
    a.save()
    b.apply("gen-2", "a", SHOWN)
    with pytest.raises(DatasetError, match="changed on disk since this session read it"):
        b.save()
    assert _session(folder).question("gen-1").status == "accepted"  # ana's label survived
    b.reload()
    b.apply("gen-2", "a", SHOWN)
    b.save()
    both = _session(folder)
    assert [both.question(q).by for q in ("gen-1", "gen-2")] == ["ana", "bo"]
    assert not list(folder.glob(".queries.jsonl.*"))  # no temporary file left behind


def test_bad_review_rows_name_file_line_and_field(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    path = folder / "queries.jsonl"
    lines = path.read_text().splitlines()
    row = json.loads(lines[1])
    row["metadata"].update(reviewed=True, review={"status": "maybe", "by": "ana", "at": AT})
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(
        DatasetError, match=r"queries.jsonl:2: field 'metadata.review.status' = \"maybe\": must be one of"
    ):
        _session(folder)
    row["metadata"]["review"] = {"status": "accepted", "by": "ana", "at": AT}
    row["metadata"]["labels"] = [{"passage": "c-d2", "doc_id": "d2", "grade": 3, "by": "ana", "at": AT}]
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(DatasetError, match=r"queries.jsonl:2: field 'metadata.labels\[0\].grade' = 3"):
        _session(folder)
    row["metadata"].update(labels=[], reviewed=False)
    path.write_text("\n".join([lines[0], json.dumps(row), *lines[2:]]) + "\n")
    with pytest.raises(DatasetError, match=r"queries.jsonl:2: field 'metadata.reviewed' = false: disagrees"):
        _session(folder)


def test_every_question_rejected_is_a_clear_error(tmp_path: Path) -> None:
    s = _session(_folder(tmp_path))
    for q in ("gen-1", "gen-2", "gen-3", "h-1"):
        s.reject(q)
    s.save()
    with pytest.raises(DatasetError, match=r"queries.jsonl: every question \(4\) was rejected by a reviewer"):
        load_dataset(s.folder)


_OPS = st.lists(
    st.tuples(
        st.sampled_from(["gen-1", "gen-2", "gen-3", "h-1"]),
        st.one_of(
            st.sampled_from(["a", "r"]),
            st.text(alphabet='xyz ?é中"\\', min_size=1, max_size=12)
            .filter(str.strip)
            .map(lambda t: "e " + quote_text(t)),
            st.lists(st.sampled_from("012"), min_size=1, max_size=3).map("".join),
            st.tuples(st.integers(1, 3), st.sampled_from("012-")).map(lambda p: f"{p[0]}={p[1]}"),
        ),
        st.sampled_from(["ana", "bo"]),
    ),
    max_size=12,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS, saves=st.lists(st.booleans(), min_size=12, max_size=12))
def test_any_labelling_survives_save_and_reload(tmp_path_factory: pytest.TempPathFactory, ops, saves) -> None:
    folder = _folder(tmp_path_factory.mktemp("prop"))
    s = _session(folder)
    for i, (qid, line, who) in enumerate(ops):
        s.who = who
        s.apply(qid, line, SHOWN)
        if saves[i]:
            s.save()
            assert _session(folder).states() == s.states()
    s.save()
    again = _session(folder)
    assert again.states() == s.states()
    again.save()  # saving what was loaded writes the same bytes
    assert _session(folder).states() == s.states()
    ds = load_dataset(folder) if any(q.status != "rejected" for q in s.questions) else None
    if ds is not None:
        assert {q.id for q in ds.queries} | {q.id for q in ds.rejected} == {"gen-1", "gen-2", "gen-3", "h-1"}
        for q in ds.queries:
            assert q.grades() == {**dict.fromkeys(s.question(q.id).gold_ids(), 1), **s.question(q.id).relevance()}
