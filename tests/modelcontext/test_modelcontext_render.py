"""Retrieval XML, substitution, message encoding, chat passage, protocol prompt (spec §4.11, §7.1–§7.3)."""

from __future__ import annotations

import json

import pytest

from rag_lab.modelcontext import (
    KnowledgeRow,
    Registry,
    chat_passage,
    encode_messages,
    protocol_prompt,
    render_knowledge_rows,
    render_retrieval_contexts,
    substitute_retrieval_contexts,
    with_protocol_prompt,
)
from rag_lab.modelcontext.escape import escape_attr, escape_text
from rag_lab.models.base import ChatMessage
from rag_lab.types.search_result import SearchResult


def _kr(cid: str, kid: str, content: str, **kw: object) -> SearchResult:
    return SearchResult(id=cid, knowledge_id=kid, knowledge_base_id="kb-main", content=content, **kw)  # type: ignore[arg-type]


def test_escapes() -> None:
    assert escape_attr("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d&#34;e&#39;f"
    assert escape_text("a&b<c>d\"e'f") == "a&amp;b&lt;c&gt;d\"e'f"


def test_knowledge_layout_two_chunks_of_one_document_and_one_of_another_byte_exact() -> None:
    r = Registry(True)
    results = [
        _kr("chunk-a1", "doc-A", "Alpha <b> & 'c'", knowledge_title='Guide "A" & co', chunk_index=3),
        _kr("chunk-b1", "doc-B", "Beta", knowledge_filename="b.pdf", chunk_index=0),
        _kr("chunk-a2", "doc-A", "Gamma\nline 2", knowledge_title='Guide "A" & co', chunk_index=4),
    ]
    xml = render_retrieval_contexts(results, r, faq_priority=False)
    assert xml == (
        '<retrieval type="knowledge" mode="semantic">\n'
        '  <document id="d1" kb="b1" title="Guide &#34;A&#34; &amp; co">\n'
        '    <chunk id="c1" index="3" view="full" type="text">\n'
        "      <content>Alpha &lt;b&gt; &amp; 'c'</content>\n"
        "    </chunk>\n"
        '    <chunk id="c3" index="4" view="full" type="text">\n'
        "      <content>Gamma\nline 2</content>\n"
        "    </chunk>\n"
        "  </document>\n"
        '  <document id="d2" kb="b1" title="b.pdf">\n'
        '    <chunk id="c2" index="0" view="full" type="text">\n'
        "      <content>Beta</content>\n"
        "    </chunk>\n"
        "  </document>\n"
        "</retrieval>"
    )
    # registration order: doc, KB, chunk per result
    assert r.document_id("d2") == "doc-B" and r.kb_id("b1") == "kb-main" and r.chunk("c2").chunk_id == "chunk-b1"  # type: ignore[union-attr]


def test_knowledge_row_without_document_empty_content_and_optional_parts() -> None:
    r = Registry(True)
    rows = [
        KnowledgeRow(chunk_id="lonely", chunk_index=0),
        KnowledgeRow(chunk_id="  "),  # skipped: no chunk ID
        KnowledgeRow(
            faq_id="faq-1",
            knowledge_id="doc-F",
            knowledge_title="FAQ",
            metadata="m<1>",
            question="Q?",
            match="M",
            content="C",
            answers=["A1", "A2 & more"],
            images=[("http://i/x.png", "cap"), ("", "no url")],
        ),
    ]
    assert render_knowledge_rows(rows, r) == (
        '<retrieval type="knowledge" mode="semantic">\n'
        "  <document>\n"
        '    <chunk id="c1" index="0" view="match">\n'
        "    </chunk>\n"
        "  </document>\n"
        '  <document id="d1" title="FAQ">\n'
        "    <metadata>m&lt;1&gt;</metadata>\n"
        '    <chunk id="c2" index="0" view="full" type="faq">\n'
        "      <question>Q?</question>\n"
        "      <match>M</match>\n"
        "      <content>C</content>\n"
        "      <answer>A1</answer>\n"
        "      <answer>A2 &amp; more</answer>\n"
        "      ![cap](http://i/x.png)\n"
        "    </chunk>\n"
        "  </document>\n"
        "</retrieval>"
    )
    assert render_knowledge_rows([KnowledgeRow()], Registry(True)) == ""


def test_web_layout_truncation_at_500_runes_and_escaping() -> None:
    r = Registry(True)
    long_snippet = "字" * 499 + "<>"  # 501 runes
    results = [
        SearchResult(
            id="https://ex.com/p#f",
            content=long_snippet,
            chunk_type="web_search",
            knowledge_title="It's <Ex>",
            metadata={"published_at": "2024-05-01"},
        ),
        SearchResult(
            id="https://ex.com/q", content="x" * 500, knowledge_source="WEB_SEARCH", knowledge_filename="q.html"
        ),
        SearchResult(id="", content="no url", chunk_type="web_search"),
    ]
    xml = render_retrieval_contexts(results, r, faq_priority=False)
    assert xml == (
        '<retrieval type="web" mode="search">\n'
        '  <page id="w1" title="It&#39;s &lt;Ex&gt;">\n'
        '    <evidence type="search_summary" verified="false" />\n'
        '    <match truncated="true">' + "字" * 499 + "&lt;</match>\n"
        "    <published>2024-05-01</published>\n"
        "  </page>\n"
        '  <page id="w2" title="q.html">\n'
        '    <evidence type="search_summary" verified="false" />\n'
        "    <match>" + "x" * 500 + "</match>\n"
        "  </page>\n"
        "</retrieval>"
    )
    assert r.web("w1").url == "https://ex.com/p#f"  # type: ignore[union-attr]


def test_custom_web_snippet_limit() -> None:
    xml = render_retrieval_contexts(
        [SearchResult(id="https://ex.com/", content="abcdef", chunk_type="web_search")],
        Registry(True),
        faq_priority=False,
        web_snippet_max_runes=3,
    )
    assert '<match truncated="true">abc</match>' in xml


def test_post_processing_compaction_and_resource_encoding_order() -> None:
    r = Registry(True)
    results = [
        _kr("chunk-a1", "doc-A", "see chunk-b1 and https://ex.com/p and ![](minio://b/i.png)", knowledge_title="A"),
        _kr("chunk-b1", "doc-B", "mentions doc-A", knowledge_title="B"),
        SearchResult(id="https://ex.com/p", content="cites https://ex.com/p and chunk-a1", chunk_type="web_search"),
    ]
    xml = render_retrieval_contexts(results, r, faq_priority=False)
    knowledge, web = xml.split('\n<retrieval type="web"')
    # other chunk IDs are compacted inside content; the web URL is not yet registered there
    assert "<content>see c2 and https://ex.com/p and ![](res://0001)</content>" in knowledge
    assert "<content>mentions d1</content>" in knowledge
    assert "<match>cites w1 and c1</match>" in web
    assert r.resource_value("res://0001") == "minio://b/i.png"


def test_faq_priority_puts_faq_first() -> None:
    r = Registry(True)
    results = [
        _kr("t-1", "doc-T", "text", knowledge_title="T"),
        _kr("f-1", "doc-F", "faq", knowledge_title="F", chunk_type="faq"),
    ]
    xml = render_retrieval_contexts(results, r, faq_priority=True)
    assert r.chunk_handle("f-1") == "c1" and r.chunk_handle("t-1") == "c2"
    assert xml.index('title="F"') < xml.index('title="T"')
    r2 = Registry(True)
    render_retrieval_contexts(results, r2, faq_priority=False)
    assert r2.chunk_handle("t-1") == "c1"


def test_knowledge_and_web_blocks_joined_with_newline_and_empty_input() -> None:
    r = Registry(True)
    xml = render_retrieval_contexts(
        [_kr("chunk-k", "doc-d", "body"), SearchResult(id="https://ex.com/", chunk_type="web_search")],
        r,
        faq_priority=False,
    )
    assert '</retrieval>\n<retrieval type="web" mode="search">\n' in xml
    assert not xml.endswith("\n")
    assert render_retrieval_contexts([], Registry(True), faq_priority=False) == ""


def test_substitution_replaces_in_system_and_user_else_prepends() -> None:
    msgs = [ChatMessage("system", "S <ctx>R</ctx> R"), ChatMessage("user", "U R")]
    out = substitute_retrieval_contexts(msgs, "R", "XML")
    assert [m.content for m in out] == ["S <ctx>XML</ctx> XML", "U XML"]
    assert msgs[0].content == "S <ctx>R</ctx> R"  # input untouched
    out = substitute_retrieval_contexts(msgs, "absent", "XML")
    assert [m.content for m in out] == ["S <ctx>R</ctx> R", "XML\n\nU R"]
    out = substitute_retrieval_contexts(msgs, "", "XML")
    assert out[-1].content == "XML\n\nU R"
    # middle messages are not checked
    msgs3 = [ChatMessage("system", "S"), ChatMessage("assistant", "R"), ChatMessage("user", "U")]
    assert substitute_retrieval_contexts(msgs3, "R", "X")[1].content == "R"
    assert substitute_retrieval_contexts([], "R", "X") == []


def test_encode_messages_resources_everywhere_citations_only_in_assistant() -> None:
    r = Registry(True)
    r.register_search_results([_kr("chunk-now", "doc-N", "c")])
    msgs = [
        ChatMessage("system", 'sys minio://b/s.png <kb doc="x" chunk_id="sys-chunk" />'),
        ChatMessage("user", "user minio://b/s.png"),
        ChatMessage(
            "assistant",
            'Old <kb doc="Guide &amp; co" chunk_id="chunk-old" kb_id="kb-9" /> and '
            '<kb doc="N" chunk_id="chunk-now" /> and <web url="https://ex.com/a#b" title="Ex" /> '
            '<kb doc="no id" /> <web title="no url" /> <kb chunk_id="c1" />',
            reasoning_content='think <kb chunk_id="chunk-old" /> resource://BBBBBBBBBBBBBBBBBBBBBB',
        ),
    ]
    out = encode_messages(msgs, r)
    assert out[0].content == 'sys res://0001 <kb doc="x" chunk_id="sys-chunk" />'
    assert out[1].content == "user res://0001"
    assert out[2].content == (
        'Old <ref id="c2"/> and <ref id="c1"/> and <ref id="w1"/> <kb doc="no id" /> <web title="no url" /> '
        '<ref id="c1"/>'
    )
    assert out[2].reasoning_content == 'think <ref id="c2"/> res://0002'
    old = r.chunk("c2")
    assert old is not None and (old.chunk_id, old.title, old.kb_id) == ("chunk-old", "Guide & co", "kb-9")
    assert r.web("w1").title == "Ex"  # type: ignore[union-attr]
    assert r.chunk_handle("sys-chunk") == ""  # system text is never registered
    assert msgs[2].content.startswith("Old <kb")  # copies


def test_encode_messages_unknown_handle_shaped_chunk_id_gives_empty_ref() -> None:
    r = Registry(True)
    out = encode_messages([ChatMessage("assistant", '<kb chunk_id="c7" />')], r)
    assert out[0].content == '<ref id=""/>'


def test_chat_passage_without_images() -> None:
    assert chat_passage(SearchResult(content="", image_info="")) == ""
    assert chat_passage(SearchResult(content="plain text")) == "plain text"


def test_chat_passage_with_image_info() -> None:
    pytest.importorskip("rag_lab.searchutil.imageinfo")
    info = json.dumps([{"url": "http://img/a.png", "caption": "A cat", "ocr_text": "MEOW"}])
    result = SearchResult(content="Look ![cat](http://img/a.png) here", image_info=info)
    assert chat_passage(result) == (
        "Look ![cat](http://img/a.png)\n\n> **Image caption:** A cat\n> \n> **Image text (OCR):** MEOW here"
    )


def test_protocol_prompt_variants() -> None:
    on = protocol_prompt(Registry(True))
    off = protocol_prompt(Registry(False))
    for text in (on, off):
        assert text.startswith("\n\n## Source handling protocol (system-owned)\n")
        assert "\n\n## Resource handle protocol (system-owned)\n" in text
        assert "res://NNNN" in text and "iN" in text
        for handle in ("cN", "wN", "dN", "bN"):
            assert handle in text
    assert '<ref id="cN"/>' in on and '<ref id="wN"/>' in on and "switched on" in on
    assert "switched off" in off and '<ref id="cN"/>' not in off
    assert Registry(True).protocol_prompt() == on


def test_with_protocol_prompt() -> None:
    r = Registry(True)
    out = with_protocol_prompt([ChatMessage("system", "Be nice. \n\t"), ChatMessage("user", "q")], r)
    assert out[0].content == "Be nice." + protocol_prompt(r)
    out = with_protocol_prompt([ChatMessage("user", "q")], r)
    assert out[0].role == "system" and out[0].content == protocol_prompt(r).strip()
    assert out[1].content == "q"
