"""Finding 1 (no authentication) and 10 (``--host 0.0.0.0`` with no auth): API keys map to (user,
tenant), every route needs one, ``X-User-ID`` means nothing, keys never appear in logs, and a
keyless server is one local user reachable from loopback only."""

from __future__ import annotations

import logging

import httpx
import pytest

from benchmarks.stream_reliability import parse_frames
from rag_lab.stream.auth import (
    API_KEYS_ENV,
    LOCAL_PRINCIPAL,
    ApiKeys,
    AuthConfigError,
    Principal,
    bearer_token,
    check_bind,
    is_loopback,
    key_digest,
)
from tests.security.conftest import ALICE, BOB, CAROL, KEYS, auth, new_session

Q = "When was the lighthouse built?"


def test_every_route_needs_a_key_and_x_user_id_is_not_one(keyed):
    srv = keyed()
    routes = [
        ("POST", "/knowledge-chat/s1", {"json": {"query": Q}}),
        ("GET", "/sessions/continue-stream/s1", {"params": {"message_id": "m1"}}),
        ("POST", "/sessions/s1/stop", {"json": {"message_id": "m1"}}),
        ("POST", "/sessions", {}),
        ("GET", "/sessions", {}),
        ("GET", "/sessions/s1", {}),
        ("DELETE", "/sessions/s1", {}),
    ]
    with httpx.Client(timeout=10, base_url=srv.url) as c:
        for method, path, kw in routes:
            for headers in ({}, {"X-User-ID": "alice"}, {"Authorization": "Basic YWxpY2U6eA=="}):
                r = c.request(method, path, headers=headers, **kw)
                assert r.status_code == 401, (method, path, headers)
                assert r.json() == {
                    "success": False,
                    "error": "authentication required: send 'Authorization: Bearer <API key>'",
                    "field": "authorization",
                }
                assert r.headers["www-authenticate"] == 'Bearer realm="rag-lab"'
            wrong = c.request(method, path, headers=auth(ALICE[:-1] + "x"), **kw)
            assert (wrong.status_code, wrong.json()["error"]) == (401, "invalid API key")
            assert ALICE[:-1] not in wrong.text
        # a bare health check stays open (load balancers) but says nothing more
        assert c.get("/health").json() == {"status": "ok"}
        assert set(c.get("/health", headers=auth(ALICE)).json()) == {"status", "stream_manager", "running"}
        assert c.get("/health", headers=auth("x" * 20)).status_code == 401
    assert not srv.service.generations  # nothing ran


def test_two_authorization_headers_are_refused_whichever_comes_first(keyed):
    srv = keyed()
    with httpx.Client(timeout=10, base_url=srv.url) as c:
        for pair in ((ALICE, BOB), (BOB, ALICE), (ALICE, ALICE), ("x" * 20, ALICE)):
            headers = [("Authorization", f"Bearer {k}") for k in pair]
            for method, path, kw in (("GET", "/sessions", {}), ("POST", "/knowledge-chat/s1", {"json": {"query": Q}})):
                r = c.request(method, path, headers=headers, **kw)
                assert (r.status_code, r.json()) == (
                    400,
                    {
                        "success": False,
                        "error": "authorization: send one Authorization header, got 2",
                        "field": "authorization",
                    },
                )
        assert c.get("/sessions", headers=auth(ALICE)).status_code == 200  # one header: as before
    assert not srv.service.generations


