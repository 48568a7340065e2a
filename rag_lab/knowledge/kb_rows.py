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
from collections.abc import Callable, Collection, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from rag_lab.knowledge.models import Chunk, Knowledge

if TYPE_CHECKING:
    from rag_lab.knowledge.store import KnowledgeStore

__all__ = ["KbRows", "RowTable"]

T = TypeVar("T", Chunk, Knowledge)

#: the tables held, and the class their rows decode into
_TABLES: dict[str, type] = {"chunks": Chunk, "knowledge": Knowledge}

#: columns whose values repeat across a KB's rows (its id, a type, a status, ``'{}'``, a document
#: id shared by its chunks): SQLite returns a new object per row for each, so a held table keeps
#: one object per distinct value instead (``benchmarks/kb_rows_memory.py``, tracemalloc: 14.8 →
#: 9.8 MB at 10k chunks and documents; 98.8 MB at 100k; the load takes ~2× as long: 0.32 vs 0.17 s
#: at 20k)
_SHARED_COLUMNS: dict[str, frozenset[str]] = {
    "chunks": frozenset(
        {
            "knowledge_id",
            "knowledge_base_id",
            "chunk_type",
            "start_at",
            "end_at",
            "parent_chunk_id",
            "pre_chunk_id",
            "next_chunk_id",
            "index_status",
            "image_info",
            "metadata",
            "tag_id",
        }
    ),
    "knowledge": frozenset(
        {
            "knowledge_base_id",
            "file_type",
            "source",
            "channel",
            "description",
            "enable_status",
            "metadata",
            "custom_metadata",
            "created_at",
            "updated_at",
        }
    ),
}
#: the column of each table that holds the document id, shared with the other table's when it is
#: held (a chunk's ``knowledge_id`` is its document row's ``id``)
_DOCUMENT_ID: dict[str, str] = {"chunks": "knowledge_id", "knowledge": "id"}


def share_values(
    rows: Iterable[Sequence[object]],
    columns: Sequence[str],
    shared: Collection[str],
    known: dict[object, object] | None = None,
) -> list[tuple[object, ...]]:
    """``rows`` with the values of the ``shared`` columns replaced by one object per distinct
    value (equal rows, less memory); ``known`` seeds the values (objects another table holds).
    Column by column (``zip``, ``map``): the rows' Python loop cost twice the table's read."""
    rows = list(rows)
    at = [i for i, c in enumerate(columns) if c in shared]
    if not rows or not at:
        return [tuple(r) for r in rows]
    # one pool per type: 1 == 1.0 == True, and a float column keeps its floats; ±0.0 are equal
    # but not the same value, so a float column holding a zero is left as it is
    pools: dict[type, dict[object, object]] = {str: known if known is not None else {}, int: {}, float: {}}
    cols: list[Sequence[object]] = list(zip(*rows))
    for i in at:
        kinds = set(map(type, cols[i]))
        if len(kinds) != 1:
            continue
        (kind,) = kinds
        pool = pools.get(kind)
        if pool is None or (kind is float and 0.0 in cols[i]):
            continue
        cols[i] = list(map(pool.setdefault, cols[i], cols[i]))
    return list(zip(*cols))


