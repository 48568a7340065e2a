"""Rerankers: an embedding re-scorer (offline default) and an HTTP ``/rerank`` client.

Both return ``RerankScore`` lists sorted by score descending, ties broken by passage index.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence

import numpy as np

from rag_lab.models.base import Embedder, ModelError, RerankScore
from rag_lab.models.embedding import check_str_sequence, row_dots, short_text
from rag_lab.models.timeouts import is_in_process


def sort_scores(scores: list[RerankScore]) -> list[RerankScore]:
    """Score descending, then index ascending."""
    return sorted(scores, key=lambda s: (-s.relevance_score, s.index))


def _check_passages(query: str, passages: Sequence[str], who: str) -> list[str]:
    if not isinstance(query, str):
        raise ModelError(f"{who}.rerank(): query is {type(query).__name__}, expected str")
    return check_str_sequence(passages, f"{who}.rerank()", "passages")


class EmbeddingReranker:
    """Re-scores passages by embedding cosine with the query, clamped to [0, 1] (``max(0, cos)``).

    A bi-encoder stand-in for a cross-encoder: cheaper and weaker, but it really ranks, so the
    rerank stage's thresholds, fallback and composite score all see meaningful numbers offline.
    The (CPU-bound) embedding runs in a worker thread.
    """

    #: the scores it can give: rerank thresholds outside this range are refused
    score_range: tuple[float, float] = (0.0, 1.0)

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model_id = "embedding-rescorer:" + embedder.model_key

    @property
    def in_process(self) -> bool:
        """In process when its embedder is (the offline MiniLM): then no rerank timeout applies."""
        return is_in_process(self.embedder)

    def __repr__(self) -> str:
        return f"EmbeddingReranker({self.embedder!r})"

    def score(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        """Synchronous scoring, sorted (what ``rerank`` runs in a thread)."""
        items = _check_passages(query, passages, "EmbeddingReranker")
        if not items:
            return []
        vectors = np.asarray(self.embedder.embed([query, *items]), dtype=np.float32)
        if vectors.shape[0] != len(items) + 1:
            raise ModelError(
                f"{self.model_id}: embedder returned {vectors.shape[0]} vectors for {len(items) + 1} texts"
            )
        cosines = row_dots(vectors[1:], vectors[0])  # a passage's score never depends on the others
        return sort_scores(
            [RerankScore(index=i, relevance_score=float(min(1.0, max(0.0, c)))) for i, c in enumerate(cosines)]
        )

    async def rerank(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        return await asyncio.to_thread(self.score, query, passages)


class HttpReranker:
    """``POST {base_url}/rerank`` (Jina, Cohere, vLLM, Infinity, TEI).

    Request: ``{"model", "query", <documents_field>: [...], "top_n"}`` (``top_n`` only when set;
    TEI wants ``documents_field="texts"``). Accepted replies: ``{"results": [{"index",
    "relevance_score"}]}`` (Jina / Cohere / vLLM) and a bare list ``[{"index", "score"}]`` (TEI).
    Anything else, an HTTP error status or a timeout raises ``ModelError`` naming the URL.
    A new ``httpx.AsyncClient`` is opened per call, so the object works from any event loop.
    ``score_range`` (``[lo, hi]``, e.g. ``[0, 1]`` for a sigmoid cross-encoder) declares the scores
    the model gives, so thresholds outside it are refused; ``None``: undeclared, not checked.
    ``httpx`` is imported when the object is built, never inside a timed call.
    """

    #: calls an endpoint: the rerank timeout applies
    in_process: bool = False

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str = "",
        timeout: float = 60.0,
        *,
        top_n: int | None = None,
        documents_field: str = "documents",
        score_range: Sequence[float] | None = None,
    ) -> None:
        if score_range is not None:
            if len(score_range) != 2 or not float(score_range[0]) < float(score_range[1]):
                raise ValueError(f"HttpReranker: score_range must be [low, high] with low < high, got {score_range!r}")
            score_range = (float(score_range[0]), float(score_range[1]))
        self.score_range = score_range
        if not base_url:
            raise ValueError("HttpReranker: base_url must be non-empty")
        if documents_field not in ("documents", "texts"):
            raise ValueError(f"HttpReranker: documents_field must be 'documents' or 'texts', got {documents_field!r}")
        if top_n is not None and top_n < 1:
            raise ValueError(f"HttpReranker: top_n must be >= 1, got {top_n}")
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/rerank"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.top_n = top_n
        self.documents_field = documents_field
        self.model_id = f"{model}|{self.base_url}"
        import httpx

        self._httpx = httpx

    def __repr__(self) -> str:
        return f"HttpReranker(url={self.url!r}, model={self.model!r})"

    async def rerank(self, query: str, passages: Sequence[str]) -> list[RerankScore]:
        items = _check_passages(query, passages, "HttpReranker")
        if not items:
            return []
        httpx = self._httpx
        body: dict[str, object] = {"model": self.model, "query": query, self.documents_field: items}
        if self.top_n is not None:
            body["top_n"] = self.top_n
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                resp = await client.post(self.url, json=body, headers=headers)
        except httpx.TimeoutException as exc:
            raise ModelError(f"rerank request to {self.url} timed out after {self.timeout}s") from exc
        except httpx.HTTPError as exc:
            raise ModelError(f"rerank request to {self.url} failed: {type(exc).__name__}: {exc}") from exc
        if resp.status_code >= 400:
            raise ModelError(f"rerank request to {self.url} failed: HTTP {resp.status_code}: {short_text(resp.text)}")
        try:
            payload = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelError(f"rerank reply from {self.url} is not JSON: {short_text(resp.text)!r}") from exc
        return sort_scores(parse_rerank_reply(payload, len(items), self.url))


def parse_rerank_reply(payload: object, n_passages: int, url: str = "") -> list[RerankScore]:
    """Scores from a Jina/Cohere ``{"results": [...]}`` or TEI ``[...]`` reply (unsorted)."""
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        rows, score_key, where = payload["results"], "relevance_score", "results"
    elif isinstance(payload, list):
        rows, score_key, where = payload, "score", "reply"
    else:
        shown = f"an object with keys {sorted(payload)}" if isinstance(payload, dict) else type(payload).__name__
        raise ModelError(
            f"rerank reply from {url}: expected {{'results': [...]}} or a list of {{index, score}}, got {shown}"
        )
    out: list[RerankScore] = []
    seen: set[int] = set()
    for pos, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ModelError(f"rerank reply from {url}: {where}[{pos}] is {type(row).__name__}, expected an object")
        index = row.get("index")
        score = row.get(score_key)
        if score is None and score_key == "score":  # some TEI-like servers use the Jina key in a bare list
            score = row.get("relevance_score")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n_passages:
            raise ModelError(
                f"rerank reply from {url}: {where}[{pos}].index is {index!r}, expected an int in [0, {n_passages})"
            )
        if index in seen:
            raise ModelError(f"rerank reply from {url}: {where}[{pos}].index {index} appears twice")
        if not isinstance(score, (int, float)) or isinstance(score, bool) or not math.isfinite(score):
            raise ModelError(f"rerank reply from {url}: {where}[{pos}].{score_key} is {score!r}, expected a number")
        seen.add(index)
        out.append(RerankScore(index=index, relevance_score=float(score)))
    return out
