"""Model-facing rendering of retrieval results and message encoding (spec §4.11 passage, §7.2, §7.3)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_lab.modelcontext.citations import compact_public_citations
from rag_lab.modelcontext.escape import escape_attr, escape_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.modelcontext.registry import Registry
    from rag_lab.models.base import ChatMessage
    from rag_lab.types.search_result import SearchResult

KNOWLEDGE_OPEN = '<retrieval type="knowledge" mode="semantic">\n'
WEB_OPEN = '<retrieval type="web" mode="search">\n'
RETRIEVAL_CLOSE = "</retrieval>"
FAQ_CHUNK_TYPE = "faq"


def chat_passage(result: SearchResult) -> str:
    """The text the chat model sees for a result (§4.11 "Chat passage").

    ``""`` when content and image info are both empty, the content when there is no image
    info, else the content enriched with image captions/OCR (§6.11).
    """
    if not result.content and not result.image_info:
        return ""
    if not result.image_info:
        return result.content
    from rag_lab.searchutil.imageinfo import enrich_content_with_image_info_for_chat

    return enrich_content_with_image_info_for_chat(result.content, result.image_info)


@dataclass(slots=True)
class KnowledgeRow:
    """One row of a knowledge "tool result". The chat pipeline fills only the first seven fields."""

    chunk_id: str = ""
    knowledge_id: str = ""
    knowledge_base_id: str = ""
    knowledge_title: str = ""
    chunk_index: int = 0
    chunk_type: str = ""
    content: str = ""
    faq_id: str = ""
    match: str = ""
    question: str = ""
    answers: list[str] = field(default_factory=list)
    metadata: str = ""
    images: list[tuple[str, str]] = field(default_factory=list)  # (url, caption)


@dataclass(slots=True)
class WebRow:
    """One row of a web-search "tool result"."""

    url: str = ""
    title: str = ""
    snippet: str = ""
    published_at: str = ""


def _first_non_blank(*values: str) -> str:
    for value in values:
        if value and value.strip():
            return value
    return ""


def render_knowledge_rows(rows: Iterable[KnowledgeRow], registry: Registry) -> str:
    """The ``<retrieval type="knowledge" mode="semantic">`` block (§7.2), or ``""`` without usable rows.

    Rows are grouped by document handle (``"chunk:"+handle`` without one), groups in order of
    first appearance. Handles, ``index`` and ``view`` are raw, other attributes 5-char escaped,
    element text text-escaped. No trailing newline.
    """
    groups: dict[str, list[tuple[KnowledgeRow, str, str, str, str]]] = {}
    for row in rows:
        chunk_id = _first_non_blank(row.chunk_id, row.faq_id)
        if not chunk_id:
            continue
        chunk_type = row.chunk_type or (FAQ_CHUNK_TYPE if row.faq_id else "")
        chunk_handle = registry.register_chunk(
            chunk_id, row.knowledge_id, row.knowledge_base_id, row.knowledge_title, row.chunk_index, chunk_type
        )
        doc_handle = registry.register_document(row.knowledge_id)
        kb_handle = registry.register_kb(row.knowledge_base_id)
        key = doc_handle if doc_handle else "chunk:" + chunk_handle
        groups.setdefault(key, []).append((row, chunk_handle, doc_handle, kb_handle, chunk_type))
    if not groups:
        return ""
    out = [KNOWLEDGE_OPEN]
    for members in groups.values():
        first, _, doc_handle, kb_handle, _ = members[0]
        attrs = ""
        if doc_handle:
            attrs += f' id="{doc_handle}"'
        if kb_handle:
            attrs += f' kb="{kb_handle}"'
        if first.knowledge_title:
            attrs += f' title="{escape_attr(first.knowledge_title)}"'
        out.append(f"  <document{attrs}>\n")
        if first.metadata:
            out.append(f"    <metadata>{escape_text(first.metadata)}</metadata>\n")
        for row, chunk_handle, _, _, chunk_type in members:
            view = "full" if row.content else "match"
            type_attr = f' type="{escape_attr(chunk_type)}"' if chunk_type else ""
            out.append(f'    <chunk id="{chunk_handle}" index="{row.chunk_index}" view="{view}"{type_attr}>\n')
            if row.question:
                out.append(f"      <question>{escape_text(row.question)}</question>\n")
            if row.match:
                out.append(f"      <match>{escape_text(row.match)}</match>\n")
            if row.content:
                out.append(f"      <content>{escape_text(row.content)}</content>\n")
            for answer in row.answers:
                out.append(f"      <answer>{escape_text(answer)}</answer>\n")
            for url, caption in row.images:
                if url:
                    out.append(f"      ![{escape_text(caption)}]({escape_text(url)})\n")
            out.append("    </chunk>\n")
        out.append("  </document>\n")
    out.append(RETRIEVAL_CLOSE)
    return "".join(out)


def render_web_rows(rows: Iterable[WebRow], registry: Registry, snippet_max_runes: int = 500) -> str:
    """The ``<retrieval type="web" mode="search">`` block (§7.2), or ``""`` when no row has a URL.

    Each page is registered (``wN``); the snippet is cut to ``snippet_max_runes`` code points,
    marked ``truncated="true"`` when cut.
    """
    pages: list[str] = []
    for row in rows:
        if not row.url or not row.url.strip():
            continue
        handle = registry.register_web(row.url, row.title)
        snippet = row.snippet
        truncated = len(snippet) > snippet_max_runes
        if truncated:
            snippet = snippet[:snippet_max_runes]
        match_attr = ' truncated="true"' if truncated else ""
        lines = [
            f'  <page id="{handle}" title="{escape_attr(row.title)}">\n',
            '    <evidence type="search_summary" verified="false" />\n',
            f"    <match{match_attr}>{escape_text(snippet)}</match>\n",
        ]
        if row.published_at:
            lines.append(f"    <published>{escape_text(row.published_at)}</published>\n")
        lines.append("  </page>\n")
        pages.append("".join(lines))
    if not pages:
        return ""
    return WEB_OPEN + "".join(pages) + RETRIEVAL_CLOSE


def _post_process(text: str, registry: Registry) -> str:
    return registry.encode_resources(registry.compact_known_text(text))


def _title(result: SearchResult) -> str:
    return result.knowledge_title or result.knowledge_filename


def render_retrieval_contexts(
    results: Sequence[SearchResult],
    registry: Registry,
    faq_priority: bool,
    web_snippet_max_runes: int = 500,
) -> str:
    """The retrieval XML that replaces ``rendered_contexts`` in the model messages (§7.2 steps 1–6).

    Order (FAQ first under FAQ priority), split into knowledge and web items, register the
    knowledge items, render the knowledge block then the web block (each only when it has
    items), compact known IDs and resource-encode each block, join with ``"\\n"``.
    """
    items = [r for r in results if r is not None]
    if not items:
        return ""
    if faq_priority:
        items = [r for r in items if r.chunk_type == FAQ_CHUNK_TYPE] + [
            r for r in items if r.chunk_type != FAQ_CHUNK_TYPE
        ]
    knowledge = [r for r in items if not r.is_web()]
    web = [r for r in items if r.is_web()]
    registry.register_search_results(knowledge)
    blocks: list[str] = []
    if knowledge:
        rows = [
            KnowledgeRow(
                chunk_id=r.id,
                knowledge_id=r.knowledge_id,
                knowledge_base_id=r.knowledge_base_id,
                knowledge_title=_title(r),
                chunk_index=r.chunk_index,
                chunk_type=r.chunk_type,
                content=chat_passage(r),
            )
            for r in knowledge
        ]
        # compacted before any web URL is registered
        blocks.append(_post_process(render_knowledge_rows(rows, registry), registry))
    if web:
        rows_w = [
            WebRow(
                url=r.id, title=_title(r), snippet=r.content, published_at=(r.metadata or {}).get("published_at", "")
            )
            for r in web
        ]
        blocks.append(_post_process(render_web_rows(rows_w, registry, web_snippet_max_runes), registry))
    return "\n".join(blocks)


def _copy_message(message: ChatMessage) -> ChatMessage:
    return dataclasses.replace(message, images=list(message.images))


def substitute_retrieval_contexts(
    messages: Sequence[ChatMessage], rendered_contexts: str, xml: str
) -> list[ChatMessage]:
    """Put the retrieval XML where ``rendered_contexts`` was (§7.2 "Substitution into the messages").

    Checks the first and then the last message; every occurrence is replaced in each message
    that contains it. When neither does, ``xml + "\\n\\n"`` is prepended to the last message.
    Returns copies; the input is not modified.
    """
    out = [_copy_message(m) for m in messages]
    if not out:
        return out
    replaced = False
    for index in dict.fromkeys((0, len(out) - 1)):
        if rendered_contexts and rendered_contexts in out[index].content:
            out[index].content = out[index].content.replace(rendered_contexts, xml)
            replaced = True
    if not replaced:
        out[-1].content = xml + "\n\n" + out[-1].content
    return out


def encode_messages(messages: Sequence[ChatMessage], registry: Registry) -> list[ChatMessage]:
    """Model-facing copies of the messages (§7.3, chat roles).

    Every message's content and reasoning is resource-encoded (``res://NNNN``); assistant
    messages then have their public ``<kb …/>`` / ``<web …/>`` citations folded into
    ``<ref id="…"/>``. System and user messages are only resource-encoded.
    """
    out = [_copy_message(m) for m in messages]
    for message in out:
        message.content = registry.encode_resources(message.content)
        message.reasoning_content = registry.encode_resources(message.reasoning_content)
    for message in out:
        if message.role == "assistant":
            message.content = compact_public_citations(message.content, registry)
            message.reasoning_content = compact_public_citations(message.reasoning_content, registry)
    return out
