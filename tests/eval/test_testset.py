"""``rag-lab testset``: offline generated questions from a KB, on slices of the bundled datasets
(English HotpotQA, Chinese CMRC 2018) ingested with the real offline lab."""

from __future__ import annotations

import json
import re

import pytest

from rag_lab.eval.datasets import load_dataset
from rag_lab.eval.datasets.schema import DatasetError
from rag_lab.eval.ingest import dataset_documents
from rag_lab.eval.testset import REPORT_FILE, build_testset
from rag_lab.eval.testset.answerable import contains_span
from rag_lab.eval.testset.generate import FORMS, normalize_question, sentences
from rag_lab.eval.testset.pipeline import Findability, kb_sources, stratified_order
from rag_lab.retrieval.base import SearchScope


@pytest.fixture(scope="module")
def ts_lab(tmp_path_factory):
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("testset_ws"))
    for name, kb, n in (("hotpotqa_hipporag100", "en", 12), ("cmrc2018", "zh", 8)):
        ds = load_dataset(name)
        lab.ingest_documents(dataset_documents(ds)[:n], kb=kb, progress=False)
    yield lab
    lab.workspace.close()


_WH_EN = re.compile(r"^(What|Who|When|Where|Which|How) .+\?$")
_WH_ZH = re.compile(r"什么|哪|多少|谁")


@pytest.mark.parametrize("kb", ["en", "zh"])
def test_generated_questions_are_answerable_by_the_gold_text(ts_lab, kb, tmp_path):
    """Every kept question asks for a span of its source chunk, a plain BM25 independent of the
    lab's search finds its documents (recomputed here, not trusted), and the KB's own search is
    only measured: its ranks are recorded as they are, missed or not."""
    ds, report = build_testset(ts_lab, kb, 9, tmp_path / "out", seed=7)
    assert report.kept == len(ds.queries) >= 8
    docs, sources = kb_sources(ts_lab, ts_lab.kb(kb, create=False))
    by_chunk = {s.chunk_id: s for s in sources}
    finder = Findability(docs)
    kb_id = ts_lab.kb(kb, create=False).id
    engine = ts_lab.workspace.engine()
    for q in ds.queries:
        md = q.metadata
        assert md["model"] == "none" and md["synthetic"] is True and md["reviewed"] is False and md["seed"] == 7
        assert md["generator"] in FORMS and "retrieved_by" not in md
        src = by_chunk[md["source_chunk_id"]]
        assert q.gold_ids[-1] == src.doc_id and contains_span(src.text, q.answers[0])
        assert normalize_question(q.question) not in {normalize_question(s) for s in sentences(src.text)}
        ranks = {
            d: finder.rank(q.question + (" " + md["linked_by"] if d == src.doc_id and "linked_by" in md else ""), d)
            for d in q.gold_ids
        }
        assert all(r is not None and r <= 50 for r in ranks.values())
        expected = ranks if len(q.gold_ids) > 1 else ranks[src.doc_id]
        assert md["answerable_by"] == {"answer_in_source": True, "plain_bm25_rank": expected}
        kw = list(
            dict.fromkeys(h.knowledge_id for h in engine.keyword_search(q.question, SearchScope([kb_id], 10, 0.0)))
        )
        measured = md["search_ranks"] if len(q.gold_ids) == 1 else md["search_ranks"][src.doc_id]
        assert measured.get("keyword") == (kw.index(src.doc_id) + 1 if src.doc_id in kw else None)
        if kb == "en":
            assert _WH_EN.match(q.question), q.question  # a question, not a bag of words or a blank
        else:
            assert _WH_ZH.search(q.question) and q.question.endswith("？"), q.question
    assert len({normalize_question(q.question) for q in ds.queries}) == len(ds.queries)
    assert len({q.metadata["generator"] for q in ds.queries}) >= 3
    saved = json.loads((tmp_path / "out" / REPORT_FILE).read_text())
    assert saved["kept"] == report.kept and saved["generator_model"] == "none" and "weaker" in saved["note"]
    assert sum(saved["answerable_by"].values()) == report.kept and "retrieved_by" not in saved
    assert saved["saturation"] == {"of": "the KB's own keyword and vector search, top 10", **report.saturation}
    assert set(report.saturation) == {"hit@1", "recall@10"} and "saturation: the KB's own search" in str(report)
    # the written folder is a dataset like any other
    assert [q.id for q in load_dataset(tmp_path / "out").queries] == [q.id for q in ds.queries]


