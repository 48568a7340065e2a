"""Issue 27, point 7: holes found on the landed server, each checked over real loopback where a
client reaches it.

* ``shared_with`` is a list of tenant ids: ``"12"`` (a string, read character by character as
  tenants 1 and 2) and ``1`` (an int, a ``TypeError`` that dropped every other tenant's ask) are
  refused when written; a bad value already stored shares with nobody and breaks no ask.
* ``GET /sessions?page=10**30`` was a 500 (SQLite integers are 64-bit): a 400 naming the field.
* ``Lab.kb(..., create=False, tenant_id=N)``'s unknown-KB message listed every KB of the workspace
  with its id, other tenants' included.
"""

from __future__ import annotations

import json

import httpx
import pytest

from benchmarks.stream_reliability import parse_frames
from tests.security.conftest import ALICE, CAROL, SECRET, VAULT_Q, auth, new_session


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("12", "metadata.shared_with='12' must be a list"),
        (1, "metadata.shared_with=1 must be a list"),
        ([1, "2"], "not '2'"),
        ([0], "not 0"),
        ([-3], "not -3"),
        ([True], "not True"),
        ([1.0], "not 1.0"),
        ({"1": 1}, "must be a list"),
    ],
)
def test_a_malformed_shared_with_is_refused_when_written(tmp_path, value, fragment):
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    try:
        kb = ws.create_kb("h", None, tenant_id=2)
        kb.metadata["shared_with"] = value
        with pytest.raises(ValueError, match="shared_with") as info:
            ws.store.update_kb(kb)
        assert fragment in str(info.value) and "'h'" in str(info.value)
        assert "shared_with" not in ws.store.get_kb(kb.id).metadata  # nothing was written
        with pytest.raises(ValueError, match="shared_with"):
            ws.share_kb("h", value)
        fresh = KnowledgeBase(id="kb_new", name="h2", tenant_id=2, metadata={"shared_with": value})
        with pytest.raises(ValueError, match="shared_with"):
            ws.store.create_kb(fresh)  # a new row with a bad value is not written either
        assert ws.store.get_kb("kb_new") is None
    finally:
        ws.close()


def test_share_kb_writes_a_list_of_tenant_ids(tmp_path):
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.sharing import can_view

    ws = Workspace(tmp_path / "ws")
    try:
        ws.create_kb("h", None, tenant_id=2)
        kb = ws.share_kb("h", [3, 1, 3])
        assert ws.get_kb("h").metadata["shared_with"] == [3, 1] == kb.metadata["shared_with"]
        assert [t for t in range(5) if can_view(ws.get_kb("h"), t)] == [0, 1, 2, 3]
        ws.share_kb("h", [])
        assert [t for t in range(5) if can_view(ws.get_kb("h"), t)] == [0, 2]
        for bad in (None, "3"):  # the documented exception, naming the argument; nothing written
            with pytest.raises(ValueError, match=r"tenant_ids \(metadata.shared_with\): expected a list") as info:
                ws.share_kb("h", bad)
            assert repr(bad) in str(info.value)
        assert ws.get_kb("h").metadata["shared_with"] == []
    finally:
        ws.close()


@pytest.mark.parametrize("stored", ["12", 1, [1.5], {"1": True}, [True], None])
def test_can_view_treats_a_bad_stored_value_as_not_shared(stored):
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.retrieval.hybrid_search import can_view

    kb = KnowledgeBase(id="k", name="k", tenant_id=2, metadata={"shared_with": stored})
    assert [t for t in (0, 1, 2, 3) if can_view(kb, t)] == [0, 2]


def _store_raw(ws, kb, metadata: dict) -> None:
    """Write metadata past the store's check (as an older version or a hand edit would)."""
    ws.store._write("UPDATE knowledge_bases SET metadata = ? WHERE id = ?", (json.dumps(metadata), kb.id))


