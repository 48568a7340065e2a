"""A small deterministic test embedder: hashed character trigrams of the keyword tokens.

Real computation (no canned vectors): each token ``t`` of the text (same tokenizer as the keyword
index) contributes the trigrams of ``#t#`` hashed with BLAKE2b into ``dimension`` buckets; the
row is L2-normalised. Words sharing most trigrams ("chloroplast" / "chloroplasts") get similar
vectors, which is what lets a test tell vector search from keyword search.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from rag_lab.retrieval.tokenization import tokenize


class HashEmbedder:
    def __init__(self, dimension: int = 128, name: str = "test-trigram-hash") -> None:
        self.dimension = dimension
        self.model_key = f"{name}-{dimension}|local"
        self.calls = 0

    def _bucket(self, gram: str) -> int:
        return int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little") % self.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            for tok in tokenize(text):
                w = f"#{tok}#"
                grams = [w[j : j + 3] for j in range(len(w) - 2)] or [w]
                for g in grams:
                    out[i, self._bucket(g)] += 1.0
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out
