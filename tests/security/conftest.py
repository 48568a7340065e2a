"""Fixtures for the security tests: one lab whose workspace holds KBs of two tenants, served on
loopback with API keys (uvicorn in a thread, real sockets).

Tenant 1 owns ``demo`` (the four tiny docs); tenant 2 owns ``vault``, whose one document holds a
secret that no tenant-1 answer, reference or error may ever show.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from benchmarks.stream_reliability import ServerThread

ALICE = "alice-key-3f9c2b7e1d8a4c6f"  # tenant 1
BOB = "bob-key-5e1a9d3c7b2f8e4a60"  # tenant 1
CAROL = "carol-key-8d2f6a1c9e3b7d5f"  # tenant 2
KEYS = {
    ALICE: {"user": "alice", "tenant": 1},
    BOB: {"user": "bob", "tenant": 1},
    CAROL: {"user": "carol", "tenant": 2},
}
SECRET = "The vault combination of Umbra Holdings is 7731-KESTREL, kept in the north annex."
VAULT_Q = "What is the vault combination of Umbra Holdings?"


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="session")
def tenant_lab(tmp_path_factory, docs_dir):
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("tenant_ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)  # tenant 1 (the default)
    lab.kb("vault", tenant_id=2)
    lab.ingest_documents([{"id": "umbra", "title": "Umbra vault", "text": SECRET}], kb="vault", progress=False)
    return lab


@pytest.fixture
def keyed(tenant_lab):
    """``keyed(**server_cfg)`` → a running server with KEYS; stopped at teardown."""
    from rag_lab.stream.manager import MemoryStreamManager
    from rag_lab.stream.server import create_app

    started: list[ServerThread] = []

    def start(manager: Any = None, **cfg: Any) -> ServerThread:
        cfg.setdefault("api_keys", KEYS)
        app = create_app(tenant_lab, manager=manager or MemoryStreamManager(), server=cfg)
        srv = ServerThread(app).__enter__()
        started.append(srv)
        return srv

    yield start
    for srv in reversed(started):
        srv.__exit__(None, None, None)


def new_session(client: httpx.Client, key: str) -> str:
    r = client.post("/sessions", headers=auth(key))
    assert r.status_code == 201, r.text
    return r.json()["data"]["id"]
