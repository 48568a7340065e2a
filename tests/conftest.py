"""Fixtures shared by several test folders, and the hypothesis profile for CI."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from tests.knowledge.hash_embedder import HashEmbedder

# CI machines are shared and noisy: no per-example deadline there.
settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def embedder():
    """A small, deterministic, real embedder (hashed character trigrams, L2-normalised)."""
    return HashEmbedder()


@pytest.fixture
def embedder_cls():
    return HashEmbedder


@pytest.fixture
def workspace(tmp_path):
    from rag_lab.knowledge.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    yield ws
    ws.close()
