from __future__ import annotations

from rag_lab.cli import main


def test_ingest_then_ask(tmp_path, capsys, docs_dir):
    ws = str(tmp_path / "ws")
    assert main(["--workspace", ws, "ingest", str(docs_dir), "--kb", "demo", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "4" in out  # four documents added, the .png skipped
    assert (
        main(
            [
                "--workspace",
                ws,
                "ask",
                "Who built the Brightwater lighthouse?",
                "--kb",
                "demo",
                "--quiet",
                "--param",
                "rerank_top_k=3",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "Mara Quill" in out and "References:" in out and "*[1]" in out


def test_errors_are_reported_not_raised(tmp_path, capsys):
    ws = str(tmp_path / "ws")
    assert main(["--workspace", ws, "ingest", str(tmp_path / "missing"), "--kb", "x"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["--workspace", ws, "ask", "q", "--kb", "nope", "--quiet"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["--workspace", ws, "ask", "q", "--param", "mmr_lambda=7", "--quiet"]) == 2
    assert "mmr_lambda" in capsys.readouterr().err
