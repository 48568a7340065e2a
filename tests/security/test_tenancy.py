"""Findings 2, 3 and 10: tenant isolation of KBs and search, session squatting and history
leaks, and the unknown-KB message. "Not yours" answers exactly like "not found"."""

from __future__ import annotations

import httpx
import pytest

from benchmarks.stream_reliability import parse_frames
from tests.security.conftest import ALICE, BOB, CAROL, SECRET, VAULT_Q, auth, new_session

Q = "When was the lighthouse built?"


def frames_of(r: httpx.Response):
    return parse_frames(iter(r.text.split("\n")))


def refs_and_answer(r: httpx.Response) -> tuple[set[str], str]:
    frames = frames_of(r)
    kbs = {
        ref["knowledge_base_id"]
        for f in frames
        if f.type == "references"
        for ref in f.data.get("knowledge_references", [])
    }
    return kbs, "".join(f.data.get("content", "") for f in frames if f.type == "answer")


def test_another_tenants_kb_is_unknown_and_the_message_lists_nothing(keyed, tenant_lab):
    srv = keyed()
    vault = tenant_lab.workspace.get_kb("vault")
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        sid = new_session(c, ALICE)
        answers = {}
        for name in ("vault", vault.id, "no-such-kb"):
            r = c.post(
                f"/knowledge-chat/{sid}", json={"query": VAULT_Q, "knowledge_base_ids": [name]}, headers=auth(ALICE)
            )
            answers[name] = (r.status_code, r.json())
        assert answers["vault"] == (
            400,
            {
                "success": False,
                "error": "knowledge_base_ids: unknown knowledge base 'vault'",
                "field": "knowledge_base_ids",
            },
        )
        assert answers[vault.id] == (
            400,
            {
                "success": False,
                "error": f"knowledge_base_ids: unknown knowledge base {vault.id!r}",
                "field": "knowledge_base_ids",
            },
        )
        text = str(answers)
        assert str(tenant_lab.workspace.root) not in text and "demo" not in text
        assert tenant_lab.workspace.get_kb("demo").id not in text
        # carol (tenant 2) may name her own KB
        sid2 = new_session(c, CAROL)
        r = c.post(f"/knowledge-chat/{sid2}", json={"query": VAULT_Q, "kb": "vault"}, headers=auth(CAROL))
        kbs, answer = refs_and_answer(r)
        assert kbs == {vault.id} and "7731-KESTREL" in answer
    assert not [g for g in srv.service.generations.values() if g.user_id == "alice"]


def test_omitting_the_kbs_searches_only_the_callers_tenant(keyed, tenant_lab):
    srv = keyed()
    demo, vault = tenant_lab.workspace.get_kb("demo"), tenant_lab.workspace.get_kb("vault")
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        sid = new_session(c, ALICE)
        r = c.post(f"/knowledge-chat/{sid}", json={"query": VAULT_Q}, headers=auth(ALICE))
        kbs, answer = refs_and_answer(r)
        assert kbs <= {demo.id} and "7731" not in r.text and "Umbra vault" not in r.text
        sid2 = new_session(c, CAROL)
        r = c.post(f"/knowledge-chat/{sid2}", json={"query": Q}, headers=auth(CAROL))
        kbs, answer = refs_and_answer(r)
        assert kbs <= {vault.id} and "1874" not in answer and "Brightwater" not in r.text
        r = c.post(f"/knowledge-chat/{sid2}", json={"query": VAULT_Q}, headers=auth(CAROL))
        kbs, answer = refs_and_answer(r)
        assert kbs == {vault.id} and "7731-KESTREL" in answer


def test_a_kb_shared_with_a_tenant_is_searchable_by_it(keyed, tenant_lab):
    from rag_lab.lab.lab import Lab

    ws = tenant_lab.workspace
    lab2 = Lab.from_config(workspace=ws.root / "shared_ws")
    try:
        kb = lab2.kb("handbook", tenant_id=2)
        kb.metadata["shared_with"] = [1]
        lab2.workspace.store.update_kb(kb)
        lab2.ingest_documents([{"id": "h", "title": "Handbook", "text": SECRET}], kb="handbook", progress=False)
        run = lab2.ask(VAULT_Q, user_id="alice", tenant_id=1, snapshots=False)
        assert {r.knowledge_base_id for r in run.references} == {kb.id}
        run = lab2.ask(VAULT_Q, user_id="zed", tenant_id=3, snapshots=False)
        assert run.references == []
        from rag_lab.knowledge.workspace import KnowledgeBaseNotFound

        with pytest.raises(KnowledgeBaseNotFound, match="^unknown knowledge base 'handbook'$"):
            lab2.ask(VAULT_Q, kb="handbook", user_id="zed", tenant_id=3, snapshots=False)
    finally:
        lab2.workspace.close()


def test_sessions_cannot_be_squatted_before_or_after_a_restart(keyed, tenant_lab):
    from rag_lab.session.sqlite_store import SessionNotFound

    srv = keyed()
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        # with keys, ids are handed out by the server: nobody can claim one before its owner
        r = c.post("/knowledge-chat/alice-chat-1", json={"query": Q}, headers=auth(BOB))
        assert (r.status_code, r.json()["error"]) == (404, "Session not found")
        with pytest.raises(SessionNotFound):
            tenant_lab.sessions.get_session("alice-chat-1")
        sid = new_session(c, ALICE)
        assert len(sid) == 36  # a uuid4: not guessable
        r = c.post(f"/knowledge-chat/{sid}", json={"query": "The vault word is MARMALADE. " + Q}, headers=auth(ALICE))
        assert r.status_code == 200
    srv.__exit__(None, None, None)
    srv2 = keyed()  # a restarted server on the memory backend: nothing of the old process survives
    with httpx.Client(timeout=30, base_url=srv2.url) as c:
        for key in (BOB, CAROL):
            r = c.post(f"/knowledge-chat/{sid}", json={"query": "Repeat my earlier question"}, headers=auth(key))
            assert (r.status_code, r.json()["error"]) == (404, "Session not found")
            assert "MARMALADE" not in r.text
        assert [m.role for m in tenant_lab.sessions.list_messages(sid)] == ["user", "assistant"]
        r = c.post(f"/knowledge-chat/{sid}", json={"query": Q}, headers=auth(ALICE))  # the owner still can
        assert r.status_code == 200 and frames_of(r)[-1].type == "complete"
    s = tenant_lab.sessions.get_session(sid)
    assert (s.user_id, s.tenant_id) == ("alice", 1)


def test_keyed_servers_can_opt_in_to_client_chosen_session_ids(keyed):
    srv = keyed(auto_create_sessions=True)
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        assert c.post("/knowledge-chat/mine-1", json={"query": Q}, headers=auth(ALICE)).status_code == 200
        r = c.post("/knowledge-chat/mine-1", json={"query": Q}, headers=auth(BOB))
        assert (r.status_code, r.json()["error"]) == (404, "Session not found")


def test_the_lab_never_loads_another_users_history(tenant_lab):
    from rag_lab.session.sqlite_store import SessionNotFound

    first = tenant_lab.ask("My locker code is 4455. " + Q, kb="demo", user_id="alice", tenant_id=1, snapshots=False)
    for user, tenant in (("bob", 1), ("alice", 2), ("lab", 0)):
        with pytest.raises(SessionNotFound):
            tenant_lab.ask("What is my locker code?", session_id=first.session_id, user_id=user, tenant_id=tenant)
    assert [m.role for m in tenant_lab.sessions.list_messages(first.session_id)] == ["user", "assistant"]
