"""SQLiteSessionStore: sessions CRUD, pinned, last request state, fork, rewind, messages, and the
same history behaviour as the in-memory store (spec §4.1, §9)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.pipeline.plugins.load_history import load_and_process_history
from rag_lab.session.sqlite_store import SessionAccessDenied, SessionNotFound, SQLiteSessionStore
from rag_lab.session.store import MemoryMessageStore
from rag_lab.types.search_result import SearchResult


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """The store on each backend: the PostgreSQL one is held to the same behaviour."""
    where = tmp_path / "sessions.sqlite" if request.param == "sqlite" else request.getfixturevalue("pg_dsn")
    s = SQLiteSessionStore(where)
    yield s
    s.close()


def _turn(store, sid, q, a, t, rid=None, **user_fields):
    rid = rid or f"r{t}"
    u = store.add_message(sid, "user", q, rid, created_at=t, **user_fields)
    b = store.add_message(sid, "assistant", a, rid, created_at=t + 0.5)
    return u, b


def test_session_crud_and_errors(store):
    s = store.create_session("alice", title="", agent_id="quick")
    assert store.get_session(s.id).user_id == "alice" and s.title == "" and not s.is_pinned
    store.update_session(s.id, title="Lighthouses")
    assert store.get_session(s.id).title == "Lighthouses"
    with pytest.raises(SessionNotFound, match="session 'nope' not found"):
        store.get_session("nope")
    with pytest.raises(ValueError, match="already exists"):
        store.create_session("bob", session_id=s.id)
    with pytest.raises(TypeError, match="unknown field.*colour"):
        store.update_session(s.id, colour="red")
    with pytest.raises(SessionAccessDenied, match="does not belong to user 'bob'"):
        store.get_owned_session(s.id, "bob")
    assert store.get_owned_session(s.id, "alice").id == s.id
    assert store.ensure_session(s.id, "bob").user_id == "alice"  # existing one is returned as is
    assert store.ensure_session("fixed-id", "bob").user_id == "bob"


def test_add_message_needs_an_existing_session(store):
    with pytest.raises(SessionNotFound, match="create it before adding messages"):
        store.add_message("ghost", "user", "hi", "r1")
    s = store.create_session("u")
    with pytest.raises(TypeError, match="unknown message field"):
        store.add_message(s.id, "user", "hi", "r1", colour="red")


def test_list_is_paginated_pinned_first_then_recent(store):
    ids = [store.create_session("u", created_at=float(i)).id for i in range(5)]
    store.create_session("other")
    # updated_at follows the writes below, so the order is by write time
    for sid in ids:
        store.update_session(sid, title=sid[:4])
    store.set_pinned(ids[1], True)
    page1 = store.list_sessions("u", page=1, page_size=2)
    assert page1.total == 5 and [x.id for x in page1.items] == [ids[1], ids[4]]
    page3 = store.list_sessions("u", page=3, page_size=2)
    assert [x.id for x in page3.items] == [ids[0]]
    assert store.list_sessions("u", page=4, page_size=2).items == []
    with pytest.raises(ValueError, match="page must be"):
        store.list_sessions("u", page=0)
    with pytest.raises(ValueError, match="page_size must be"):
        store.list_sessions("u", page_size=0)
    store.set_pinned(ids[1], False)
    assert not store.get_session(ids[1]).is_pinned


def test_last_request_state_round_trips(store):
    s = store.create_session("u")
    state = {"agent_id": "a1", "model_id": "m", "knowledge_base_ids": ["kb1"], "web_search": True, "thinking": None}
    assert store.update_last_request_state(s.id, state).last_request_state == state
    with pytest.raises(TypeError, match="must be a dict"):
        store.update_last_request_state(s.id, ["x"])
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        store.update_last_request_state(s.id, {"x": object()})


def test_delete_batch_and_purge_cascade_to_messages(store):
    a, b, c = (store.create_session(u) for u in ("u", "u", "v"))
    _turn(store, a.id, "q", "a", 1.0)
    assert store.delete_session(a.id) and not store.delete_session(a.id)
    assert store.message_count(a.id) == 0
    assert store.batch_delete_sessions([b.id, c.id], user_id="u") == 1  # c belongs to v
    assert store.get_session(c.id).user_id == "v"
    store.create_session("v")
    assert store.purge_sessions("v") == 2 and store.list_sessions("v").total == 0
    assert store.batch_delete_sessions([]) == 0


def test_messages_round_trip_with_references_images_and_flags(store):
    s = store.create_session("u")
    ref = SearchResult(id="c1", content="text", knowledge_id="k1", knowledge_title="Doc", score=0.8)
    m = store.add_message(
        s.id,
        "assistant",
        "answer",
        "r1",
        knowledge_references=[ref],
        is_completed=False,
        image_urls=["http://x/1.png"],
        used_memories=[{"id": "m1"}],
        extra={"k": 1},
    )
    got = store.get_message(s.id, m.id)
    assert got.knowledge_references[0].id == "c1" and got.knowledge_references[0].score == 0.8
    assert (got.is_completed, got.image_urls, got.used_memories, got.extra) == (
        False,
        ["http://x/1.png"],
        [{"id": "m1"}],
        {"k": 1},
    )
    done = store.complete_message(s.id, m.id, content="final answer", is_fallback=True, agent_steps=[{"s": 1}])
    assert (
        done.is_completed and done.is_fallback and done.content == "final answer" and done.updated_at >= got.updated_at
    )
    with pytest.raises(KeyError, match="message 'zzz' not found"):
        store.update_message(s.id, "zzz", content="x")
    store.update_rendered_content(s.id, m.id, "<ctx>rendered</ctx>")
    assert store.get_message(s.id, m.id).rendered_content == "<ctx>rendered</ctx>"


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_finish_message_saves_what_complete_message_saves(tmp_path, kind):
    """§9.1 step 1 without reading the message back (the lab does not need it)."""
    store = SQLiteSessionStore(tmp_path / "s.sqlite") if kind == "sqlite" else MemoryMessageStore()
    sid = store.create_session("u").id if kind == "sqlite" else "s1"
    a = store.add_message(sid, "assistant", "", "r1", is_completed=False)
    b = store.add_message(sid, "assistant", "", "r2", is_completed=False)
    fields = dict(content="done", knowledge_references=[SearchResult(id="c1", score=0.5)], is_fallback=True)
    assert store.finish_message(sid, a.id, **fields) is None
    done = store.complete_message(sid, b.id, **fields)
    got = store.get_message(sid, a.id)
    assert (got.content, got.is_completed, got.is_fallback, [r.id for r in got.knowledge_references]) == (
        "done",
        True,
        True,
        ["c1"],
    )
    assert got.updated_at >= a.created_at and (done.content, done.is_completed) == ("done", True)
    with pytest.raises(KeyError, match="message 'zzz' not found"):
        store.finish_message(sid, "zzz", content="x")


def test_add_message_commits_the_message_with_the_session_time_or_nothing(store):
    s = store.create_session("u", created_at=100.0)
    m = store.add_message(s.id, "user", "q", "r1")
    assert store.get_session(s.id).updated_at > 100.0 and store.message_count(s.id) == 1
    with pytest.raises(SessionNotFound, match="session 'gone' not found"):
        store.add_message("gone", "user", "q", "r2")
    assert store.list_messages(s.id) == [m] and store.message_count("gone") == 0
    store.add_message(s.id, "user", "q2", "r3")  # the connection is usable after the rollback
    assert store.message_count(s.id) == 2


def test_first_image_caption_written_only_when_an_image_is_stored(store):
    s = store.create_session("u")
    with_img = store.add_message(s.id, "user", "what is this?", "r1", image_urls=["a.png", "b.png"])
    plain = store.add_message(s.id, "user", "hi", "r2")
    assert store.set_first_image_caption(s.id, with_img.id, "a cat")
    assert store.get_message(s.id, with_img.id).image_captions == ["a cat", ""]
    assert not store.set_first_image_caption(s.id, plain.id, "nothing")
    assert store.get_message(s.id, plain.id).image_captions == []
    store.update_message_images(s.id, with_img.id, ["a.png", "b.png"], ["x", "y"])
    assert store.get_message(s.id, with_img.id).image_captions == ["x", "y"]
    with pytest.raises(ValueError, match="3 captions for 2 images"):
        store.update_message_images(s.id, with_img.id, ["a", "b"], ["1", "2", "3"])


def test_recent_messages_newest_first_and_user_first_on_equal_timestamps(store):
    s = store.create_session("u")
    store.add_message(s.id, "assistant", "A1", "r1", created_at=5.0)
    store.add_message(s.id, "user", "Q1", "r1", created_at=5.0)
    store.add_message(s.id, "user", "Q0", "r0", created_at=1.0)
    assert [m.content for m in store.get_recent_messages(s.id, 10)] == ["A1", "Q1", "Q0"]
    assert [m.content for m in store.list_messages(s.id)] == ["Q0", "Q1", "A1"]
    assert [m.content for m in store.get_recent_messages(s.id, 1)] == ["A1"]
    assert store.get_recent_messages(s.id, 0) == []


def test_history_algorithm_same_result_on_both_stores(store):
    mem = MemoryMessageStore()
    s = store.create_session("u")
    for st_, sid in ((store, s.id), (mem, s.id)):
        _turn(st_, sid, "Who built it?", "<think>hmm\nlet me see</think>Mara Quill.", 1.0)
        _turn(st_, sid, "When?", "In 1874.", 2.0, image_urls=["x.png"], image_captions=["a tower"])
        st_.add_message(sid, "user", "unanswered", "r9", created_at=3.0)
        _turn(st_, sid, "Colour?", "Red and white.", 4.0, attachment_prompt="<attachments/>")
    a = load_and_process_history(store, s.id, 2, 20)
    b = load_and_process_history(mem, s.id, 2, 20)
    assert (
        [(h.query, h.answer) for h in a]
        == [(h.query, h.answer) for h in b]
        == [
            ("When?\n\n[用户上传图片内容]\na tower", "In 1874."),
            ("Colour?\n\n<attachments/>", "Red and white."),
        ]
    )
    full = load_and_process_history(store, s.id, 5, 20)
    assert full[0].answer == "Mara Quill."  # thinking stripped


def test_fork_copies_history_up_to_the_message(store):
    s = store.create_session("alice", title="T", agent_id="ag")
    store.update_last_request_state(s.id, {"model": "m"})
    u1, a1 = _turn(store, s.id, "q1", "a1", 1.0)
    _turn(store, s.id, "q2", "a2", 2.0)
    f = store.fork_session(s.id, a1.id)
    assert (f.parent_session_id, f.forked_from_message_id, f.user_id, f.title, f.agent_id) == (
        s.id,
        a1.id,
        "alice",
        "T",
        "ag",
    )
    assert f.last_request_state == {"model": "m"}
    copied = store.list_messages(f.id)
    assert [(m.role, m.content, m.request_id) for m in copied] == [
        ("user", "q1", u1.request_id),
        ("assistant", "a1", a1.request_id),
    ]
    assert {m.id for m in copied}.isdisjoint({u1.id, a1.id})
    assert store.message_count(s.id) == 4  # the source is untouched
    whole = store.fork_session(s.id, user_id="bob", title="copy")
    assert store.message_count(whole.id) == 4 and whole.user_id == "bob" and whole.title == "copy"
    assert whole.forked_from_message_id == store.list_messages(s.id)[-1].id
    with pytest.raises(KeyError, match="message 'nope' not found"):
        store.fork_session(s.id, "nope")
    assert store.list_sessions("alice").total == 2  # the failed fork left nothing behind


def test_rewind_deletes_what_follows(store):
    s = store.create_session("u")
    u1, a1 = _turn(store, s.id, "q1", "a1", 1.0)
    u2, a2 = _turn(store, s.id, "q2", "a2", 2.0)
    assert store.rewind_session(s.id, u2.id) == 1
    assert [m.content for m in store.list_messages(s.id)] == ["q1", "a1", "q2"]
    assert store.rewind_session(s.id, u2.id, keep_message=False) == 1
    assert [m.content for m in store.list_messages(s.id)] == ["q1", "a1"]
    assert store.rewind_session(s.id, a1.id) == 0
    with pytest.raises(SessionNotFound):
        store.rewind_session("ghost", a1.id)


def test_reopen_keeps_data_and_rejects_other_files(tmp_path):
    path = tmp_path / "s.sqlite"
    with SQLiteSessionStore(path) as st_:
        s = st_.create_session("u", title="kept")
    with SQLiteSessionStore(path) as st_:
        assert st_.get_session(s.id).title == "kept"
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ValueError, match="not a usable session database"):
        SQLiteSessionStore(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        SQLiteSessionStore(tmp_path / "missing" / "s.sqlite")


def test_concurrent_writers_lose_nothing(store):
    s = store.create_session("u")

    def writer(k: int) -> None:
        for i in range(25):
            store.add_message(s.id, "user", f"{k}-{i}", f"r{k}-{i}")

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.message_count(s.id) == 100


@settings(max_examples=40)
@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=12), st.data())
def test_fork_then_rewind_equals_prefix(times, data):
    """Property: forking at message k and rewinding at message k keep the same chronological
    prefix of (role, content)."""
    with SQLiteSessionStore(":memory:") as store:
        s = store.create_session("u")
        for i, t in enumerate(times):
            store.add_message(s.id, "user" if i % 2 == 0 else "assistant", f"m{i}", f"r{i // 2}", created_at=float(t))
        chrono = store.list_messages(s.id)
        k = data.draw(st.integers(min_value=0, max_value=len(chrono) - 1))
        fork = store.fork_session(s.id, chrono[k].id)
        forked = [(m.role, m.content) for m in store.list_messages(fork.id)]
        store.rewind_session(s.id, chrono[k].id)
        assert (
            forked
            == [(m.role, m.content) for m in store.list_messages(s.id)]
            == [(m.role, m.content) for m in chrono[: k + 1]]
        )


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
def test_insert_message_stores_what_add_message_stores(tmp_path, kind):
    store = SQLiteSessionStore(tmp_path / "s.sqlite") if kind == "sqlite" else MemoryMessageStore()
    sid = store.create_session("u").id if kind == "sqlite" else "s1"
    refs = [SearchResult(id="c1", score=0.5, metadata={"base_score": "0.4"})]
    kw = dict(knowledge_references=refs, created_at=10.0, is_completed=True, used_memories=[{"id": "m"}])
    added = store.add_message(sid, "assistant", "answer", "r1", **kw)
    mid = store.insert_message(sid, "assistant", "answer", "r1", **kw)
    assert isinstance(mid, str) and mid != added.id
    got = store.get_message(sid, mid)
    assert (got.role, got.content, got.request_id, got.created_at, got.is_completed, got.used_memories) == (
        "assistant",
        "answer",
        "r1",
        10.0,
        True,
        [{"id": "m"}],
    )
    assert got.knowledge_references == added.knowledge_references == refs
    with pytest.raises(TypeError, match="unknown message field"):
        store.insert_message(sid, "user", "q", "r2", colour="red")


def test_generations_in_flight_are_recorded_refreshed_restarted_and_ended(store):
    """The crash-recovery records (rag_lab.stream.recovery): a second begin of the same message
    starts its record over (no partial answer kept), heartbeats save the answer so far."""
    s = store.create_session("alice")
    store.begin_generation(
        s.id, "m1", request_id="r1", user_id="alice", tenant_id=1, query="q?", host="h", pid=7, instance="i1"
    )
    store.heartbeat_generations("i1", {(s.id, "m1"): ("Partial ans", [{"id": "c1"}])})
    (rec,) = store.list_generations()
    assert (rec.session_id, rec.message_id, rec.request_id, rec.user_id, rec.tenant_id, rec.query) == (
        s.id,
        "m1",
        "r1",
        "alice",
        1,
        "q?",
    )
    assert (rec.host, rec.pid, rec.instance, rec.partial, rec.knowledge_references) == (
        "h",
        7,
        "i1",
        "Partial ans",
        [{"id": "c1"}],
    )
    assert rec.heartbeat >= rec.started_at > 0
    store.begin_generation(s.id, "m1", request_id="r2", user_id="alice", tenant_id=1, query="again", instance="i2")
    (rec,) = store.list_generations()
    assert (rec.request_id, rec.query, rec.instance, rec.partial, rec.knowledge_references) == (
        "r2",
        "again",
        "i2",
        "",
        [],
    )
    store.end_generation(s.id, "m1")
    assert store.list_generations() == []
