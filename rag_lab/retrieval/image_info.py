"""Image info of a chunk collected from the image chunks under it (spec §6.9).

A text chunk whose images were split off into ``image_ocr`` / ``image_caption`` child chunks has
no image info of its own; a ``parent_text`` chunk reaches its images through its text children.
:func:`collect_image_info_by_chunk_ids` gathers, per chunk id, the image entries of its enabled
image children and of the enabled image grandchildren under its text children, one entry per
image ``url`` (or ``original_url``). :func:`enrich_search_results_image_info` fills the results
that have no image info from it (the end of hydration, entity search step 7).

``store`` is anything with ``get_children(ids) -> list[Chunk]`` (the knowledge store).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from rag_lab.searchutil.imageinfo import dump_image_info, image_field, parse_image_info

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk
    from rag_lab.types.search_result import SearchResult

__all__ = ["aggregate_image_entries", "collect_image_info_by_chunk_ids", "enrich_search_results_image_info"]

log = logging.getLogger(__name__)

_IMAGE_TYPES = ("image_ocr", "image_caption")


class ChildChunks(Protocol):
    """What the image info is gathered from: the knowledge store, or a KB's chunk rows."""

    def get_children(self, parent_ids: Iterable[str]) -> Sequence[Chunk]: ...


def aggregate_image_entries(into: dict[str, dict[str, object]], info: str) -> None:
    """Add the entries of one ``image_info`` JSON to ``into`` (keyed by ``url``, else
    ``original_url``; entries with neither are skipped). The first entry per key is kept; a later
    one with a non-empty ``ocr_text`` or ``caption`` overwrites that field. Invalid JSON is
    skipped."""
    entries = parse_image_info(info) if info else None
    for entry in entries or ():
        key = image_field(entry, "url") or image_field(entry, "original_url")
        if not key:
            continue
        kept = into.get(key)
        if kept is None:
            into[key] = dict(entry)
            continue
        for name in ("ocr_text", "caption"):
            if entry.get(name):
                kept[name] = entry[name]


def collect_image_info_by_chunk_ids(store: ChildChunks | None, ids: Iterable[str]) -> dict[str, str]:
    """``chunk id -> image_info JSON`` gathered from the image chunks under each id (§6.9).

    Image children aggregate under their parent; the image grandchildren under a text child
    aggregate under the original id. Disabled chunks are ignored. An id with nothing gathered is
    left out; a load error gives what was gathered so far (an empty map when the children fail).
    """
    wanted = list(dict.fromkeys(i for i in ids if i))
    if not wanted or store is None:
        return {}
    try:
        children = store.get_children(wanted)
    except Exception as exc:
        log.warning("image info: loading the children of %d chunks failed: %s", len(wanted), exc)
        return {}
    gathered: dict[str, dict[str, dict[str, object]]] = {}
    origin_of: dict[str, str] = {}  # text child id -> the original id it descends from
    for child in children:
        if not child.is_enabled:
            continue
        if child.chunk_type in _IMAGE_TYPES:
            aggregate_image_entries(gathered.setdefault(child.parent_chunk_id, {}), child.image_info)
        elif child.chunk_type == "text":
            origin_of[child.id] = child.parent_chunk_id
    if origin_of:
        try:
            grandchildren = store.get_children(list(origin_of))
        except Exception as exc:
            log.warning("image info: loading image chunks under %d text chunks failed: %s", len(origin_of), exc)
            grandchildren = []
        for g in grandchildren:
            if g.is_enabled and g.chunk_type in _IMAGE_TYPES and g.parent_chunk_id in origin_of:
                aggregate_image_entries(gathered.setdefault(origin_of[g.parent_chunk_id], {}), g.image_info)
    return {cid: dump_image_info(list(entries.values())) for cid, entries in gathered.items() if entries}


def enrich_search_results_image_info(
    results: Sequence[SearchResult], store: ChildChunks | None, memo: dict[str, str] | None = None
) -> None:
    """Fill the empty ``image_info`` of results from :func:`collect_image_info_by_chunk_ids`.
    ``memo`` (chunk id -> gathered info, ``""`` for none) is read and filled when given."""
    empty = [r for r in results if not r.image_info and r.id]
    if not empty:
        return
    known = memo if memo is not None else {}
    missing = [r.id for r in empty if r.id not in known]
    if missing:
        found = collect_image_info_by_chunk_ids(store, missing)
        for i in missing:
            known[i] = found.get(i, "")
    for r in empty:
        if known[r.id]:
            r.image_info = known[r.id]
