"""RedisStreamManager and RedisStreamDirectory against a real redis-server on loopback (§8.1),
and the factory that picks a backend from config / environment."""

from __future__ import annotations

import json

import pytest

from rag_lab.stream.factory import (
    StreamManagerConfigError,
    build_stream_directory,
    build_stream_manager,
    resolve_settings,
)
from rag_lab.stream.manager import MemoryStreamDirectory, MemoryStreamManager, stopped_answer
from rag_lab.stream.redis_manager import RedisStreamDirectory, RedisStreamManager, decode_event
from rag_lab.types.search_result import MatchType, SearchResult
from rag_lab.types.stream import StreamEvent


def answer(i: int, done: bool = False) -> StreamEvent:
    return StreamEvent("e1-answer", "answer", f"piece{i} ", done, data={"event_id": "e1-answer", "i": i})


# -- Redis backend -------------------------------------------------------------------------------


@pytest.mark.redis
def test_append_is_rpush_json_with_ttl_under_the_spec_key(redis_url):
    m = RedisStreamManager(url=redis_url)
    assert m.prefix == "stream:events" and m.ttl_s == 3600
    m.append_event("s1", "m1", StreamEvent("q-1", "agent_query", "", True, data={"session_id": "s1"}))
    key = "stream:events:s1:m1"
    assert m.client.llen(key) == 1
    stored = json.loads(m.client.lindex(key, 0))
    assert stored["id"] == "q-1" and stored["type"] == "agent_query" and stored["done"] is True
    assert stored["data"] == {"session_id": "s1"} and stored["timestamp"] > 0  # stamped on append
    assert 3590 <= m.client.ttl(key) <= 3600
    m.client.expire(key, 5)
    m.append_event("s1", "m1", answer(0))  # every append refreshes the TTL
    assert m.client.ttl(key) > 3590


@pytest.mark.redis
def test_get_events_reads_from_offset_with_next_offset(redis_url):
    m = RedisStreamManager(url=redis_url, prefix="t", ttl_s=60)
    assert m.get_events("s", "m", 0) == ([], 0)  # unknown stream
    for i in range(5):
        m.append_event("s", "m", answer(i))
    events, nxt = m.get_events("s", "m", 0)
    assert nxt == 5 and [e.data["i"] for e in events] == [0, 1, 2, 3, 4]
    assert all(isinstance(e, StreamEvent) and e.timestamp > 0 for e in events)
    events, nxt = m.get_events("s", "m", 3)
    assert nxt == 5 and [e.content for e in events] == ["piece3 ", "piece4 "]
    assert m.get_events("s", "m", 5) == ([], 5)
    assert m.client.ttl("t:s:m") <= 60


@pytest.mark.redis
def test_undecodable_entries_are_skipped_but_counted(redis_url):
    m = RedisStreamManager(url=redis_url)
    m.append_event("s", "m", answer(0))
    key = m.key("s", "m")
    m.client.rpush(key, b"{not json", b"[1, 2]", json.dumps({"no": "type"}), b"\xff\xfe")
    m.append_event("s", "m", answer(1))
    events, nxt = m.get_events("s", "m", 0)
    assert [e.data["i"] for e in events] == [0, 1]
    assert nxt == 6  # from + raw count, not + decoded count
    events, nxt = m.get_events("s", "m", 2)
    assert [e.data["i"] for e in events] == [1] and nxt == 6


@pytest.mark.redis
def test_references_keep_every_field_through_redis(redis_url):
    """Appendix B.16: upstream loses match_type and sub_chunk_id on the Redis path; we keep them."""
    m = RedisStreamManager(url=redis_url)
    ref = SearchResult(
        id="c1",
        content="text",
        knowledge_id="k1",
        chunk_index=2,
        score=0.75,
        match_type=MatchType.KEYWORDS,
        sub_chunk_id=["c1a"],
        knowledge_title="T",
    )
    m.append_event("s", "m", StreamEvent("r", "references", "", False, data={"references": [ref.to_dict()]}))
    (back,), _ = m.get_events("s", "m", 0)
    got = back.data["references"][0]
    assert got == json.loads(json.dumps(ref.to_dict()))
    assert SearchResult.from_dict(got).match_type == MatchType.KEYWORDS


@pytest.mark.redis
def test_two_managers_share_one_log(redis_url):
    """Two replicas: one writes, the other reads, and offsets mean the same thing."""
    a, b = RedisStreamManager(url=redis_url), RedisStreamManager(url=redis_url)
    a.append_event("s", "m", answer(0))
    b.append_event("s", "m", answer(1))
    assert [e.data["i"] for e in b.get_events("s", "m", 0)[0]] == [0, 1]
    assert a.get_events("s", "m", 1)[1] == 2


