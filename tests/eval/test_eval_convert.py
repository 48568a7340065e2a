"""Conversion helpers (SQuAD-style JSON, BEIR folders) and `rag-lab eval` on a never-seen dataset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rag_lab.eval.datasets import (
    CorpusDoc,
    DatasetError,
    QueryItem,
    convert_beir,
    convert_squad,
    load_dataset,
    write_dataset,
)

SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Brightwater",
            "paragraphs": [
                {
                    "context": "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill.",
                    "qas": [
                        {
                            "id": "q1",
                            "question": "Who built the Brightwater lighthouse?",
                            "answers": [
                                {"text": "Mara Quill", "answer_start": 58},
                                {"text": "Mara Quill", "answer_start": 58},
                                {"text": "the engineer Mara Quill", "answer_start": 45},
                            ],
                        },
                        {"id": "q2", "question": "What colour is the lamp?", "answers": [], "is_impossible": True},
                    ],
                },
                {
                    "context": "Its lamp can be seen from 22 nautical miles away.",
                    "qas": [
                        {
                            "id": "q3",
                            "question": "How far can the lamp be seen?",
                            "answers": [{"text": "22 nautical miles", "answer_start": 26}],
                        }
                    ],
                },
            ],
        },
        {
            "title": "泡泡战士",
            "paragraphs": [
                {
                    "id": "TRIAL_1",
                    "context": "生命数耗完即算为踢爆。",
                    "qas": [
                        {
                            "id": "q4",
                            "question": "生命数耗完即算为什么？",
                            "answers": [{"text": "踢爆", "answer_start": 7}],
                        }
                    ],
                }
            ],
        },
    ],
}


def write_json(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def test_squad_conversion(tmp_path: Path) -> None:
    ds = convert_squad(write_json(tmp_path / "squad.json", SQUAD), tmp_path / "out")
    assert [d.id for d in ds.corpus] == ["0-0", "0-1", "TRIAL_1"]
    assert ds.corpus[0].title == "Brightwater" and ds.corpus[2].title == "泡泡战士"
    assert ds.corpus[1].metadata == {"article_index": 0, "paragraph_index": 1}
    q1, q2, q3, q4 = ds.queries
    assert q1 == QueryItem(
        "q1",
        "Who built the Brightwater lighthouse?",
        ["Mara Quill", "the engineer Mara Quill"],
        ["0-0"],
        {"answer_starts": [58, 45]},
    )
    assert (q2.answers, q2.gold_ids, q2.metadata) == ([], ["0-0"], {"is_impossible": True})
    assert q3.gold_ids == ["0-1"] and q4.gold_ids == ["TRIAL_1"] and q4.answers == ["踢爆"]
    # the written files are the documented format: a plain reload gives the same dataset
    again = load_dataset(tmp_path / "out")
    assert again.corpus == ds.corpus and again.queries == ds.queries
    skipped = convert_squad(tmp_path / "squad.json", tmp_path / "out2", skip_impossible=True)
    assert [q.id for q in skipped.queries] == ["q1", "q3", "q4"]


def test_squad_refuses_to_overwrite_and_names_bad_values(tmp_path: Path) -> None:
    src = write_json(tmp_path / "squad.json", SQUAD)
    convert_squad(src, tmp_path / "out")
    with pytest.raises(DatasetError, match=r"queries\.jsonl|corpus\.jsonl: exists"):
        convert_squad(src, tmp_path / "out")
    convert_squad(src, tmp_path / "out", overwrite=True)

    bad = json.loads(json.dumps(SQUAD))
    bad["data"][0]["paragraphs"][1]["qas"][0]["question"] = 42
    with pytest.raises(DatasetError) as info:
        convert_squad(write_json(tmp_path / "bad.json", bad), tmp_path / "o3")
    msg = str(info.value)
    assert "bad.json" in msg and "data[0].paragraphs[1].qas[0].question = 42: must be a string, got int" in msg

    bad = json.loads(json.dumps(SQUAD))
    bad["data"][1]["paragraphs"][0]["qas"][0]["id"] = "q1"
    with pytest.raises(DatasetError, match=r"data\[1\]\.paragraphs\[0\]\.qas\[0\]\.id = \"q1\": duplicate question id"):
        convert_squad(write_json(tmp_path / "dup.json", bad), tmp_path / "o4")
    with pytest.raises(DatasetError, match=r"<root> = \[\"version\"\]: expected an object with a 'data' list"):
        convert_squad(write_json(tmp_path / "nodata.json", {"version": "x"}), tmp_path / "o5")
    (tmp_path / "broken.json").write_text('{"data": [', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"broken\.json: invalid JSON"):
        convert_squad(tmp_path / "broken.json", tmp_path / "o6")


def make_beir(root: Path, qrels: str) -> Path:
    root.mkdir(parents=True)
    rows = [
        {"_id": "d1", "title": "Lighthouse", "text": "The Brightwater lighthouse was built by Mara Quill."},
        {"_id": 2, "title": "Bread", "text": "Sourdough rises with wild yeast.", "metadata": {"src": "x"}},
        {"_id": "d3", "title": "Only a title", "text": ""},
    ]
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    qs = [
        {"_id": "q1", "text": "who built the lighthouse"},
        {"_id": "q2", "text": "how does bread rise"},
        {"_id": "q3", "text": "unjudged question"},
    ]
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qs), encoding="utf-8")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return root


def test_beir_conversion(tmp_path: Path) -> None:
    src = make_beir(tmp_path / "beir", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t2\t0\nq2\t2\t1\n")
    ds = convert_beir(src, tmp_path / "out")
    assert [(d.id, d.title, d.text) for d in ds.corpus] == [
        ("d1", "Lighthouse", "The Brightwater lighthouse was built by Mara Quill."),
        ("2", "Bread", "Sourdough rises with wild yeast."),
        ("d3", "Only a title", "Only a title"),
    ]
    assert ds.corpus[1].metadata == {"src": "x"}
    assert [(q.id, q.question, q.answers, q.gold_ids) for q in ds.queries] == [
        ("q1", "who built the lighthouse", [], ["d1"]),
        ("q2", "how does bread rise", [], ["2"]),
    ]
    assert ds.queries[0].metadata == {"qrels": {"d1": 2, "2": 0}, "split": "test"}
    strict = convert_beir(src, tmp_path / "out2", min_score=2)
    assert [q.gold_ids for q in strict.queries] == [["d1"], []]  # q2 loads with empty gold (excluded by metrics)


@pytest.mark.parametrize(
    ("qrels", "pattern"),
    [
        ("q1\td9\t1\n", r"test\.tsv:1: field 'corpus-id' = \"d9\": unknown corpus id"),
        ("query-id\tcorpus-id\tscore\nqx\td1\t1\n", r"test\.tsv:2: field 'query-id' = \"qx\": unknown query id"),
        ("q1\td1\n", r"test\.tsv:1: expected 3 tab-separated columns"),
        ("h\th\th\nq1\td1\thigh\n", r"test\.tsv:2: field 'score' = \"high\": must be an integer"),
    ],
)
def test_beir_errors_name_file_line_field(tmp_path: Path, qrels: str, pattern: str) -> None:
    src = make_beir(tmp_path / "beir", qrels)
    with pytest.raises(DatasetError, match=pattern):
        convert_beir(src, tmp_path / "out")


def test_beir_missing_split_lists_available(tmp_path: Path) -> None:
    src = make_beir(tmp_path / "beir", "q1\td1\t1\n")
    with pytest.raises(DatasetError, match=r"dev\.tsv: file not found \(splits available: test\)"):
        convert_beir(src, tmp_path / "out", split="dev")


def test_write_dataset_validates_what_it_wrote(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"gold_ids\[0\]' = \"zz\": unknown corpus id"):
        write_dataset([CorpusDoc("a", "alpha")], [QueryItem("q", "?", [], ["zz"])], tmp_path / "x")


@pytest.mark.slow
def test_cli_convert_then_eval_on_a_never_seen_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    src = write_json(tmp_path / "squad.json", SQUAD)
    assert main(["convert", "squad", str(src), "--out", str(tmp_path / "fresh")]) == 0
    assert "3 documents, 4 queries" in capsys.readouterr().out
    code = main(
        [
            "--workspace",
            str(tmp_path / "ws"),
            "eval",
            "--dataset",
            str(tmp_path / "fresh"),
            "--out",
            str(tmp_path / "reports"),
            "--quiet",
            "--ragas",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert re.search(r"fresh \(4 queries, 0 errors", out)
    report = json.loads((tmp_path / "reports" / "eval_fresh.json").read_text(encoding="utf-8"))
    suite = report["suites"][0]
    assert suite["dataset"] == "fresh" and len(suite["records"]) == 4
    recall = {r["qid"]: r["recall@10"] for r in suite["retrieval"]["rows"]}
    # q2 (unanswerable in SQuAD 2.0) asks about the lamp, which only the other paragraph mentions
    assert recall == {"q1": 1.0, "q2": 0.0, "q3": 1.0, "q4": 1.0}
    assert suite["summary"]["recall@10"] == 0.75
    assert (tmp_path / "reports" / "eval_fresh.md").is_file()
