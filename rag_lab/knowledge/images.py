"""Image ingestion: one searchable chunk and one image vector per image (seed §5 step 5).

``ingest_images(workspace, kb, items, image_embedder, captions=None)`` adds, per image:

* a document (``source`` ``"image"``, ``file_type`` ``"image"``) whose id is the item's ``id`` or
  the file name;
* one chunk ``<kb_id>:<doc id>#img`` of type ``image_caption`` (searchable) whose content is the
  caption and OCR text (the file name when both are empty), with ``image_info`` =
  ``[{"url", "caption", "ocr_text"}]`` (``url``: the given URL, else the file path); it goes into
  the KB's keyword index when the KB has one;
* the image tower's vector in the KB's image index (``<root>/indexes/<kb_id>/images/``).

The KB is marked ``image_vector_enabled`` with the embedder's ``image_embedding_model_key`` and
``image_embedding_dim``; a KB already bound to another image model is refused. Idempotent by a hash
of the image bytes, caption, OCR text and URL.

Items are paths (``str`` / ``Path``) or mappings with ``path`` (required: the file that is
embedded) and optional ``id``, ``url``, ``caption``, ``ocr_text``, ``tag_id``. ``captions`` maps a
path (as given) or a file name to a caption, or is a sequence aligned with the items.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_lab.knowledge.ingest_common import IngestError
from rag_lab.knowledge.ingestion import IngestReport
from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase
from rag_lab.types.errors import MixedEmbeddingSpaces

if TYPE_CHECKING:
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.retrieval.image_recall import ImageEmbedder

__all__ = ["ingest_images"]


@dataclass(slots=True)
class _Image:
    doc: Knowledge
    chunk: Chunk
    path: str


def _item_fields(i: int, item: object) -> dict[str, Any]:
    if isinstance(item, (str, Path)):
        return {"path": str(item)}
    if isinstance(item, Mapping):
        unknown = set(item) - {"path", "id", "url", "caption", "ocr_text", "tag_id"}
        if unknown:
            raise IngestError(
                f"image #{i}: unknown fields {sorted(unknown)} (allowed: path, id, url, caption, ocr_text, tag_id)"
            )
        return dict(item)
    raise IngestError(f"image #{i}: {item!r} must be a path or a mapping with 'path'")


def _caption_for(i: int, given_path: str, captions: Mapping[str, str] | Sequence[str] | None) -> str | None:
    if captions is None:
        return None
    if isinstance(captions, Mapping):
        got = captions.get(given_path, captions.get(Path(given_path).name))
    else:
        got = captions[i] if i < len(captions) else None
    if got is not None and not isinstance(got, str):
        raise IngestError(f"image #{i} ({given_path}): caption {got!r} must be a string")
    return got


def _embed_images(embedder: ImageEmbedder, paths: list[str]) -> np.ndarray:
    try:
        arr = np.asarray(embedder.embed_images(paths), dtype=np.float32)
    except Exception as exc:
        raise IngestError(f"image embedder {embedder.model_key!r} failed on {len(paths)} images: {exc}") from exc
    if arr.ndim != 2 or arr.shape != (len(paths), int(embedder.dimension)):
        raise IngestError(
            f"image embedder {embedder.model_key!r} returned shape {arr.shape}; expected "
            f"({len(paths)}, {embedder.dimension})"
        )
    if not np.all(np.isfinite(arr)):
        raise IngestError(f"image embedder {embedder.model_key!r} returned NaN or infinite values")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)  # cosine = inner product


def ingest_images(
    workspace: Workspace,
    kb: KnowledgeBase | str,
    paths_or_items: Iterable[object],
    image_embedder: ImageEmbedder,
    captions: Mapping[str, str] | Sequence[str] | None = None,
) -> IngestReport:
    """Ingest images into ``kb`` (see the module docstring); returns what changed."""
    from rag_lab.retrieval.image_recall import image_index, image_index_dir, remember_image_index

    t0 = time.perf_counter()
    kb = workspace.get_kb(kb)
    if kb.type == "faq":
        raise IngestError(f"knowledge base {kb.name!r} is an FAQ KB; images go into document KBs")
    key, dim = getattr(image_embedder, "model_key", ""), int(getattr(image_embedder, "dimension", 0) or 0)
    if not key or dim <= 0:
        raise ValueError(f"image embedder model_key={key!r} dimension={dim!r}: both must be set")
    bound = kb.metadata.get("image_embedding_model_key")
    if bound and (bound != key or int(kb.metadata.get("image_embedding_dim") or 0) != dim):
        raise MixedEmbeddingSpaces(
            f"knowledge base {kb.name!r} stores image vectors of {bound!r} (dimension "
            f"{kb.metadata.get('image_embedding_dim')}); the image embedder is {key!r} (dimension {dim})"
        )
    report = IngestReport(kb_id=kb.id)
    prepared: list[_Image] = []
    seen: set[str] = set()
    for i, item in enumerate(paths_or_items):
        f = _item_fields(i, item)
        given = f.get("path")
        if not isinstance(given, str | Path) or not str(given):
            raise IngestError(f"image #{i}: field 'path' = {given!r} must name an image file")
        given = str(given)
        p = Path(given)
        if not p.is_file():
            raise IngestError(f"image #{i}: {given}: file does not exist")
        for name in ("id", "url", "caption", "ocr_text", "tag_id"):
            if f.get(name) is not None and not isinstance(f[name], str):
                raise IngestError(f"image #{i} ({given}): field {name!r} = {f[name]!r} must be a string")
        cap = _caption_for(i, given, captions)
        caption = (f.get("caption") if f.get("caption") is not None else cap) or ""
        ocr = f.get("ocr_text") or ""
        url = f.get("url") or given
        kid = f.get("id") or p.name
        if kid in seen:
            raise IngestError(f"image #{i} ({given}): duplicate id {kid!r}")
        seen.add(kid)
        digest = hashlib.sha256(p.read_bytes()).hexdigest()
        content = "\n".join(t.strip() for t in (caption, ocr) if t.strip()) or p.name
        h = hashlib.sha256(json.dumps([digest, caption, ocr, url, f.get("tag_id") or ""]).encode()).hexdigest()
        doc = Knowledge(
            id=kid,
            knowledge_base_id=kb.id,
            title=caption.strip() or p.name,
            file_name=p.name,
            file_type="image",
            source="image",
            metadata={"path": given},
            content_hash=h,
        )
        chunk = Chunk(
            id=f"{kb.id}:{kid}#img",
            knowledge_id=kid,
            knowledge_base_id=kb.id,
            content=content,
            chunk_type="image_caption",
            end_at=len(content),
            tag_id=f.get("tag_id") or "",
            image_info=json.dumps([{"url": url, "caption": caption, "ocr_text": ocr}], ensure_ascii=False),
            metadata={"image_sha256": digest},
        )
        prepared.append(_Image(doc, chunk, given))
    store = workspace.store
    with workspace.kb_lock(kb):
        todo: list[_Image] = []
        for im in prepared:
            old = store.get_document(kb.id, im.doc.id)
            if old is not None and old.content_hash == im.doc.content_hash:
                report.unchanged.append(im.doc.id)
            else:
                (report.updated if old is not None else report.added).append(im.doc.id)
                todo.append(im)
        if not todo:
            report.seconds = time.perf_counter() - t0
            return report
        vectors = _embed_images(image_embedder, [im.path for im in todo])
        kb.metadata.update(image_vector_enabled=True, image_embedding_model_key=key, image_embedding_dim=dim)
        store.update_kb(kb)
        idx = image_index(workspace, kb)
        kindex = workspace.keyword_index(kb) if kb.keyword_enabled else None
        for im in todo:
            if im.doc.id in report.updated:
                removed = store.delete_knowledge(kb.id, im.doc.id)
                report.chunks_removed += len(removed)
                idx.remove_chunks(removed)
                vindex = workspace.vector_index(kb)
                if vindex is not None:
                    vindex.remove_chunks(removed)
                if kindex is not None:
                    kindex.remove_chunks(removed)
        store.add_chunks([im.chunk for im in todo])
        idx.add([im.chunk.id for im in todo], vectors)
        idx.save(image_index_dir(workspace, kb.id))
        remember_image_index(workspace, kb.id, idx)
        if kindex is not None:
            kindex.add([im.chunk.id for im in todo], [im.chunk.content for im in todo])
            kindex.save()
        vindex = workspace.vector_index(kb)
        if vindex is not None and report.updated:
            vindex.save(workspace.index_dir(kb.id))
        store.add_knowledge([im.doc for im in todo])
        report.chunks_added += len(todo)
        report.vectors_added += len(todo)
    report.seconds = time.perf_counter() - t0
    return report