@pytest.mark.redis
def test_appends_work_after_a_redis_restart_and_a_reader_is_not_stranded(volatile_redis):
    """With --save '' a restart empties Redis: the events stored before are gone. Appends after it
    must work without a new client, and a reader positioned past the new list's end restarts at 0
    so it receives the new events instead of waiting for the list to outgrow its old offset."""
    m = RedisStreamManager(url=volatile_redis.url)
    for i in range(3):
        m.append_event("s", "m", answer(i))
    _, offset = m.get_events("s", "m", 0)
    assert offset == 3
    volatile_redis.restart()
    m.append_event("s", "m", answer(3))  # the client reconnects by itself
    m.append_event("s", "m", answer(4))
    events, nxt = m.get_events("s", "m", offset)
    assert [e.data["i"] for e in events] == [3, 4] and nxt == 2
    events, nxt = m.get_events("s", "m", 0)
    assert [e.data["i"] for e in events] == [3, 4]  # 0..2 were lost with the restart
    assert m.client.ttl(m.key("s", "m")) > 3590


@pytest.mark.redis
def test_redis_down_fails_loudly_then_recovers(volatile_redis):
    from redis.exceptions import ConnectionError as RedisConnectionError

    m = RedisStreamManager(url=volatile_redis.url, retries=1)
    m.append_event("s", "m", answer(0))
    volatile_redis.stop()
    with pytest.raises(RedisConnectionError):
        m.append_event("s", "m", answer(1))
    with pytest.raises(RedisConnectionError):
        m.get_events("s", "m", 0)
    volatile_redis.start()
    m.append_event("s", "m", answer(2))
    assert [e.data["i"] for e in m.get_events("s", "m", 0)[0]] == [2]


@pytest.mark.redis
def test_redis_directory_owner_is_first_claim_and_never_expires(redis_url):
    m = RedisStreamManager(url=redis_url, prefix="p", ttl_s=120)
    d = build_stream_directory(m)
    assert isinstance(d, RedisStreamDirectory)
    assert d.session_owner("s") is None
    assert d.claim_session("s", "alice") == "alice"
    assert d.claim_session("s", "bob") == "alice"
    assert d.session_owner("s") == "alice"
    assert m.client.ttl("p#owner:s") == -1
    assert d.message_request_id("s", "m") is None
    d.record_message("s", "m", "req-9")
    assert d.message_request_id("s", "m") == "req-9"
    assert 0 < m.client.ttl("p#request:s:m") <= 120
    assert m.get_events("s", "m", 0) == ([], 0)  # directory keys never read as events


def test_memory_directory_matches_the_protocol():
    d = build_stream_directory(MemoryStreamManager())
    assert isinstance(d, MemoryStreamDirectory)
    assert d.claim_session("s", "u1") == "u1" and d.claim_session("s", "u2") == "u1"
    assert d.session_owner("s") == "u1" and d.session_owner("x") is None
    d.record_message("s", "m", "r")
    assert d.message_request_id("s", "m") == "r" and d.message_request_id("s", "n") is None


def test_decode_event_rejects_what_a_reader_cannot_route():
    assert decode_event(b'{"id": "x", "type": "answer", "content": "hi"}').content == "hi"
    for raw in (b"", b"nope", b"[]", b'"answer"', b'{"type": 3}', b"\xff"):
        assert decode_event(raw) is None


def test_passwords_never_reach_reprs_or_messages():
    from rag_lab.stream.redis_manager import redact_url

    assert redact_url("redis://u:s3cret@h:1/0") == "redis://u:***@h:1/0"
    assert redact_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    m = RedisStreamManager(client=object(), url="redis://u:s3cret@h:1/0")
    assert "s3cret" not in repr(m)
    assert "s3cret" not in resolve_settings("redis://u:s3cret@h:1/0", {}).describe()


def test_ttl_and_prefix_are_validated():
    with pytest.raises(ValueError, match="ttl_s"):
        RedisStreamManager(client=object(), ttl_s=0)
    with pytest.raises(ValueError, match="prefix"):
        RedisStreamManager(client=object(), prefix="")


# -- factory -------------------------------------------------------------------------------------


def test_factory_defaults_to_memory():
    assert resolve_settings(None, {}).type == "memory"
    assert isinstance(build_stream_manager(None, {}), MemoryStreamManager)
    assert isinstance(build_stream_manager("memory", {"STREAM_MANAGER_TYPE": "redis"}), MemoryStreamManager)


def test_factory_reads_the_spec_environment():
    env = {
        "STREAM_MANAGER_TYPE": "redis",
        "REDIS_ADDR": "10.0.0.5:6380",
        "REDIS_USERNAME": "u",
        "REDIS_PASSWORD": "secret",
        "REDIS_DB": "2",
        "REDIS_PREFIX": "chat:events",
    }
    s = resolve_settings(None, env)
    assert (s.type, s.url, s.prefix, s.ttl_s, s.username, s.password) == (
        "redis",
        "redis://10.0.0.5:6380/2",
        "chat:events",
        3600,
        "u",
        "secret",
    )
    assert "secret" not in s.describe()


