from __future__ import annotations

import argparse

import pytest

from rag_lab.cli import main
from rag_lab.cliutil import number_arg


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


def test_ask_prints_numbered_citations_and_refuses_an_empty_question(tmp_path, capsys, docs_dir):
    ws = str(tmp_path / "ws")
    assert main(["--workspace", ws, "ingest", str(docs_dir), "--kb", "demo", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["--workspace", ws, "ask", "Who built the Brightwater lighthouse?", "--kb", "demo", "--quiet"]) == 0
    out = capsys.readouterr().out
    answer, refs = out.split("References:", 1)
    assert "<kb" not in out and "chunk_id=" not in answer  # no raw citation tags
    assert "Mara Quill" in answer and "[1]" in answer
    assert "*[1]" in refs  # the cited reference is number 1 in the list below
    # the same rule as the server (400 "query: must not be empty")
    assert main(["--workspace", ws, "ask", "   ", "--kb", "demo", "--quiet"]) == 2
    assert "query: must not be empty" in capsys.readouterr().err


def test_number_arguments_name_the_value_and_the_rule():
    at_least_one = number_arg(int, lambda n: n >= 1, ">= 1")
    fraction = number_arg(float, lambda v: 0.0 < v <= 1.0, "in (0, 1]")
    assert at_least_one("3") == 3 and fraction("1") == 1.0 and fraction("0.25") == 0.25
    for parse, text, message in [
        (at_least_one, "0", "0 must be >= 1"),
        (at_least_one, "1.5", "'1.5' is not an integer"),
        (fraction, "0", "0 must be in (0, 1]"),
        (fraction, "nan", "nan must be in (0, 1]"),
        (fraction, "x", "'x' is not a number"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError) as info:
            parse(text)
        assert str(info.value) == message
