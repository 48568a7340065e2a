"""The workspace vector cache: bit-for-bit vectors, model-key misses, the LRU bound, concurrent writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from rag_lab import blobstore
from rag_lab.blobstore import ROW_OVERHEAD
from rag_lab.models import vector_cache as vc
from rag_lab.models.embedding import CachedEmbedder, vector_store_key
from rag_lab.models.vector_cache import VectorCache


class CountingEmbedder:
    """Deterministic pseudo-vectors from the text (and a counter of texts embedded)."""

    dimension = 8

    def __init__(self, model_key: str = "fake|tok=aaaa") -> None:
        self.model_key = model_key
        self.embedded = 0

    def embed(self, texts):
        self.embedded += len(texts)
        rows = [np.random.default_rng(abs(hash((self.model_key, t))) % 2**32).standard_normal(8) for t in texts]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), 8)


TEXTS = ["Mara Quill built the lighthouse in 1874.", "The keeper's log.", "", "灯塔", "Who built it?"]


def test_a_cached_minilm_vector_equals_a_fresh_one_bit_for_bit(minilm, tmp_path: Path) -> None:
    fresh = minilm.embed(TEXTS)
    first = CachedEmbedder(minilm, store=VectorCache(tmp_path / "v.sqlite"))
    first.embed(TEXTS)
    assert first.misses == len(TEXTS)
    again = CachedEmbedder(minilm, store=VectorCache(tmp_path / "v.sqlite"))  # a new process, in effect
    served = again.embed(TEXTS)
    assert (again.store_hits, again.misses) == (len(TEXTS), 0)
    assert served.dtype == np.float32 and np.array_equal(served.view(np.uint32), fresh.view(np.uint32))


def test_a_model_key_change_misses_the_cache(tmp_path: Path) -> None:
    """The tokenizer's hash is part of MiniLM's model key: another tokenizer is another key."""
    store = VectorCache(tmp_path / "v.sqlite")
    a = CachedEmbedder(CountingEmbedder("minilm|tok=1111"), store=store)
    a.embed(TEXTS)
    b = CachedEmbedder(CountingEmbedder("minilm|tok=2222"), store=store)
    b.embed(TEXTS)
    assert (b.store_hits, b.misses) == (0, len(TEXTS))
    c = CachedEmbedder(CountingEmbedder("minilm|tok=1111"), store=store)
    c.embed(TEXTS)
    assert (c.store_hits, c.misses, c.embedder.embedded) == (len(TEXTS), 0, 0)
    assert store.stats()["models"].keys() == {a.store_key, b.store_key}
    assert a.store_key.startswith("minilm|tok=1111|code:") and b.store_key.startswith("minilm|tok=2222|code:")


def _embedder_class_from(path: Path, body: str, monkeypatch) -> type:
    import importlib.util
    import sys

    path.write_text(f"class FileEmbedder:\n    dimension = 8\n    model_key = 'file|local'\n{body}")
    spec = importlib.util.spec_from_file_location("file_embedder", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "file_embedder", module)  # as an imported module is
    spec.loader.exec_module(module)
    return module.FileEmbedder


def test_an_edit_of_the_embedding_code_or_an_upgrade_misses_the_store(tmp_path: Path, monkeypatch) -> None:
    """The model key (the vector space, kept by KBs) survives code changes; a stored vector does
    not: the store key carries a hash of the embedder class's source file and of the numeric
    packages' versions, so edited code or another onnxruntime computes afresh."""
    import importlib.metadata

    from rag_lab.models.embedding import cached

    src = tmp_path / "file_embedder.py"
    keys = []  # each key taken while its source is the file's (the source is read at first use)
    for body in ("return texts", "return texts", "return list(texts)"):
        emb = _embedder_class_from(src, f"    def embed(self, texts):\n        {body}\n", monkeypatch)()
        assert emb.model_key == "file|local"
        keys.append(vector_store_key(emb))
    assert keys[0] == keys[1] and keys[2] != keys[0]  # the same source, the same key; an edit, another
    assert keys[0].startswith("file|local|code:") and len(keys[0]) == len("file|local|code:") + 12

    inner = CountingEmbedder("minilm|tok=1111")
    before = vector_store_key(inner)
    real = importlib.metadata.version
    monkeypatch.setattr(cached, "_code_tags", {})
    monkeypatch.setattr(importlib.metadata, "version", lambda pkg: "99.0" if pkg == "onnxruntime" else real(pkg))
    upgraded = vector_store_key(inner)
    assert upgraded != before and upgraded.split("|code:")[0] == before.split("|code:")[0]
    store = VectorCache(tmp_path / "v.sqlite")
    store.put_many(before, TEXTS, CountingEmbedder("minilm|tok=1111").embed(TEXTS))
    c = CachedEmbedder(inner, store=store)
    c.embed(TEXTS)
    assert (c.store_hits, c.misses) == (0, len(TEXTS))  # the old runtime's vectors are not served
    assert store.stats()["models"].keys() == {before, upgraded}
    assert store.clear("minilm|tok=1111") == 2 * len(TEXTS) and store.stats()["rows"] == 0  # both, by model key