def test_a_bridge_question_needs_both_documents(ts_lab, tmp_path):
    ds, report = build_testset(ts_lab, "en", 9, tmp_path / "out", seed=7)
    bridge = [q for q in ds.queries if q.metadata["generator"] == "bridge"]
    assert [(q.question, q.answers, q.metadata["linked_by"]) for q in bridge] == [
        ("When was the director of The Prestige born?", ["30 July 1970"], "Christopher Nolan")
    ]
    titles = {d.id: d.title for d in ds.corpus}
    assert [titles[d] for d in bridge[0].gold_ids] == ["The Prestige (film)", "Christopher Nolan"]
    assert report.multihop == 1 and len(bridge[0].metadata["source_chunk_ids"]) == 2
    assert ds.queries[0].metadata["generator"] == "bridge"  # bridges are sought before comparisons


def test_ids_metadata_bins_and_overwrite(ts_lab, tmp_path):
    """What each question carries besides its text: numbered ids from gen-0001, the source KB's
    name, ``linked_by`` only on a question reached through another document, and the report's
    rank bins named with the depth asked for; a second build into the same folder needs
    ``overwrite``."""
    ds, report = build_testset(ts_lab, "en", 9, tmp_path / "out", seed=7, depth=40)
    assert [q.id for q in ds.queries] == [f"gen-{i:04d}" for i in range(1, len(ds.queries) + 1)]
    assert {q.metadata["source_kb"] for q in ds.queries} == {"en"}
    for q in ds.queries:
        assert ("linked_by" in q.metadata) == (q.metadata["generator"] == "bridge"), q.metadata
    assert set(report.answerable_by) <= {"rank 1", "rank 2-10", "rank 11-40"}
    assert sum(report.answerable_by.values()) == report.kept
    with pytest.raises(DatasetError, match=r"corpus\.jsonl: exists \(pass overwrite=True"):
        build_testset(ts_lab, "en", 9, tmp_path / "out", seed=7)
    again, _ = build_testset(ts_lab, "en", 9, tmp_path / "out", seed=7, depth=40, overwrite=True)
    assert [q.id for q in again.queries] == [q.id for q in ds.queries]


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
    assert "kept 3 of 3" in out and "saturation:" in out and "weaker" in err
    assert len(load_dataset(tmp_path).queries) == 3


def test_unknown_kb_and_bad_n(ts_lab, tmp_path):
    with pytest.raises(ValueError, match="n must be"):
        build_testset(ts_lab, "en", 0, tmp_path)
    with pytest.raises(ValueError, match="multihop must be a share"):
        build_testset(ts_lab, "en", 3, tmp_path, multihop=1.5)
    with pytest.raises(ValueError, match="n must be an integer >= 1, got '3'"):
        build_testset(ts_lab, "en", "3", tmp_path)  # type: ignore[arg-type]
    kbs = [k.name for k in ts_lab.workspace.list_kbs()]
    with pytest.raises(Exception, match="nope"):
        build_testset(ts_lab, "nope", 3, tmp_path)
    assert [k.name for k in ts_lab.workspace.list_kbs()] == kbs  # an unknown KB is not created
    ts_lab.kb("empty_kb")
    with pytest.raises(ValueError, match="knowledge base 'empty_kb' holds no text or table chunks"):
        build_testset(ts_lab, "empty_kb", 3, tmp_path)


def test_report_fields_seed_default_and_the_two_document_share(ts_lab, tmp_path):
    ds, report = build_testset(ts_lab, "en", 4, tmp_path / "a", multihop=0.25)
    assert (report.kb, report.seed, report.requested) == ("en", 0, 4)
    assert report.multihop == 1  # round(4 × 0.25): exactly one two-document question, not more
    assert sum(len(q.gold_ids) > 1 for q in ds.queries) == 1
    seeded, _ = build_testset(ts_lab, "en", 4, tmp_path / "b", seed=0, multihop=0.25)
    assert [q.question for q in seeded.queries] == [q.question for q in ds.queries]  # the default seed is 0
    every, every_report = build_testset(ts_lab, "en", 4, tmp_path / "c", multihop=1.0)  # a share of 1 is allowed
    assert every_report.multihop >= 1 and len(every.queries) == 4


