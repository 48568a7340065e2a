"""Query intents (spec §1.2, seed "Énumération d'intention")."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.types.chat_manage import ChatManage


class QueryIntent(str, Enum):
    """The intents the query-understanding model may return. ``NONE`` ("") means "retrieve"."""

    NONE = ""
    KB_SEARCH = "kb_search"
    WEB_SEARCH = "web_search"
    GREETING = "greeting"
    CHITCHAT = "chitchat"
    FOLLOW_UP = "follow_up"
    IMAGE_ONLY = "image_only"
    DOC_ONLY = "doc_only"
    SUMMARIZE = "summarize"
    CLARIFICATION = "clarification"


_CANONICAL = {i.value for i in QueryIntent}
_KB_RETRIEVAL = frozenset({"kb_search", "clarification", "summarize", ""})


def normalize_query_intent(raw: object) -> str:
    """Map a model-produced label to a canonical intent value.

    Case, surrounding quotes, ``-`` and spaces are ignored (``"KB-Search"`` → ``"kb_search"``).
    Anything that is not one of the nine intents becomes ``""`` (which means: retrieve).
    This follows the seed (``NormalizeQueryIntent``), not upstream's verbatim storage.
    """
    if not isinstance(raw, str):
        return ""
    key = raw.strip().strip("\"'").strip().lower().replace("-", "_").replace(" ", "_")
    return key if key in _CANONICAL else ""


def needs_kb_retrieval(intent: str) -> bool:
    """True only for ``kb_search``, ``clarification``, ``summarize`` and ``""`` (spec §1.2)."""
    return intent in _KB_RETRIEVAL


def needs_retrieval(chat: ChatManage) -> bool:
    """``web_search`` retrieves only when web search is on; otherwise :func:`needs_kb_retrieval`."""
    intent = chat.state.intent
    if intent == QueryIntent.WEB_SEARCH.value:
        return bool(chat.request.web_search_enabled)
    return needs_kb_retrieval(intent)
