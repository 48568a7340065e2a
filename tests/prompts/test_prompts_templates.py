"""Prompt templates: the catalogue of spec §10.2 (ids, placeholders, output formats), placeholder
rendering (§10.1) and agent-level overrides."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_lab.prompts.templates import (
    PromptTemplates,
    TemplateError,
    default_templates,
    render_prompt_placeholders,
    resolve,
)
from rag_lab.types.intent import QueryIntent

T = default_templates()
NOW = dt.datetime(2024, 3, 4, 5, 6, 7)  # a Monday


def _ph(text: str) -> set[str]:
    return set(re.findall(r"\{\{(\w+)\}\}", text))


def test_every_text_ends_with_exactly_one_newline():
    for t in T.by_id.values():
        for part in (t.content, t.user):
            if part:
                assert part.endswith("\n") and not part.endswith("\n\n"), (t.source, t.id)


@pytest.mark.parametrize(
    "tid, allowed, required",
    [
        ("default_kb", {"language", "contexts", "query", "current_time", "current_week"}, {"language", "contexts"}),
        ("pure_chat", {"language", "current_time", "current_week"}, {"language"}),
        ("default_context", {"current_time", "current_week", "query"}, {"current_time", "current_week", "query"}),
        (
            "default_rewrite",
            {"language", "conversation", "query", "current_time", "current_week", "yesterday"},
            {"language", "conversation", "query"},
        ),
        ("default_fallback_prompt", {"query", "language", "kb_documents"}, {"query", "language", "kb_documents"}),
        ("default_session_title", {"language"}, {"language"}),
        ("default_keywords_extraction", {"language", "query"}, {"language", "query"}),
        (
            "default_generate_questions",
            {"context", "doc_name", "content", "question_count", "language"},
            {"context", "doc_name", "content", "question_count", "language"},
        ),
        ("default_summary", {"language"}, {"language"}),
    ],
)
def test_catalogue_placeholders(tid, allowed, required):
    used = T.placeholders(tid)
    assert required <= used <= allowed, used


def test_catalogue_formats():
    rw = T.get("default_rewrite")
    assert rw.content.endswith("## Conversation History\n{{conversation}}\n")
    assert "## User Question\n{{query}}" in rw.user and rw.user.rstrip().endswith("## JSON Output")
    for key in ('"rewrite_query"', '"intent"', '"image_description"'):
        assert key in rw.content
    # the image description is asked for last, so a cut reply keeps the rewrite and the intent
    assert rw.content.index('"image_description"') > rw.content.index('"intent"') > rw.content.index('"rewrite_query"')
    assert T.get("default_keywords_extraction").user == "Output:\n"
    assert "No textual content was extractable from this document.\n" in T.text("default_summary")
    assert set(T.intent_prompts()) == {
        "greeting",
        "chitchat",
        "follow_up",
        "image_only",
        "summarize",
        "web_search",
        "doc_only",
    }
    assert set(T.intent_prompts()) <= {i.value for i in QueryIntent}
    for tid in (
        "default_session_title",
        "default_keywords_extraction",
        "default_generate_questions",
        "default_summary",
    ):
        assert T.get(tid).default and T.get(tid).name


def test_render_fills_auto_values_only_when_used_and_leaves_unknowns():
    out = render_prompt_placeholders(
        "{{current_time}} {{current_week}} {{yesterday}} {{x}} {{query}}", {"query": "q"}, now=NOW
    )
    assert out == "2024-03-04 05:06:07 Monday 2024-03-03 {{x}} q"
    assert render_prompt_placeholders("{{current_time}}", {"current_time": "given"}, now=NOW) == "given"
    assert render_prompt_placeholders("", {"a": 1}) == ""


@given(st.text(alphabet="ab{}", max_size=12), st.text(alphabet="ab{}", max_size=12))
def test_render_is_single_pass(v1, v2):
    """A value holding ``{{b}}`` is never substituted again, whatever the key order."""
    out = render_prompt_placeholders("{{a}}|{{b}}", {"a": v1, "b": v2})
    assert out == f"{v1}|{v2}"


def test_resolve_overrides():
    base = T.text("default_kb")
    assert T.resolve("default_kb") == base == resolve("default_kb", None)
    assert T.resolve("default_kb", {"default_kb": "Agent prompt {{contexts}}"}) == "Agent prompt {{contexts}}"
    assert T.resolve("default_kb", {"default_kb": "   "}) == base  # blank does not win
    pair = {"default_rewrite": {"user": "U {{query}}"}}
    assert T.resolve("default_rewrite", pair, part="user") == "U {{query}}"
    assert T.resolve("default_rewrite", pair) == T.get("default_rewrite").content
    assert T.resolve("agent_only", {"agent_only": "mine"}) == "mine"
    assert T.resolve("agent_only", {"agent_only": ""}) == ""
    with pytest.raises(TemplateError, match="unknown prompt template id 'nope'"):
        T.resolve("nope", {})
    with pytest.raises(TemplateError, match="must be a string"):
        T.resolve("default_kb", {"default_kb": 3})
    with pytest.raises(TemplateError, match="part must be"):
        T.resolve("default_kb", part="system")


def test_bad_template_files_are_named(tmp_path):
    (tmp_path / "a.yaml").write_text("- id: x\n  content: |\n    hi\n", encoding="utf-8")
    (tmp_path / "b.yaml").write_text("- id: x\n  content: dup\n", encoding="utf-8")
    with pytest.raises(TemplateError, match=r"b.yaml: duplicate template id 'x' \(also in a.yaml\)"):
        PromptTemplates(tmp_path)
    (tmp_path / "b.yaml").write_text("- content: no id\n", encoding="utf-8")
    with pytest.raises(TemplateError, match="b.yaml: template #1 has no string 'id'"):
        PromptTemplates(tmp_path)
    with pytest.raises(TemplateError, match="not found"):
        PromptTemplates(tmp_path / "missing")