def test_another_max_length_is_another_minilm_model_key() -> None:
    from rag_lab.models.embedding import DEFAULT_TOKENIZER_PATH, MINILM_MODEL_KEY, minilm_model_key

    assert minilm_model_key(DEFAULT_TOKENIZER_PATH) == minilm_model_key(DEFAULT_TOKENIZER_PATH, 256) == MINILM_MODEL_KEY
    assert minilm_model_key(DEFAULT_TOKENIZER_PATH, 128) == f"{MINILM_MODEL_KEY}|max_length:128"


def test_warm_fills_the_store_only_with_what_is_missing(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    c = CachedEmbedder(inner, store=VectorCache(tmp_path / "v.sqlite"))
    assert c.warm(TEXTS + TEXTS) == len(TEXTS)
    assert c.warm(TEXTS) == 0 and inner.embedded == len(TEXTS)
    assert CachedEmbedder(inner).warm(TEXTS) == 0  # no store: nothing to warm


def test_eviction_keeps_the_bound_and_drops_the_least_recently_used(tmp_path: Path, monkeypatch) -> None:
    row = 8 * 4 + ROW_OVERHEAD
    store = VectorCache(tmp_path / "v.sqlite", max_bytes=10 * row)
    clock = [1_000_000.0]
    monkeypatch.setattr(blobstore.time, "time", lambda: clock[0])
    emb = CountingEmbedder()
    texts = [f"text {i}" for i in range(30)]
    for t in texts[:10]:
        store.put_many(emb.model_key, [t], emb.embed([t]))
        clock[0] += 120
    store.get_many(emb.model_key, [texts[0]])  # read again: now the most recently used
    clock[0] += 120
    for t in texts[10:15]:
        store.put_many(emb.model_key, [t], emb.embed([t]))
        clock[0] += 120
    s = store.stats()
    assert s["bytes"] <= 10 * row and s["rows"] == s["bytes"] // row and s["evicted"] > 0
    kept = [t for t, v in zip(texts[:15], store.get_many(emb.model_key, texts[:15])) if v is not None]
    assert kept == [texts[0]] + texts[15 - (len(kept) - 1) : 15]  # the newest, plus the one read again
    assert texts[1] not in kept and len(kept) >= 9


def test_two_processes_and_threads_writing_at_once_do_not_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        from rag_lab.models.vector_cache import VectorCache
        store = VectorCache({str(path)!r})
        start = int(sys.argv[1])
        for i in range(start, start + 300, 3):
            texts = [f"t{{j}}" for j in range(i, i + 3)]
            store.put_many("m", texts, np.array([[j, j + 0.5] for j in range(i, i + 3)], dtype=np.float32))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(s)]) for s in (0, 150)]
    store = VectorCache(path)

    def writer(start: int) -> None:
        for i in range(start, start + 60, 2):
            store.put_many("m", [f"t{i}", f"t{i + 1}"], np.array([[i, i + 0.5], [i + 1, i + 1.5]], dtype=np.float32))

    threads = [threading.Thread(target=writer, args=(s,)) for s in (400, 460)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    want = list(range(0, 450)) + list(range(400, 520))
    got = store.get_many("m", [f"t{j}" for j in want])
    assert all(v is not None and v.tolist() == [j, j + 0.5] for j, v in zip(want, got))
    assert store.stats()["rows"] == len(set(want))


def test_clear_one_model_or_all(tmp_path: Path) -> None:
    store = VectorCache(tmp_path / "v.sqlite")
    store.put_many("a", ["x", "y"], np.ones((2, 4), dtype=np.float32))
    store.put_many("b", ["x"], np.ones((1, 4), dtype=np.float32))
    assert store.clear("a") == 2 and store.stats()["models"] == {"b": {"rows": 1, "bytes": 16 + ROW_OVERHEAD}}
    assert store.clear() == 1 and store.stats()["rows"] == 0 and store.stats()["bytes"] == 0
    with pytest.raises(ValueError, match="2 texts"):
        store.put_many("a", ["x", "y"], np.ones((1, 4), dtype=np.float32))


def test_a_file_of_another_layout_is_started_again(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE vectors (hash BLOB PRIMARY KEY, vec BLOB, used INTEGER)")
        conn.execute("INSERT INTO vectors VALUES (x'00', x'00', 0)")
    store = VectorCache(path)
    assert store.get_many("m", ["x"]) == [None]
    store.put_many("m", ["x"], np.ones((1, 2), dtype=np.float32))
    assert store.get_many("m", ["x"])[0].tolist() == [1.0, 1.0] and store.stats()["rows"] == 1


def test_a_file_of_the_earlier_vector_layout_keeps_its_rows(tmp_path: Path) -> None:
    """Layout 3 (tables ``models`` / ``vectors``, written by earlier versions) is renamed into the
    shared store's layout: its vectors are served, its totals and triggers go on counting."""
    path = tmp_path / "v.sqlite"
    old = np.array([0.25, -1.5], dtype="<f4")
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE models (id INTEGER PRIMARY KEY, model_key TEXT NOT NULL UNIQUE);
            CREATE TABLE vectors (hash BLOB NOT NULL UNIQUE, model_id INTEGER NOT NULL, vec BLOB NOT NULL);
            CREATE TABLE uses (hash BLOB PRIMARY KEY, used INTEGER NOT NULL) WITHOUT ROWID;
            CREATE TABLE totals (id INTEGER PRIMARY KEY CHECK (id = 0), rows INTEGER NOT NULL, bytes INTEGER NOT NULL);
            INSERT INTO totals VALUES (0, 0, 0);
            CREATE TRIGGER vectors_added AFTER INSERT ON vectors BEGIN
                UPDATE totals SET rows = rows + 1, bytes = bytes + length(NEW.vec) + 80 WHERE id = 0;
            END;
            INSERT INTO models VALUES (1, 'm');
            PRAGMA user_version = 3;
            """
        )
        conn.execute("INSERT INTO vectors VALUES (?, 1, ?)", (vc.vector_key("m", "x"), old.tobytes()))
        conn.execute("INSERT INTO uses VALUES (?, 5)", (vc.vector_key("m", "x"),))
        # what this layout's tables look like after an earlier version reopened a file of the later
        # one: it rebuilt its own tables and left the later ones beside them
        conn.execute("CREATE TABLE spaces (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        conn.execute("CREATE TABLE entries (hash BLOB NOT NULL UNIQUE, space_id INTEGER NOT NULL, value BLOB)")
    store = VectorCache(path)
    assert store.get_many("m", ["x", "y"])[0].tolist() == [0.25, -1.5]
    assert store.put_many("m", ["x", "y"], np.ones((2, 2), dtype=np.float32)) == 1
    assert store.stats()["rows"] == 2 and store.stats()["bytes"] == 2 * (8 + ROW_OVERHEAD)
    assert store.stats()["models"] == {"m": {"rows": 2, "bytes": 2 * (8 + ROW_OVERHEAD)}}
    assert store.clear("m") == 2 and store.stats()["bytes"] == 0


def test_use_times_of_reads_are_written_in_a_batch_at_close(tmp_path: Path, monkeypatch) -> None:
    clock = [1_000_000.0]
    monkeypatch.setattr(blobstore.time, "time", lambda: clock[0])
    path = tmp_path / "v.sqlite"
    store = VectorCache(path)
    store.put_many("m", ["a", "b"], np.ones((2, 2), dtype=np.float32))
    clock[0] += 3600
    store.get_many("m", ["a", "b"])

    def used() -> list[int]:
        with sqlite3.connect(path) as conn:
            return [r[0] for r in conn.execute("SELECT used FROM uses ORDER BY used")]

    assert used() == [1_000_000, 1_000_000]  # the read wrote nothing
    store.close()
    assert used() == [1_003_600, 1_003_600]


def test_where_the_cache_file_lives(tmp_path: Path, monkeypatch) -> None:
    """``vector_cache.path`` names the file (relative to the workspace, ``~`` expanded), else
    ``$RAG_LAB_VECTOR_CACHE`` (one file shared by workspaces), else ``<workspace>/vectors.sqlite``;
    bad values name the key and the value."""
    from rag_lab.lab.lab import VECTOR_CACHE_ENV, LabConfigError, vector_cache_from_config

    ws = tmp_path / "ws"
    monkeypatch.delenv(VECTOR_CACHE_ENV, raising=False)
    assert vector_cache_from_config(True, ws, "lab.yaml").path == ws / vc.FILE_NAME
    assert vector_cache_from_config({"path": "cache/v.sqlite"}, ws, "lab.yaml").path == ws / "cache" / "v.sqlite"
    shared = tmp_path / "shared" / "vectors.sqlite"
    monkeypatch.setenv(VECTOR_CACHE_ENV, str(shared))
    a = vector_cache_from_config(True, tmp_path / "a", "lab.yaml")
    b = vector_cache_from_config({"max_mb": 10}, tmp_path / "b", "lab.yaml")
    assert a.path == b.path == shared
    emb = CountingEmbedder()
    CachedEmbedder(emb, store=a).embed(TEXTS)
    other = CachedEmbedder(CountingEmbedder(), store=b)  # another workspace, same file: nothing to embed
    other.embed(TEXTS)
    assert (other.store_hits, other.misses) == (len(TEXTS), 0) and shared.is_file()
    assert vector_cache_from_config({"path": "own.sqlite"}, ws, "lab.yaml").path == ws / "own.sqlite"  # config wins
    assert vector_cache_from_config(False, ws, "lab.yaml") is None
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert vector_cache_from_config({"path": "~/v.sqlite"}, ws, "x").path == tmp_path / "home" / "v.sqlite"
    with pytest.raises(LabConfigError, match=r"lab.yaml: vector_cache.path must be a file path, got 3"):
        vector_cache_from_config({"path": 3}, ws, "lab.yaml")
    with pytest.raises(LabConfigError, match=r"lab.yaml: vector_cache: expected .*got \{'size': 1\}"):
        vector_cache_from_config({"size": 1}, ws, "lab.yaml")
    with pytest.raises(LabConfigError, match="is a folder; name the cache file"):
        vector_cache_from_config({"path": str(tmp_path)}, ws, "lab.yaml")


def test_a_perturbed_copy_of_the_model_weights_misses_the_store(minilm, tmp_path: Path) -> None:
    """Same model key and code, other weights: a copy of ``model.onnx`` with one byte of a weight
    tensor nudged loads under another store key and is embedded afresh; an identical copy hits."""
    from rag_lab.models.embedding import OnnxMiniLMEmbedder, file_digest

    data = bytearray(Path(minilm.model_path).read_bytes())
    same = tmp_path / "same.onnx"
    same.write_bytes(bytes(data))
    data[len(data) // 2] ^= 0x01  # inside the initializers' raw data: still a loadable model
    nudged = tmp_path / "nudged.onnx"
    nudged.write_bytes(bytes(data))
    store = VectorCache(tmp_path / "v.sqlite")
    CachedEmbedder(minilm, store=store).embed(TEXTS)
    other = OnnxMiniLMEmbedder(model_path=nudged)
    assert other.model_key == minilm.model_key  # the vector space's name is the same
    assert vector_store_key(other) != vector_store_key(minilm) and "|weights:" in vector_store_key(other)
    c = CachedEmbedder(other, store=store)
    c.embed(TEXTS)
    assert (c.store_hits, c.misses) == (0, len(TEXTS))
    copy = CachedEmbedder(OnnxMiniLMEmbedder(model_path=same), store=store)
    copy.embed(TEXTS)
    assert (copy.store_hits, copy.misses) == (len(TEXTS), 0)
    assert file_digest(same) == file_digest(minilm.model_path) != file_digest(nudged)
    assert vector_store_key(CountingEmbedder()).endswith(tuple("0123456789abcdef"))  # no weight files: no tag
    assert "|weights:" not in vector_store_key(CountingEmbedder())


def test_vectors_are_stored_inline_near_their_raw_size(tmp_path: Path) -> None:
    """2,000 MiniLM-sized vectors (384 float32 = 1,536 bytes): the file, checkpointed, is at most
    1.3× their bytes (rows inline in 16 KB pages; a WITHOUT ROWID table put each on an overflow
    page of its own, 3.1×)."""
    n = 2000
    vecs = np.random.default_rng(0).standard_normal((n, 384)).astype(np.float32)
    texts = [f"passage {i}" for i in range(n)]
    store = VectorCache(tmp_path / "v.sqlite")
    store.put_many("m", texts, vecs)
    store.close()
    with sqlite3.connect(tmp_path / "v.sqlite") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert conn.execute("PRAGMA page_size").fetchone()[0] == blobstore.PAGE_SIZE
    ratio = (tmp_path / "v.sqlite").stat().st_size / vecs.nbytes
    assert ratio <= 1.3, ratio
    again = VectorCache(tmp_path / "v.sqlite").get_many("m", texts[:5] + ["absent"])
    assert np.array_equal(np.stack(again[:5]), vecs[:5]) and again[5] is None
