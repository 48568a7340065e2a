"""Who may see a knowledge base: its tenant, and the tenants listed in ``metadata["shared_with"]``.

``shared_with`` is a list of tenant ids, each a positive ``int`` (``bool`` is not one). It is
checked when a KB is written (:func:`check_shared_with`, called by the store's ``create_kb`` /
``update_kb``), so a string like ``"12"`` (which a loop over it would read as tenants 1 and 2) or a
bare ``1`` never reaches the store through rag_lab. Readers go through :func:`shared_tenants`,
which treats a malformed stored value (a file edited by hand, an older version) as "shared with
nobody" instead of guessing or raising in the middle of a search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase

SHARED_WITH = "shared_with"


def _tenant_id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check_shared_with(value: object) -> list[int]:
    """``value`` as a list of tenant ids, or :class:`ValueError` naming the field and the value.
    ``None`` means not shared (``[]``)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValueError(
            f"metadata.{SHARED_WITH}={value!r:.80} must be a list of tenant ids (positive integers), "
            f"e.g. [2, 3]; got a {type(value).__name__}"
        )
    bad = [t for t in value if not _tenant_id(t)]
    if bad:
        raise ValueError(
            f"metadata.{SHARED_WITH}={list(value)!r:.80} must hold tenant ids (positive integers) only; "
            f"not {bad[0]!r:.40}"
        )
    return list(dict.fromkeys(value))


def shared_tenants(metadata: object) -> frozenset[int]:
    """The tenant ids a KB's stored metadata shares it with; a malformed value shares with nobody."""
    if not isinstance(metadata, dict):
        return frozenset()
    try:
        return frozenset(check_shared_with(metadata.get(SHARED_WITH)))
    except ValueError:
        return frozenset()


def can_view(kb: KnowledgeBase, tenant_id: int) -> bool:
    """§5.3: a tenant sees its own KBs and KBs shared with it (``metadata["shared_with"]``, a list
    of tenant ids); ``tenant_id`` 0 means no check."""
    if not tenant_id or kb.tenant_id == tenant_id:
        return True
    return tenant_id in shared_tenants(kb.metadata)