@pytest.mark.parametrize("stored", ["12", 1])
def test_a_bad_stored_shared_with_breaks_no_ask_and_shares_nothing(keyed, tenant_lab, stored):
    ws = tenant_lab.workspace
    kb = tenant_lab.kb("bad_share", tenant_id=2)
    try:
        tenant_lab.ingest_documents(
            [{"id": "s", "title": "Umbra note", "text": SECRET}], kb="bad_share", progress=False
        )
        _store_raw(ws, kb, {**kb.metadata, "shared_with": stored})
        srv = keyed()
        with httpx.Client(timeout=60, base_url=srv.url) as c:
            sid = new_session(c, ALICE)  # tenant 1: "12" would have read as tenants 1 and 2
            r = c.post(f"/knowledge-chat/{sid}", json={"query": VAULT_Q}, headers=auth(ALICE))
            frames = parse_frames(iter(r.text.split("\n")))
            assert r.status_code == 200 and frames[-1].type == "complete" and "error" not in {f.type for f in frames}
            assert kb.id not in r.text and "7731" not in r.text
            r = c.post(
                f"/knowledge-chat/{sid}",
                json={"query": VAULT_Q, "knowledge_base_ids": ["bad_share"]},
                headers=auth(ALICE),
            )
            assert (
                r.status_code == 400 and r.json()["error"] == "knowledge_base_ids: unknown knowledge base 'bad_share'"
            )
            sid2 = new_session(c, CAROL)  # the owner still searches it
            r = c.post(
                f"/knowledge-chat/{sid2}",
                json={"query": VAULT_Q, "knowledge_base_ids": ["bad_share"]},
                headers=auth(CAROL),
            )
            assert r.status_code == 200 and "7731-KESTREL" in r.text
            r = c.post(f"/knowledge-chat/{sid2}", json={"query": VAULT_Q}, headers=auth(CAROL))
            assert parse_frames(iter(r.text.split("\n")))[-1].type == "complete"
    finally:
        ws.delete_kb(kb.id)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page=" + "1" + "0" * 30, "page"),
        ("page=9223372036854775807", "page"),
        ("page=0", "page"),
        ("page=-1", "page"),
        ("page=abc", "page"),
        ("page=1e3", "page"),
        ("page_size=" + "9" * 25, "page_size"),
        ("page_size=0", "page_size"),
        ("page_size=1001", "page_size"),
        ("page=2&page_size=x", "page_size"),
    ],
)
def test_session_paging_takes_bounded_integers_only(keyed, query, field):
    srv = keyed()
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        new_session(c, ALICE)
        r = c.get(f"/sessions?{query}", headers=auth(ALICE))
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["field"] == field and body["error"].startswith(f"{field}: expected an integer in [1, ")
        ok = c.get("/sessions?page=1000000&page_size=1000", headers=auth(ALICE))
        assert ok.status_code == 200 and ok.json()["data"] == []
        ok = c.get("/sessions", headers=auth(ALICE))
        assert ok.status_code == 200 and ok.json()["page"] == 1 and ok.json()["page_size"] == 20


def test_lab_unknown_kb_message_lists_only_the_callers_kbs(tenant_lab):
    from rag_lab.knowledge.workspace import KnowledgeBaseNotFound

    demo, vault = tenant_lab.workspace.get_kb("demo"), tenant_lab.workspace.get_kb("vault")
    with pytest.raises(KnowledgeBaseNotFound) as info:
        tenant_lab.kb("nope", create=False, tenant_id=1)
    text = str(info.value)
    assert demo.id in text and "'vault'" not in text and vault.id not in text
    with pytest.raises(KnowledgeBaseNotFound) as info:  # another tenant's KB is unknown too
        tenant_lab.kb("vault", create=False, tenant_id=1)
    assert vault.id not in str(info.value) and demo.id in str(info.value)
    with pytest.raises(KnowledgeBaseNotFound) as info:
        tenant_lab.kb("nope", create=False, tenant_id=2)
    assert vault.id in str(info.value) and demo.id not in str(info.value)
    assert tenant_lab.kb("vault", create=False, tenant_id=2).id == vault.id
    with pytest.raises(KnowledgeBaseNotFound) as info:  # the single-user lab sees every KB
        tenant_lab.kb("nope", create=False)
    assert demo.id in str(info.value) and vault.id in str(info.value)
