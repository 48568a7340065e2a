"""Chunks in the knowledge store: chunk ids are unique in the whole store; batch getters return
dicts (missing ids are simply absent); whole KBs' rows as stored, for
:class:`~rag_lab.knowledge.kb_rows.KbRows`; the searchable subset of a KB (enabled, searchable
type, indexed). :class:`ChunkRows` is one of the parts of
:class:`~rag_lab.knowledge.store.KnowledgeStore`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from rag_lab.knowledge.models import Chunk
from rag_lab.knowledge.store_db import StoreDB
from rag_lab.knowledge.store_rows import (
    _SPECS,
    _SQLITE_MAX_VARS,
    _UNSEARCHABLE_SQL,
    StoreError,
    _batches,
    _decode_rows,
    _kb_table,
    _to_row,
    _tuples,
    _unique,
)
from rag_lab.knowledge.sync_journal import journal_chunk_flags
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES, UNSEARCHABLE_STATUSES


class ChunkRows(StoreDB):
    """Chunk writes and reads."""

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

    def get_chunk_columns(self, ids: Iterable[str], columns: Sequence[str]) -> dict[str, tuple[Any, ...]]:
        """``{chunk id: (value, ...)}`` of plain columns (booleans as stored: 0 / 1) of the chunks
        ``ids`` (neighbour expansion reads these)."""
        if bad := [c for c in columns if c not in _SPECS[Chunk][0] or c in _SPECS[Chunk][1]]:
            raise StoreError(f"get_chunk_columns: not plain chunk columns: {', '.join(bad)}")
        head = f"SELECT id, {', '.join(columns)} FROM chunks WHERE "
        out: dict[str, tuple[Any, ...]] = {}
        for batch in _batches(_unique(ids)):
            for row in _tuples(self._conn(), head + f"id IN ({', '.join('?' * len(batch))})", tuple(batch)):
                out[row[0]] = row[1:]
        return out

    def get_chunk_rows(self, ids: Iterable[str]) -> tuple[tuple[str, ...], dict[str, tuple[Any, ...]]]:
        """The column names and ``{chunk id: row}`` of the chunks ``ids``, rows as stored (JSON
        undecoded, booleans 0 / 1): the rows :meth:`kb_table_rows` holds, for chunks of a KB
        not held whole."""
        out: dict[str, tuple[Any, ...]] = {}
        columns: tuple[str, ...] = ()
        for batch in _batches(_unique(ids)):
            cur = _tuples(self._conn(), f"SELECT * FROM chunks WHERE id IN ({', '.join('?' * len(batch))})", batch)
            columns = tuple(d[0] for d in cur.description)
            out.update((r[0], r) for r in cur)
        return columns or self.table_columns("chunks"), out

    def kb_table_rows(self, table: str, kb_id: str) -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
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
        args: tuple[object, ...] = (kb_id,)
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
        args: tuple[object, ...] = (kb_id, *types, *UNSEARCHABLE_STATUSES)
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

    def count_chunks(self, kb_id: str) -> int:
        return self.count_kb_rows("chunks", kb_id)
