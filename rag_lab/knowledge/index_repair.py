"""Make a KB's indexes agree with the knowledge store, the source of truth (crash and
concurrency repair, and how a replica over a shared store catches up with the others).

An index can disagree with the store after an interrupted ingestion (chunks written, index not
yet switched), after an older rag_lab wrote two files non-atomically ("458 vectors but 215
ids"), after writers that did not share a lock, or, over a shared PostgreSQL store, after
another replica wrote. On open, the workspace compares the index's chunk ids with the store's
and, when they differ, repairs the index with a warning (info over a shared store, where it is
normal) instead of refusing to open:

* keyword index: chunks missing from it are tokenised from their stored text, extra ones removed;
* vector index: extra entries are removed; missing chunks are embedded when an embedder for the
  KB's space is at hand (ingestion always has one; a lab sets ``workspace.embedder_for``),
  otherwise they are reported and left for the next ``ingest`` run, which repairs them.

What each index should hold is decided by chunk type, the same rule ingestion follows: every
searchable chunk is in the keyword index; the text vector index holds every searchable chunk but
image captions / OCR (those live in the image index), FAQ chunks as one vector per question.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from rag_lab.types.search_result import SEARCHABLE_CHUNK_TYPES

if TYPE_CHECKING:
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.keyword_index import KeywordIndex
    from rag_lab.retrieval.vector_index import VectorIndex

log = logging.getLogger(__name__)

#: chunk types that are searchable but not in the text vector index
IMAGE_CHUNK_TYPES = frozenset({"image_caption", "image_ocr"})


def _level(ws: Workspace) -> int:
    """How a repair is logged: a warning over a workspace's own store, where a disagreement means
    an interrupted or concurrent writer; info over a shared store (PostgreSQL), where another
    replica's writes reach this folder's indexes that way in normal operation."""
    return logging.INFO if getattr(ws.store, "shared", False) else logging.WARNING


def _chunk_types(ws: Workspace, kb_id: str) -> dict[str, str]:
    rows = ws.store._conn().execute("SELECT id, chunk_type FROM chunks WHERE knowledge_base_id = ?", (kb_id,))
    return {r[0]: r[1] for r in rows if r[1] in SEARCHABLE_CHUNK_TYPES}


def repair_keyword_index(ws: Workspace, kb: KnowledgeBase, idx: KeywordIndex) -> bool:
    """Bring ``idx`` in line with the store; True when it had to change (and was saved)."""
    want = _chunk_types(ws, kb.id)
    have = set(idx.chunk_ids())
    missing = [cid for cid in want if cid not in have]
    extra = [cid for cid in have if cid not in want]
    if not missing and not extra:
        return False
    log.log(
        _level(ws),
        "knowledge base %r: keyword index disagrees with the store (%d chunks missing, %d extra); rebuilding it",
        kb.name,
        len(missing),
        len(extra),
    )
    if extra:
        idx.remove_chunks(extra)
    if missing:
        chunks = ws.store.get_chunks(missing)
        ids = [cid for cid in missing if cid in chunks]
        idx.add(ids, [chunks[cid].content for cid in ids])
    idx.save()
    return True


def repair_vector_index(ws: Workspace, kb: KnowledgeBase, idx: VectorIndex, embedder: Any = None) -> bool:
    """Bring ``idx`` in line with the store; True when it changed (and was saved)."""
    from rag_lab.knowledge.ingest_common import _embed
    from rag_lab.retrieval.spaces import vector_entries as _vector_entries

    want = {cid for cid, t in _chunk_types(ws, kb.id).items() if t not in IMAGE_CHUNK_TYPES}
    have = idx.chunk_ids()
    extra = [cid for cid in have if cid not in want]
    missing_ids = [cid for cid in want if cid not in have]
    chunks = ws.store.get_chunks(missing_ids) if missing_ids else {}
    todo = [(c.id, e, own, text) for c in chunks.values() for e, own, text in _vector_entries(c)]
    if not extra and not todo:
        return False
    if todo and embedder is None:
        log.warning(
            "knowledge base %r: %d chunks have no vector (an interrupted or concurrent ingestion); "
            "run `rag-lab ingest` on the KB again to embed them",
            kb.name,
            len({t[0] for t in todo}),
        )
        todo = []
        if not extra:
            return False
    else:
        log.log(
            _level(ws),
            "knowledge base %r: vector index disagrees with the store (%d chunks missing, %d extra); repairing it",
            kb.name,
            len({t[0] for t in todo}),
            len(extra),
        )
    if extra:
        idx.remove_chunks(extra)
    for start in range(0, len(todo), 64):
        part = todo[start : start + 64]
        vecs = _embed(embedder, [p[3] for p in part], f"knowledge base {kb.name!r}")
        idx.add([p[0] for p in part], vecs, entry_ids=[p[1] for p in part], texts=[p[2] for p in part])
    idx.save(ws.index_dir(kb.id))
    return True
