"""Finding 7 (store side) and 10: the in-memory stream log expires and is capped, table files
are capped before they are loaded, and symlinks never take ingestion out of the folder."""

from __future__ import annotations

import pytest

from rag_lab.knowledge.workspace import IngestError, Workspace
from rag_lab.stream.manager import MemoryStreamManager
from rag_lab.types.stream import StreamEvent


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def ev(i: int, kind: str = "answer", size: int = 10) -> StreamEvent:
    return StreamEvent(f"e{i}", kind, "x" * size, kind != "answer")


def test_streams_expire_one_hour_after_their_last_append():
    clock = Clock()
    m = MemoryStreamManager(clock=clock)
    assert m.ttl_s == 3600  # the spec's stream TTL
    m.append_event("s", "old", ev(0))
    clock.t += 1800
    m.append_event("s", "live", ev(1))
    clock.t += 1801  # "old" is 3601 s old, "live" 1801 s
    assert m.get_events("s", "old", 0) == ([], 0)
    assert [e.id for e in m.get_events("s", "live", 0)[0]] == ["e1"]
    assert len(m) == 1 and m.total_bytes > 0
    clock.t += 3601
    assert m.get_events("s", "live", 0) == ([], 0) and len(m) == 0 and m.total_bytes == 0


def test_a_full_stream_drops_deltas_but_still_ends():
    m = MemoryStreamManager(max_events_per_stream=5, max_stream_bytes=10_000)
    for i in range(10):
        m.append_event("s", "m", ev(i))
    m.append_event("s", "m", ev(99, "complete"))
    events, n = m.get_events("s", "m", 0)
    assert [e.id for e in events] == ["e0", "e1", "e2", "e3", "e4", "e99"] and n == 6
    assert m.dropped("s", "m") == 5
    big = MemoryStreamManager(max_stream_bytes=2_000)
    for i in range(10):
        big.append_event("s", "m", ev(i, size=500))
    assert len(big.get_events("s", "m", 0)[0]) == 3 and big.total_bytes <= 2_000


def test_the_store_evicts_the_least_recently_appended_streams_past_its_total_cap():
    m = MemoryStreamManager(max_total_bytes=5_000)
    for i in range(20):
        m.append_event("s", f"m{i}", ev(i, size=900))
    assert m.total_bytes <= 5_000
    kept = [i for i in range(20) if m.get_events("s", f"m{i}", 0)[0]]
    assert kept == list(range(20 - len(kept), 20)) and 3 <= len(kept) <= 5


def test_appends_are_idempotent_by_append_id():
    m = MemoryStreamManager()
    e = ev(1)
    m.append_event("s", "m", e)
    m.append_event("s", "m", e)  # a retry of the same append
    m.append_event("s", "m", ev(1))  # another append with the same event id (answer deltas share one)
    assert m.get_events("s", "m", 0)[1] == 2


def test_table_caps_apply_before_loading(tmp_path, embedder):
    import openpyxl

    with Workspace(tmp_path / "ws") as ws:
        kb = ws.create_kb("t", embedder)
        book = openpyxl.Workbook()
        sheet = book.active
        sheet.append(["city", "visitors"])
        for i in range(300):
            sheet.append([f"town {i}", i])
        xlsx = tmp_path / "visits.xlsx"
        book.save(xlsx)
        from rag_lab.knowledge.tables import ingest_table

        with pytest.raises(IngestError, match=r"visits.xlsx: more than 100 rows; the cap is 100 \(max_rows\)"):
            ingest_table(ws, kb, xlsx, embedder, max_rows=100)
        with pytest.raises(IngestError, match=r"unpacks to \d+ bytes, more than the cap of 2000"):
            ingest_table(ws, kb, xlsx, embedder, max_expanded_bytes=2000)
        with pytest.raises(IngestError, match=r"bytes is larger than the table cap of 1000 bytes"):
            ingest_table(ws, kb, xlsx, embedder, max_bytes=1000)
        csv = tmp_path / "visits.csv"
        csv.write_text("city,visitors\n" + "".join(f"town {i},{i}\n" for i in range(300)))
        with pytest.raises(IngestError, match=r"visits.csv: more than 100 rows; the cap is 100"):
            ingest_table(ws, kb, csv, embedder, max_rows=100)
        assert ws.store.count_chunks(kb.id) == 0  # nothing half-written
        report = ingest_table(ws, kb, xlsx, embedder, max_rows=300)  # at the cap: accepted
        assert report.added == ["visits.xlsx"]


def test_symlinks_out_of_the_folder_are_not_followed(tmp_path, embedder):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("The root password is swordfish.")
    (outside / "more").mkdir()
    (outside / "more" / "notes.md").write_text("# Notes\n\nPrivate notes about the vault.")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# Lighthouse\n\nThe lighthouse was built in 1874.")
    (docs / "inner.md").symlink_to(docs / "ok.md")  # a link inside the tree: the same document, once
    (docs / "passwd.txt").symlink_to(outside / "secret.txt")
    (docs / "linked").symlink_to(outside / "more", target_is_directory=True)
    with Workspace(tmp_path / "ws") as ws:
        kb = ws.create_kb("d", embedder)
        report = ws.ingest_folder(kb, docs, embedder, progress=False)
        assert sorted(report.added) == ["ok.md"]  # not twice (it used to be a duplicate document)
        skipped = dict(report.skipped)
        assert skipped["inner.md"] == "the same file as ok.md (ingested once)"
        assert "outside the ingested folder" in skipped["passwd.txt"]
        assert any(k.startswith("linked/") and "outside the ingested folder" in v for k, v in skipped.items()) or (
            "linked/notes.md" not in report.added
        )
        text = " ".join(c.content for c in ws.store.list_chunks(kb.id))
        assert "swordfish" not in text and "vault" not in text
