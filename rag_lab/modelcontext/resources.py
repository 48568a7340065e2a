"""Stored-resource handles (``res://NNNN``): encoding, restoring and orphan stripping (spec §7.3–§7.4).

These functions work on any table with ``register(key, value) -> handle`` and
``pairs() -> [(handle, value)]`` (the registry's resource table).
"""

from __future__ import annotations

import re
from typing import Protocol

#: A stored reference: ``resource://`` + 22 id chars, a provider URL (optionally behind
#: ``storage://<name>/``), or a wiki ``summary/<uuid>`` slug. ``entity/…`` slugs are left alone.
STORED_REF_RE = re.compile(
    r"resource://[0-9A-Za-z_-]{22}"
    r"|(?:storage://[0-9A-Za-z_-]+/)?(?:local|minio|cos|tos|s3|oss|ks3|obs)://[^\s)\]>\"']+"
    r"|summary/[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    re.ASCII,
)

#: Anything shaped like a resource handle, registered or not.
RESOURCE_HANDLE_SHAPE_RE = re.compile(r"res://[0-9]+")

RESOURCE_PREFIX = "res://"
RESOURCE_WIDTH = 4


class _ResourceTable(Protocol):
    def register(self, key: str, value: str) -> str: ...

    def pairs(self) -> list[tuple[str, str]]: ...

    def has(self, handle: str) -> bool: ...


def encode_resources(text: str, table: _ResourceTable) -> str:
    """Replace each stored reference with its handle; the same reference always gets the same handle."""
    if not text:
        return text
    return STORED_REF_RE.sub(lambda m: table.register(m.group(0), m.group(0)), text)


def restore_resources(text: str, table: _ResourceTable) -> str:
    """Replace every registered handle with its durable value, longest handle first (plain substrings)."""
    if not text:
        return text
    pairs = sorted(table.pairs(), key=lambda p: len(p[0]), reverse=True)
    for handle, value in pairs:
        if handle in text:
            text = text.replace(handle, value)
    return text


def strip_orphan_resource_handles(text: str) -> str:
    """Remove every remaining ``res://<digits>`` token."""
    return RESOURCE_HANDLE_SHAPE_RE.sub("", text) if text else text


def orphan_resource_handles(decoded: str, table: _ResourceTable) -> list[str]:
    """Distinct handle-shaped tokens in decoded text that no registered handle explains (for logging)."""
    seen: dict[str, None] = {}
    for match in RESOURCE_HANDLE_SHAPE_RE.findall(decoded or ""):
        if not table.has(match):
            seen.setdefault(match, None)
    return list(seen)
