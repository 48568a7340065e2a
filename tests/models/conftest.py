"""Fixtures for the model tests: one shared ONNX MiniLM and a fresh loopback fake server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rag_lab.models.embedding import OnnxMiniLMEmbedder, shared_minilm

from .fake_openai import FakeOpenAIServer


@pytest.fixture(scope="session")
def minilm() -> OnnxMiniLMEmbedder:
    return shared_minilm()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv
