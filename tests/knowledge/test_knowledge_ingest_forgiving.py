"""Forgiving ingest: bad files are listed with reasons (``strict`` stops at the first), skipped
files are named, a size cap, big text files chunked while read (same chunks as in memory),
progress counted in bytes, and no orphan rows when a run stops midway."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rag_lab.knowledge.ingest_write as ingest_write
import rag_lab.knowledge.ingestion as ingestion
from rag_lab.knowledge.chunking import iter_spans, split_spans
from rag_lab.knowledge.workspace import IngestError

PARA = "The lighthouse keeper logged the weather at dawn. Ships passed the granite headland.\n\n"


def _messy(tmp_path):
    d = tmp_path / "messy"
    d.mkdir()
    (d / "good.txt").write_text("Volcanoes erupt magma and ash. " * 5, encoding="utf-8")
    (d / "latin.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    (d / "broken.xlsx").write_bytes(b"not a zip archive")
    (d / "notes.md").write_text("# Notes\n\nMarkdown about databases.", encoding="utf-8")
    (d / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    (d / "big.txt").write_text("x " * 3000, encoding="utf-8")
    return d


def test_bad_files_are_listed_and_the_rest_ingested(workspace, embedder, tmp_path):
    kb = workspace.create_kb("messy", embedder)
    report = workspace.ingest_folder(kb, _messy(tmp_path), embedder, progress=False, max_file_bytes=5000)
    assert sorted(report.added) == ["good.txt", "notes.md"]
    failed = dict(report.failed)
    assert failed["latin.txt"].startswith("not valid UTF-8")
    assert "broken.xlsx" in failed
    skipped = dict(report.skipped)
    assert skipped["photo.jpg"] == "unsupported file type '.jpg'"
    assert (
        skipped["big.txt"] == "0.0 MB is above the size cap of 0.0 MB (max_file_bytes)"
        or "size cap" in skipped["big.txt"]
    )
    assert "6000" not in skipped["big.txt"] and "max_file_bytes" in skipped["big.txt"]
    text = report.details()
    assert "failed: latin.txt: not valid UTF-8" in text and "skipped: photo.jpg: unsupported file type" in text
    assert "2 failed" in str(report)


def test_strict_stops_at_the_first_bad_file(workspace, embedder, tmp_path):
    kb = workspace.create_kb("strict", embedder)
    with pytest.raises(IngestError, match="latin.txt: not valid UTF-8"):
        workspace.ingest_folder(kb, _messy(tmp_path), embedder, progress=False, strict=True)
    assert workspace.store.list_knowledge(kb.id) == [] and workspace.store.count_chunks(kb.id) == 0


def test_cli_lists_failures_and_exits_1(tmp_path, capsys):
    from rag_lab.cli import main

    rc = main(["--workspace", str(tmp_path / "ws"), "ingest", str(_messy(tmp_path)), "--kb", "m", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "failed: latin.txt: not valid UTF-8" in out and "skipped: photo.jpg: unsupported file type '.jpg'" in out
    rc = main(
        ["--workspace", str(tmp_path / "ws2"), "ingest", str(tmp_path / "messy"), "--kb", "m", "--strict", "--quiet"]
    )
    assert rc == 2 and "latin.txt: not valid UTF-8" in capsys.readouterr().err


def _rows(ws, kb):
    conn = sqlite3.connect(ws.root / "store.sqlite")
    try:
        chunks = conn.execute(
            "SELECT id, knowledge_id, content, start_at, end_at, pre_chunk_id, next_chunk_id FROM chunks WHERE knowledge_base_id = ? ORDER BY chunk_index",
            (kb.id,),
        ).fetchall()
        docs = {r[0] for r in conn.execute("SELECT id FROM knowledge WHERE knowledge_base_id = ?", (kb.id,))}
    finally:
        conn.close()
    return chunks, docs


def test_big_text_files_are_streamed_into_the_same_chunks(workspace, embedder, tmp_path, monkeypatch):
    d = tmp_path / "big"
    d.mkdir()
    (d / "log.txt").write_text("\ufeff" + PARA.replace("\n", "\r\n") * 400, encoding="utf-8")  # BOM, CRLF
    mem = workspace.create_kb("in_memory", embedder, chunk_size=200, chunk_overlap=30)
    r1 = workspace.ingest_folder(mem, d, embedder, progress=False)
    monkeypatch.setattr(ingestion, "STREAM_FILE_BYTES", 1000)
    monkeypatch.setattr(ingest_write, "_READ_BLOCK", 777)
    streamed = workspace.create_kb("streamed", embedder, chunk_size=200, chunk_overlap=30)
    r2 = workspace.ingest_folder(streamed, d, embedder, progress=False)
    a, _ = _rows(workspace, mem)
    b, _ = _rows(workspace, streamed)
    assert r1.chunks_added == r2.chunks_added == len(a) > 100
    strip = lambda rows, kb: [(r[0].split(":", 1)[1], *r[1:5]) for r in rows]  # noqa: E731
    assert strip(a, mem) == strip(b, streamed)
    # the streamed hash is the in-memory one: re-ingesting the folder finds the file unchanged
    monkeypatch.setattr(ingestion, "STREAM_FILE_BYTES", 10**9)
    assert workspace.ingest_folder(streamed, d, embedder, progress=False).unchanged == ["log.txt"]


class _Stops:
    """An embedder that raises KeyboardInterrupt (Ctrl-C) on its n-th call."""

    def __init__(self, inner, n):
        self.inner, self.n, self.calls = inner, n, 0
        self.model_key, self.dimension = inner.model_key, inner.dimension

    def embed(self, texts):
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.inner.embed(texts)


def test_an_interrupt_leaves_no_orphan_rows(workspace, embedder, tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(10):
        (d / f"doc{i}.txt").write_text(PARA * 30, encoding="utf-8")
    kb = workspace.create_kb("interrupted", embedder, chunk_size=200, chunk_overlap=0)
    stopper = _Stops(embedder, 3)
    with pytest.raises(KeyboardInterrupt):
        workspace.ingest_folder(kb, d, stopper, progress=False, batch_size=16)
    chunks, docs = _rows(workspace, kb)
    assert {c[1] for c in chunks} <= docs  # every chunk row belongs to a document row
    assert stopper.calls == 3 and 0 < len(docs) < 10  # the documents finished before the stop are kept
    report = workspace.ingest_folder(kb, d, embedder, progress=False)
    assert sorted(report.unchanged) == sorted(docs) and len(report.added) == 10 - len(docs)
    chunks, docs = _rows(workspace, kb)
    assert len(docs) == 10 and {c[1] for c in chunks} == docs


def test_progress_counts_bytes(workspace, embedder, tmp_path, monkeypatch):
    bars = []

    class Bar:
        """Every bar made while the folder is ingested (other users of tqdm.auto, such as bm25s,
        make their own): the ingest's bar is the one counting bytes."""

        def __init__(self, iterable=None, total=None, **kw):
            self.total, self.unit, self.n, self.postfix = total, kw.get("unit"), 0, ""
            self.iterable = iterable or []
            bars.append(self)

        def __iter__(self):
            return iter(self.iterable)

        def update(self, n):
            self.n += n

        def set_postfix_str(self, text, refresh=True):
            self.postfix = text

        def close(self):
            pass

    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    d = tmp_path / "p"
    d.mkdir()
    (d / "a.txt").write_text("é" * 700, encoding="utf-8")
    (d / "b.txt").write_text(PARA * 20, encoding="utf-8")
    kb = workspace.create_kb("progress", embedder, chunk_size=200, chunk_overlap=0)
    workspace.ingest_folder(kb, d, embedder, progress=True)
    (bar,) = [b for b in bars if b.unit == "B"]
    assert bar.total == 1400 + len(PARA * 20) == bar.n
    assert bar.postfix.endswith("read")  # the file being read, while it is read


