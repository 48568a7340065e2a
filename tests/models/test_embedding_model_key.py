"""The MiniLM model key follows its tokenizer file (issue 23): the key names the vector space and
keys the embedding cache, and the vendored tokenizer lies outside the code-version closure."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rag_lab.eval.cache import CachingEmbedder, StageCache
from rag_lab.models.embedding import (
    DEFAULT_TOKENIZER_PATH,
    MINILM_KEYED_TOKENIZER_SHA256,
    MINILM_MODEL_KEY,
    OnnxMiniLMEmbedder,
    minilm_model_key,
)


def test_the_model_key_carries_a_changed_tokenizer_s_hash(tmp_path: Path) -> None:
    assert minilm_model_key(DEFAULT_TOKENIZER_PATH) == MINILM_MODEL_KEY  # the file it was keyed with
    assert hashlib.sha256(DEFAULT_TOKENIZER_PATH.read_bytes()).hexdigest() == MINILM_KEYED_TOKENIZER_SHA256, (
        "the vendored tokenizer changed: its key is now MINILM_MODEL_KEY|tokenizer:<hash>, as it must be; "
        "update this test (and re-ingest KBs), never MINILM_KEYED_TOKENIZER_SHA256"
    )
    changed = tmp_path / "tokenizer.json"
    data = DEFAULT_TOKENIZER_PATH.read_bytes()
    changed.write_bytes(data.replace(b'"lowercase":true', b'"lowercase":false', 1))
    assert changed.read_bytes() != data
    digest = hashlib.sha256(changed.read_bytes()).hexdigest()
    assert minilm_model_key(changed) == f"{MINILM_MODEL_KEY}|tokenizer:{digest[:12]}"


def test_a_changed_tokenizer_misses_the_embedding_cache(tmp_path: Path, minilm: OnnxMiniLMEmbedder) -> None:
    changed = tmp_path / "tokenizer.json"
    changed.write_bytes(DEFAULT_TOKENIZER_PATH.read_bytes() + b"\n")  # the same vocabulary, other bytes
    other = OnnxMiniLMEmbedder(tokenizer_path=changed)
    assert other.model_key != minilm.model_key and other.model_key.startswith(MINILM_MODEL_KEY + "|tokenizer:")
    cache = StageCache(tmp_path / "cache")
    first = CachingEmbedder(minilm, cache)
    v = first.embed(["lighthouse keepers"])
    assert first.embed_key("x") != CachingEmbedder(other, cache).embed_key("x")
    again = CachingEmbedder(other, cache).embed(["lighthouse keepers"])
    st = cache.stats()["embed"]
    assert (st.hits, st.misses) == (0, 2)  # the other tokenizer's vectors are computed, not served
    np.testing.assert_array_equal(again, v)  # (this change keeps the vocabulary: the same vector)
    CachingEmbedder(OnnxMiniLMEmbedder(), cache).embed(["lighthouse keepers"])
    assert cache.stats()["embed"].hits == 1  # the vendored tokenizer again: served