def test_each_filter_drops_what_it_exists_for(ts_lab, tmp_path, monkeypatch):
    """A fixture that produces every case the filters exist for: chunks of one document get a
    question sharing no word with the corpus (not findable), of another an answer their text does
    not hold, of a third a question that gives its answer away; all the others one of two
    questions (so all but the first of each are duplicates). Exactly those are dropped, each
    counted once under its reason."""
    from rag_lab.eval.testset import build as build_mod
    from rag_lab.eval.testset.generate import Candidate

    _, sources = kb_sources(ts_lab, ts_lab.kb("en", create=False))
    lost, wrong, given = sorted({s.doc_id for s in sources})[:3]

    def cands(src):
        first = src.text.split()[0]
        if src.doc_id == lost:
            return [Candidate("Qqqzx vvvjk?", "definition", src, [first])]
        if src.doc_id == wrong:
            return [Candidate("What is described in this text?", "definition", src, ["zzz not in the text"])]
        if src.doc_id == given:
            return [Candidate(f"Is {first} described in this text?", "definition", src, [first])]
        i = sources.index(src)
        return [Candidate(f"Which harbour is described in text {i % 2}?", "definition", src, [first])]

    monkeypatch.setattr(build_mod, "generate_candidates", cands)
    ds, report = build_testset(ts_lab, "en", len(sources), tmp_path / "out", seed=1, multihop=0.0)
    chunks = {d: sum(1 for s in sources if s.doc_id == d) for d in (lost, wrong, given)}
    assert report.dropped["not findable"] == chunks[lost] >= 1
    assert report.dropped["answer not in source"] == chunks[wrong] >= 1
    assert report.dropped["answer in the question"] == chunks[given] >= 1
    assert sorted(q.question for q in ds.queries) == [
        "Which harbour is described in text 0?",
        "Which harbour is described in text 1?",
    ]
    assert report.dropped["duplicate"] == len(sources) - sum(chunks.values()) - 2
    assert report.kept == 2 and report.examined_chunks == len(sources)


def test_table_documents_give_cell_questions(tmp_path):
    """A CSV ingested through the lab (table summary and column chunks) next to a text document:
    its rows and its numeric column become questions about cells, gold the CSV document."""
    from rag_lab.lab.lab import Lab

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "cities.csv").write_text("city,country,population\nLyon,France,516092\nGraz,Austria,291072\n")
    (folder / "notes.md").write_text("# Kestle\n\nKestle is a small harbour town on the river Orrin.\n")
    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        lab.ingest(folder, kb="tables", progress=False)
        ds, report = build_testset(lab, "tables", 6, tmp_path / "out", seed=0, multihop=0.0)
    finally:
        lab.workspace.close()
    got = sorted((q.question, q.answers[0], q.gold_ids[0]) for q in ds.queries if q.metadata["generator"] == "table")
    assert got == [
        ("What is the country of Lyon?", "France", "cities.csv"),
        ("What is the highest population in cities?", "516092", "cities.csv"),
    ]
    assert {q.metadata["generator"] for q in ds.queries} == {"table", "definition"}
    table_doc = next(d for d in ds.corpus if d.id == "cities.csv")
    assert "Lyon" in table_doc.text and "range 291072 to 516092" in table_doc.text


def test_a_duplicate_passage_is_a_gold_candidate(tmp_path):
    """Two documents hold the same passage: the question made of one lists the other as a gold
    candidate (documents and the passage itself); an unrelated document is not listed."""
    from rag_lab.lab.lab import Lab

    text = "The Tarn viaduct was designed by Mara Vell and completed in 1919."
    docs = [
        {"id": "tarn", "title": "The Tarn viaduct", "text": text},
        {"id": "tarn-copy", "title": "Viaducts of the moor", "text": text},
        {"id": "ferry", "title": "The Kestle ferry", "text": "The Kestle ferry carried carts across the river."},
    ]
    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        lab.ingest_documents(docs, kb="dup", progress=False)
        ds, _ = build_testset(lab, "dup", 1, tmp_path / "out", seed=0, multihop=0.0)
        chunk = {
            d: lab.workspace.store.list_chunks(lab.kb("dup", create=False).id, d)[0].id for d in ("tarn", "tarn-copy")
        }
    finally:
        lab.workspace.close()
    (q,) = ds.queries
    other = "tarn-copy" if q.gold_ids == ["tarn"] else "tarn"
    assert q.answers[0] in ("1919", "Mara Vell")
    assert q.metadata["gold_candidates"] == [*q.gold_ids, other]
    assert q.metadata["candidate_passages"] == [{"passage": chunk[other], "doc_id": other}]


def test_old_sets_with_retrieved_by_still_load(tmp_path):
    from rag_lab.eval.datasets import CorpusDoc, QueryItem, write_dataset
    from rag_lab.eval.labelling.model import candidate_passages

    md = {"generator": "keyphrase", "retrieved_by": {"keyword": 1}, "synthetic": True, "reviewed": False}
    write_dataset([CorpusDoc("d", "D", "text")], [QueryItem("q", "old question", [], ["d"], md)], tmp_path)
    (q,) = load_dataset(tmp_path).queries
    assert q.metadata["retrieved_by"] == {"keyword": 1} and candidate_passages(q.metadata) == []
    ok = {"candidate_passages": [{"passage": "c", "doc_id": "d"}, {"passage": 3}, "junk"]}
    assert candidate_passages(ok) == [("c", "d")]


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