def test_a_user_cannot_read_or_stop_another_users_stream_even_naming_them(keyed):
    srv = keyed()
    with httpx.Client(timeout=30, base_url=srv.url) as c:

        def listed(key: str) -> list[str]:
            return [
                s["id"] for s in c.get("/sessions", headers=dict(auth(key), **{"X-User-ID": "alice"})).json()["data"]
            ]

        # the lab is shared by this directory's tests: what BOB, CAROL and ALICE own already stays
        before = {key: listed(key) for key in (BOB, CAROL, ALICE)}
        sid = new_session(c, ALICE)
        r = c.post(f"/knowledge-chat/{sid}", json={"query": Q}, headers=auth(ALICE))
        assert r.status_code == 200
        mid = r.headers["x-message-id"]
        missing = c.get("/sessions/continue-stream/no-such", params={"message_id": mid}, headers=auth(BOB))
        assert (missing.status_code, missing.json()) == (
            404,
            {"success": False, "error": "Session not found", "field": "session_id"},
        )
        for key in (BOB, CAROL):  # same tenant, other tenant
            h = dict(auth(key), **{"X-User-ID": "alice"})
            for resp in (
                c.get(f"/sessions/continue-stream/{sid}", params={"message_id": mid}, headers=h),
                c.post(f"/sessions/{sid}/stop", json={"message_id": mid}, headers=h),
                c.post(f"/knowledge-chat/{sid}", json={"query": "what did alice ask?"}, headers=h),
                c.get(f"/sessions/{sid}", headers=h),
                c.delete(f"/sessions/{sid}", headers=h),
            ):
                assert (resp.status_code, resp.json()) == (404, missing.json())
                assert Q not in resp.text
            assert listed(key) == before[key] and sid not in before[key]
        mine = c.get(f"/sessions/{sid}", headers=auth(ALICE)).json()["data"]
        assert [m["role"] for m in mine["messages"]] == ["user", "assistant"] and mine["messages"][0]["content"] == Q
        r = c.get(f"/sessions/continue-stream/{sid}", params={"message_id": mid}, headers=auth(ALICE))
        assert r.status_code == 200 and parse_frames(iter(r.text.split("\n")))[-1].type == "complete"
        assert sorted(listed(ALICE)) == sorted([sid, *before[ALICE]])
        assert c.delete(f"/sessions/{sid}", headers=auth(ALICE)).json() == {"success": True}
        assert c.get(f"/sessions/{sid}", headers=auth(ALICE)).status_code == 404


def test_keys_never_reach_the_logs(keyed, caplog):
    caplog.set_level(logging.DEBUG)
    srv = keyed()
    with httpx.Client(timeout=30, base_url=srv.url) as c:
        sid = new_session(c, ALICE)
        c.post(f"/knowledge-chat/{sid}", json={"query": Q}, headers=auth(ALICE))
        c.get("/sessions", headers=auth(CAROL[:-2] + "zz"))
    text = caplog.text + repr(srv.service.config) + repr(srv.service.config.keys)
    for key in (ALICE, BOB, CAROL, CAROL[:-2]):
        assert key not in text
    assert repr(srv.service.config.keys) == "ApiKeys(3 keys)"


def test_keyless_server_is_one_local_user_whatever_the_headers_say(tenant_lab):
    from benchmarks.stream_reliability import ServerThread
    from rag_lab.stream.server import create_app

    with ServerThread(create_app(tenant_lab, server={})) as srv, httpx.Client(timeout=30, base_url=srv.url) as c:
        r = c.post("/knowledge-chat/s-local", json={"query": Q, "kb": "demo"}, headers={"X-User-ID": "alice"})
        assert r.status_code == 200
        mid = r.headers["x-message-id"]
        # another "user" is the same local user: keyless means single-user
        r = c.get("/sessions/continue-stream/s-local", params={"message_id": mid}, headers={"X-User-ID": "mallory"})
        assert r.status_code == 200
        session = tenant_lab.sessions.get_session("s-local")
        assert (session.user_id, session.tenant_id) == (LOCAL_PRINCIPAL.user_id, 0)


def test_keyless_server_refuses_peers_that_are_not_loopback(tenant_lab):
    """The bind check is the first line; this is the second, should the app be mounted elsewhere."""
    import asyncio

    from rag_lab.stream.server import create_app

    app = create_app(tenant_lab, server={})

    async def go(client_addr):
        transport = httpx.ASGITransport(app=app, client=client_addr)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.get("/sessions")

    far = asyncio.run(go(("10.1.2.3", 5000)))
    assert (far.status_code, far.json()["error"]) == (
        401,
        "this server has no API keys and only answers loopback clients",
    )
    assert asyncio.run(go(("127.0.0.1", 5000))).status_code == 200


