"""Citation expansion and compaction (spec §7.3 "Compacting public citations", §7.4).

The model cites with private ``<ref id="cN"/>`` / ``<ref id="wN"/>`` tags; decoding turns
them into the public ``<kb …/>`` / ``<web …/>`` tags, fail-closed. History answers carrying
public tags are folded back into ``<ref/>`` before they reach the model.

Regex notes: the upstream patterns are RE2, whose ``\\s`` is ``[\\t\\n\\f\\r ]`` and whose ``\\b``
is ASCII; both are spelled out explicitly here. Case-insensitive matching stays Unicode-aware
(RE2's ``(?i)`` also folds e.g. the Kelvin sign onto ``k``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rag_lab.modelcontext.escape import escape_attr, unescape

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.modelcontext.registry import Registry

_WS = r"[\t\n\f\r ]"
_NOT_WORD_BEFORE = r"(?<![0-9A-Za-z_])"
_NOT_WORD_AFTER = r"(?![0-9A-Za-z_])"

#: Model-written public tags (removed from output): ``<kb`` / ``<web`` then whitespace or end.
MODEL_KB_TAG_RE = re.compile(rf"<kb(?:{_WS}|\Z)[^>]*(?:>|\Z)", re.IGNORECASE | re.DOTALL)
MODEL_WEB_TAG_RE = re.compile(rf"<web(?:{_WS}|\Z)[^>]*(?:>|\Z)", re.IGNORECASE | re.DOTALL)
#: Any ``<ref…>`` candidate, closed or running to the end of the text.
REF_CANDIDATE_RE = re.compile(rf"<ref(?:{_WS}|\Z)[^>]*(?:>|\Z)", re.IGNORECASE | re.DOTALL)
#: The only accepted citation form: double quotes and a closing ``>``.
REF_STRICT_RE = re.compile(rf'<ref{_WS}+id{_WS}*={_WS}*"([^"]+)"{_WS}*/?>', re.IGNORECASE)

#: Public tags in history answers (compacted back to ``<ref/>``).
PUBLIC_KB_TAG_RE = re.compile(rf"<kb{_NOT_WORD_AFTER}[^>]*>", re.IGNORECASE | re.DOTALL)
PUBLIC_WEB_TAG_RE = re.compile(rf"<web{_NOT_WORD_AFTER}[^>]*>", re.IGNORECASE | re.DOTALL)


def _attr_re(name: str, allow_empty: bool) -> re.Pattern[str]:
    body = r'[^"]*' if allow_empty else r'[^"]+'
    return re.compile(rf'{_NOT_WORD_BEFORE}{name}{_WS}*={_WS}*"({body})"', re.IGNORECASE)


_DOC_ATTR = _attr_re("doc", True)
_CHUNK_ATTR = _attr_re("chunk_id", False)
_KB_ATTR = _attr_re("kb_id", True)
_URL_ATTR = _attr_re("url", False)
_TITLE_ATTR = _attr_re("title", True)


def _attr(pattern: re.Pattern[str], tag: str) -> str:
    m = pattern.search(tag)
    return unescape(m.group(1)) if m else ""


def _expand_ref(match: re.Match[str], registry: Registry) -> str:
    strict = REF_STRICT_RE.search(match.group(0))
    if strict is None:
        return ""
    handle = strict.group(1).lower()
    ref = registry.chunk(handle)
    if ref is not None:
        out = f'<kb doc="{escape_attr(ref.title)}" chunk_id="{escape_attr(ref.chunk_id)}"'
        if ref.kb_id:
            out += f' kb_id="{escape_attr(ref.kb_id)}"'
        return out + " />"
    web = registry.web(handle)
    if web is not None:
        return f'<web url="{escape_attr(web.url)}" title="{escape_attr(web.title)}" />'
    return ""


def expand_citations(text: str, registry: Registry) -> str:
    """§7.4 step 3: drop model-written ``<kb>``/``<web>`` tags, then expand or drop every ``<ref…>``.

    Chunk handles become ``<kb doc=… chunk_id=… [kb_id=…] />``, web handles
    ``<web url=… title=… />``; anything else (``dN``, ``bN``, unknown, malformed) is removed.
    With citations disabled every ``<ref…>`` candidate is removed.
    """
    if not text:
        return text
    text = MODEL_KB_TAG_RE.sub("", text)
    text = MODEL_WEB_TAG_RE.sub("", text)
    if not registry.citations_enabled:
        return REF_CANDIDATE_RE.sub("", text)
    return REF_CANDIDATE_RE.sub(lambda m: _expand_ref(m, registry), text)


def decode_output_text(text: str, registry: Registry) -> str:
    """Decode complete model output (§7.4): restore resources, strip orphans, expand citations, issues."""
    if not text:
        return text
    text = registry.restore_resources(text)
    from rag_lab.modelcontext.resources import strip_orphan_resource_handles

    text = strip_orphan_resource_handles(text)
    text = expand_citations(text, registry)
    return registry.decode_issue_handles(text)


#: Alias kept for the seed's vocabulary (``ExpandText``).
expand_text = decode_output_text


def compact_public_citations(text: str, registry: Registry) -> str:
    """Fold public ``<kb …/>`` / ``<web …/>`` tags of a history answer into ``<ref id="…"/>`` (§7.3).

    A ``<kb>`` tag without a non-empty ``chunk_id`` (or a ``<web>`` tag without ``url``) is left as is.
    Registration may return ``""`` (handle-shaped IDs), giving ``<ref id=""/>``.
    """
    if not text:
        return text

    def _kb(m: re.Match[str]) -> str:
        tag = m.group(0)
        chunk_id = _attr(_CHUNK_ATTR, tag)
        if not chunk_id:
            return tag
        handle = registry.register_chunk(chunk_id, kb_id=_attr(_KB_ATTR, tag), title=_attr(_DOC_ATTR, tag))
        return f'<ref id="{handle}"/>'

    def _web(m: re.Match[str]) -> str:
        tag = m.group(0)
        url = _attr(_URL_ATTR, tag)
        if not url:
            return tag
        handle = registry.register_web(url, _attr(_TITLE_ATTR, tag))
        return f'<ref id="{handle}"/>'

    text = PUBLIC_KB_TAG_RE.sub(_kb, text)
    return PUBLIC_WEB_TAG_RE.sub(_web, text)


def cited_chunk_ids(expanded_text: str) -> list[str]:
    """Chunk IDs of the ``<kb … chunk_id="…" />`` tags in decoded output: unescaped, in order, unique."""
    seen: dict[str, None] = {}
    for m in PUBLIC_KB_TAG_RE.finditer(expanded_text or ""):
        chunk_id = _attr(_CHUNK_ATTR, m.group(0))
        if chunk_id:
            seen.setdefault(chunk_id, None)
    return list(seen)


def cited_web_urls(expanded_text: str) -> list[str]:
    """URLs of the ``<web url="…" />`` tags in decoded output: unescaped, in order, unique."""
    seen: dict[str, None] = {}
    for m in PUBLIC_WEB_TAG_RE.finditer(expanded_text or ""):
        url = _attr(_URL_ATTR, m.group(0))
        if url:
            seen.setdefault(url, None)
    return list(seen)
