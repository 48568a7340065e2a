"""The system-owned source/citation/resource protocol appended to the system prompt (spec §7.1)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.modelcontext.registry import Registry
    from rag_lab.models.base import ChatMessage

SOURCE_SECTION = (
    "## Source handling protocol (system-owned)\n"
    "The retrieved material names its sources with short handles that are valid for this answer only: "
    "cN is a knowledge chunk, wN is a web page, dN is a document and bN is a knowledge base.\n"
    "- dN and bN exist only to be passed as tool arguments when a tool asks for a document or a knowledge base.\n"
    "- Never show the user a raw identifier (chunk, document or knowledge-base ID) or any source handle. "
    "Image URLs taken from the retrieved material are not identifiers: keep them exactly as given."
)

CITATIONS_ENABLED_PART = (
    "Citations are switched on for this answer. To cite a knowledge chunk write exactly "
    '<ref id="cN"/>; to cite a web page write exactly <ref id="wN"/>.\n'
    "- Use only handles that appear in the context you were given; never make one up.\n"
    "- A dN or bN handle is never a citation.\n"
    "- Do not write <kb> or <web> tags yourself: the system builds them from your <ref/> tags.\n"
    "- Put each <ref/> on the same line as the claim it supports, right next to it, not in a list at the end.\n"
    "- These citation rules take precedence over any other citation format asked for elsewhere."
)

CITATIONS_DISABLED_PART = (
    "Citations are switched off for this answer. Write no <ref>, <kb> or <web> tags, "
    "no raw source URLs and no source handles as citations.\n"
    "- These rules take precedence over any other instruction that asks for citations."
)

RESOURCE_SECTION = (
    "## Resource handle protocol (system-owned)\n"
    "Stored files and some wiki pages appear as handles of the form res://NNNN, and wiki issues as iN. "
    "They stand for the real resources of this request only.\n"
    "- Wherever you use one (a link, an image, a tool argument), copy it character for character.\n"
    "- Never invent a handle and never change its digits."
)


def protocol_prompt(registry: Registry) -> str:
    """The three-part protocol: source handling, the citation rules (enabled or disabled), resources.

    Starts with ``"\\n\\n## Source handling protocol (system-owned)"``; parts are separated by blank lines.
    """
    citations = CITATIONS_ENABLED_PART if registry.citations_enabled else CITATIONS_DISABLED_PART
    return "\n\n" + SOURCE_SECTION + "\n\n" + citations + "\n\n" + RESOURCE_SECTION


def with_protocol_prompt(messages: Sequence[ChatMessage], registry: Registry) -> list[ChatMessage]:
    """A copy of ``messages`` with the protocol prompt attached to the system message.

    A leading system message is right-trimmed (spaces, tabs, CR, LF) and gets the prompt
    appended; otherwise a new system message holding the trimmed prompt is inserted first
    (spec §3.6 step 4, §4.12.2 step 6.2).
    """
    from rag_lab.models.base import ChatMessage

    out = [dataclasses.replace(m, images=list(m.images)) for m in messages]
    prompt = protocol_prompt(registry)
    if out and out[0].role == "system":
        out[0].content = out[0].content.rstrip(" \t\r\n") + prompt
    else:
        out.insert(0, ChatMessage(role="system", content=prompt.strip()))
    return out