def test_factory_config_wins_over_the_environment_field_by_field():
    env = {"STREAM_MANAGER_TYPE": "memory", "REDIS_ADDR": "10.0.0.5:6380", "REDIS_PREFIX": "env:p"}
    s = resolve_settings({"type": "redis", "prefix": "cfg:p", "ttl_s": 60}, env)
    assert (s.type, s.url, s.prefix, s.ttl_s) == ("redis", "redis://10.0.0.5:6380/0", "cfg:p", 60)
    s = resolve_settings("redis://127.0.0.1:7000/3", env)
    assert (s.type, s.url, s.prefix) == ("redis", "redis://127.0.0.1:7000/3", "env:p")
    assert resolve_settings({"type": "redis", "addr": "h:1", "db": 4}, env).url == "redis://h:1/4"


@pytest.mark.parametrize(
    "config, env, message",
    [
        ("kafka", {}, "stream_manager.type: unknown stream manager 'kafka'"),
        (None, {"STREAM_MANAGER_TYPE": "disk"}, "STREAM_MANAGER_TYPE: unknown stream manager 'disk'"),
        ({"type": "redis", "ttl": 5}, {}, "unknown key(s) ttl"),
        ({"type": "redis", "ttl_s": 0}, {}, "stream_manager.ttl_s: expected an integer >= 1, got 0"),
        ({"type": "redis", "ttl_s": "soon"}, {}, "stream_manager.ttl_s"),
        ({"type": "redis"}, {"REDIS_DB": "x"}, "REDIS_DB: expected an integer >= 0, got 'x'"),
        ({"type": "redis"}, {"REDIS_ADDR": "nohost"}, "REDIS_ADDR: expected host:port, got 'nohost'"),
        ({"type": "redis", "url": "http://x"}, {}, "stream_manager.url: expected redis://"),
        ({"type": "redis", "url": "redis://h:1", "db": 2}, {}, "either url or addr/db"),
        ({"type": "redis", "prefix": " "}, {}, "stream_manager.prefix: expected a non-empty string"),
        ({"type": "memory", "url": "redis://h:1"}, {}, "only apply to type 'redis'"),
        (42, {}, "expected 'memory', 'redis', a redis:// URL or a mapping"),
    ],
)
def test_factory_errors_name_the_field(config, env, message):
    with pytest.raises(StreamManagerConfigError) as info:
        resolve_settings(config, env)
    assert message in str(info.value)


@pytest.mark.redis
def test_factory_builds_a_working_redis_manager(redis_url):
    m = build_stream_manager({"type": "redis", "url": redis_url, "prefix": "f", "ttl_s": 30}, {}, check=True)
    assert isinstance(m, RedisStreamManager) and m.prefix == "f" and m.ttl_s == 30
    m.append_event("s", "m", answer(0))
    assert m.get_events("s", "m", 0)[1] == 1 and 0 < m.client.ttl("f:s:m") <= 30


def test_factory_check_reports_an_unreachable_redis():
    from tests.stream.conftest import free_port

    pytest.importorskip("redis")
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(StreamManagerConfigError, match=f"cannot reach Redis at {url}"):
        build_stream_manager(url, {}, check=True)


def test_handler_survives_a_store_that_refuses_appends(caplog):
    """A store outage loses events for readers but never kills the answer (logged, counted)."""
    from rag_lab.stream.bus import BusEventType, EventBus
    from rag_lab.stream.handler import AgentStreamHandler

    class Down:
        def append_event(self, *a):
            raise ConnectionError("store is down")

        def get_events(self, *a):
            return [], 0

    handler = AgentStreamHandler(Down(), "s", "m")
    bus = EventBus()
    handler.subscribe(bus)
    bus.emit(BusEventType.FINAL_ANSWER, {"content": "partial ", "done": False}, event_id="a")
    bus.emit(BusEventType.FINAL_ANSWER, {"content": "", "done": True}, event_id="a")
    assert handler.append_failures == 2 and handler.answer_text == "partial "
    assert "could not store a answer event: store is down" in caplog.text


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_a_stopped_stream_takes_no_further_event_from_any_writer(backend, request):
    """Stop is final: once a ``stop`` is stored, appends from any manager (another replica) are
    refused, the stop itself included when sent again; the answer up to the stop is the answer."""
    if backend == "redis":
        url = request.getfixturevalue("redis_url")
        generating, stopping = RedisStreamManager(url=url), RedisStreamManager(url=url)
    else:
        generating = stopping = MemoryStreamManager()
    generating.append_event("s", "m", StreamEvent("a1", "answer", "Built ", False))
    stop = StreamEvent("stop-1", "stop", "", True)
    stopping.append_event("s", "m", stop)
    generating.append_event("s", "m", StreamEvent("a1", "answer", "in 1874.", False))
    generating.append_event("s", "m", StreamEvent("c1", "complete", "", True))
    stopping.append_event("s", "m", StreamEvent("stop-2", "stop", "", True))
    events, offset = generating.get_events("s", "m", 0)
    assert [e.type for e in events] == ["answer", "stop"] and offset == 2
    assert stopped_answer(events) == "Built "
    assert generating.refused_after_stop + (stopping.refused_after_stop if stopping is not generating else 0) == 3
    other, _ = stopping.get_events("s", "other")
    assert other == [] and stopped_answer(other) is None
    assert generating.is_stopped("s", "m") and not generating.is_stopped("s", "other")  # the stop watcher's check
