"""The storage layer under both caches: counts, the bound's exact eviction, use times, layouts, faults;
the WAL switch every SQLite file of rag_lab opens with."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import weakref
from pathlib import Path

import pytest

from rag_lab import blobstore
from rag_lab.blobstore import ROW_OVERHEAD, BlobStore, _flush_at_exit
from rag_lab.knowledge.sqlite_conn import ThreadConnections
from rag_lab.memory.memory_db import MemoryDB
from rag_lab.session.session_db import SessionDB


def key(i: int) -> bytes:
    return i.to_bytes(32, "big")


def used_times(path: Path) -> dict[bytes, int]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT hash, used FROM uses"))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1_000_000.0]
    monkeypatch.setattr(blobstore.time, "time", lambda: now[0])
    return now


def test_puts_gets_and_counters(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "a" / "b" / "s.sqlite", 10_000, "test cache")  # parents created
    assert store.put_many("s", []) == 0
    assert store.put_many("s", [(key(1), b"one"), (key(2), b"two")]) == 2
    assert store.put_many("s", [(key(2), b"TWO"), (key(3), b"three")]) == 1  # a key there keeps its value
    assert store.get_many([key(1), key(2), key(9)]) == {key(1): b"one", key(2): b"two"}
    assert store.put_many("t", [(key(2), b"2")], replace=True) == 0  # replaced: moved to space t
    assert store.get_many([key(2)]) == {key(2): b"2"}
    assert store.has_many([key(1), key(2), key(9)]) == {key(1), key(2)}
    assert (store.reads, store.writes, store.evicted) == (3, 3, 0)
    s = store.stats()
    assert s["spaces"] == {"s": {"rows": 2, "bytes": 8 + 2 * ROW_OVERHEAD}, "t": {"rows": 1, "bytes": 1 + ROW_OVERHEAD}}
    assert (s["rows"], s["bytes"], s["max_bytes"]) == (3, 9 + 3 * ROW_OVERHEAD, 10_000)
    assert store._conn() is store._conn()  # one connection per thread
    other: list[sqlite3.Connection] = []
    t = threading.Thread(target=lambda: other.append(store._conn()))
    t.start()
    t.join()
    assert other[0] is not store._conn()
    store.close()
    assert store.get_many([key(3)]) == {key(3): b"three"}  # opens again after close
    assert store.clear(lambda name: name == "t") == 1 and store.stats()["spaces"].keys() == {"s"}
    with pytest.raises(ValueError, match=r"^test cache: max_bytes must be >= 0, got -1$"):
        BlobStore(tmp_path / "x.sqlite", -1, "test cache")


def test_more_keys_than_one_query_holds(tmp_path: Path, clock: list[float]) -> None:
    store = BlobStore(tmp_path / "s.sqlite", 10**9, "test cache")
    keys = [key(i) for i in range(1_234)]
    assert store.put_many("s", [(k, b"v") for k in keys]) == len(keys)
    assert len(store.get_many(keys) or {}) == len(keys)
    assert store.has_many(keys) == set(keys)
    clock[0] += 3600
    store.get_many(keys)
    store.flush()
    assert set(used_times(tmp_path / "s.sqlite").values()) == {1_003_600}


def test_eviction_takes_the_least_recently_used_down_to_nine_tenths(tmp_path: Path, clock: list[float]) -> None:
    row = 10 + ROW_OVERHEAD
    store = BlobStore(tmp_path / "s.sqlite", 10 * row, "test cache")
    for i in range(10):
        store.put_many("s", [(key(i), b"x" * 10)])
        clock[0] += 120
    assert store.evicted == 0 and store.stats()["bytes"] == 10 * row  # at the bound: nothing goes
    store.get_many([key(0)])  # read: the most recently used after the flush an eviction does
    clock[0] += 120
    store.put_many("s", [(key(10), b"x" * 10)])  # 11 rows: down to 9 (exactly 90 %)
    assert store.evicted == 2 and store.stats()["bytes"] == 9 * row
    assert sorted(store.get_many([key(i) for i in range(11)]) or {}) == [key(0)] + [key(i) for i in range(3, 11)]
    # big rows: one eviction frees enough
    big = BlobStore(tmp_path / "big.sqlite", 10_000, "test cache")
    for i in range(5):
        big.put_many("s", [(key(i), b"x" * (2000 - ROW_OVERHEAD))])
        clock[0] += 120
    big.put_many("s", [(key(5), b"y")])
    assert big.evicted == 1 and sorted(big.get_many([key(i) for i in range(6)]) or {}) == [key(i) for i in range(1, 6)]
    # a bound of zero keeps nothing, the last row included
    none = BlobStore(tmp_path / "none.sqlite", 0, "test cache")
    assert none.put_many("s", [(key(1), b"v")]) == 1
    assert none.stats()["rows"] == 0 and none.evicted == 1
    none.put_many("s", [(key(2), b"v"), (key(3), b"w")])
    assert none.stats()["rows"] == 0 and none.evicted == 3


def test_use_times_are_written_when_stale_in_batches(tmp_path: Path, clock: list[float], monkeypatch) -> None:
    path = tmp_path / "s.sqlite"
    store = BlobStore(path, 10**6, "test cache")
    store.put_many("s", [(key(i), b"v") for i in range(4)])
    clock[0] += blobstore.TOUCH_S  # exactly a minute later: not stale yet
    store.get_many([key(0)])
    store.flush()
    assert used_times(path)[key(0)] == 1_000_000
    clock[0] += 1  # now stale
    store.get_many([key(0)])
    assert used_times(path)[key(0)] == 1_000_000  # a read writes nothing
    store.flush()
    assert used_times(path)[key(0)] == 1_000_061
    monkeypatch.setattr(blobstore, "TOUCH_BATCH", 3)
    clock[0] += 3600
    store.get_many([key(1), key(2)])
    assert used_times(path)[key(1)] == 1_000_000  # two pending: below the batch
    store.get_many([key(3)])
    assert [used_times(path)[key(i)] for i in (1, 2, 3)] == [1_003_661] * 3  # the third fills it
    clock[0] += 3600
    store.get_many([key(0)])
    _flush_at_exit(weakref.ref(store))  # what runs at process exit
    assert used_times(path)[key(0)] == 1_007_261
    gone = BlobStore(tmp_path / "gone.sqlite", 1, "test cache")
    ref = weakref.ref(gone)
    del gone
    _flush_at_exit(ref)  # a store collected before exit: nothing to do


def test_a_file_of_an_unknown_layout_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with sqlite3.connect(path) as conn:
        for table in ("entries", "uses", "spaces", "totals", "vectors", "models", "other"):
            conn.execute(f"CREATE TABLE {table} (x)")
        conn.execute("PRAGMA user_version = 2")
    store = BlobStore(path, 10**6, "test cache")
    assert store.put_many("s", [(key(1), b"v")]) == 1 and store.get_many([key(1)]) == {key(1): b"v"}
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        columns = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
    assert tables == {"entries", "uses", "spaces", "totals", "other"} and columns == ["hash", "space_id", "value"]


def test_a_fault_is_logged_once_and_reported_as_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not a database" * 100)
    store = BlobStore(path, 10**6, "test cache")
    with caplog.at_level(logging.WARNING, logger="rag_lab.blobstore"):
        assert store.get_many([key(1)]) is None
        assert store.has_many([key(1)]) is None
        assert store.put_many("s", [(key(1), b"v")]) is None
        store._touched.add(key(1))
        store.flush()
    assert [r.getMessage() for r in caplog.records] == [
        f"test cache {path}: a read failed (file is not a database); values are computed instead"
    ]
    fresh = BlobStore(path, 10**6, "test cache")
    with caplog.at_level(logging.WARNING, logger="rag_lab.blobstore"):
        fresh._touched.add(key(1))
        fresh.flush()
    assert caplog.records[-1].getMessage() == (
        f"test cache {path}: a write failed (file is not a database); values are computed instead"
    )
    for call, what in (
        (lambda b: b.has_many([key(1)]), "read"),
        (lambda b: b.put_many("s", [(key(1), b"v")]), "write"),
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rag_lab.blobstore"):
            assert call(BlobStore(path, 10**6, "test cache")) is None
        assert [r.getMessage() for r in caplog.records] == [
            f"test cache {path}: a {what} failed (file is not a database); values are computed instead"
        ]
    with pytest.raises(sqlite3.DatabaseError, match=r"^test cache .*s\.sqlite: file is not a database$"):
        store.stats()


def test_stats_name_the_file_and_its_size(tmp_path: Path) -> None:
    store = BlobStore(tmp_path / "s.sqlite", 10**6, "test cache")
    store.put_many("s", [(key(1), b"v" * 5000)])
    s = store.stats()
    assert s["path"] == str(tmp_path / "s.sqlite") and s["file_bytes"] > 5000


def test_use_times_read_are_written_at_process_exit(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "s.sqlite"
    BlobStore(path, 10**6, "test cache").put_many("s", [(key(1), b"v")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE uses SET used = 5")
    script = textwrap.dedent(
        f"""
        from rag_lab.blobstore import BlobStore
        store = BlobStore({str(path)!r}, 10**6, "test cache")
        assert store.get_many([(1).to_bytes(32, "big")])
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True)
    assert used_times(path)[key(1)] > 5


