"""Runner: records, suite specs, failed questions kept (scored 0), report / eval CLI round trip."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from rag_lab.eval.runner import (
    QueryRecord,
    SuiteSpec,
    answer_text,
    evaluate_lab,
    evaluate_suites,
    parse_suite_spec,
    write_retrieval_report,
)


def test_answer_text_strips_citation_tags() -> None:
    a = 'Mara Quill built it <kb doc="Lighthouse" chunk_id="c1" /> . See <web url="http://x" title="t"/>,  too.'
    assert answer_text(a) == "Mara Quill built it. See, too."
    assert answer_text('北京是首都 <kb chunk_id="c"/> 。') == "北京是首都。"
    assert answer_text("") == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hotpotqa_hipporag100", ("hotpotqa_hipporag100", None, None, 0)),
        ("hotpotqa_hipporag100:30", ("hotpotqa_hipporag100", 30, None, 0)),
        ("pubmedqa_pqal:30:60", ("pubmedqa_pqal", 30, 60, 0)),
        ("pubmedqa_pqal::60:7", ("pubmedqa_pqal", None, 60, 7)),
        ("/data/my:set:5", ("/data/my:set", 5, None, 0)),
    ],
)
def test_parse_suite_spec(text: str, expected: tuple[Any, ...]) -> None:
    s = parse_suite_spec(text)
    assert (s.dataset, s.n_queries, s.max_docs, s.seed) == expected


def test_suite_spec_names_and_validation() -> None:
    s = SuiteSpec("pubmedqa_pqal", 30, 60)
    assert s.name == "pubmedqa_pqal" and re.fullmatch(r"eval-pubmedqa_pqal-60d-[0-9a-f]{10}", s.kb_name)
    assert SuiteSpec("/tmp/x/fresh").name == "fresh"
    assert SuiteSpec.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError, match="n_queries must be an integer >= 1, got 0"):
        SuiteSpec("x", 0)
    ds = SuiteSpec("pubmedqa_pqal", 3, 5, seed=1).load()
    assert [q.id for q in ds.queries] == [q.id for q in SuiteSpec("pubmedqa_pqal").load().queries[:3]]
    assert len(ds.corpus) == 5


@pytest.mark.slow
async def test_failed_questions_are_kept_and_score_zero(
    eval_lab: Any, small_ds: Any, small_spec: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = eval_lab.aask
    bad_question = small_ds.queries[1].question

    async def flaky(question: str, *a: Any, **kw: Any) -> Any:
        if question == bad_question:
            raise RuntimeError("model server down")
        return await real(question, *a, **kw)

    monkeypatch.setattr(eval_lab, "aask", flaky)
    res = await evaluate_lab(
        eval_lab, small_ds, small_spec.kb_name, n_queries=3, progress=False, params={"rerank_top_k": 5}
    )
    assert [r.qid for r in res.records] == [q.id for q in small_ds.queries[:3]]
    broken = res.records[1]
    assert broken.error == "RuntimeError: model server down" and broken.retrieved_doc_ids == []
    assert res.errors == 1 and res.report.n_queries == 3
    assert res.report.per_query().loc[broken.qid, "ndcg@10"] == 0.0
    assert res.params == {"rerank_top_k": 5}
    ok = res.records[0]
    assert len(ok.contexts) == len(ok.context_ids) == len(ok.context_doc_ids) <= 5
    assert ok.retrieved_doc_ids == list(dict.fromkeys(ok.context_doc_ids))
    assert ok.latency_ms > 0 and "chunk_rerank" in ok.stage_ms
    assert QueryRecord.from_dict(json.loads(json.dumps(ok.to_dict()))) == ok


@pytest.mark.slow
def test_evaluate_suites_and_report_cli(
    eval_lab: Any, small_spec: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rag_lab.commands.evaluate import main
    from rag_lab.lab.lab import _run_sync
    from rag_lab.lab.outputs import write_report

    spec = SuiteSpec(small_spec.dataset, 4, small_spec.max_docs)
    rep = _run_sync(lambda: evaluate_suites(eval_lab, [spec], ragas_metrics=["id_context_recall"], progress=False))
    assert rep.meta["spec"] == {
        "suites": [spec.to_dict()],
        "ks": [1, 3, 5, 10],
        "ragas_metrics": ["id_context_recall"],
        "params": {},
    }
    s = rep.suites[0]
    assert len(s.records) == 4 and s.ragas is not None and s.summary()["id_context_recall"] >= s.summary()["recall@10"]
    j = write_report(rep, tmp_path, "r", formats=["json"])["json"]
    assert main(["report", "--from", str(j), "--out", str(tmp_path / "out")]) == 0
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert names == {"r.md", "r.html", "r.json", "r.junit.xml"}
    assert "hotpotqa_hipporag100 (4 queries, 0 errors" in capsys.readouterr().out
    assert main(["report", "--out", str(tmp_path)]) == 2
    assert "give --dataset" in capsys.readouterr().err


@pytest.mark.slow
def test_demo_report_writer_still_works(eval_lab: Any, small_ds: Any, small_spec: Any, tmp_path: Path) -> None:
    from rag_lab.lab.lab import _run_sync

    res = _run_sync(lambda: evaluate_lab(eval_lab, small_ds, small_spec.kb_name, n_queries=2, progress=False))
    jpath, mpath = write_retrieval_report(res, tmp_path, "demo")
    data = json.loads(jpath.read_text(encoding="utf-8"))
    assert data["meta"]["queries"] == 2 and data["meta"]["errors"] == 0 and "ndcg@10" in data["summary"]
    assert mpath.read_text(encoding="utf-8").startswith("# Retrieval report: hotpotqa_hipporag100")


def _tiny_dataset(tmp_path: Path) -> Path:
    """``tinyds``: 12 documents, 4 questions with one gold document each (tests/eval style)."""
    folder = tmp_path / "tinyds"
    folder.mkdir()
    docs = [
        {"id": f"d{i}", "title": f"Doc {i}", "text": f"Fact number {i}: the keeper of tower {i} is Ann {i}."}
        for i in range(12)
    ]
    queries = [
        {"id": f"q{i}", "question": f"Who keeps tower {i}?", "answers": [f"Ann {i}"], "gold_ids": [f"d{i}"]}
        for i in range(4)
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    return folder


def test_each_slice_is_scored_against_exactly_its_own_documents(tmp_path: Path) -> None:
    """``tinyds:4:6`` then ``tinyds:1:6`` shared ``eval-tinyds-d6-s0``: ingestion only adds, so the
    second slice searched nine documents. Now the KB name follows the document set."""
    from rag_lab.lab.lab import Lab, _run_sync

    folder = _tiny_dataset(tmp_path)
    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        specs = [parse_suite_spec(f"{folder}:4:6"), parse_suite_spec(f"{folder}:1:6")]
        for spec in specs:  # two runs in one workspace, both suites named "tinyds"
            rep = _run_sync(lambda spec=spec: evaluate_suites(lab, [spec], progress=False))
            kb = lab.workspace.get_kb(rep.suites[0].kb)
            held = {k.id for k in lab.workspace.store.list_knowledge(kb.id)}
            assert len(held) == 6 and len(held) == len(spec.load().corpus), rep.suites[0].kb
        a, b = (s.load() for s in specs)
        assert {d.id for d in a.corpus} != {d.id for d in b.corpus}  # different gold → other documents
        assert specs[0].kb_name != specs[1].kb_name
        assert re.fullmatch(r"eval-tinyds-6d-[0-9a-f]{10}", specs[0].kb_name)
        same_docs = SuiteSpec(str(folder), 4, 6, name="tinyds")
        assert same_docs.kb_name == specs[0].kb_name  # the same slice again: the same KB
    finally:
        lab.workspace.close()
