"""Embedders: the real ONNX MiniLM and the OpenAI-compatible client on a loopback server."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.models.base import Embedder, ModelError
from rag_lab.models.embedding import (
    MINILM_DIMENSION,
    MINILM_MODEL_KEY,
    OnnxMiniLMEmbedder,
    OpenAIEmbedder,
    l2_normalise,
    shared_minilm,
)

from .fake_openai import FakeOpenAIServer, Reply, bag_of_words_vector

EATING = "A man is eating food."
BREAD = "A man is eating a piece of bread."
HORSE = "A man is riding a horse."


# -- ONNX MiniLM ----------------------------------------------------------------------------


def test_minilm_identity_and_shape(minilm: OnnxMiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.model_key == MINILM_MODEL_KEY == "all-MiniLM-L6-v2-int8|local"
    assert minilm.dimension == MINILM_DIMENSION == 384
    out = minilm.embed([EATING, BREAD, HORSE])
    assert out.shape == (3, 384)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_minilm_semantics(minilm: OnnxMiniLMEmbedder) -> None:
    e, b, h = minilm.embed([EATING, BREAD, HORSE])
    # sentence-transformers' fp32 model gives 0.755 and 0.253; int8 stays within a few hundredths.
    assert float(e @ b) == pytest.approx(0.755, abs=0.03)
    assert float(e @ b) > 0.5
    assert float(e @ b) > float(e @ h) + 0.3
    q, right, wrong = minilm.embed(
        ["How tall is Mount Everest?", "Everest's summit is 8,849 metres high.", "Bananas are rich in potassium."]
    )
    assert float(q @ right) > float(q @ wrong) + 0.3


def test_minilm_deterministic_and_batch_equals_single(minilm: OnnxMiniLMEmbedder) -> None:
    texts = [EATING, BREAD, HORSE, "Short.", "A much longer sentence about embeddings, padding and batches of text."]
    first = minilm.embed(texts)
    np.testing.assert_array_equal(first, minilm.embed(texts))
    singles = np.stack([minilm.embed([t])[0] for t in texts])
    np.testing.assert_allclose(first, singles, atol=1e-5)


def test_minilm_batches_of_two_match_one_batch(minilm: OnnxMiniLMEmbedder) -> None:
    small = OnnxMiniLMEmbedder(batch_size=2, intra_op_num_threads=1)
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(5)]
    np.testing.assert_allclose(small.embed(texts), minilm.embed(texts), atol=1e-5)
    assert small._session.get_session_options().intra_op_num_threads == 1


def test_minilm_empty_and_blank(minilm: OnnxMiniLMEmbedder) -> None:
    empty = minilm.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    blank = minilm.embed([""])
    assert blank.shape == (1, 384)
    assert float(np.linalg.norm(blank[0])) == pytest.approx(1.0, abs=1e-5)


def test_minilm_truncates_at_max_length(minilm: OnnxMiniLMEmbedder) -> None:
    head = " ".join(f"word{i}" for i in range(400))  # far more than 256 word pieces
    a, b = minilm.embed([head + " apples and pears", head + " rockets and satellites"])
    np.testing.assert_array_equal(a, b)  # the differing tails lie beyond token 256
    short = OnnxMiniLMEmbedder(max_length=16)
    x, y = short.embed(
        [
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen cat",
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen dog",
        ]
    )
    np.testing.assert_array_equal(x, y)
    x2, y2 = minilm.embed(["one two three cat", "one two three dog"])
    assert not np.array_equal(x2, y2)


def test_minilm_bad_input(minilm: OnnxMiniLMEmbedder) -> None:
    with pytest.raises(ModelError, match="single str"):
        minilm.embed("not a list")
    with pytest.raises(ModelError, match=r"texts\[1\] is int"):
        minilm.embed(["ok", 3])  # type: ignore[list-item]


def test_minilm_missing_files(tmp_path) -> None:
    missing = tmp_path / "nope.onnx"
    with pytest.raises(ModelError, match="model file not found: .*nope.onnx"):
        OnnxMiniLMEmbedder(model_path=missing)
    with pytest.raises(ValueError, match="batch_size"):
        OnnxMiniLMEmbedder(batch_size=0)


def test_shared_minilm_is_cached() -> None:
    assert shared_minilm() is shared_minilm()
    assert shared_minilm(batch_size=8) is not shared_minilm()


def test_l2_normalise_keeps_zero_rows() -> None:
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert out.dtype == np.float32


# -- OpenAI-compatible ----------------------------------------------------------------------


def _expected(texts: list[str], dim: int = 8) -> np.ndarray:
    return l2_normalise(np.array([bag_of_words_vector(t, dim) for t in texts]))


def test_openai_embedder_round_trip(fake_openai: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder("text-emb", fake_openai.base_url, api_key="sk-test", dimension=8, max_retries=0)
    assert emb.model_key == f"text-emb|{fake_openai.base_url}"
    texts = ["alpha beta", "beta gamma", "delta"]
    out = emb.embed(texts)
    assert out.shape == (3, 8) and out.dtype == np.float32
    np.testing.assert_allclose(out, _expected(texts), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    (req,) = fake_openai.requests
    assert req.path == "/v1/embeddings"
    assert req.json == {"model": "text-emb", "input": texts, "encoding_format": "float"}
    assert req.headers["authorization"] == "Bearer sk-test"


def test_openai_embedder_batches_and_reorders(fake_openai: FakeOpenAIServer) -> None:
    shuffled = {
        "data": [
            {"index": 1, "embedding": [0.0, 2.0]},
            {"index": 0, "embedding": [3.0, 0.0]},
        ]
    }
    fake_openai.script(
        "/v1/embeddings", Reply.json(shuffled), Reply.json({"data": [{"index": 0, "embedding": [1.0, 1.0]}]})
    )
    emb = OpenAIEmbedder("m", fake_openai.base_url, batch_size=2, max_retries=0)
    out = emb.embed(["a", "b", "c"])
    assert [r.json["input"] for r in fake_openai.requests] == [["a", "b"], ["c"]]
    h = 2**-0.5
    np.testing.assert_allclose(out, [[1.0, 0.0], [0.0, 1.0], [h, h]], atol=1e-6)
    assert emb.dimension == 2


def test_openai_embedder_dimension_is_learnt(fake_openai: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder("m", fake_openai.base_url, max_retries=0)
    assert emb.embed([]).shape == (0, 0)
    assert fake_openai.requests == []
    assert emb.dimension == 8  # probes once
    assert len(fake_openai.requests) == 1
    assert emb.embed(["x"]).shape == (1, 8)


def test_openai_embedder_width_mismatch(fake_openai: FakeOpenAIServer) -> None:
    emb = OpenAIEmbedder("m", fake_openai.base_url, dimension=16, max_retries=0)
    with pytest.raises(ModelError, match="width 8, expected 16"):
        emb.embed(["x"])


def test_openai_embedder_http_error_names_url_and_status(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/embeddings", Reply.error(500, "boom"))
    emb = OpenAIEmbedder("m", fake_openai.base_url, max_retries=0)
    with pytest.raises(ModelError) as err:
        emb.embed(["x"])
    msg = str(err.value)
    assert f"{fake_openai.base_url}/embeddings" in msg and "HTTP 500" in msg and "boom" in msg


@pytest.mark.parametrize(
    ("reply", "pattern"),
    [
        (Reply.json({"object": "list"}), "'data'"),
        (Reply.raw("<html>oops</html>", content_type="text/html"), "got a non-JSON body '<html>oops</html>'"),
        (Reply.raw("{bad json"), "is not valid JSON"),
        (Reply.json({"data": [{"index": 0, "embedding": [1.0]}]}), r"expected 2 items in 'data', got 1 items"),
        (
            Reply.json({"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}]}),
            r"data\[0\]\.embedding is not a list",
        ),
        (
            Reply.json({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [1.0]}]}),
            r"data\[1\]\.index is invalid",
        ),
        (Reply.json({"data": [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [1.0]}]}), "ragged"),
    ],
)
def test_openai_embedder_malformed_replies(fake_openai: FakeOpenAIServer, reply: Reply, pattern: str) -> None:
    fake_openai.script("/v1/embeddings", reply)
    emb = OpenAIEmbedder("m", fake_openai.base_url, max_retries=0)
    with pytest.raises(ModelError, match=pattern):
        emb.embed(["x", "y"])


def test_openai_embedder_retries_then_succeeds(fake_openai: FakeOpenAIServer) -> None:
    fake_openai.script("/v1/embeddings", Reply.error(503, "busy"))
    emb = OpenAIEmbedder("m", fake_openai.base_url, max_retries=1)
    out = emb.embed(["alpha"])
    np.testing.assert_allclose(out, _expected(["alpha"]), atol=1e-6)
    assert len(fake_openai.requests) == 2


def test_openai_embedder_unreachable() -> None:
    srv = FakeOpenAIServer()
    url = srv.base_url
    srv.stop()  # the port is now closed
    emb = OpenAIEmbedder("m", url, max_retries=0, timeout=2)
    with pytest.raises(ModelError, match=f"{url}/embeddings failed: cannot connect"):
        emb.embed(["x"])


def test_cached_embedder_returns_the_same_vectors_and_counts_hits(minilm):
    from rag_lab.models.embedding import CachedEmbedder

    c = CachedEmbedder(minilm, max_entries=3)
    texts = ["alpha beta", "gamma", "alpha beta"]
    v = c.embed(texts)
    assert np.allclose(v, minilm.embed(texts), atol=1e-6)
    assert (c.hits, c.misses) == (1, 2)  # the duplicate inside one call is computed once
    c.embed(["gamma", "delta", "epsilon"])
    assert c.hits == 2 and len(c._cache) == 3  # bounded: the oldest entry was evicted
    assert c.embed([]).shape == (0, 384)
