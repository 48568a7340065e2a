"""Whole KBs' rows held in memory per state of the knowledge store: the rows of each KB's chunks and
documents as stored (plain tuples, JSON undecoded), each table read in one scan.

Search reads the same few columns of many chunks (the retrieval engine's hits) and the full rows
of a few (hydration: the results' chunks, their documents, the §6.9 children). On a KB of 100k
chunks reading them row by row means SQLite walking its B-trees at random places of the file for
every row; an in-memory retriever over a document list pays nothing.
:class:`KbRows` reads a KB's table once, keyed on the store's change token (its own writes, and
SQLite's ``data_version`` for other connections' commits): any write drops every table, and the
next search reads them again. A budget (:attr:`KbRows.max_rows`) bounds memory: a table that does
not fit is not held, and its callers read row by row as before.

Plain tuples of strings and numbers are untracked by Python's garbage collector, so a held table
adds nothing to a collection's work, unlike decoded ``Chunk`` objects. Objects are decoded on
demand (:meth:`RowTable.get`) by the store's positional decoder.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rag_lab.knowledge.models import Chunk, Knowledge

if TYPE_CHECKING:
    from rag_lab.knowledge.store import KnowledgeStore

__all__ = ["KbRows", "RowTable"]

T = TypeVar("T", Chunk, Knowledge)

#: the tables held, and the class their rows decode into
_TABLES: dict[str, type] = {"chunks": Chunk, "knowledge": Knowledge}


class RowTable(Generic[T]):
    """One KB's rows of one table: ``rows`` maps the row id (chunk id, or document id: unique
    within a KB) to the stored tuple, ``at`` a column name to its position in the tuples."""

    __slots__ = ("rows", "columns", "at", "_decode", "_children", "_lock")

    def __init__(
        self,
        columns: tuple[str, ...],
        rows: Iterable[tuple[Any, ...]],
        decode: Callable[[Sequence[Any]], T],
    ) -> None:
        self.columns: tuple[str, ...] = columns
        self.at: dict[str, int] = {c: i for i, c in enumerate(columns)}
        key = self.at["id"]
        self.rows: dict[str, tuple[Any, ...]] = {r[key]: r for r in rows}
        self._decode: Callable[[Sequence[Any]], T] = decode
        self._children: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, row_id: str) -> T | None:
        """The decoded object (a new one per call), or None."""
        row = self.rows.get(row_id)
        return None if row is None else self._decode(row)

    def get_children(self, parent_ids: Iterable[str]) -> list[T]:
        """Chunk tables: :meth:`KnowledgeStore.get_children` over this KB's chunks (children are
        in their parent's KB), in the store's order: by parent id, ``chunk_index``, id."""
        by_parent = self._children
        if by_parent is None:
            with self._lock:
                if self._children is None:
                    self._children = self._index_children()
                by_parent = self._children
        return [self._decode(self.rows[c]) for p in sorted(set(parent_ids)) if p for c in by_parent.get(p, ())]

    def _index_children(self) -> dict[str, list[str]]:
        parent, index, key = self.at["parent_chunk_id"], self.at["chunk_index"], self.at["id"]
        groups: dict[str, list[tuple[Any, ...]]] = {}
        for r in self.rows.values():
            if r[parent]:
                groups.setdefault(r[parent], []).append(r)
        return {p: [r[key] for r in sorted(g, key=lambda r: (r[index], r[key]))] for p, g in groups.items()}


class KbRows:
    """The tables of whole KBs a store's readers share (one per :class:`KnowledgeStore`)."""

    #: rows held in all (chunks and documents of every KB held); a table that would pass it is
    #: not held. ``benchmarks/search.py`` notes what they take: 227 MB (``sys.getsizeof``, an upper
    #: bound) for 100,000 chunks of ~350 characters and their 100,000 documents.
    max_rows = 300_000

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._token: Any = None
        self._tables: dict[tuple[str, str], RowTable[Any] | None] = {}
        self._held = 0

    def chunks(self, kb_id: str, token: Any = None) -> RowTable[Chunk] | None:
        """KB ``kb_id``'s chunk rows, read on first use under this store state; None when they do
        not fit in :attr:`max_rows`. ``token``: the store's change token when the caller just
        read it (saves a query)."""
        return self._table("chunks", kb_id, token)

    def documents(self, kb_id: str, token: Any = None) -> RowTable[Knowledge] | None:
        """KB ``kb_id``'s document rows (see :meth:`chunks`)."""
        return self._table("knowledge", kb_id, token)

    def held(self) -> int:
        """Rows held now."""
        return self._held

    def tables(self) -> list[RowTable[Any]]:
        """The tables held now."""
        with self._lock:
            return [t for t in self._tables.values() if t is not None]

    def _table(self, table: str, kb_id: str, token: Any) -> RowTable[Any] | None:
        store = self.store
        if token is None:
            token = store.change_token()
        key = (table, kb_id)
        with self._lock:  # one scan when several threads ask at once (a search's two retrievers)
            if token != self._token:
                self._token, self._tables, self._held = token, {}, 0
            if key in self._tables:
                return self._tables[key]
            found: RowTable[Any] | None = None
            if self.max_rows > 0 and self._held + store.count_kb_rows(table, kb_id) <= self.max_rows:
                columns, rows = store.kb_table_rows(table, kb_id)
                found = RowTable(columns, rows, store.row_decoder(_TABLES[table], columns))
                self._held += len(found)
            self._tables[key] = found
            return found
