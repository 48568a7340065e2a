"""The labelling panel on a real offline lab, driven through its widgets (no browser): the
passages come from the lab's pipeline, the command box, the toggles and the buttons all write the
same labels to queries.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_lab.eval.datasets import CorpusDoc, QueryItem, load_dataset, write_dataset
from rag_lab.eval.ingest import eval_kb_name, ingest_dataset
from rag_lab.lab.lab import Lab
from rag_lab.lab.label_panel import LabelPanel

AT = "2026-12-02T05:00:00Z"
GEN = {"synthetic": True, "reviewed": False, "source_kb": "not-in-this-workspace"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("label_ws"))
    yield lab
    lab.workspace.close()


def _folder(tmp_path: Path) -> Path:
    write_dataset(
        [
            CorpusDoc(
                "light", "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.", "Lighthouse"
            ),
            CorpusDoc(
                "quill", "Mara Quill trained as a shipwright before she designed the Brightwater lighthouse.", "Quill"
            ),
            CorpusDoc("bread", "Sourdough bread rises thanks to a starter of wild yeast and lactic bacteria.", "Bread"),
        ],
        [
            QueryItem("gen-1", "Who built the Brightwater lighthouse?", [], ["light"], metadata=dict(GEN)),
            QueryItem("gen-2", "What makes sourdough rise?", [], ["bread"], metadata=dict(GEN)),
        ],
        tmp_path / "mine",
    )
    return tmp_path / "mine"


def test_the_panel_labels_through_its_widgets(lab: Lab, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    panel = LabelPanel(lab, folder, who="ana", clock=lambda: AT)
    assert panel.kb == eval_kb_name("mine", load_dataset(folder))  # source_kb absent: the corpus was ingested
    shown = panel.passages()
    assert shown[0].doc_id == "light" and shown[0].origin == "retrieved #1"
    assert {p.doc_id for p in shown} >= {"light", "quill"}
    assert "Question 1 of 2" in panel.header.value and "synthetic · unreviewed" in panel.header.value
    assert len(panel.passage_box.children) == len(shown)

    toggle = panel.passage_box.children[0].children[1]
    toggle.value = 2  # the mouse: "relevant (2)"
    assert panel.session.question("gen-1").labels[shown[0].passage].grade == 2
    panel.cmd.value = "a n"  # the keyboard: accept, next (what Enter sends)
    assert panel.cmd.value == "" and panel.index == 1
    assert "Question 2 of 2" in panel.header.value and "1 accepted" in panel.header.value

    panel.text.value = "Why does sourdough bread rise?"
    panel.buttons["edit"].click()
    panel.cmd.value = "zz"
    assert "is not a command" in panel.status.value and panel.cmd.value == ""
    panel.buttons["prev"].click()
    assert panel.index == 0 and panel.passage_box.children[0].children[1].value == 2  # drawn from the labels

    rows = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]  # autosaved
    assert rows[0]["metadata"]["review"]["status"] == "accepted" and rows[0]["metadata"]["reviewed"] is True
    assert rows[0]["relevance"] == {"light": 2}
    assert rows[0]["metadata"]["labels"][0] == {
        "passage": shown[0].passage,
        "doc_id": "light",
        "grade": 2,
        "by": "ana",
        "at": AT,
    }
    assert rows[1]["question"] == "Why does sourdough bread rise?"
    assert rows[1]["metadata"]["review"]["original"]["question"] == "What makes sourdough rise?"
    assert load_dataset(folder).graded_qrels() == {"gen-1": {"light": 2}, "gen-2": {"bread": 1}}


def test_the_source_chunk_is_shown_when_retrieval_misses_it(lab: Lab, tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    row = json.loads((folder / "queries.jsonl").read_text().splitlines()[1])
    ds = load_dataset(folder)
    ingest_dataset(lab, ds, eval_kb_name("mine", ds))
    panel = LabelPanel(lab, folder, who="ana", clock=lambda: AT, retriever=lambda q: [])
    chunk = lab.workspace.store.list_chunks(lab.kb(eval_kb_name("mine", ds)).id, "bread")[0]
    row["metadata"]["source_chunk_id"] = chunk.id
    (folder / "queries.jsonl").write_text(
        (folder / "queries.jsonl").read_text().splitlines()[0] + "\n" + json.dumps(row) + "\n"
    )
    panel.session.reload()
    panel.show(1)
    (p,) = panel.passages()
    assert (p.passage, p.doc_id, p.origin) == (chunk.id, "bread", "source chunk") and "Sourdough" in p.text
    assert panel.command("1") == "gen-2: 1 · saved queries.jsonl"
    assert panel.session.question("gen-2").relevance() == {"bread": 1}


def test_other_passages_holding_the_answer_are_shown_to_grade(lab: Lab, tmp_path: Path) -> None:
    """A generated question's ``candidate_passages`` (other passages holding its answer) are shown
    after the retrieved ones, marked, and a grade makes their document relevant."""
    folder = _folder(tmp_path)
    ds = load_dataset(folder)
    ingest_dataset(lab, ds, eval_kb_name("mine", ds))
    quill = lab.workspace.store.list_chunks(lab.kb(eval_kb_name("mine", ds)).id, "quill")[0]
    row = json.loads((folder / "queries.jsonl").read_text().splitlines()[0])
    row["metadata"]["candidate_passages"] = [{"passage": quill.id, "doc_id": "quill"}, {"passage": 7}]
    (folder / "queries.jsonl").write_text(
        json.dumps(row) + "\n" + (folder / "queries.jsonl").read_text().splitlines()[1] + "\n"
    )
    panel = LabelPanel(lab, folder, who="ana", clock=lambda: AT, retriever=lambda q: [])
    (p,) = panel.passages()  # the malformed entry is skipped
    assert (p.passage, p.doc_id, p.origin) == (quill.id, "quill", "also holds the answer") and "Quill" in p.text
    panel.command("1=2")
    assert panel.session.question("gen-1").relevance() == {"quill": 2}


def test_after_an_edit_the_passages_follow_the_new_text_and_grades_stay_with_their_passages(
    lab: Lab, tmp_path: Path
) -> None:
    folder = _folder(tmp_path)
    panel = LabelPanel(lab, folder, who="ana", clock=lambda: AT)
    before = panel.passages()
    graded = before[0]
    panel.command("1=2")  # graded by position, stored by passage id
    assert panel.session.question("gen-1").labels[graded.passage].grade == 2
    panel.command('e "What does sourdough bread rise thanks to?" ')
    after = panel.passages()
    assert panel.current.text == "What does sourdough bread rise thanks to?"
    assert after[0].doc_id == "bread" and after[0].origin == "retrieved #1"  # retrieved for the new text
    kept = next(p for p in after if p.passage == graded.passage)  # still shown, wherever it now is
    assert panel.session.question("gen-1").labels[kept.passage].grade == 2
    panel.command("e")  # e alone: the text box holds the question, nothing changes
    assert panel.text.value == panel.current.text and "edit the question in the text box" in panel.status.value
    panel.command("e Who built it? 2")
    assert "quote the new text" in panel.status.value and panel.current.text.startswith("What does sourdough")
