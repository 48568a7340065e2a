"""``rag-lab testset``: offline generated questions from a KB, on slices of the bundled datasets
(English HotpotQA, Chinese CMRC 2018) ingested with the real offline lab."""

from __future__ import annotations

import json

import pytest

from rag_lab.eval.datasets import load_dataset
from rag_lab.eval.ingest import dataset_documents
from rag_lab.eval.testset import REPORT_FILE, build_testset
from rag_lab.eval.testset.build import kb_sources
from rag_lab.eval.testset.generate import normalize_question, sentences, stratified_order


@pytest.fixture(scope="module")
def ts_lab(tmp_path_factory):
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("testset_ws"))
    for name, kb, n in (("hotpotqa_hipporag100", "en", 12), ("cmrc2018", "zh", 8)):
        ds = load_dataset(name)
        lab.ingest_documents(dataset_documents(ds)[:n], kb=kb, progress=False)
    yield lab
    lab.workspace.close()


@pytest.mark.parametrize("kb", ["en", "zh"])
def test_generated_questions_are_retrievable_and_not_copies(ts_lab, kb, tmp_path):
    ds, report = build_testset(ts_lab, kb, 9, tmp_path / "out", seed=7)
    assert report.kept == len(ds.queries) >= 6
    assert sum(report.dropped.values()) + report.kept <= report.examined_chunks
    _, sources = kb_sources(ts_lab, ts_lab.kb(kb, create=False))
    by_chunk = {s.chunk_id: s for s in sources}
    engine = ts_lab.workspace.engine()
    kb_id = ts_lab.kb(kb, create=False).id
    found = 0
    for q in ds.queries:
        md = q.metadata
        assert md["model"] == "none" and md["synthetic"] is True and md["reviewed"] is False and md["seed"] == 7
        src = by_chunk[md["source_chunk_id"]]
        assert q.gold_ids == [src.doc_id]
        assert normalize_question(q.question) not in {normalize_question(s) for s in sentences(src.text)}
        if md["generator"] == "cloze":
            assert q.answers and q.answers[0] in src.text
        # checked again here, not trusted from the generator: the gold chunk among the candidates
        emb = ts_lab.embedder.embed([q.question])[0]
        hits = engine.keyword_search([kb_id], q.question, 10, 0.0) + engine.vector_search([kb_id], emb, 10, 0.0)
        found += src.chunk_id in {h.chunk_id for h in hits}
    assert found >= 0.9 * len(ds.queries)
    assert len({normalize_question(q.question) for q in ds.queries}) == len(ds.queries)
    assert {q.metadata["generator"] for q in ds.queries} == {"keyphrase", "cloze", "title"}
    if kb == "zh":
        assert any("填空" in q.question for q in ds.queries)
    saved = json.loads((tmp_path / "out" / REPORT_FILE).read_text())
    assert saved["kept"] == report.kept and saved["generator_model"] == "none" and "weaker" in saved["note"]
    # the written folder is a dataset like any other
    assert [q.id for q in load_dataset(tmp_path / "out").queries] == [q.id for q in ds.queries]


def test_deterministic_for_a_seed(ts_lab, tmp_path):
    build_testset(ts_lab, "en", 6, tmp_path / "a", seed=3)
    build_testset(ts_lab, "en", 6, tmp_path / "b", seed=3)
    build_testset(ts_lab, "en", 6, tmp_path / "c", seed=4)
    a, b, c = ((tmp_path / x / "queries.jsonl").read_bytes() for x in "abc")
    assert a == b
    assert a != c


def test_stratified_by_document():
    from rag_lab.eval.testset.generate import SourceChunk

    chunks = [SourceChunk(f"d{d}#c{i}", f"d{d}", "", "x") for d in range(3) for i in range(4 if d == 0 else 1)]
    order = stratified_order(chunks, seed=1)
    assert {c.doc_id for c in order[:3]} == {"d0", "d1", "d2"}
    assert sorted(c.chunk_id for c in order) == sorted(c.chunk_id for c in chunks)
    assert order == stratified_order(list(reversed(chunks)), seed=1)


def test_cli(ts_lab, tmp_path, capsys):
    from rag_lab.cli import main

    rc = main(["--workspace", str(ts_lab.workspace.root), "testset", "--kb", "en", "--n", "3", "--out", str(tmp_path)])
    assert rc == 0
    out, err = capsys.readouterr()
    assert "kept 3 of 3" in out and "weaker" in err
    assert len(load_dataset(tmp_path).queries) == 3


