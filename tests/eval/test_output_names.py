"""Issue 27, point 7: ``rag-lab report --name ../../x`` wrote outside ``--out``. A report, sweep
or export name is a file name under ``--out``: names with a path separator, ``..``, a leading
``.``/``~`` or a control character are refused by the CLI (exit 2, the option and value named) and
by the writers themselves (``ValueError``), and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.cliutil import check_file_stem
from rag_lab.commands.evaluate import main

BASELINE = Path(__file__).resolve().parents[2] / "reports" / "baseline.json"
BAD = ["../../x", "../x", "a/b", "/tmp/x", "..", "a\\b", ".x", "~x", "x\ny", ""]


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", BAD)
def test_check_file_stem_refuses_paths(name):
    with pytest.raises(ValueError, match="--name") as info:
        check_file_stem(name)
    assert repr(name)[:20].strip("'") in str(info.value) or name == ""


@pytest.mark.parametrize("name", ["report", "eval_squad_small", "a.b", "sweep-2024_01", "x"])
def test_plain_names_pass(name):
    assert check_file_stem(name) == name


@pytest.mark.parametrize("command", ["report", "eval", "sweep"])
@pytest.mark.parametrize("name", ["../../x", "a/b", ".."])
def test_the_cli_refuses_a_name_that_is_a_path(tmp_path, capsys, command, name):
    out = tmp_path / "a" / "b" / "out"
    argv = [command, "--out", str(out), "--name", name]
    argv += ["--from", str(BASELINE)] if command == "report" else ["--dataset", "nowhere"]
    before = _files(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --name: --name {name!r}" in err and "not a path" in err
    assert _files(tmp_path) == before


def test_report_from_json_writes_only_under_out(tmp_path, capsys):
    out = tmp_path / "a" / "b" / "out"
    assert main(["report", "--from", str(BASELINE), "--out", str(out), "--name", "ok"]) == 0
    assert {p.parent for p in _files(tmp_path)} == {out}
    assert {p.name for p in _files(out)} >= {"ok.json", "ok.md"}


def test_the_writers_refuse_a_path_name_too(tmp_path):
    from rag_lab.eval.formats import export_records
    from rag_lab.eval.report import load_report
    from rag_lab.eval.sweep.outputs import SweepResult
    from rag_lab.lab.outputs import write_report, write_sweep_outputs

    out = tmp_path / "a" / "out"
    report = load_report(BASELINE)
    with pytest.raises(ValueError, match=r"--name '\.\./\.\./x'"):
        write_report(report, out, "../../x")
    with pytest.raises(ValueError, match="not a path"):
        export_records(report.suites[0].records, out, "../x", ["jsonl"])
    result = SweepResult(
        ["mmr_lambda"], "ndcg@10", "maximize", [{"mmr_lambda": 0.5, "ndcg@10": 1.0}], {}, ["s"], {}, 0.0
    )
    with pytest.raises(ValueError, match="not a path"):
        write_sweep_outputs(result, out, "../x")
    assert _files(tmp_path) == set()