class RowTable(Generic[T]):
    """One KB's rows of one table: ``rows`` maps the row id (chunk id, or document id: unique
    within a KB) to the stored tuple, ``at`` a column name to its position in the tuples."""

    __slots__ = ("rows", "columns", "at", "_decode", "_fields", "_children", "_lock")

    def __init__(
        self,
        columns: tuple[str, ...],
        rows: Iterable[tuple[Any, ...]],
        decode: Callable[[Sequence[object]], T],
        fields: Callable[[tuple[str, ...]], Callable[[Sequence[object]], list[object]]],
    ) -> None:
        """``decode``: row → object; ``fields(names)``: row → the values of those fields of the
        object (:meth:`reader`)."""
        self.columns: tuple[str, ...] = columns
        self.at: dict[str, int] = {c: i for i, c in enumerate(columns)}
        key = self.at["id"]
        self.rows: dict[str, tuple[Any, ...]] = {r[key]: r for r in rows}
        self._decode: Callable[[Sequence[object]], T] = decode
        self._fields = fields
        self._children: dict[str, list[str]] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, row_id: str) -> T | None:
        """The decoded object (a new one per call), or None."""
        row = self.rows.get(row_id)
        return None if row is None else self._decode(row)

    def reader(self, names: tuple[str, ...]) -> Callable[[Sequence[object]], list[object]]:
        """Row (of :attr:`rows`) → the values of the fields ``names``, as the decoded object
        holds them (JSON decoded, booleans as ``bool``), without building the object."""
        return self._fields(names)

    def get_children(self, parent_ids: Iterable[str]) -> list[T]:
        """Chunk tables: :meth:`KnowledgeStore.get_children` over this KB's chunks (children are
        in their parent's KB), in the store's order: by parent id, ``chunk_index``, id."""
        by_parent = self._by_parent()
        return [self._decode(self.rows[c]) for p in sorted(set(parent_ids)) if p for c in by_parent.get(p, ())]

    def has_children(self) -> bool:
        """Chunk tables: whether any chunk of the KB has a parent."""
        return bool(self._by_parent())

    def _by_parent(self) -> dict[str, list[str]]:
        """The ids of the children of each parent (indexed on first use)."""
        by_parent = self._children
        if by_parent is None:
            with self._lock:
                if self._children is None:
                    self._children = self._index_children()
                by_parent = self._children
        return by_parent

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
    #: not held. ``benchmarks/kb_rows_memory.py`` measures what they take with tracemalloc: 98.8 MB
    #: for 100,000 chunks of ~350 characters and their 100,000 documents (``sys.getsizeof``'s
    #: upper bound, which ``search.py`` prints, counts shared values once per row).
    max_rows = 300_000

    def __init__(self, store: KnowledgeStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._token: tuple[int, int] | None = None
        self._tables: dict[tuple[str, str], RowTable[Any] | None] = {}
        self._held = 0

    def chunks(self, kb_id: str, token: tuple[int, int] | None = None) -> RowTable[Chunk] | None:
        """KB ``kb_id``'s chunk rows, read on first use under this store state; None when they do
        not fit in :attr:`max_rows`. ``token``: the store's change token when the caller just
        read it (saves a query)."""
        return self._table("chunks", kb_id, token)

    def documents(self, kb_id: str, token: tuple[int, int] | None = None) -> RowTable[Knowledge] | None:
        """KB ``kb_id``'s document rows (see :meth:`chunks`)."""
        return self._table("knowledge", kb_id, token)

    def held(self) -> int:
        """Rows held now."""
        return self._held

    def tables(self) -> list[RowTable[Any]]:
        """The tables held now."""
        with self._lock:
            return [t for t in self._tables.values() if t is not None]

    def _ids(self, table: str, kb_id: str) -> dict[object, object]:
        """The document ids the KB's other table holds (itself to itself), to share with this one;
        empty when it is not held. Called under the lock."""
        other = next(t for t in _TABLES if t != table)
        held = self._tables.get((other, kb_id))
        if held is None:
            return {}
        at = held.at[_DOCUMENT_ID[other]]
        return {r[at]: r[at] for r in held.rows.values()}

    def _table(self, table: str, kb_id: str, token: tuple[int, int] | None) -> RowTable[Any] | None:
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
                found = RowTable(
                    columns,
                    share_values(
                        rows, columns, _SHARED_COLUMNS[table] | {_DOCUMENT_ID[table]}, self._ids(table, kb_id)
                    ),
                    store.row_decoder(_TABLES[table], columns),
                    partial(store.values_decoder, _TABLES[table], columns),
                )
                self._held += len(found)
            self._tables[key] = found
            return found
