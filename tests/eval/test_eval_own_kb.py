"""``rag-lab eval --kb NAME --queries FILE``: the knowledge base the user built with ``rag-lab
ingest`` is the one evaluated (nothing re-ingested), gold named by id, path, file name or title;
bad names fail with the line, field and value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DOCS = {
    "lighthouse.md": "# The lighthouse\n\nMara Quill built the Orrin lighthouse in 1874 from granite.",
    "bakery.md": "# Sourdough\n\nA sourdough starter is fed flour and water every twelve hours.",
    "notes/ferry.txt": "The ferry to Vell island leaves at seven every morning from the north pier.",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from rag_lab.cli import main as rag_lab

    root = tmp_path_factory.mktemp("own_kb")
    docs = root / "docs"
    for rel, text in DOCS.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    ws = root / "ws"
    assert rag_lab(["--workspace", str(ws), "ingest", str(docs), "--kb", "handbook"]) == 0
    return ws, root


def _queries(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_the_built_kb_is_evaluated_with_gold_by_path_file_name_or_title(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.commands.evaluate import main
    from rag_lab.lab import Lab

    ws, root = built
    q = _queries(
        root / "q.jsonl",
        [
            {
                "id": "light",
                "question": "Who built the Orrin lighthouse?",
                "gold": ["lighthouse.md"],
                "answers": ["Mara Quill"],
            },
            {"question": "How often is a sourdough starter fed?", "gold_ids": ["Sourdough"]},
            {"question": "When does the ferry to Vell leave?", "gold": ["notes/ferry.txt"]},
        ],
    )
    out = root / "out"
    argv = ["--workspace", str(ws), "eval", "--kb", "handbook", "--queries", str(q), "--out", str(out), "--quiet"]
    assert main([*argv, "--name", "own", "--ragas"]) == 0
    rep = json.loads((out / "own.json").read_text(encoding="utf-8"))
    (suite,) = rep["suites"]
    assert suite["name"] == "handbook" and suite["kb"] == "handbook"
    gold = {r["qid"]: r["gold_ids"] for r in suite["records"]}
    assert gold == {"light": ["lighthouse.md"], "q2": ["bakery.md"], "q3": ["notes/ferry.txt"]}
    assert all(r["retrieved_doc_ids"][0] == r["gold_ids"][0] for r in suite["records"])  # three easy questions
    lab = Lab.from_config(workspace=ws)
    assert [kb.name for kb in lab.workspace.list_kbs()] == ["handbook"]  # nothing re-ingested elsewhere
    lab.workspace.close()
    capsys.readouterr()
    # the gate compares two evaluations of the KB (its suite has the KB's name in both)
    assert main([*argv, "--name", "again"]) == 0
    gate = ["gate", "--baseline", str(out / "own.json"), "--current", str(out / "again.json"), "--quiet"]
    assert main([*gate, "--metric", "recall@5"]) == 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"question": "Who?", "gold": ["lighthous.md"]},
            "q.jsonl:1: field 'gold': no document of knowledge base 'handbook'",
        ),
        ({"question": "Who?", "gold": ["lighthouse"]}, "did you mean 'lighthouse.md'"),
        ({"question": "", "gold": ["lighthouse.md"]}, "q.jsonl:1: field 'question' = '' must be a non-empty string"),
        ({"question": "Who?", "gold": []}, "field 'gold' = [] must be a non-empty list of document names"),
    ],
)
def test_bad_questions_name_the_line_field_and_value(
    built: tuple[Path, Path], row: dict[str, object], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.commands.evaluate import main

    ws, root = built
    q = _queries(root / "q.jsonl", [row])
    argv = [
        "--workspace",
        str(ws),
        "eval",
        "--kb",
        "handbook",
        "--queries",
        str(q),
        "--out",
        str(root / "o"),
        "--quiet",
    ]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_kb_and_queries_go_together_and_the_kb_must_exist(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.commands.evaluate import main

    ws, root = built
    q = _queries(root / "q1.jsonl", [{"question": "Who?", "gold": ["lighthouse.md"]}])
    assert main(["--workspace", str(ws), "eval", "--kb", "handbook", "--out", str(root / "o")]) == 2
    assert "--kb NAME and --queries FILE go together" in capsys.readouterr().err
    assert main(["--workspace", str(ws), "eval", "--kb", "nope", "--queries", str(q), "--out", str(root / "o")]) == 2
    assert "nope" in capsys.readouterr().err
