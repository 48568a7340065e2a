"""Fixtures shared by several test folders, and the suite's hypothesis profile."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.knowledge.hash_embedder import HashEmbedder

# One hypothesis profile for the whole suite, loaded by default: no per-example deadline and no
# "too slow" health check. Both measure wall-clock time, which on a shared or busy machine says
# more about the neighbours than about the code; a test's examples and assertions are the same
# everywhere. HYPOTHESIS_PROFILE names another registered profile.
settings.register_profile("rag_lab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "rag_lab"))


@pytest.fixture
def embedder():
    """A small, deterministic, real embedder (hashed character trigrams, L2-normalised)."""
    return HashEmbedder()


@pytest.fixture
def embedder_cls():
    return HashEmbedder


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL server on loopback for the whole session (tests/pg_server.py); skipped
    when PostgreSQL is missing, a failure under RAG_LAB_REQUIRE_EXTRAS / CI."""
    from tests.pg_server import PostgresServer, need_postgres

    need_postgres()
    srv = PostgresServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def pg_dsn(pg_server) -> str:
    """The URL of an empty PostgreSQL store (a schema of its own) on the session's server."""
    return pg_server.new_schema()


@pytest.fixture
def workspace(tmp_path):
    from rag_lab.knowledge.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    yield ws
    ws.close()


DOCS = {
    "lighthouse.md": (
        "# The Brightwater Lighthouse\n\n"
        "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill. "
        "Its lamp can be seen from 22 nautical miles away on a clear night.\n\n"
        "The tower is painted with red and white bands and stands on a granite headland."
    ),
    "bread.txt": (
        "Sourdough bread rises thanks to a starter of wild yeast and lactic acid bacteria. "
        "Bakers feed the starter with flour and water every day. A long cold proof gives the crumb "
        "its open structure and a sour taste."
    ),
    "volcano.html": (
        "<html><head><title>Mount Ember</title><style>p{color:red}</style></head><body>"
        "<p>Mount Ember is a stratovolcano whose last eruption was recorded in 1921.</p>"
        "<p>Its crater lake is acidic and turquoise.</p><script>var x = 1;</script></body></html>"
    ),
    "chess.md": (
        "# Chess openings\n\nThe Sicilian Defence answers 1.e4 with 1...c5. "
        "The Queen's Gambit begins 1.d4 d5 2.c4 and offers a pawn for central control."
    ),
}


@pytest.fixture(scope="session")
def docs_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("docs")
    for name, text in DOCS.items():
        (d / name).write_text(text, encoding="utf-8")
    (d / "image.png").write_bytes(b"\x89PNG")
    return d


@pytest.fixture(scope="session")
def lab(tmp_path_factory, docs_dir):
    from rag_lab.lab import Lab

    lab = Lab.from_config(workspace=tmp_path_factory.mktemp("ws"))
    lab.ingest(docs_dir, kb="demo", progress=False)
    return lab
