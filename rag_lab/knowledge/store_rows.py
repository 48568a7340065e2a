"""Rows of the knowledge store: the columns of each table (one per dataclass field; dict/list
fields are JSON text, booleans 0/1), a dataclass as a row and rows decoded back (one decoder per
query shape), batches of ids under SQLite's variable limit, and the store's error type.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import fields
from operator import itemgetter
from typing import TYPE_CHECKING, Any, TypeVar

from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.retrieval.sharing import SHARED_WITH, check_shared_with
from rag_lab.types.search_result import UNSEARCHABLE_STATUSES

if TYPE_CHECKING:
    from rag_lab.knowledge.sqldb import PgConnection, PgCursor

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


def _to_row(obj: object) -> tuple[object, ...]:
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


_DECODERS: dict[tuple[type, tuple[str, ...]], Callable[[Sequence[object]], Any]] = {}
_VALUE_DECODERS: dict[
    tuple[type, tuple[str, ...], tuple[str, ...] | None], Callable[[Sequence[object]], list[object]]
] = {}


def _values_decoder(
    cls: type, columns: tuple[str, ...], names: tuple[str, ...] | None = None
) -> Callable[[Sequence[object]], list[object]]:
    """Row → the values of the fields ``names`` of ``cls`` (default: every field, in the
    dataclass' order) for rows of these columns, as the object holds them: JSON decoded, booleans
    as ``bool``. Found once per (class, query shape, names): for readers of a few fields of many
    rows, who need not build the objects."""
    found = _VALUE_DECODERS.get((cls, columns, names))
    if found is not None:
        return found
    all_names, js, bools = _SPECS[cls]
    wanted = all_names if names is None else list(names)
    at = [columns.index(n) for n in wanted]
    take = itemgetter(*at) if len(at) != 1 else (lambda row: (row[at[0]],))
    json_at = [(i, n in ("metadata", "custom_metadata")) for i, n in enumerate(wanted) if n in js]
    bool_at = [i for i, n in enumerate(wanted) if n in bools]

    def decode(row: Sequence[object]) -> list[object]:
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
        return values

    _VALUE_DECODERS[(cls, columns, names)] = decode
    return decode


def _decoder(cls: type[T], columns: tuple[str, ...]) -> Callable[[Sequence[object]], T]:
    """Row → ``cls`` for rows of these columns (in this order): every field's value
    (:func:`_values_decoder`), the dataclass built positionally."""
    found = _DECODERS.get((cls, columns))
    if found is not None:
        return found
    values = _values_decoder(cls, columns)

    def decode(row: Sequence[object]) -> T:
        return cls(*values(row))

    _DECODERS[(cls, columns)] = decode
    return decode


def _from_row(cls: type[T], row: sqlite3.Row) -> T:
    return _decoder(cls, tuple(row.keys()))(row)


def _decode_rows(cls: type[T], cursor: sqlite3.Cursor | PgCursor) -> Iterator[T]:
    """Every row of ``cursor`` as a ``cls`` (one column lookup for the whole query)."""
    return map(_decoder(cls, tuple(d[0] for d in cursor.description or ())), cursor)


def _tuples(
    conn: sqlite3.Connection | PgConnection, sql: str, args: Sequence[object] = ()
) -> sqlite3.Cursor | PgCursor:
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
