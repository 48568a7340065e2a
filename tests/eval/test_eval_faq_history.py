"""Optional faq.jsonl and history.jsonl in the dataset format: validated, and used by the runner."""

from __future__ import annotations

import json

import pytest

from rag_lab.eval.datasets import DatasetError, load_dataset


def _write(folder, name, rows):
    (folder / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "mini"
    d.mkdir()
    _write(
        d,
        "corpus.jsonl",
        [
            {
                "id": "lh",
                "title": "Brightwater Lighthouse",
                "text": "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.",
            },
            {"id": "sd", "title": "Sourdough", "text": "Sourdough bread rises thanks to wild yeast in the starter."},
        ],
    )
    _write(
        d,
        "queries.jsonl",
        [
            {
                "id": "q1",
                "question": "Who built the Brightwater lighthouse?",
                "answers": ["Mara Quill"],
                "gold_ids": ["lh"],
            },
            {"id": "q2", "question": "And in which year?", "answers": ["1874"], "gold_ids": ["lh"]},
        ],
    )
    _write(
        d,
        "faq.jsonl",
        [
            {
                "id": "f1",
                "question": "How do I visit the lighthouse?",
                "answers": ["Take the 9am ferry from the harbour."],
                "negative_questions": ["how do i visit the bakery?"],
            },
        ],
    )
    _write(
        d,
        "history.jsonl",
        [
            {
                "query_id": "q2",
                "turns": [{"question": "Who built the Brightwater lighthouse?", "answer": "Mara Quill built it."}],
            },
        ],
    )
    return d


def test_optional_files_are_loaded_and_subset_keeps_history(folder):
    ds = load_dataset(folder)
    assert [f.id for f in ds.faq] == ["f1"] and ds.faq[0].negative_questions == ["how do i visit the bakery?"]
    assert ds.history["q2"][0].answer == "Mara Quill built it."
    assert list(ds.subset(1).history) == [] and list(ds.subset(2).history) == ["q2"]


@pytest.mark.parametrize(
    "name,rows,fragment",
    [
        ("history.jsonl", [{"query_id": "nope", "turns": []}], "unknown query id"),
        ("history.jsonl", [{"query_id": "q1", "turns": [{"question": "x"}]}], "turns[0]"),
        ("faq.jsonl", [{"id": "f", "question": "q", "answers": [" "]}], "at least one non-blank answer"),
        ("faq.jsonl", [{"id": "f", "question": "q", "answers": ["a"], "colour": "red"}], "colour"),
    ],
)
def test_bad_optional_rows_name_file_line_and_field(folder, name, rows, fragment):
    _write(folder, name, rows)
    with pytest.raises(DatasetError) as e:
        load_dataset(folder)
    assert name in str(e.value) and ":1:" in str(e.value) and fragment in str(e.value)


async def test_runner_searches_the_faq_and_replays_the_history(folder, tmp_path):
    from rag_lab.eval.runner import evaluate_lab, ingest_dataset
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / "ws")
    ds = load_dataset(folder)
    ingest_dataset(lab, ds, "mini")
    assert lab.workspace.get_kb("mini-faq").type == "faq"
    result = await evaluate_lab(lab, ds, "mini", progress=False)
    q2 = result.runs["q2"]
    hist = [m for m in lab.services.messages.get_recent_messages(q2.session_id, 10) if m.role == "user"]
    assert "Who built the Brightwater lighthouse?" in [m.content for m in hist]
    visit = await lab.aask("How do I visit the lighthouse?", kb=["mini", "mini-faq"], snapshots=False)
    assert any(r.chunk_type == "faq" and "ferry" in r.content for r in visit.references)
