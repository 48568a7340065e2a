"""Streaming output decoder (spec §7.5): one per text channel (answer, thinking).

``StreamDecoder.feed(chunk)`` runs the chunk through four stages and returns what can be
released now; ``flush()`` cascades every stage's held tail through the later stages.

1. resource stage – holds a possible partial registered ``res://`` handle, restores known ones;
2. citation stage – holds a possible partial ``<ref``/``<kb``/``<web`` tag, expands ``<ref/>``,
   drops model-written ``<kb>``/``<web>`` tags;
3. issue-handle stage – holds a trailing ``i``/``i<digits>`` word, decodes registered ``iN``
   handles at word boundaries (nothing in the chat pipeline registers issues, so there it only
   delays such a tail; its total output equals its input);
4. orphan-resource stage – holds a possible partial ``res://<digits>`` and strips such tokens.

End of stream (spec Appendix B #14 drops every held fragment; rag_lab keeps text): a trailing bare
prefix of a tag name (``<``, ``<r``, ``<re``, ``<ref``, ``<k``, ``<w``, …) and a trailing ``res:`` /
``res:/`` are ordinary text and are released; a started tag (``<ref id="c1``, ``<web ``) and a
partial handle (``res://``, ``res://12``) are dropped, as upstream does
(``docs/differences.md``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rag_lab.modelcontext.citations import REF_STRICT_RE, expand_citations
from rag_lab.modelcontext.resources import RESOURCE_PREFIX, strip_orphan_resource_handles

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.modelcontext.registry import Registry

_TAG_NAMES = ("ref", "kb", "web")
_TAG_DELIMS = frozenset(" \t\r\n>")
_ISSUE_TAIL_RE = re.compile(r"i[0-9]*")
_DIGITS_RE = re.compile(r"[0-9]*")
_WORDISH = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _is_named_tag_start(rest: str, name: str) -> bool:
    """``rest`` (case-insensitively) starts with ``<name`` followed by end, space, tab, CR, LF or ``>``."""
    prefix = "<" + name
    low = rest[: len(prefix) + 1].lower()
    if not low.startswith(prefix):
        return False
    return len(low) == len(prefix) or low[len(prefix)] in _TAG_DELIMS


def _is_bare_tag_prefix(rest: str) -> bool:
    """``rest`` is ``<`` plus at most a tag name's letters (no attributes, no space)."""
    return any(len(rest) <= len("<" + n) and ("<" + n).startswith(rest.lower()) for n in _TAG_NAMES)


def is_possible_source_tag(rest: str) -> bool:
    """Could ``rest`` (text starting at a ``<``) still be, or already be, a ``<ref``/``<kb``/``<web`` tag?"""
    for name in _TAG_NAMES:
        prefix = "<" + name
        if len(rest) <= len(prefix) and prefix.startswith(rest.lower()):
            return True
        if _is_named_tag_start(rest, name):
            return True
    return False


