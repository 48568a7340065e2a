"""The store of knowledge bases, documents (Knowledge) and chunks: a SQLite file (the embedded
default) or a PostgreSQL database (``postgresql://…``: the store several server replicas share).

One connection per thread (so worker threads such as ``asyncio.to_thread`` can read while another
thread writes; this process' writes are serialised by a lock). SQLite: one file, WAL journal.
PostgreSQL: the same statements through :mod:`rag_lab.knowledge.sqldb`, which bridges the two
dialects (placeholders, column types, errors, the change counter). Dataclass fields map to
columns one to one; dict/list fields are JSON text, booleans are 0/1.

Keys: a KB id and a KB name are unique; a document is keyed by ``(knowledge_base_id, id)`` so the
same dataset can be ingested into several KBs (e.g. two chunk sizes) with its own ids; chunk ids
are unique in the whole store (ingestion prefixes them with the KB id). Batch getters return
dicts; missing ids are simply absent.

Kept whole: one class over one database, whose methods share its per-thread connections, its
write lock and the change token that caches of its rows key on.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from rag_lab.knowledge.kb_rows import KbRows
from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.knowledge.sqldb import is_postgres
from rag_lab.knowledge.sqlite_conn import ThreadConnections
from rag_lab.knowledge.sync_journal import (
    SyncJournal,
    create_tables,
    forget_kb,
    journal_chunk_flags,
    journal_documents,
    journal_owner_change,
)
from rag_lab.retrieval.sharing import SHARED_WITH, check_shared_with
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES
from rag_lab.types.search_result import UNSEARCHABLE_STATUSES as UNSEARCHABLE_STATUSES

T = TypeVar("T")

# literal SQL (not bound parameters) so that SQLite can use the partial index below
_UNSEARCHABLE_SQL = "(is_enabled = 0 OR index_status IN ({}))".format(
    ", ".join(f"'{s}'" for s in UNSEARCHABLE_STATUSES)
)

_SQLITE_MAX_VARS = 900  # stay below SQLITE_MAX_VARIABLE_NUMBER on old builds

#: each table's primary key (upserts name it in ``ON CONFLICT``)
_KEYS = {"knowledge_bases": "id", "knowledge": "knowledge_base_id, id", "chunks": "id"}


def _check_kb(kb: KnowledgeBase) -> None:
    """What the store refuses to write: metadata that is not a mapping, a ``shared_with`` that is
    not a list of tenant ids (normalised to a list of ints without repeats)."""
    if not isinstance(kb.metadata, dict):
        raise ValueError(f"knowledge base {kb.name!r}: metadata must be a mapping, got {type(kb.metadata).__name__}")
    if SHARED_WITH in kb.metadata:
        try:
            kb.metadata[SHARED_WITH] = check_shared_with(kb.metadata[SHARED_WITH])
        except ValueError as exc:
            raise ValueError(f"knowledge base {kb.name!r}: {exc}") from None


class StoreError(RuntimeError):
    """The store file cannot be opened or a write violates a constraint."""


def _columns(cls: type) -> list[tuple[str, str]]:
    """(name, sqlite type) per dataclass field; dicts/lists are JSON text."""
    out = []
    for f in fields(cls):
        t = str(f.type)
        if t.startswith(("dict", "list")) or t == "Any":
            out.append((f.name, "TEXT"))  # JSON
        elif t in ("int", "bool"):
            out.append((f.name, "INTEGER"))
        elif t == "float":
            out.append((f.name, "REAL"))
        else:
            out.append((f.name, "TEXT"))
    return out


def _json_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls) if str(f.type).startswith(("dict", "list")))


def _bool_fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls) if str(f.type) == "bool")


_SPECS: dict[type, tuple[list[str], frozenset[str], frozenset[str]]] = {
    cls: ([c for c, _ in _columns(cls)], _json_fields(cls), _bool_fields(cls))
    for cls in (KnowledgeBase, Knowledge, Chunk)
}


def _to_row(obj: Any) -> tuple:
    names, js, _ = _SPECS[type(obj)]
    row = []
    for name in names:
        v = getattr(obj, name)
        if name in js:
            v = json.dumps(v, ensure_ascii=False, sort_keys=True)
        elif isinstance(v, bool):
            v = int(v)
        row.append(v)
    return tuple(row)


_EMPTY_JSON: dict[str, type] = {"{}": dict, "[]": list}


_DECODERS: dict[tuple[type, tuple[str, ...]], Callable[[Sequence[Any]], Any]] = {}


def _decoder(cls: type[T], columns: tuple[str, ...]) -> Callable[[Sequence[Any]], T]:
    """Row → ``cls`` for rows of these columns (in this order): the fields' positions found once
    per query shape (kept: a store has a handful), JSON and booleans decoded in place, the
    dataclass built positionally."""
    found = _DECODERS.get((cls, columns))
    if found is not None:
        return found
    names, js, bools = _SPECS[cls]
    take = itemgetter(*(columns.index(n) for n in names))
    json_at = [(i, n in ("metadata", "custom_metadata")) for i, n in enumerate(names) if n in js]
    bool_at = [i for i, n in enumerate(names) if n in bools]

    def decode(row: Sequence[Any]) -> T:
        values = list(take(row))
        for i, is_dict in json_at:
            v = values[i]
            if not v:
                values[i] = {} if is_dict else []
            else:
                empty = _EMPTY_JSON.get(v)
                values[i] = empty() if empty is not None else json.loads(v)
        for i in bool_at:
            values[i] = bool(values[i])
        return cls(*values)

    _DECODERS[(cls, columns)] = decode
    return decode


def _from_row(cls: type[T], row: sqlite3.Row) -> T:
    return _decoder(cls, tuple(row.keys()))(row)


def _decode_rows(cls: type[T], cursor: sqlite3.Cursor) -> Iterator[T]:
    """Every row of ``cursor`` as a ``cls`` (one column lookup for the whole query)."""
    return map(_decoder(cls, tuple(d[0] for d in cursor.description or ())), cursor)


def _tuples(conn: sqlite3.Connection, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
    """``sql`` on a cursor whose rows are plain tuples, for rows decoded by position: what
    :class:`~rag_lab.knowledge.kb_rows.KbRows` holds (sliceable, and untracked by the garbage
    collector), a little cheaper to fetch than ``sqlite3.Row`` (``benchmarks/store_reads.py``:
    0.120 vs 0.125 ms for 30 whole rows at 100k chunks)."""
    cur = conn.cursor()
    cur.row_factory = None
    return cur.execute(sql, args)


def _kb_table(table: str) -> str:
    """``table`` when it is one of the tables rows of a whole KB are read from, else StoreError."""
    if table not in ("chunks", "knowledge"):
        raise StoreError(f"no KB rows in table {table!r}: 'chunks' or 'knowledge'")
    return table


def _batches(items: Sequence[str], size: int = _SQLITE_MAX_VARS) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _unique(ids: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i))


class KnowledgeStore:
    """CRUD over KBs, documents and chunks in one SQLite file (a path) or one PostgreSQL
    database (a ``postgresql://`` URL)."""

    def __init__(self, path: str | Path, *, outage_s: float | None = None) -> None:
        """``outage_s``: how long a PostgreSQL store waits for a restarting server
        (:func:`~rag_lab.knowledge.sqldb.outage_window`; ``None``: the environment or 30 s)."""
        #: True for a PostgreSQL store: other processes (other machines) write to it too
        self.shared = is_postgres(path)
        #: the SQLite file (``None`` for PostgreSQL, see :attr:`where`)
        self.path: Path | None = None if self.shared else Path(path)
        if self.path is not None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"{self.path}: cannot create the store directory: {exc}") from None
        self._write_lock = threading.RLock()
        self._conns = ThreadConnections(path, StoreError, "store", foreign_keys=True, outage_s=outage_s)
        #: the file, or the URL without its password (what messages name)
        self.where = self._conns.where
        #: bumped by every write of this process (with the database's counter: any other writer)
        self.generation = 0
        self._create_schema()
        #: whole KBs' chunk and document rows, per store state (the search path's reads)
        self.kb_rows = KbRows(self)
        #: the sync state of external engine copies and their pending writes (written in the
        #: transactions below that commit a change: :mod:`rag_lab.knowledge.sync_journal`)
        self.sync = SyncJournal(self)

    #: ``row_decoder(cls, columns)``: row → ``cls`` for rows of these columns (the decoder every
    #: getter uses; :class:`~rag_lab.knowledge.kb_rows.KbRows` decodes its rows with it)
    row_decoder = staticmethod(_decoder)

    # -- connections ------------------------------------------------------------------------
    def _conn(self) -> Any:
        """This thread's connection (:class:`sqlite3.Connection` or
        :class:`~rag_lab.knowledge.sqldb.PgConnection`: the same calls)."""
        return self._conns.get()

    def change_token(self) -> tuple[int, int]:
        """Changes when the store may have changed: this process' write count and the database's
        change number (SQLite's ``data_version``, PostgreSQL's change counter: both move when
        another connection, of any process, commits). Caches of store rows key on it."""
        return self.generation, self._conns.data_version()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        """One write transaction (committed on exit, rolled back on an error)."""
        with self._write_lock:
            self.generation += 1
            conn = self._conn()
            try:
                with conn:
                    yield conn
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"{self.where}: {exc}") from None

    def _write(self, sql: str, rows: Iterable[tuple] | tuple = ()) -> None:
        with self._transaction() as conn:
            if isinstance(rows, tuple):
                conn.execute(sql, rows)
            else:
                conn.executemany(sql, rows)

    def close(self) -> None:
        """Close every connection opened by any thread."""
        self._conns.close()

    def __enter__(self) -> KnowledgeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_schema(self) -> None:
        def cols(cls: type, table: str) -> str:
            parts = [f"{n} {t}" for n, t in _columns(cls)]
            return ", ".join(parts) + f", PRIMARY KEY ({_KEYS[table]})"

        with self._write_lock:
            try:
                with self._conns.schema() as conn:
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS knowledge_bases ({cols(KnowledgeBase, 'knowledge_bases')})"
                    )
                    conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS kb_name ON knowledge_bases(name)")
                    conn.execute(f"CREATE TABLE IF NOT EXISTS knowledge ({cols(Knowledge, 'knowledge')})")
                    conn.execute("CREATE INDEX IF NOT EXISTS knowledge_id ON knowledge(id)")
                    conn.execute(f"CREATE TABLE IF NOT EXISTS chunks ({cols(Chunk, 'chunks')})")
                    conn.execute("CREATE INDEX IF NOT EXISTS chunk_doc ON chunks(knowledge_base_id, knowledge_id)")
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunk_parent ON chunks(parent_chunk_id) WHERE parent_chunk_id != ''"
                    )
                    conn.execute(
                        "CREATE INDEX IF NOT EXISTS chunk_unsearchable ON chunks(knowledge_base_id) "
                        f"WHERE {_UNSEARCHABLE_SQL}"
                    )
                    create_tables(conn)
            except sqlite3.DatabaseError as exc:
                kind = "PostgreSQL" if self.shared else "SQLite"
                raise StoreError(f"{self.where}: not a usable {kind} store: {exc}") from None

    def _insert_sql(self, table: str, cls: type, replace: bool = True) -> str:
        """``INSERT`` of a whole row; with ``replace`` an upsert on the table's key (the row
        written over in place; a clash on another unique column still fails)."""
        names = _SPECS[cls][0]
        sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        if replace:
            keys = _KEYS[table]
            sets = ", ".join(f"{n} = excluded.{n}" for n in names if n not in keys.split(", "))
            sql += f" ON CONFLICT ({keys}) DO UPDATE SET {sets}"
        return sql

    # -- knowledge bases --------------------------------------------------------------------
    def create_kb(self, kb: KnowledgeBase) -> KnowledgeBase:
        """Insert a KB; a duplicate id or name raises :class:`StoreError`, a malformed
        ``metadata["shared_with"]`` :class:`ValueError` (nothing is written)."""
        _check_kb(kb)
        if not kb.created_at:
            kb.created_at = time.time()
        self._write(self._insert_sql("knowledge_bases", KnowledgeBase, replace=False), _to_row(kb))
        return kb

    def update_kb(self, kb: KnowledgeBase) -> None:
        """Write a KB's row; a malformed ``metadata["shared_with"]`` raises :class:`ValueError`
        (see :mod:`rag_lab.retrieval.sharing`) and leaves the stored row as it was."""
        _check_kb(kb)
        with self._transaction() as conn:
            journal_owner_change(conn, kb.id, kb.tenant_id)
            conn.execute(self._insert_sql("knowledge_bases", KnowledgeBase), _to_row(kb))

    def get_kb(self, kb_id: str) -> KnowledgeBase | None:
        row = self._conn().execute("SELECT * FROM knowledge_bases WHERE id = ?", (kb_id,)).fetchone()
        return _from_row(KnowledgeBase, row) if row else None

    def get_kb_by_name(self, name: str) -> KnowledgeBase | None:
        row = self._conn().execute("SELECT * FROM knowledge_bases WHERE name = ?", (name,)).fetchone()
        return _from_row(KnowledgeBase, row) if row else None

    def get_kbs(self, ids: Iterable[str]) -> dict[str, KnowledgeBase]:
        out: dict[str, KnowledgeBase] = {}
        for batch in _batches(_unique(ids)):
            q = f"SELECT * FROM knowledge_bases WHERE id IN ({', '.join('?' * len(batch))})"
            for row in self._conn().execute(q, tuple(batch)):
                out[row["id"]] = _from_row(KnowledgeBase, row)
        return out

    def list_kbs(self) -> list[KnowledgeBase]:
        rows = self._conn().execute("SELECT * FROM knowledge_bases ORDER BY created_at, id").fetchall()
        return [_from_row(KnowledgeBase, r) for r in rows]

    def delete_kb(self, kb_id: str) -> None:
        """Delete a KB with its documents and chunks."""
        with self._transaction() as conn:
            conn.execute("DELETE FROM chunks WHERE knowledge_base_id = ?", (kb_id,))
            conn.execute("DELETE FROM knowledge WHERE knowledge_base_id = ?", (kb_id,))
            conn.execute("DELETE FROM knowledge_bases WHERE id = ?", (kb_id,))
            forget_kb(conn, kb_id)

    # -- documents --------------------------------------------------------------------------
    def add_knowledge(self, docs: Knowledge | Iterable[Knowledge]) -> None:
        """Insert or replace documents (keyed by ``(knowledge_base_id, id)``)."""
        items = [docs] if isinstance(docs, Knowledge) else list(docs)
        now = time.time()
        for d in items:
            if not d.created_at:
                d.created_at = now
        with self._transaction() as conn:
            conn.executemany(self._insert_sql("knowledge", Knowledge), [_to_row(d) for d in items])
            for kb_id in {d.knowledge_base_id for d in items}:  # the documents' commit point
                journal_documents(conn, kb_id, [d.id for d in items if d.knowledge_base_id == kb_id])

    def get_document(self, kb_id: str, knowledge_id: str) -> Knowledge | None:
        row = (
            self._conn()
            .execute("SELECT * FROM knowledge WHERE knowledge_base_id = ? AND id = ?", (kb_id, knowledge_id))
            .fetchone()
        )
        return _from_row(Knowledge, row) if row else None

    def get_knowledge(self, ids: Iterable[str], kb_ids: Iterable[str] | None = None) -> dict[str, Knowledge]:
        """Documents by id, optionally restricted to some KBs. When an id exists in several of the
        KBs searched, the KB created first wins (pass ``kb_ids`` to choose)."""
        kb_list = _unique(kb_ids) if kb_ids is not None else None
        if kb_list is not None and not kb_list:
            return {}
        out: dict[str, Knowledge] = {}
        for batch in _batches(_unique(ids), _SQLITE_MAX_VARS - len(kb_list or ())):
            q = (
                "SELECT k.* FROM knowledge k JOIN knowledge_bases b ON b.id = k.knowledge_base_id "
                f"WHERE k.id IN ({', '.join('?' * len(batch))})"
            )
            args: tuple = tuple(batch)
            if kb_list is not None:
                q += f" AND k.knowledge_base_id IN ({', '.join('?' * len(kb_list))})"
                args += tuple(kb_list)
            q += " ORDER BY b.created_at DESC, b.id DESC"  # earliest KB written last, so it wins
            for d in _decode_rows(Knowledge, _tuples(self._conn(), q, args)):
                out[d.id] = d
        return out

    def list_knowledge(self, kb_id: str) -> list[Knowledge]:
        rows = _tuples(
            self._conn(), "SELECT * FROM knowledge WHERE knowledge_base_id = ? ORDER BY created_at, id", (kb_id,)
        )
        return list(_decode_rows(Knowledge, rows))

    def delete_knowledge(self, kb_id: str, knowledge_id: str) -> list[str]:
        """Delete a document and its chunks; returns the deleted chunk ids."""
        with self._transaction() as conn:
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM chunks WHERE knowledge_base_id = ? AND knowledge_id = ? ORDER BY id",
                    (kb_id, knowledge_id),
                )
            ]
            conn.execute("DELETE FROM chunks WHERE knowledge_base_id = ? AND knowledge_id = ?", (kb_id, knowledge_id))
            conn.execute("DELETE FROM knowledge WHERE knowledge_base_id = ? AND id = ?", (kb_id, knowledge_id))
            journal_documents(conn, kb_id, [knowledge_id])
        return ids

    # -- chunks -----------------------------------------------------------------------------
    def add_chunks(self, chunks: Iterable[Chunk]) -> None:
        """Insert or replace chunks (chunk ids are unique store-wide)."""
        self._write(self._insert_sql("chunks", Chunk), [_to_row(c) for c in chunks])

    def get_chunks(self, ids: Iterable[str]) -> dict[str, Chunk]:
        out: dict[str, Chunk] = {}
        for batch in _batches(_unique(ids)):
            q = f"SELECT * FROM chunks WHERE id IN ({', '.join('?' * len(batch))})"
            for c in _decode_rows(Chunk, _tuples(self._conn(), q, tuple(batch))):
                out[c.id] = c
        return out

    def get_chunk_columns(self, ids: Iterable[str], columns: Sequence[str]) -> dict[str, tuple]:
        """``{chunk id: (value, ...)}`` of plain columns (booleans as stored: 0 / 1) of the chunks
        ``ids`` (neighbour expansion reads these)."""
        if bad := [c for c in columns if c not in _SPECS[Chunk][0] or c in _SPECS[Chunk][1]]:
            raise StoreError(f"get_chunk_columns: not plain chunk columns: {', '.join(bad)}")
        head = f"SELECT id, {', '.join(columns)} FROM chunks WHERE "
        out: dict[str, tuple] = {}
        for batch in _batches(_unique(ids)):
            for row in _tuples(self._conn(), head + f"id IN ({', '.join('?' * len(batch))})", tuple(batch)):
                out[row[0]] = row[1:]
        return out

    def get_chunk_rows(self, ids: Iterable[str]) -> tuple[tuple[str, ...], dict[str, tuple]]:
        """The column names and ``{chunk id: row}`` of the chunks ``ids``, rows as stored (JSON
        undecoded, booleans 0 / 1): the rows :meth:`kb_table_rows` holds, for chunks of a KB
        not held whole."""
        out: dict[str, tuple] = {}
        columns: tuple[str, ...] = ()
        for batch in _batches(_unique(ids)):
            cur = _tuples(self._conn(), f"SELECT * FROM chunks WHERE id IN ({', '.join('?' * len(batch))})", batch)
            columns = tuple(d[0] for d in cur.description)
            out.update((r[0], r) for r in cur)
        return columns or self.table_columns("chunks"), out

    def kb_table_rows(self, table: str, kb_id: str) -> tuple[tuple[str, ...], list[tuple]]:
        """The column names and every row of KB ``kb_id`` in ``table`` (``"chunks"`` or
        ``"knowledge"``), as stored, in one scan."""
        cur = _tuples(self._conn(), f"SELECT * FROM {_kb_table(table)} WHERE knowledge_base_id = ?", (kb_id,))
        return tuple(d[0] for d in cur.description), cur.fetchall()

    def count_kb_rows(self, table: str, kb_id: str) -> int:
        """Rows of KB ``kb_id`` in ``table`` (``"chunks"`` or ``"knowledge"``)."""
        q = f"SELECT COUNT(*) FROM {_kb_table(table)} WHERE knowledge_base_id = ?"
        return int(self._conn().execute(q, (kb_id,)).fetchone()[0])

    def table_columns(self, table: str) -> tuple[str, ...]:
        """``table``'s column names in its rows' order (``"chunks"`` or ``"knowledge"``)."""
        cur = self._conn().execute(f"SELECT * FROM {_kb_table(table)} LIMIT 0")
        return tuple(d[0] for d in cur.description)

    def get_children(self, parent_ids: Iterable[str]) -> list[Chunk]:
        """The chunks whose ``parent_chunk_id`` is one of ``parent_ids`` (disabled ones included),
        ordered by parent, ``chunk_index`` and id."""
        out: list[Chunk] = []
        for batch in _batches([i for i in _unique(parent_ids) if i]):
            q = (
                f"SELECT * FROM chunks WHERE parent_chunk_id IN ({', '.join('?' * len(batch))}) "
                # the condition of the partial index chunk_parent: without it SQLite scans the table
                "AND parent_chunk_id != '' ORDER BY parent_chunk_id, chunk_index, id"
            )
            out.extend(_decode_rows(Chunk, _tuples(self._conn(), q, tuple(batch))))
        return out

    def list_chunks(self, kb_id: str, knowledge_id: str | None = None) -> list[Chunk]:
        """Chunks of a KB (or one document), ordered by document, type and chunk_index."""
        q = "SELECT * FROM chunks WHERE knowledge_base_id = ?"
        args: tuple = (kb_id,)
        if knowledge_id is not None:
            q += " AND knowledge_id = ?"
            args += (knowledge_id,)
        q += " ORDER BY knowledge_id, chunk_type, chunk_index, id"
        return list(_decode_rows(Chunk, _tuples(self._conn(), q, args)))

    def set_chunks_enabled(self, ids: Iterable[str], enabled: bool) -> None:
        for batch in _batches(_unique(ids)):
            with self._transaction() as conn:
                conn.execute(
                    f"UPDATE chunks SET is_enabled = ? WHERE id IN ({', '.join('?' * len(batch))})",
                    (int(enabled), *batch),
                )
                journal_chunk_flags(conn, batch)

    def searchable_chunk_ids(
        self, kb_id: str, knowledge_ids: Sequence[str] = (), tag_ids: Sequence[str] = ()
    ) -> set[str]:
        """Ids of the KB's chunks retrieval may return: enabled, searchable type, status not
        processing/failed, and (when given) in ``knowledge_ids`` AND with a tag in ``tag_ids``."""
        types = sorted(SEARCHABLE_CHUNK_TYPES)
        q = (
            "SELECT id FROM chunks WHERE knowledge_base_id = ? AND is_enabled = 1 "
            f"AND chunk_type IN ({', '.join('?' * len(types))}) "
            f"AND index_status NOT IN ({', '.join('?' * len(UNSEARCHABLE_STATUSES))})"
        )
        args: tuple = (kb_id, *types, *UNSEARCHABLE_STATUSES)
        kids = _unique(knowledge_ids)
        tags = _unique(tag_ids)
        if len(kids) + len(tags) > _SQLITE_MAX_VARS - len(args):
            # large filters: filter in Python
            base = self.searchable_chunk_ids(kb_id)
            chunks = self.get_chunks(base)
            ks, ts = set(kids), set(tags)
            return {cid for cid, c in chunks.items() if (not ks or c.knowledge_id in ks) and (not ts or c.tag_id in ts)}
        if kids:
            q += f" AND knowledge_id IN ({', '.join('?' * len(kids))})"
            args += tuple(kids)
        if tags:
            q += f" AND tag_id IN ({', '.join('?' * len(tags))})"
            args += tuple(tags)
        return {r[0] for r in self._conn().execute(q, args)}

    def has_unsearchable_indexed_chunks(self, kb_id: str) -> bool:
        """True when some chunk of a searchable type is disabled or not indexed yet (so an index
        search must be restricted to :meth:`searchable_chunk_ids`)."""
        types = sorted(SEARCHABLE_CHUNK_TYPES)
        q = (
            f"SELECT 1 FROM chunks WHERE knowledge_base_id = ? AND {_UNSEARCHABLE_SQL} "
            f"AND chunk_type IN ({', '.join('?' * len(types))}) LIMIT 1"
        )
        return self._conn().execute(q, (kb_id, *types)).fetchone() is not None

    def unsearchable_chunk_ids(self, kb_id: str) -> set[str]:
        """Ids of the KB's chunks of a searchable type that retrieval must not return now
        (disabled, or ``processing`` / ``failed``): what an external engine's copy excludes."""
        types = sorted(SEARCHABLE_CHUNK_TYPES)
        q = (
            f"SELECT id FROM chunks WHERE knowledge_base_id = ? AND {_UNSEARCHABLE_SQL} "
            f"AND chunk_type IN ({', '.join('?' * len(types))})"
        )
        return {r[0] for r in self._conn().execute(q, (kb_id, *types))}

    def count_chunks(self, kb_id: str) -> int:
        return self.count_kb_rows("chunks", kb_id)
