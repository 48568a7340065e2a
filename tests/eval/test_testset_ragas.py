"""``rag-lab testset --generator ragas``: ragas 0.4.3's ``TestsetGenerator`` run end to end against
a fake OpenAI-compatible server over real loopback (each ragas prompt answered by its output
schema, :mod:`tests.eval.ragas_fake_llm`), on a three-document KB; and the conversion of ragas
samples to rag_lab rows (gold by context text, drops counted) without any server.

tiktoken downloads its BPE tables on first use and this machine has no network, so the tests
register byte-level encodings (a real ``tiktoken.Encoding``, one token per byte) under the two
names ragas loads; the preflight's own error for a missing encoding is tested too."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import pytest

pytest.importorskip("ragas")
pytest.importorskip("tiktoken")

from rag_lab.eval.datasets import CorpusDoc, load_dataset  # noqa: E402
from rag_lab.eval.ragas_adapter.samples import RagasError  # noqa: E402
from rag_lab.eval.testset import REPORT_FILE  # noqa: E402
from rag_lab.eval.testset.ragas_build import build_ragas_testset, check_ragas, ragas_chat_config  # noqa: E402
from rag_lab.eval.testset.ragas_convert import (  # noqa: E402
    RagasRow,
    convert_rows,
    gold_documents,
    normalize_text,
    rows_from_samples,
)
from tests.eval.ragas_fake_llm import RagasScript  # noqa: E402
from tests.models.fake_openai import FakeOpenAIServer  # noqa: E402

CHAT = "/v1/chat/completions"
DOCS = [
    {
        "id": "curie-marie",
        "title": "Marie Curie",
        "text": "Marie Curie was born in Warsaw in 1867. She moved to Paris to study physics at the Sorbonne. "
        "Curie discovered polonium and radium with Pierre Curie, and she won two Nobel prizes for that work.",
    },
    {
        "id": "curie-pierre",
        "title": "Pierre Curie",
        "text": "Pierre Curie was a French physicist in Paris. Before meeting Marie Curie he studied crystals and "
        "magnetism with his brother Jacques. The Curie point, where a magnet loses its magnetism, is named after him.",
    },
    {
        "id": "warsaw",
        "title": "Warsaw",
        "text": "Warsaw is the capital of Poland and lies on the Vistula river. The city was rebuilt after the war, "
        "and its old town is a world heritage site. Marie Curie's birthplace in Warsaw is now a museum.",
    },
]


@pytest.fixture
def byte_tiktoken(monkeypatch):
    import tiktoken
    import tiktoken.registry

    ranks = {bytes([i]): i for i in range(256)}
    for name in ("cl100k_base", "o200k_base"):
        enc = tiktoken.Encoding(name, pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={})
        monkeypatch.setitem(tiktoken.registry.ENCODINGS, name, enc)


@pytest.fixture(scope="module")
def ragas_lab(tmp_path_factory):
    from rag_lab.lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("testset_ragas_ws"))
    lab.ingest_documents([{**d, "metadata": {}} for d in DOCS], kb="curie", progress=False)
    yield lab
    lab.workspace.close()


def _chat(srv, **kw):
    return ragas_chat_config("fake-ragas", srv.base_url, timeout=10, retries=0, concurrency=2, **kw)


# -- the conversion, no server ---------------------------------------------------------------


def _sample(q, ref, contexts, name="single_hop_specific_query_synthesizer"):
    return SimpleNamespace(
        synthesizer_name=name,
        eval_sample=SimpleNamespace(user_input=q, reference=ref, reference_contexts=contexts),
    )


CORPUS = [CorpusDoc(id=d["id"], title=d["title"], text=d["text"]) for d in DOCS]


def test_normalize_text_strips_hop_tags_and_whitespace():
    assert normalize_text("<2-hop>\n\n  Warsaw  is\nthe capital ") == "Warsaw is the capital"
    assert normalize_text("ﬁne\u00a0print") == "fine print"  # NFKC: ligature and no-break space


def test_gold_documents_by_context_text():
    marie, pierre, warsaw = (d.text for d in CORPUS)
    # a whole document (what ragas was fed), re-wrapped
    assert gold_documents([marie.replace(". ", ".\n")], CORPUS) == ["curie-marie"]
    # multi-hop contexts with their tags, in corpus order, each document once
    assert gold_documents([f"<1-hop>\n\n{warsaw}", f"<2-hop>\n\n{marie}", marie], CORPUS) == ["curie-marie", "warsaw"]
    # a piece of a document (a ragas split of a long one) belongs to it; a sentence in two documents to both
    assert gold_documents(["The Curie point, where a magnet"], CORPUS) == ["curie-pierre"]
    assert gold_documents(["Paris"], CORPUS) == ["curie-marie", "curie-pierre"]
    # one context in no document, or none at all: no gold, not a guess
    assert gold_documents([marie, "Marie Curie was born in Krakow."], CORPUS) is None
    assert gold_documents([], CORPUS) is None


def test_rows_from_samples_and_drop_counting():
    marie, pierre, warsaw = (d.text for d in CORPUS)
    samples = [
        _sample("Where was Marie Curie born?", "In Warsaw.", [marie]),
        _sample(" ", "x", [marie]),
        _sample("Who is Jacques?", float("nan"), [pierre]),
        _sample(
            "What links Warsaw and Curie?",
            "Her birthplace.",
            ["<1-hop>\n\n" + warsaw, "<2-hop>\n\n" + marie],
            "multi_hop_specific_query_synthesizer",
        ),
        _sample("What did Curie invent?", "The Curie engine.", ["Curie invented an engine in 1901."]),
        SimpleNamespace(synthesizer_name="x", eval_sample=float("nan")),
        ("single_hop_specific_query_synthesizer", None),
    ]
    rows, failed = rows_from_samples(samples)
    assert failed == 2 and len(rows) == 5
    assert rows[0] == RagasRow(
        "Where was Marie Curie born?", "In Warsaw.", (marie,), "single_hop_specific_query_synthesizer"
    )
    kept, dropped = convert_rows(rows, CORPUS)
    assert [(r.question, gold) for r, gold in kept] == [
        ("Where was Marie Curie born?", ["curie-marie"]),
        ("What links Warsaw and Curie?", ["curie-marie", "warsaw"]),
    ]
    assert kept[1][0].synthesizer == "multi_hop_specific_query_synthesizer"
    assert dropped == Counter({"no question": 1, "no answer": 1, "context not in the KB": 1})


def test_chat_config_from_flags_or_lab_config():
    jc = ragas_chat_config("m", "http://127.0.0.1:9/v1", timeout=7, retries=2, concurrency=3)
    assert (jc.model, jc.timeout, jc.max_retries, jc.concurrency) == ("m", 7.0, 2, 3)
    lab_cfg = {"models": {"chat": {"type": "openai", "model": "q", "base_url": "http://h/v1", "supports_vision": True}}}
    assert ragas_chat_config(None, None, lab_config=lab_cfg).model == "q"
    with pytest.raises(RagasError, match="OpenAI-compatible chat model"):
        ragas_chat_config(None, None, lab_config={"models": {"chat": {"type": "extractive"}}})


def test_preflight_names_the_missing_tiktoken_encoding(monkeypatch):
    import tiktoken

    def offline(name):
        raise ConnectionError("no network")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    with pytest.raises(RagasError, match="cl100k_base.*TIKTOKEN_CACHE_DIR"):
        check_ragas()


def test_ragas_missing_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ragas", None)  # import ragas -> ImportError
    with pytest.raises(RagasError, match=r"pip install 'rag_lab\[eval\]'"):
        check_ragas()


# -- end to end, fake server over loopback -----------------------------------------------------


def test_ragas_generator_end_to_end(ragas_lab, byte_tiktoken, tmp_path):
    script = RagasScript(fail_queries=1, copy_queries=1)
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([script] * 300))
        ds, report = build_ragas_testset(ragas_lab, "curie", 4, tmp_path / "out", _chat(srv), seed=3)
        requests = srv.requests_to(CHAT)
    # ragas' own prompts went to the fake, with rag_lab's model, seed and temperature
    assert {"StringIO", "NEROutput", "ThemesAndConcepts", "Persona", "GeneratedQueryAnswer"} <= set(script.counts)
    assert all(
        r.json["model"] == "fake-ragas" and r.json["seed"] == 3 and r.json["temperature"] == 0.0 for r in requests
    )
    assert report.model_calls == len(requests)
    # the scripted 500 on one query is one failed call and one sample short, never a crash
    assert report.errors == Counter({"model error": 1, "no sample": 1})
    assert any("HTTP 500" in e for e in report.error_examples)
    assert 1 <= report.kept <= 4 and report.kept == len(ds.queries)
    ids = {d["id"] for d in DOCS}
    assert {d.id for d in ds.corpus} == ids
    for q in ds.queries:
        md = q.metadata
        assert md["generator"] == "ragas" and md["synthetic"] is True and md["reviewed"] is False
        assert md["synthesizer"] in report.by_generator and md["model"] == "fake-ragas" and md["seed"] == 3
        assert set(q.gold_ids) <= ids and q.answers and q.answers[0]
        assert len(md["prompt_hash"]) == 16
        # the answer the fake wrote is the first sentence of the first context: of a gold document
        assert any(q.answers[0] in next(d["text"] for d in DOCS if d["id"] == g) for g in q.gold_ids)
    # the question that repeats a source sentence was dropped, and counted
    assert report.dropped["copies a source sentence"] == 1
    assert not any(q.question == q.answers[0] for q in ds.queries)
    saved = json.loads((tmp_path / "out" / REPORT_FILE).read_text())
    assert saved["generator"] == "ragas" and saved["generator_model"] == "fake-ragas" and saved["kept"] == report.kept
    assert load_dataset(tmp_path / "out").queries == ds.queries


def test_ragas_generator_down_server_writes_nothing(ragas_lab, byte_tiktoken, tmp_path):
    with FakeOpenAIServer() as srv:
        chat = _chat(srv)
    # the server is gone: the knowledge-graph stage fails, a clear error, no files
    with pytest.raises(RagasError, match="knowledge-graph stage failed"):
        build_ragas_testset(ragas_lab, "curie", 2, tmp_path / "out", chat, seed=0)
    assert not (tmp_path / "out").exists()


def test_cli_generator_ragas(ragas_lab, byte_tiktoken, tmp_path, capsys, monkeypatch):
    import sys

    from rag_lab.cli import main

    base = ["--workspace", str(ragas_lab.workspace.root), "testset", "--kb", "curie", "--n", "2", "--seed", "1"]
    with FakeOpenAIServer() as srv:
        srv.script(CHAT, *([RagasScript()] * 300))
        rc = main([*base, "--out", str(tmp_path / "o"), "--generator", "ragas", "--model", "fake-ragas",
                   "--base-url", srv.base_url, "--retries", "0"])  # fmt: skip
    assert rc == 0
    out, err = capsys.readouterr()
    assert "model 'fake-ragas'" in out and "_query_synthesizer" in out and "reviewed" in err
    assert {q.metadata["generator"] for q in load_dataset(tmp_path / "o").queries} == {"ragas"}
    # no chat endpoint (the default config's answerer is extractive): a clear refusal, nothing written
    assert main([*base, "--out", str(tmp_path / "p"), "--generator", "ragas"]) == 2
    assert "--generator ragas needs an OpenAI-compatible chat model" in capsys.readouterr().err
    # ragas missing: the message names the extra
    monkeypatch.setitem(sys.modules, "ragas", None)
    args = [
        *base,
        "--out",
        str(tmp_path / "q"),
        "--generator",
        "ragas",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]
    assert main(args) == 2
    assert "pip install 'rag_lab[eval]'" in capsys.readouterr().err
    assert not (tmp_path / "p").exists() and not (tmp_path / "q").exists()
