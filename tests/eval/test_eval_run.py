"""``rag-lab eval --run FILE``: another system's outputs (a TREC run, rag_lab's samples JSONL, a
ragas EvaluationDataset) scored with the same metrics — equal to pytrec_eval on the same files —
and gated like rag_lab's own reports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.external import evaluate_run, guess_format
from rag_lab.eval.formats import FormatError, trec_ranking

RUN = """\
q1 Q0 d3 1 9.0 sys
q1 Q0 d1 2 5.0 sys
q1 Q0 d2 3 5.0 sys
q1 Q0 d9 4 1.0 sys
q2 Q0 d7 1 3.0 sys
q2 Q0 d4 2 2.5 sys
q3 Q0 d8 1 1.0 sys
"""
# q1: d1 (grade 2) and d2 tie on score 5.0; q2's gold d5 is never retrieved; q4 is in the qrels only
QRELS = """\
q1 0 d1 2
q1 0 d2 1
q1 0 d9 0
q2 0 d5 1
q2 0 d4 1
q3 0 d8 1
q4 0 d6 1
"""


def _files(tmp_path: Path) -> tuple[Path, Path]:
    run, qrels = tmp_path / "sys.run.trec", tmp_path / "gold.qrels"
    run.write_text(RUN, encoding="utf-8")
    qrels.write_text(QRELS, encoding="utf-8")
    return run, qrels


def test_a_trec_run_scores_as_pytrec_eval(tmp_path: Path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    run, qrels = _files(tmp_path)
    assert guess_format(run) == "trec"
    assert trec_ranking({"d1": 5.0, "d2": 5.0, "d3": 9.0}) == ["d3", "d2", "d1"]  # ties: document id descending
    report = evaluate_run(run, "sys", qrels=qrels, ks=(1, 3, 5))
    (suite,) = report.suites
    rows = {r["qid"]: r for r in suite.retrieval.rows}
    assert list(rows) == ["q1", "q2", "q3", "q4"]
    from rag_lab.eval.formats import read_trec_qrels, read_trec_run

    measures = {"recall.1,3,5", "P.5", "ndcg_cut.5", "recip_rank", "map"}
    trec = pytrec_eval.RelevanceEvaluator(read_trec_qrels(qrels), measures).evaluate(read_trec_run(run))
    for qid, t in trec.items():
        r = rows[qid]
        assert r["recall@1"] == pytest.approx(t["recall_1"]) and r["recall@3"] == pytest.approx(t["recall_3"])
        assert r["precision@5"] == pytest.approx(t["P_5"]) and r["mrr"] == pytest.approx(t["recip_rank"])
        assert r["map"] == pytest.approx(t["map"]) and r["ndcg@5"] == pytest.approx(t["ndcg_cut_5"]), qid
    assert "q4" not in trec and rows["q4"]["recall@5"] == 0.0  # asked, not answered: nothing retrieved
    assert report.meta["source_run"]["format"] == "trec" and len(report.meta["source_run"]["sha256"]) == 16


def test_the_gate_compares_two_runs_and_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rag_lab.commands.evaluate import main

    run, qrels = _files(tmp_path)
    out = tmp_path / "out"
    base = ["eval", "--run", str(run), "--qrels", str(qrels), "--out", str(out)]
    assert main([*base, "--name", "before"]) == 0
    worse = tmp_path / "worse.run.trec"
    worse.write_text(RUN.replace("d3 1 9.0", "d3 1 1.0").replace("d8 1 1.0", "d0 1 1.0"), encoding="utf-8")
    assert main(["eval", "--run", str(worse), "--qrels", str(qrels), "--out", str(out), "--name", "after"]) == 0
    capsys.readouterr()
    gate = ["gate", "--baseline", str(out / "before.json"), "--quiet", "--metric", "recall@1", "--metric", "hit@1"]
    assert main([*gate, "--current", str(out / "before.json")]) == 0
    # q3 loses its only gold; q1's top document is now d2 (gold) instead of d3: hit@1 even, recall@1 down
    assert main([*gate, "--current", str(out / "after.json")]) == 1
    verdict = capsys.readouterr().out.strip().splitlines()[-1]
    assert "run/recall@1 probable regression" in verdict and "run/hit@1 inconclusive" in verdict
    assert main([*base, "--param", "rerank_threshold=0.5"]) == 2
    assert "--param and --config do not apply" in capsys.readouterr().err
    assert main(["eval", "--run", str(run), "--out", str(out)]) == 2  # no gold anywhere
    assert "no question has gold documents: give --qrels FILE or --dataset NAME" in capsys.readouterr().err
    assert main(["eval", "--out", str(out)]) == 2
    assert "give --dataset NAME" in capsys.readouterr().err
    bad = tmp_path / "bad.trec"
    bad.write_text("q1 Q0 d1 1 high sys\n", encoding="utf-8")
    assert main(["eval", "--run", str(bad), "--qrels", str(qrels), "--out", str(out)]) == 2
    assert "bad.trec:1: field 'score' = 'high' is not a number" in capsys.readouterr().err
    with pytest.raises(FormatError, match="run file not found"):
        evaluate_run(tmp_path / "none.trec", "x", qrels=qrels)


def test_a_samples_jsonl_and_a_ragas_dataset_give_the_pipelines_metrics(
    eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path
) -> None:
    """rag_lab's own outputs, exported and scored back as another system's: the same retrieval
    metrics from the samples JSONL (document ids) and from the ragas rows (contexts matched to the
    documents that contain them), and the same offline answer metrics."""
    from rag_lab.eval.formats import export_records
    from rag_lab.eval.ragas_adapter import samples_from_records, score_samples
    from rag_lab.eval.runner import evaluate_lab

    res = asyncio.run(evaluate_lab(eval_lab, small_ds, small_spec.kb_name, ks=(1, 5, 10), progress=False))
    files = export_records(res.records, tmp_path, "mine", ["jsonl", "ragas"])
    own = res.report.summary()
    for key, fmt in (("jsonl", "jsonl"), ("ragas", "ragas")):
        path = files[key]
        assert guess_format(path) == fmt
        rep = evaluate_run(path, "mine", dataset=small_ds, ks=(1, 5, 10), ragas_metrics=["chrf", "rouge_l"])
        got = rep.suites[0].retrieval.summary()
        assert {m: got[m] for m in ("recall@5", "recall@10", "mrr", "ndcg@10")} == pytest.approx(
            {m: own[m] for m in ("recall@5", "recall@10", "mrr", "ndcg@10")}
        ), key
        theirs = rep.suites[0].ragas
        mine = score_samples(samples_from_records(res.records, small_ds), ["chrf", "rouge_l"])
        assert theirs is not None and theirs.summary() == pytest.approx(mine.summary()), key
    rows = [json.loads(x) for x in files["ragas"].read_text(encoding="utf-8").splitlines()]
    rows[0]["user_input"] = "a question nobody asked"
    odd = tmp_path / "odd.ragas.jsonl"
    odd.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"odd.ragas.jsonl:1: field 'user_input' = 'a question nobody asked'"):
        evaluate_run(odd, "x", dataset=small_ds)
    with pytest.raises(FormatError, match="give --dataset to match them by question text"):
        evaluate_run(files["ragas"], "x")