class ResourceStage:
    """Stage 1: restore registered ``res://`` handles, holding back a possible partial one."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._pending = ""

    def _holdback(self, data: str) -> int:
        best = 0
        for handle in self._registry.resource_handles():
            for n in range(min(len(handle) - 1, len(data)), best, -1):
                if data.endswith(handle[:n]):
                    best = n
                    break
        return best

    def feed(self, chunk: str) -> str:
        data = self._pending + chunk
        self._pending = ""
        hold = self._holdback(data)
        if hold:
            self._pending = data[-hold:]
            data = data[:-hold]
        return self._registry.restore_resources(data)

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        return self._registry.restore_resources(pending)


class CitationStage:
    """Stage 2: expand complete ``<ref/>`` tags, drop ``<kb>``/``<web>`` tags, hold partial ones."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._pending = ""

    def feed(self, chunk: str) -> str:
        buf = self._pending + chunk
        self._pending = ""
        out: list[str] = []
        last_gt = buf.rfind(">")
        i = 0
        n = len(buf)
        while i < n:
            lt = buf.find("<", i)
            if lt < 0:
                out.append(buf[i:])
                break
            out.append(buf[i:lt])
            i = lt
            # is_possible_source_tag needs the whole rest only when it is short
            head = buf[i : i + 5] if n - i > 5 else buf[i:]
            possible = (
                is_possible_source_tag(head)
                if n - i <= 5
                else any(_is_named_tag_start(head, name) for name in _TAG_NAMES)
            )
            if possible and last_gt < i:
                self._pending = buf[i:]
                break
            if _is_named_tag_start(head, "ref"):
                end = buf.find(">", i)
                if end < 0:  # unreachable after the check above; kept for clarity
                    self._pending = buf[i:]
                    break
                tag = buf[i : end + 1]
                if REF_STRICT_RE.search(tag):
                    out.append(expand_citations(tag, self._registry))
                i = end + 1
                continue
            if _is_named_tag_start(head, "kb") or _is_named_tag_start(head, "web"):
                end = buf.find(">", i)
                if end < 0:
                    self._pending = buf[i:]
                    break
                i = end + 1
                continue
            out.append("<")
            i += 1
        return "".join(out)

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        if is_possible_source_tag(pending):
            # a bare "<", "<re", "<kb" … is text the model wrote; a started tag is broken markup
            return pending if _is_bare_tag_prefix(pending) else ""
        return expand_citations(pending, self._registry)


class IssueStage:
    """Stage 3: decode registered ``iN`` handles, holding a trailing ``i``/``i<digits>`` word."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._pending = ""

    def feed(self, chunk: str) -> str:
        data = self._pending + chunk
        self._pending = ""
        start = len(data)
        while start > 0 and data[start - 1] in _WORDISH:
            start -= 1
        run = data[start:]
        if run and _ISSUE_TAIL_RE.fullmatch(run):
            self._pending = run
            data = data[:start]
        return self._registry.decode_issue_handles(data)

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        return self._registry.decode_issue_handles(pending)


class OrphanResourceStage:
    """Stage 4: strip ``res://<digits>`` tokens, holding a possible partial one."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, chunk: str) -> str:
        data = self._pending + chunk
        self._pending = ""
        cut = len(data)
        for k in range(len(RESOURCE_PREFIX) - 1, 0, -1):  # proper prefixes, longest first
            if data.endswith(RESOURCE_PREFIX[:k]):
                cut = len(data) - k
                break
        last = data.rfind(RESOURCE_PREFIX)
        if last >= 0 and _DIGITS_RE.fullmatch(data, last + len(RESOURCE_PREFIX)):
            cut = min(cut, last)
        self._pending = data[cut:]
        return strip_orphan_resource_handles(data[:cut])

    def flush(self) -> str:
        pending, self._pending = self._pending, ""
        if pending in ("res:", "res:/"):  # not a handle: text (upstream drops it, B.14)
            return pending
        if pending.startswith(RESOURCE_PREFIX) and _DIGITS_RE.fullmatch(pending, len(RESOURCE_PREFIX)):
            return ""
        return strip_orphan_resource_handles(pending)


class StreamDecoder:
    """The four-stage decoder for one streamed text channel."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._resource = ResourceStage(registry)
        self._citation = CitationStage(registry)
        self._issue = IssueStage(registry)
        self._orphan = OrphanResourceStage()

    def feed(self, chunk: str) -> str:
        """Decode a chunk; returns the text that can be released now (possibly ``""``)."""
        text = self._resource.feed(chunk)
        text = self._citation.feed(text)
        text = self._issue.feed(text)
        return self._orphan.feed(text)

    def flush(self) -> str:
        """End of stream: push every stage's held tail through the later stages."""
        text = self._resource.flush()
        text = self._citation.feed(text) + self._citation.flush()
        text = self._issue.feed(text) + self._issue.flush()
        return self._orphan.feed(text) + self._orphan.flush()