def test_unknown_kb_and_bad_n(ts_lab, tmp_path):
    with pytest.raises(ValueError, match="n must be"):
        build_testset(ts_lab, "en", 0, tmp_path)
    with pytest.raises(Exception, match="nope"):
        build_testset(ts_lab, "nope", 3, tmp_path)


def test_duplicates_and_unretrievable_questions_are_dropped(ts_lab, tmp_path, monkeypatch):
    """A fixture that produces both cases the filters exist for: every chunk's question is one of
    two texts (so all but the first of each text are duplicates), and the chunks of one document
    are never retrieved. Exactly those are dropped, with their reasons counted."""
    from rag_lab.eval.testset import build as build_mod
    from rag_lab.eval.testset.generate import Candidate

    _, sources = kb_sources(ts_lab, ts_lab.kb("en", create=False))
    lost = sources[0].doc_id
    texts = {s.chunk_id: f"Which harbour is described in text {i % 2}?" for i, s in enumerate(sources)}
    texts.update(
        {s.chunk_id: f"What is never retrieved in part {i}?" for i, s in enumerate(sources) if s.doc_id == lost}
    )
    monkeypatch.setattr(
        build_mod, "generate_candidates", lambda src, stats, gen: [Candidate(texts[src.chunk_id], gen, src)]
    )
    real = build_mod._retrieved_by

    def retrieved(lab, kb, cands, depth):
        return [{} if c.source.doc_id == lost else found for c, found in zip(cands, real(lab, kb, cands, depth))]

    monkeypatch.setattr(build_mod, "_retrieved_by", retrieved)
    ds, report = build_testset(ts_lab, "en", len(sources), tmp_path / "out", seed=1)
    lost_chunks = sum(1 for s in sources if s.doc_id == lost)
    assert report.dropped["not retrieved"] == lost_chunks >= 1
    assert sorted(q.question for q in ds.queries) == [
        "Which harbour is described in text 0?",
        "Which harbour is described in text 1?",
    ]
    assert report.dropped["duplicate"] == len(sources) - lost_chunks - 2
    assert report.kept == 2 and all(q.gold_ids != [lost] for q in ds.queries)


def test_questions_from_a_file_get_a_guessed_gold_and_stay_unreviewed(ts_lab, tmp_path):
    from rag_lab.eval.review import unreviewed_qids
    from rag_lab.eval.testset.from_file import build_from_file, read_questions

    _, sources = kb_sources(ts_lab, ts_lab.kb("en", create=False))
    asked = sources[0].text.split(".")[0].strip() + "?"
    f = tmp_path / "asked.txt"
    f.write_text(f"{asked}\n\n{asked.upper()}\nqqqzx vvvjk\n", encoding="utf-8")
    ds, report = build_from_file(ts_lab, "en", f, tmp_path / "out")
    # the vector search always finds a nearest document: even a nonsense question gets a guess to review
    assert (report.kept, report.dropped["duplicate"], report.dropped["not retrieved"]) == (2, 1, 0)
    q = ds.queries[0]
    md = q.metadata
    assert q.question == asked and q.gold_ids == [md["gold_candidates"][0]] and len(md["gold_candidates"]) <= 3
    assert q.gold_ids == [sources[0].doc_id]  # the sentence's own document ranks first
    assert md["origin"] == "file" and md["synthetic"] is True and md["reviewed"] is False
    assert unreviewed_qids(load_dataset(tmp_path / "out")) == [q.id for q in ds.queries]  # refused until labelled
    csv_file = tmp_path / "asked.csv"
    csv_file.write_text('id,question\n1,"Where is it, then?"\n2,\n', encoding="utf-8")
    assert read_questions(csv_file) == ["Where is it, then?"]
    bad = tmp_path / "asked.jsonl"
    bad.write_text('{"question": "ok?"}\n{"q": "no"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"asked.jsonl:2: field 'question' = None must be a non-empty string"):
        read_questions(bad)
    (tmp_path / "asked.xlsx").write_bytes(b"PK")
    with pytest.raises(ValueError, match=r"use a .txt, .csv, .jsonl or .json file"):
        read_questions(tmp_path / "asked.xlsx")