def test_serve_refuses_a_public_bind_without_keys(tmp_path, capsys, monkeypatch):
    from rag_lab.cli import main

    monkeypatch.delenv(API_KEYS_ENV, raising=False)
    assert main(["--workspace", str(tmp_path / "ws"), "serve", "--host", "0.0.0.0", "--port", "9"]) == 2
    err = capsys.readouterr().err
    assert "--host 0.0.0.0: refusing to serve without API keys" in err and API_KEYS_ENV in err
    for host in ("0.0.0.0", "192.168.1.4", "::", "example.org"):
        with pytest.raises(AuthConfigError):
            check_bind(host, ApiKeys())
        check_bind(host, ApiKeys(KEYS))  # with keys any interface is fine
    for host in ("127.0.0.1", "127.8.0.1", "::1", "localhost", "::ffff:127.0.0.1"):
        check_bind(host, ApiKeys())


def test_key_table_from_config_and_environment():
    env = {API_KEYS_ENV: f"dave-key-0000000000000001=dave:3; erin-key-00000000000000002=erin:3, {ALICE}=alice:1"}
    keys = ApiKeys.from_config({"api_keys": KEYS}, env)
    assert len(keys) == 5  # alice's key given in both places counts once
    assert keys.authenticate("dave-key-0000000000000001") == Principal("dave", 3)
    assert keys.authenticate(CAROL) == Principal("carol", 2)
    assert keys.authenticate("dave-key-000000000000000") is None and keys.authenticate("") is None
    hashed = ApiKeys({"sha256:" + key_digest("frank-secret-key-123").hex(): {"user": "frank", "tenant": 4}})
    assert hashed.authenticate("frank-secret-key-123") == Principal("frank", 4)
    assert ApiKeys.from_config({}, {API_KEYS_ENV: '{"json-key-aaaaaaaaaaaa": {"user": "g", "tenant": 2}}'})
    assert bearer_token("Bearer  abc ") == "abc" and bearer_token("bearer abc") == "abc"
    assert bearer_token("Token abc") is None and bearer_token("Bearer ") is None and bearer_token(None) is None


@pytest.mark.parametrize(
    "entries, env, message",
    [
        ({"short": {"user": "a", "tenant": 1}}, "", "shorter than 16 characters"),
        ({ALICE: {"user": "alice", "tenant": 0}}, "", "tenant: expected an integer >= 1, got 0"),
        ({ALICE: {"user": "a b", "tenant": 1}}, "", ".user: expected 1-128 characters"),
        ({ALICE: {"user": "lab", "tenant": 1}}, "", "reserved for the keyless local user"),
        ({ALICE: {"user": "alice", "tenant": 1, "role": "admin"}}, "", "unknown field(s) role"),
        ({ALICE: {"user": "alice", "tenant": 1}, BOB: {"user": "alice", "tenant": 2}}, "", "already in tenant 1"),
        ({ALICE: {"user": "alice", "tenant": 1}}, f"{ALICE}=mallory:1", "given twice with different users"),
        ({}, "no-equals-sign", f"{API_KEYS_ENV}: entry 1: expected KEY=USER:TENANT"),
        ({}, "{not json", f"{API_KEYS_ENV}: not valid JSON"),
    ],
)
def test_bad_key_tables_name_the_field_but_never_the_key(entries, env, message):
    with pytest.raises(AuthConfigError) as info:
        ApiKeys.from_config({"api_keys": entries}, {API_KEYS_ENV: env})
    assert message in str(info.value)
    for key in (ALICE, BOB, "short"):
        assert f"{key}" not in str(info.value).replace("shorter", "")


def test_every_digest_is_compared_even_after_a_match(monkeypatch):
    import hmac

    import rag_lab.stream.auth as auth_mod

    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(auth_mod.hmac, "compare_digest", lambda a, b: calls.append(1) or real(a, b))
    keys = ApiKeys(KEYS)
    calls.clear()
    assert keys.authenticate(ALICE) == Principal("alice", 1)  # the first entry
    assert len(calls) == 3
    calls.clear()
    assert keys.authenticate("nobody-key-00000000000") is None
    assert len(calls) == 3


def test_is_loopback():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("") and not is_loopback(None)
