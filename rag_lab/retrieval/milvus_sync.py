"""Keeping a KB's Milvus copy equal to SQLite: writes keyed by row id, the journal replayed, the
row counts compared when a KB is opened, repair or refusal.

**Writes** (:meth:`MilvusSync.write_documents`): the current rows of the documents (read from
SQLite, vectors from the workspace's vector index) are *upserted* by primary key (the entry id:
the chunk id, or ``<chunk id>#q<i>`` per FAQ question), then the rows Milvus still holds for
those documents and SQLite no longer has are deleted by id. A document is never absent from
Milvus midway, and a failed write leaves its previous rows. Flag changes (a chunk enabled or
disabled, a new owner tenant) are partial upserts of ``is_enabled`` / ``tenant_id`` in place.

**Journal** (:mod:`rag_lab.knowledge.sync_journal`): SQLite records what Milvus has not
acknowledged, in the transaction of the change. :meth:`MilvusSync.replay` writes the pending
entries and clears them once Milvus answered; it runs after each ingestion or deletion, before
a KB is searched (so a toggle or an owner change made through the store reaches Milvus before
the next search returns), and under the KB's write lock.

**Open** (the first search of a KB in a process): the KB is attached (a KB that has documents and
no sync state gets a ``copy`` entry: e.g. the engine was switched to Milvus without ``rag-lab
reindex``), its journal replayed, then Milvus's row count is compared with the rows SQLite
implies. A copy that is missing or behind is **copied again** when that is cheap and safe (at most
``repair_max_rows`` rows and every vector at hand: in the local index or from the lab's
embedder), else **refused** with :class:`MilvusSyncError`, which names the KB, both counts and
the command to run. A search never reads a copy known to be behind.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np

from rag_lab.retrieval.milvus_layout import (
    _INSERT_BATCH,
    MilvusEngineError,
    chunk_rows,
    in_list,
    literal,
)
from rag_lab.retrieval.milvus_tenancy import PER_TENANT, drop_elsewhere
from rag_lab.retrieval.spaces import vector_entries
from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk, KnowledgeBase
    from rag_lab.knowledge.sync_journal import SyncJournal
    from rag_lab.models.base import Embedder
    from rag_lab.retrieval.milvus_engine import MilvusEngine

log = logging.getLogger(__name__)
WHOLE_KB = "*"  # as rag_lab.knowledge.sync_journal.WHOLE_KB (retrieval sits below knowledge)
_DOC_BATCH = 500  # documents per filter expression
_ID_BATCH = 1000  # ids per delete expression
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(slots=True)
class IndexedCounts:
    """What :meth:`MilvusEngine.index_documents` wrote."""

    kb_id: str
    collection: str
    documents: int = 0
    chunks: int = 0
    rows: int = 0
    embedded: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.rows} rows ({self.chunks} chunks of {self.documents} documents, {self.embedded} embedded) "
            f"into {self.collection} in {self.seconds:.2f}s"
        )


class MilvusSyncError(MilvusEngineError):
    """A KB whose Milvus copy is missing or behind SQLite and was not repaired; the message
    names the KB, both row counts and the command that rebuilds the copy."""


def _dense(kb: KnowledgeBase) -> bool:
    return bool(kb.embedding_model_key and kb.embedding_dim > 0)


def _searchable(chunks: Iterable[Chunk]) -> list[Chunk]:
    return [c for c in chunks if c.chunk_type in SEARCHABLE_CHUNK_TYPES]


def expected_row_ids(kb: KnowledgeBase, chunks: Iterable[Chunk]) -> list[str]:
    """The Milvus row ids SQLite implies for these chunks (as :func:`chunk_rows` writes them)."""
    if not _dense(kb):
        return [c.id for c in _searchable(chunks)]
    return [eid for c in _searchable(chunks) for eid, _, _ in vector_entries(c)]


class MilvusSync:
    """The write and sync paths of one :class:`MilvusEngine` (one Milvus store)."""

    def __init__(self, engine: MilvusEngine) -> None:
        self.engine = engine
        #: KBs whose row counts were compared since this process opened them
        self._verified: set[str] = set()

    @property
    def key(self) -> str:
        return self.engine.config.key

    @property
    def _journal(self) -> SyncJournal:
        return self.engine.workspace.store.sync

    def reindex_command(self, kb: KnowledgeBase) -> str:
        return (
            f"rag-lab reindex --kb {shlex.quote(kb.name)} --engine milvus --uri {shlex.quote(self.engine.config.uri)}"
        )

    # -- writing ----------------------------------------------------------------------------
    def _call(self, what: str, name: str, fn: Callable[P, R], *args: P.args, **kw: P.kwargs) -> R:
        try:
            return fn(*args, **kw)
        except Exception as exc:
            raise MilvusEngineError(f"Milvus {what} in {name!r} failed: {type(exc).__name__}: {exc}") from exc

    def _existing_ids(self, name: str, expr: str) -> set[str]:
        client = self.engine.client
        it = self._call("query", name, client.query_iterator, name, batch_size=4096, filter=expr, output_fields=["id"])
        out: set[str] = set()
        try:
            while batch := self._call("query", name, it.next):
                out.update(str(r["id"]) for r in batch)
        finally:
            it.close()
        return out

    def _delete_ids(self, name: str, ids: Sequence[str]) -> None:
        for start in range(0, len(ids), _ID_BATCH):
            expr = in_list("id", ids[start : start + _ID_BATCH])
            self._call("delete", name, self.engine.client.delete, name, filter=expr)

    def _upsert(self, name: str, rows: list[dict[str, object]], partial: bool = False) -> int:
        kw = {"partial_update": True} if partial else {}
        res = self._call(f"upsert (first row {rows[0]['id']!r})", name, self.engine.client.upsert, name, rows, **kw)
        return int(res.get("upsert_count", len(rows))) if isinstance(res, Mapping) else len(rows)

    def _local_vectors(self, kb: KnowledgeBase, chunk_ids: set[str]) -> dict[str, np.ndarray]:
        index = self.engine.workspace.vector_index(kb)
        if index is None or len(index) == 0:
            return {}
        entries, vecs = index.export_vectors()
        return {e.entry_id: vecs[i] for i, e in enumerate(entries) if e.chunk_id in chunk_ids}

    def _embed_missing(
        self, kb: KnowledgeBase, chunks: Sequence[Chunk], vectors: dict[str, np.ndarray], embedder: Embedder | None
    ) -> int:
        from rag_lab.retrieval.spaces import check_embedder

        missing = [(eid, text) for c in chunks for eid, _, text in vector_entries(c) if eid not in vectors]
        if not missing or embedder is None:
            return 0  # chunk_rows names the first missing entry
        check_embedder(kb, embedder)
        for start in range(0, len(missing), 64):
            part = missing[start : start + 64]
            vecs = np.asarray(embedder.embed([t for _, t in part]), dtype=np.float32)
            for (eid, _), v in zip(part, vecs):
                vectors[eid] = v
        return len(missing)

    def _doc_groups(self, kb: KnowledgeBase, knowledge_ids: Sequence[str] | None) -> list[tuple[str, list[Chunk]]]:
        """(filter expression, SQLite chunks) per batch of documents (``None``: the whole KB)."""
        store = self.engine.workspace.store
        if knowledge_ids is None:
            return [(f"kb_id == {literal(kb.id)}", store.list_chunks(kb.id))]
        docs = sorted(set(knowledge_ids))
        out = []
        for start in range(0, len(docs), _DOC_BATCH):
            part = docs[start : start + _DOC_BATCH]
            expr = f"(kb_id == {literal(kb.id)}) and ({in_list('knowledge_id', part)})"
            out.append((expr, [c for kid in part for c in store.list_chunks(kb.id, kid)]))
        return out

    def write_documents(
        self, kb: KnowledgeBase, knowledge_ids: Sequence[str] | None = None, embedder: Embedder | None = None
    ) -> IndexedCounts:
        """Make Milvus hold exactly SQLite's rows for ``knowledge_ids`` (``None``: the whole KB):
        upsert the current rows by id, then delete the ids SQLite no longer has."""
        t0 = time.perf_counter()
        name = self.engine.ensure_collection(kb)
        counts = IndexedCounts(kb_id=kb.id, collection=name)
        docs: set[str] = set()
        for expr, all_chunks in self._doc_groups(kb, knowledge_ids):
            chunks = _searchable(all_chunks)
            docs.update(knowledge_ids if knowledge_ids is not None else {c.knowledge_id for c in all_chunks})
            counts.chunks += len(chunks)
            vectors: dict[str, np.ndarray] | None = None
            if _dense(kb):
                vectors = self._local_vectors(kb, {c.id for c in chunks})
                counts.embedded += self._embed_missing(kb, chunks, vectors, embedder)
            new_ids: set[str] = set()
            batch: list[dict[str, Any]] = []
            for c in chunks:
                batch.extend(chunk_rows(kb, c, vectors))
                if len(batch) >= _INSERT_BATCH:
                    new_ids.update(r["id"] for r in batch)
                    counts.rows += self._upsert(name, batch)
                    batch = []
            if batch:
                new_ids.update(r["id"] for r in batch)
                counts.rows += self._upsert(name, batch)
            self._delete_ids(name, sorted(self._existing_ids(name, expr) - new_ids))
        if knowledge_ids is None:
            drop_elsewhere(self.engine, kb)  # collection_per_tenant: the copy in a former owner's collection
        counts.documents = len(docs)
        counts.seconds = time.perf_counter() - t0
        return counts

    def write_flags(self, kb: KnowledgeBase, knowledge_ids: Sequence[str] | None) -> int:
        """Update ``is_enabled`` and ``tenant_id`` in place (partial upserts) for the rows of
        ``knowledge_ids`` (``None``: the whole KB). Returns the rows updated."""
        name = self.engine.ensure_collection(kb)
        tenant, n = int(kb.tenant_id), 0
        dense = _dense(kb)
        for _, chunks in self._doc_groups(kb, knowledge_ids):
            rows = [
                {"id": eid, "is_enabled": bool(c.is_enabled), "tenant_id": tenant}
                for c in _searchable(chunks)
                for eid in ([e for e, _, _ in vector_entries(c)] if dense else [c.id])
            ]
            for start in range(0, len(rows), _INSERT_BATCH):
                n += self._upsert(name, rows[start : start + _INSERT_BATCH], partial=True)
        return n

    # -- syncing ----------------------------------------------------------------------------
    def attach(self, kb: KnowledgeBase) -> None:
        """Record in SQLite that this store holds a copy of ``kb`` (before the KB's first write
        through this engine, so that the write is journalled). One read when it is recorded
        already (another process may have deleted and recreated the KB since)."""
        if not self._journal.is_attached(kb.id, self.key):
            self._journal.attach(kb.id, self.key)
            self._verified.discard(kb.id)

    def detach(self, kb: KnowledgeBase) -> None:
        """The KB was deleted: forget what this process verified about it."""
        self._verified.discard(kb.id)

    def before_search(self, kb: KnowledgeBase) -> list[str]:
        """Bring ``kb``'s copy up to date before a search (replay its journal; the first time,
        compare the counts). Returns the documents to leave out of this search: those a writer
        is writing right now (it replays them when it is done)."""
        self.attach(kb)
        pending = self._journal.pending(kb.id, self.key)
        if not pending and kb.id in self._verified:
            return []
        with self.engine.workspace.try_kb_lock(kb) as got:
            if got:
                self.replay(kb)
                return []
        if any(kid == WHOLE_KB for kid, _, _ in pending):
            raise MilvusSyncError(
                f"knowledge base {kb.name!r} ({kb.id}) must be copied into Milvus at {self.engine.config.uri} "
                "and another writer holds its lock now; search it when that writer is done, or run: "
                f"{self.reindex_command(kb)}"
            )
        return [kid for kid, _, _ in pending]

    def replay(self, kb: KnowledgeBase, embedder: Embedder | None = None) -> None:
        """Write the KB's pending journal entries, compare counts if not done in this process,
        clear what Milvus acknowledged. The caller holds the KB's write lock. Raises
        :class:`MilvusSyncError` (the entries stay pending) when Milvus cannot be brought level."""
        self.attach(kb)
        entries = self._journal.pending(kb.id, self.key)
        if not entries and kb.id in self._verified:
            return
        whole = {op for kid, op, _ in entries if kid == WHOLE_KB}
        docs = [kid for kid, op, _ in entries if kid != WHOLE_KB and op == "doc"]
        flags = [kid for kid, op, _ in entries if kid != WHOLE_KB and op == "flags"]
        wrote = False
        if embedder is None and self.engine.workspace.embedder_for is not None:
            embedder = self.engine.workspace.embedder_for(kb)
        try:
            if "copy" in whole:
                self._repair(kb, embedder, attached=True)
            else:
                if docs:
                    self.write_documents(kb, docs, embedder)
                if "owner" in whole and self.engine.config.tenancy == PER_TENANT:
                    self.write_documents(kb, None, embedder)  # into the new owner's collection, out of the old
                elif flags or "owner" in whole:
                    self.write_flags(kb, None if "owner" in whole else flags)
                if kb.id not in self._verified:
                    wrote = self._repair(kb, embedder, attached=False)
            if entries or wrote:
                self.engine._flush(self.engine.collection_for(kb))
            rows = self.engine.count(kb)
        except MilvusSyncError as exc:
            self._journal.record(kb.id, self.key, error=str(exc))
            raise
        except Exception as exc:
            msg = self._behind_message(kb, len(entries), exc)
            self._journal.record(kb.id, self.key, error=msg)
            raise MilvusSyncError(msg) from exc
        self._journal.clear(kb.id, self.key, entries)
        self._journal.record(kb.id, self.key, rows=rows)
        self._verified.add(kb.id)

    def _counts(self, kb: KnowledgeBase) -> tuple[int | None, list[str]]:
        expected = expected_row_ids(kb, self.engine.workspace.store.list_chunks(kb.id))
        try:
            have: int | None = self.engine.count(kb)
        except Exception:
            have = None
        return have, expected

    def _behind_message(self, kb: KnowledgeBase, pending: int, exc: BaseException) -> str:
        have, expected = self._counts(kb)
        held = "an unknown number of" if have is None else str(have)
        return (
            f"knowledge base {kb.name!r} ({kb.id}): {pending} write(s) to Milvus at {self.engine.config.uri} "
            f"are pending and could not be replayed ({exc}); Milvus holds {held} rows, SQLite {len(expected)}. "
            "Searching the copy could return stale chunks, so it is refused; the writes are retried at the next "
            f"ingest or search, or run: {self.reindex_command(kb)}"
        )

    def _repair(self, kb: KnowledgeBase, embedder: Embedder | None, attached: bool) -> bool:
        """Compare counts; copy the KB again when it is behind (or newly attached) and that is
        cheap and safe; else raise :class:`MilvusSyncError`. True when it wrote."""
        have, expected = self._counts(kb)
        if have is None:
            have = self.engine.count(kb)  # raises the client's error
        cfg = self.engine.config
        if have == len(expected) and not attached:
            return False
        why_not = ""
        if len(expected) > cfg.repair_max_rows:
            why_not = f"{len(expected)} rows > repair_max_rows {cfg.repair_max_rows}"
        elif _dense(kb) and embedder is None:
            chunks = _searchable(self.engine.workspace.store.list_chunks(kb.id))
            vectors = self._local_vectors(kb, {c.id for c in chunks})
            lacking = sum(1 for eid in expected if eid not in vectors)
            if lacking:
                why_not = f"{lacking} entries have no vector in the local index and no embedder is at hand"
        if not why_not:
            if have != len(expected):
                log.warning(
                    "knowledge base %r: Milvus at %s holds %d rows, SQLite %d; copying it again",
                    kb.name,
                    cfg.uri,
                    have,
                    len(expected),
                )
            self.write_documents(kb, None, embedder)
            return True
        if attached and have == len(expected):
            # a large KB whose copy has the right size: refresh the flags, trust the rows
            log.warning(
                "knowledge base %r: attached to Milvus at %s with %d rows as in SQLite; flags refreshed, rows not "
                "compared one by one (%s). If documents changed while it was not routed there, run: %s",
                kb.name,
                cfg.uri,
                have,
                why_not,
                self.reindex_command(kb),
            )
            self.write_flags(kb, None)
            return True
        raise MilvusSyncError(
            f"knowledge base {kb.name!r} ({kb.id}): its Milvus copy at {cfg.uri} is "
            f"{'missing' if have == 0 else 'out of step'}: Milvus holds {have} rows, SQLite {len(expected)}. "
            f"It is not repaired automatically ({why_not}); run: {self.reindex_command(kb)}"
        )


__all__ = ["IndexedCounts", "MilvusSync", "MilvusSyncError", "expected_row_ids"]
