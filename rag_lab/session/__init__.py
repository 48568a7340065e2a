"""Sessions and messages: the in-memory message store, the SQLite session store (CRUD, pinned,
last request state, fork, rewind), assistant-message completion and title generation (spec §9)."""

from __future__ import annotations

from rag_lab.session.store import MemoryMessageStore, Message

__all__ = [
    "MemoryMessageStore",
    "Message",
    "SQLiteSessionStore",
    "Session",
    "SessionPage",
    "SessionNotFound",
    "SessionAccessDenied",
    "complete_assistant_message",
    "generate_title_async",
    "sanitize_title",
    "build_attachment_prompt",
    "MessageAttachment",
]

_LAZY = {
    "SQLiteSessionStore": "rag_lab.session.sqlite_store",
    "Session": "rag_lab.session.sqlite_store",
    "SessionPage": "rag_lab.session.sqlite_store",
    "SessionNotFound": "rag_lab.session.sqlite_store",
    "SessionAccessDenied": "rag_lab.session.sqlite_store",
    "complete_assistant_message": "rag_lab.session.completion",
    "generate_title_async": "rag_lab.session.title",
    "sanitize_title": "rag_lab.session.title",
    "build_attachment_prompt": "rag_lab.session.attachments",
    "MessageAttachment": "rag_lab.session.attachments",
}


def __getattr__(name: str) -> object:
    import importlib

    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rag_lab.session' has no attribute '{name}'")
    return getattr(importlib.import_module(module), name)
