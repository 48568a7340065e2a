from __future__ import annotations

import pytest

from tests.knowledge.hash_embedder import HashEmbedder

DOCS = [
    {
        "id": "photo",
        "title": "Photosynthesis",
        "text": "Photosynthesis in plants: chloroplasts capture sunlight and turn carbon dioxide and water into sugar.",
        "metadata": {"topic": "biology"},
        "tag_id": "science",
    },
    {
        "id": "volcano",
        "title": "Volcanoes",
        "text": "Volcanoes erupt when molten magma rises through cracks in the crust; lava then flows downhill.",
        "metadata": {"topic": "geology"},
        "tag_id": "science",
    },
    {
        "id": "db",
        "title": "SQLite",
        "text": "SQLite is an embedded relational database; its write-ahead log lets readers work during writes.",
        "metadata": {"topic": "computing"},
        "tag_id": "tech",
    },
    {
        "id": "wall",
        "title": "长城",
        "text": "长城是中国古代修建的军事防御工程，全长两万多公里。",
        "metadata": {"topic": "history"},
        "tag_id": "culture",
    },
    {
        "id": "tides",
        "title": "Tides",
        "text": "Ocean tides are caused by the gravitational pull of the moon and the sun on the oceans.",
        "metadata": {"topic": "physics"},
        "tag_id": "science",
    },
    {
        "id": "chess",
        "title": "Chess",
        "text": "Chess openings such as the Sicilian defence shape the strategy of the middle game.",
        "metadata": {"topic": "games"},
        "tag_id": "culture",
    },
]


@pytest.fixture
def small_kb(tmp_path):
    """(workspace, kb, embedder) with the six DOCS ingested (one chunk each)."""
    from rag_lab.knowledge.workspace import Workspace

    emb = HashEmbedder()
    ws = Workspace(tmp_path / "ws")
    kb = ws.create_kb("small", emb, chunk_size=200, chunk_overlap=20)
    ws.ingest_documents(kb, DOCS, emb, progress=False)
    yield ws, kb, emb
    ws.close()


@pytest.fixture
def docs():
    return [dict(d) for d in DOCS]


@pytest.fixture(scope="module")
def lite(tmp_path_factory):
    """(uri, client): one Milvus Lite file shared by a test module's engines
    (:func:`tests.retrieval.lite_engines.lite_engine`)."""
    from pymilvus import MilvusClient

    uri = str(tmp_path_factory.mktemp("milvus_lite") / "m.db")
    client = MilvusClient(uri)
    yield uri, client
    client.close()