def test_progress_counts_what_is_stored_when_stopped_midway(workspace, embedder, tmp_path, monkeypatch):
    """Ctrl-C during the second document's vectors: the bar shows the first document's bytes (it
    is stored), not the second's (it was written, then removed again)."""
    from rag_lab.knowledge import ingest_write

    seen = {"n": 0}

    class Bar:
        def __init__(self, iterable=None, total=None, **kw):
            seen["total"] = total
            self.iterable = iterable or []

        def __iter__(self):
            return iter(self.iterable)

        def update(self, n):
            seen["n"] += n

        def set_postfix_str(self, text, refresh=True):
            pass

        def close(self):
            pass

    import tqdm.auto

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    real, calls = ingest_write._embed, []

    def embed_then_stop(*args, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kw)

    monkeypatch.setattr(ingest_write, "_embed", embed_then_stop)
    d = tmp_path / "stop"
    d.mkdir()
    (d / "a.txt").write_text("The first file about lighthouses.", encoding="utf-8")
    (d / "b.txt").write_text("The second file about volcanoes.", encoding="utf-8")
    kb = workspace.create_kb("stopped", embedder)
    with pytest.raises(KeyboardInterrupt):
        workspace.ingest_folder(kb, d, embedder, progress=True, batch_size=1)
    stored = [k.file_name for k in workspace.store.list_knowledge(kb.id)]
    assert stored == ["a.txt"] and seen["n"] == len(b"The first file about lighthouses.")


@settings(max_examples=150)
@given(
    st.lists(st.sampled_from(["word ", "end. ", "\n", "\n\n", "长城。", "x" * 40, "  ", "a"]), max_size=200),
    st.integers(8, 90),
    st.integers(0, 7),
    st.lists(st.integers(0, 2000), max_size=12),
)
def test_streamed_spans_equal_in_memory_spans(parts, size, overlap, cuts):
    text = "".join(parts)
    ov = min(overlap, size - 1)
    bounds = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
    got = list(iter_spans(pieces, size, ov))
    assert [(s, e) for s, e, _ in got] == split_spans(text, size, ov)
    assert all(text[s:e] == c for s, e, c in got)