def test_a_file_that_cannot_be_opened_is_not_tried_again_until_close(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not a database" * 100)
    opened: list[str] = []
    real = sqlite3.connect

    def counting(*args: object, **kwargs: object) -> sqlite3.Connection:
        opened.append(str(args[0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(blobstore.sqlite3, "connect", counting)
    store = BlobStore(path, 10**6, "test cache")
    assert store.get_many([key(1)]) is None and store.put_many("s", [(key(1), b"v")]) is None
    assert store.has_many([key(1)]) is None and opened == [str(path)]
    path.unlink()
    store.close()  # a close forgets the failure: the next call opens the (now new) file
    assert store.put_many("s", [(key(1), b"v")]) == 1 and opened == [str(path)] * 2


def test_the_exit_flush_does_not_queue_behind_another_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.sqlite"
    store = BlobStore(path, 10**6, "test cache")
    store.put_many("s", [(key(1), b"v")])
    statements: list[str] = []
    store._conn().set_trace_callback(statements.append)

    def read_a_stale_row() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE uses SET used = 5")
        assert store.get_many([key(1)]) == {key(1): b"v"} and store._touched == {key(1)}

    read_a_stale_row()
    store.flush(wait_s=2.5)  # the file is free: written, and the busy timeout is the usual one again
    assert [q for q in statements if "busy_timeout" in q] == [
        "PRAGMA busy_timeout = 2500",
        "PRAGMA busy_timeout = 30000",
    ]
    assert used_times(path)[key(1)] > 5 and store._touched == set()
    read_a_stale_row()
    statements.clear()
    monkeypatch.setattr(blobstore, "BUSY_TIMEOUT_S", 0.05)  # what an ordinary write waits from here on
    monkeypatch.setattr(blobstore, "EXIT_WAIT_S", 0.25)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's write in progress
    with caplog.at_level(logging.DEBUG, logger="rag_lab.blobstore"):
        _flush_at_exit(weakref.ref(store))
    assert [q for q in statements if "busy_timeout" in q] == ["PRAGMA busy_timeout = 250", "PRAGMA busy_timeout = 50"]
    assert used_times(path)[key(1)] == 5 and store._touched == set()  # dropped, not a fault
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", f"test cache {path}: busy, 1 use times dropped")
    ]
    caplog.clear()
    assert store.get_many([key(1)]) == {key(1): b"v"} and store._touched == {key(1)}  # still stale
    with caplog.at_level(logging.DEBUG, logger="rag_lab.blobstore"):
        store.flush()  # an ordinary flush on a busy file: a fault, logged, the use times dropped
    assert store._touched == set() and [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", f"test cache {path}: a write failed (database is locked); values are computed instead")
    ]
    holder.execute("ROLLBACK")
    store.get_many([key(1)])
    store.flush()
    assert used_times(path)[key(1)] > 5 and store._touched == set()


def test_an_exit_flush_on_a_file_that_cannot_be_opened_is_a_fault(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite"
    path.write_bytes(b"not a database" * 100)
    store = BlobStore(path, 10**6, "test cache")
    store._touched.add(key(1))
    with caplog.at_level(logging.WARNING, logger="rag_lab.blobstore"):
        store.flush(wait_s=0)
    assert store._touched == set() and [r.getMessage() for r in caplog.records] == [
        f"test cache {path}: a write failed (file is not a database); values are computed instead"
    ]


def test_a_process_exits_without_waiting_for_a_busy_file(tmp_path: Path) -> None:
    """Another process holds the write lock for as long as this one runs: the exit flush gives up
    after ``EXIT_WAIT_S`` without a warning, and the at-exit work registered before it still runs."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "s.sqlite"
    BlobStore(path, 10**6, "test cache").put_many("s", [(key(1), b"v")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE uses SET used = 5")
    marker = tmp_path / "emptied"
    script = textwrap.dedent(
        f"""
        import atexit, pathlib
        from rag_lab.blobstore import BlobStore
        atexit.register(pathlib.Path({str(marker)!r}).touch)  # registered first: runs after the flush
        store = BlobStore({str(path)!r}, 10**6, "test cache")
        assert store.get_many([(1).to_bytes(32, "big")])
        """
    )
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    finally:
        holder.execute("ROLLBACK")
    assert done.stderr == "" and marker.exists()  # old: a 30 s wait, then "a write failed" logged
    assert used_times(path)[key(1)] == 5


def _fault(code: int) -> sqlite3.OperationalError:
    exc = sqlite3.OperationalError("database is locked" if code & 0xFF == sqlite3.SQLITE_BUSY else "disk I/O error")
    exc.sqlite_errorcode = code
    return exc


class _Conn:
    """Answers ``PRAGMA journal_mode=WAL`` with the faults given, then with success."""

    def __init__(self, *faults: sqlite3.OperationalError) -> None:
        self.faults, self.calls = list(faults), 0

    def execute(self, sql: str) -> None:
        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.faults:
            raise self.faults.pop(0)


def test_the_wal_switch_is_retried_while_busy_and_a_fault_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blobstore.time, "sleep", lambda s: None)
    busy, recovery, io = sqlite3.SQLITE_BUSY, sqlite3.SQLITE_BUSY | (1 << 8), sqlite3.SQLITE_IOERR
    conn = _Conn(_fault(busy), _fault(recovery))  # plain and extended busy codes are both waited out
    blobstore.use_wal(conn, 60.0)  # type: ignore[arg-type]
    assert conn.calls == 3
    conn = _Conn(_fault(io), _fault(busy))
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):  # another fault: raised at once
        blobstore.use_wal(conn, 60.0)  # type: ignore[arg-type]
    assert conn.calls == 1
    conn = _Conn(_fault(busy))
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # past the wait: raised
        blobstore.use_wal(conn, 0.0)  # type: ignore[arg-type]
    assert conn.calls == 1


def _opened_by_the_knowledge_store(path: Path) -> None:
    ThreadConnections(path, RuntimeError, "test store").get()


def _opened_by_a_blob_store(path: Path) -> None:
    assert BlobStore(path, 10_000, "test cache").put_many("s", [(key(1), b"one")]) == 1


@pytest.mark.parametrize(
    "open_file",
    [
        _opened_by_a_blob_store,
        _opened_by_the_knowledge_store,
        SessionDB,
        lambda path: MemoryDB(path, embedder=None),  # the embedder is not called on open
    ],
    ids=["blob store", "knowledge store", "sessions", "memory"],
)
def test_a_file_switched_to_wal_beside_a_writer_waits_for_it(tmp_path: Path, open_file) -> None:
    path = tmp_path / "s.sqlite"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (a)")
    writer.execute("BEGIN IMMEDIATE")  # a rollback-journal file (a new one, another process's), its lock held
    opener = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # SQLite's own answer: at once, no busy wait
        opener.execute("PRAGMA journal_mode=WAL")
    release = threading.Timer(0.2, lambda: writer.execute("COMMIT"))
    release.start()
    open_file(path)
    release.join()
    opener.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
