"""Rerankers: the embedding re-scorer (real MiniLM) and the HTTP /rerank client on loopback."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.models.base import ModelError, Reranker, RerankScore
from rag_lab.models.embedding import OnnxMiniLMEmbedder
from rag_lab.models.rerank import EmbeddingReranker, HttpReranker, parse_rerank_reply, sort_scores

from .fake_openai import FakeOpenAIServer, Reply


class TableEmbedder:
    """A tiny real embedder: fixed vectors per text (normalised), for exact expectations."""

    model_key = "table|test"
    dimension = 2

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        v = np.array([self.table[t] for t in texts], dtype=np.float32).reshape(-1, 2)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


async def test_embedding_reranker_exact_scores_and_order() -> None:
    emb = TableEmbedder(
        {"q": [1, 0], "same": [2, 0], "half": [1, 1], "opposite": [-1, 0], "orth": [0, 1], "same2": [5, 0]}
    )
    rr = EmbeddingReranker(emb)
    assert isinstance(rr, Reranker)
    assert rr.model_id == "embedding-rescorer:table|test"
    out = await rr.rerank("q", ["opposite", "half", "same", "orth", "same2"])
    assert [s.index for s in out] == [2, 4, 1, 0, 3]  # ties (1.0, 1.0) and (0.0, 0.0) by index
    scores = {s.index: s.relevance_score for s in out}
    assert scores[2] == pytest.approx(1.0) and scores[4] == pytest.approx(1.0)
    assert scores[1] == pytest.approx(2**-0.5, abs=1e-6)
    assert scores[0] == 0.0  # cosine -1 clamped
    assert scores[3] == pytest.approx(0.0, abs=1e-7)
    assert emb.calls == [["q", "opposite", "half", "same", "orth", "same2"]]


async def test_embedding_reranker_empty_makes_no_call() -> None:
    emb = TableEmbedder({})
    assert await EmbeddingReranker(emb).rerank("q", []) == []
    assert emb.calls == []


async def test_embedding_reranker_bad_input() -> None:
    with pytest.raises(ModelError, match=r"passages\[0\] is int"):
        await EmbeddingReranker(TableEmbedder({})).rerank("q", [1])  # type: ignore[list-item]


async def test_embedding_reranker_with_minilm(minilm: OnnxMiniLMEmbedder) -> None:
    rr = EmbeddingReranker(minilm)
    assert rr.model_id == "embedding-rescorer:all-MiniLM-L6-v2-int8|local"
    passages = [
        "Bananas are rich in potassium and grow in the tropics.",
        "The Eiffel Tower was completed in 1889 in Paris.",
        "Python is a popular programming language.",
    ]
    out = await rr.rerank("When was the Eiffel Tower built?", passages)
    assert out[0].index == 1
    assert out[0].relevance_score > 0.5
    assert all(0.0 <= s.relevance_score <= 1.0 for s in out)
    assert out[0].relevance_score > out[1].relevance_score + 0.3


def test_sort_scores_ties_by_index() -> None:
    out = sort_scores([RerankScore(2, 0.5), RerankScore(0, 0.5), RerankScore(1, 0.9)])
    assert [(s.index, s.relevance_score) for s in out] == [(1, 0.9), (0, 0.5), (2, 0.5)]


async def test_http_reranker_jina_shape(fake_openai: FakeOpenAIServer) -> None:
    rr = HttpReranker(fake_openai.root_url, "bge-reranker", api_key="k1", top_n=2)
    assert rr.url == fake_openai.root_url + "/rerank"
    docs = ["red apples", "green apples and red pears", "blue sky"]
    out = await rr.rerank("red apples", docs)
    # the fake scores by word Jaccard: 1.0, 2/5, 0 -> top_n=2 keeps two
    assert [(s.index, round(s.relevance_score, 6)) for s in out] == [(0, 1.0), (1, 0.4)]
    (req,) = fake_openai.requests
    assert req.path == "/rerank"
    assert req.json == {"model": "bge-reranker", "query": "red apples", "documents": docs, "top_n": 2}
    assert req.headers["authorization"] == "Bearer k1"


async def test_http_reranker_tei_shape_and_texts_field(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script(
        "/rerank", Reply.json([{"index": 1, "score": 0.25}, {"index": 0, "score": 0.75}, {"index": 2, "score": 0.25}])
    )
    rr = HttpReranker(fake_openai.root_url + "/", "tei", documents_field="texts")
    out = await rr.rerank("q", ["a", "b", "c"])
    assert [(s.index, s.relevance_score) for s in out] == [(0, 0.75), (1, 0.25), (2, 0.25)]
    assert fake_openai.requests[0].json == {"model": "tei", "query": "q", "texts": ["a", "b", "c"]}
    assert "authorization" not in fake_openai.requests[0].headers


async def test_http_reranker_v1_prefix_and_empty(fake_openai: FakeOpenAIServer) -> None:
    rr = HttpReranker(fake_openai.base_url, "m")
    assert rr.url.endswith("/v1/rerank")
    assert await rr.rerank("q", []) == []
    assert fake_openai.requests == []
    out = await rr.rerank("x", ["x", "y"])
    assert [s.index for s in out] == [0, 1]
    assert fake_openai.requests[0].path == "/v1/rerank"


async def test_http_reranker_500(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/rerank", Reply.error(500, "model crashed"))
    rr = HttpReranker(fake_openai.root_url, "m")
    with pytest.raises(ModelError) as err:
        await rr.rerank("q", ["a"])
    assert f"{fake_openai.root_url}/rerank" in str(err.value)
    assert "HTTP 500" in str(err.value) and "model crashed" in str(err.value)


@pytest.mark.parametrize(
    ("reply", "pattern"),
    [
        (Reply.raw("<html>oops</html>", content_type="text/html"), "is not JSON: '<html>oops</html>'"),
        (
            Reply.json({"data": []}),
            r"expected \{'results': \[...\]\} or a list of \{index, score\}, got an object with keys \['data'\]",
        ),
        (Reply.json("nope"), "got str"),
        (
            Reply.json({"results": [{"index": 5, "relevance_score": 0.1}]}),
            r"results\[0\]\.index is 5, expected an int in \[0, 2\)",
        ),
        (
            Reply.json({"results": [{"index": 0, "relevance_score": "high"}]}),
            r"results\[0\]\.relevance_score is 'high'",
        ),
        (Reply.json([{"index": 0, "score": 0.1}, {"index": 0, "score": 0.2}]), r"reply\[1\]\.index 0 appears twice"),
        (Reply.json([7]), r"reply\[0\] is int"),
    ],
)
async def test_http_reranker_malformed(fake_openai: FakeOpenAIServer, reply: Reply, pattern: str) -> None:
    fake_openai.script("/rerank", reply)
    rr = HttpReranker(fake_openai.root_url, "m")
    with pytest.raises(ModelError, match=pattern) as err:
        await rr.rerank("q", ["a", "b"])
    assert f"{fake_openai.root_url}/rerank" in str(err.value)


async def test_http_reranker_timeout(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/rerank", Reply.json({"results": []}, delay=5))
    rr = HttpReranker(fake_openai.root_url, "m", timeout=0.2)
    with pytest.raises(ModelError, match=r"/rerank timed out after 0.2s"):
        await rr.rerank("q", ["a"])


async def test_http_reranker_connection_dropped(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/rerank", Reply.disconnect())
    rr = HttpReranker(fake_openai.root_url, "m")
    with pytest.raises(ModelError, match=r"/rerank failed: RemoteProtocolError"):
        await rr.rerank("q", ["a"])


def test_parse_rerank_reply_accepts_relevance_score_in_bare_list() -> None:
    out = parse_rerank_reply([{"index": 0, "relevance_score": 0.3}], 1, "u")
    assert [(s.index, s.relevance_score) for s in out] == [(0, 0.3)]


def test_http_reranker_rejects_bad_config() -> None:
    with pytest.raises(ValueError, match="documents_field"):
        HttpReranker("http://x", "m", documents_field="docs")
    with pytest.raises(ValueError, match="base_url"):
        HttpReranker("", "m")
