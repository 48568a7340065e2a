from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def load_hash_embedder():
    """Import tests/knowledge/hash_embedder.py under a unique name (works in any import mode)."""
    name = "rag_lab_tests_hash_embedder"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("hash_embedder.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].HashEmbedder


HashEmbedder = load_hash_embedder()


@pytest.fixture
def embedder():
    return HashEmbedder()


@pytest.fixture
def workspace(tmp_path):
    from rag_lab.knowledge.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    yield ws
    ws.close()


@pytest.fixture
def embedder_cls():
    return HashEmbedder
