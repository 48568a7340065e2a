"""One Milvus Lite file per test module (the ``lite`` fixture of this directory's conftest) and the
engines the Milvus tests open on it."""

from __future__ import annotations

from typing import Any


def lite_engine(ws: Any, lite: tuple[str, Any], prefix: str, **cfg: Any) -> Any:
    """A :class:`MilvusEngine` over ``ws`` on the module's Milvus Lite client, its collections
    named with ``prefix`` (each test its own) and ``cfg`` for the rest of its config."""
    from rag_lab.retrieval.milvus_engine import MilvusEngine

    uri, client = lite
    return MilvusEngine(ws, {"uri": uri, "collection_prefix": prefix, **cfg}, client=client)
