"""``rag-lab runs``: every eval is recorded in the workspace; runs are listed, tagged and compared
side by side (means, stage metrics, the params that differ) and, two at a time, question by
question with the gate's statistics; runs over other questions are refused, naming the difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_lab.eval.report import load_report
from rag_lab.eval.runs import RUNS_FILE, RunsError, compare_runs, load_runs, tag_run

SLICE = "hotpotqa_hipporag100@0-4:12"  # 4 questions over 12 documents


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    from rag_lab.commands.evaluate import main

    root = tmp_path_factory.mktemp("runs")
    ws, out = root / "ws", root / "out"
    base = ["--workspace", str(ws), "eval", "--dataset", SLICE, "--out", str(out), "--quiet"]
    assert main([*base, "--name", "a"]) == 0
    assert main([*base, "--name", "b", "--param", "rerank_threshold=0.5"]) == 0
    assert main([*base, "--name", "c", "--param", "rerank_threshold=0.5", "--param", "rerank_top_k=2"]) == 0
    ids = [e.id for e in load_runs(ws)]
    return ws, ids


def test_each_eval_is_recorded_with_what_makes_it_comparable(three_runs: tuple[Path, list[str]]) -> None:
    ws, ids = three_runs
    entries = load_runs(ws)
    assert len(ids) == len(set(ids)) == 3 and (ws / RUNS_FILE).is_file()
    a, b, c = entries
    assert a.suites == b.suites == c.suites and len(a.suites) == 1
    (suite,) = a.suites.values()
    assert suite["n_queries"] == 4 and len(suite["digest"]) == 16
    assert a.params["rerank_threshold"] == 0.3 and b.params["rerank_threshold"] == 0.5 and c.params["rerank_top_k"] == 2
    assert a.models["embedder"].startswith("all-MiniLM") and a.code_version and a.report.endswith("a.json")
    assert list(a.suites) == ["hotpotqa_hipporag100"] and "vector.ndcg@10" in a.means["hotpotqa_hipporag100"]


def test_compare_three_runs_side_by_side_and_two_question_by_question(
    three_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from rag_lab.cli import main as rag_lab

    ws, ids = three_runs
    cmp = compare_runs(ws, ids)
    assert cmp.params == {"rerank_threshold": [0.3, 0.5, 0.5], "rerank_top_k": [30, 30, 2]}
    metrics = [m for _, m, _ in cmp.rows]
    assert metrics[:2] == ["ndcg@10", "recall@5"] and "vector.ndcg@10" in metrics and cmp.gate is None
    row = next(vals for _, m, vals in cmp.rows if m == "recall@5")
    reports = [load_report(e.report) for e in load_runs(ws)]
    assert row == pytest.approx([r.suites[0].summary()["recall@5"] for r in reports])
    assert rag_lab(["--workspace", str(ws), "runs", "compare", *ids, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["suite", "metric", *ids]
    assert "params that differ: rerank_threshold 0.3 / 0.5 / 0.5; rerank_top_k 30 / 30 / 2" in out
    assert (tmp_path / "runs_compare.html").read_text(encoding="utf-8").count("<tr>") > 10
    two = compare_runs(ws, ids[:2])
    assert two.gate is not None and {c.suite for c in two.gate.checks} == {"hotpotqa_hipporag100"}
    assert rag_lab(["--workspace", str(ws), "runs", "compare", ids[0], ids[2]]) == 0
    assert "GATE" in capsys.readouterr().out  # the paired verdict of the two runs


def test_tags_name_one_run_and_lists_show_them(
    three_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.cli import main as rag_lab

    ws, ids = three_runs
    assert rag_lab(["--workspace", str(ws), "runs", "tag", ids[0][:5], "baseline"]) == 0
    tag_run(ws, ids[1], "baseline")  # moves the tag
    assert [e.tags for e in load_runs(ws)] == [[], ["baseline"], []]
    assert compare_runs(ws, ["baseline", ids[2]]).runs[0].id == ids[1]
    capsys.readouterr()
    assert rag_lab(["--workspace", str(ws), "runs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in lines] == ids and lines[1].endswith("[baseline]")
    with pytest.raises(RunsError, match="no run 'zzz'"):
        compare_runs(ws, ["zzz", ids[0]])


def test_runs_over_other_questions_are_refused(
    three_runs: tuple[Path, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.cli import main as rag_lab
    from rag_lab.commands.evaluate import main

    ws, ids = three_runs
    out = ws.parent / "out"
    assert (
        main(
            [
                "--workspace",
                str(ws),
                "eval",
                "--dataset",
                "hotpotqa_hipporag100@0-3:12",
                "--out",
                str(out),
                "--quiet",
                "--name",
                "d",
            ]
        )
        == 0
    )
    other = load_runs(ws)[-1].id
    capsys.readouterr()
    assert rag_lab(["--workspace", str(ws), "runs", "compare", ids[0], other]) == 2
    err = capsys.readouterr().err
    assert f"suite 'hotpotqa_hipporag100' differs between runs {ids[0]} and {other}: 4 vs 3 questions" in err
    assert "the runs are not comparable" in err
