"""CHUNK_MERGE in eight steps (spec §4.8, seed "Fusion en huit étapes").

1 input (rerank result, else search result by score) · 2 dedup · 3 history references ·
4 parent chunks · 5 sequential merge per (document, chunk type) · 6 FAQ answers ·
7 neighbour expansion of short text chunks · 8 merge again, dedup, partial-overlap removal.
Every decision is appended to ``state.diagnostics["merge"]`` for the merge view.

Kept whole: one stage per module; the eight steps are this module's public functions, each tested
on its own, and the plugin runs them in order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from rag_lab.knowledge.ingestion import faq_content
from rag_lab.knowledge.models import FAQEntry
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.filter_top_k import sort_search_results_deterministically
from rag_lab.reranking.image import is_image_hit
from rag_lab.retrieval.image_info import ChildChunks, collect_image_info_by_chunk_ids
from rag_lab.searchutil.chunkmerge import (
    append_with_exact_overlap,
    append_with_overlap,
    contains_chunk_content,
    join_chunk_content,
)
from rag_lab.searchutil.dedup import remove_duplicate_results, remove_partial_overlaps
from rag_lab.searchutil.imageinfo import (
    filter_image_info_by_content_urls,
    merge_image_info,
    prune_markdown_images_by_image_info,
)
from rag_lab.searchutil.text import content_overlap_ratio, jaccard, normalize_content, tokenize_simple
from rag_lab.types.chat_manage import ChatManage, History
from rag_lab.types.diagnostics import MergeDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import MatchType, SearchResult

if TYPE_CHECKING:
    from rag_lab.knowledge.models import Chunk

log = logging.getLogger(__name__)
SEP = "\n\n"


class ChunkStore(ChildChunks, Protocol):
    """What merging reads stored chunks from: the knowledge store, or the tuning evaluator's memo of it."""

    def get_chunks(self, ids: Iterable[str]) -> dict[str, Chunk]: ...


def _fmt_sim(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


def inject_history_references(
    current: list[SearchResult],
    history: list[History],
    query: str,
    params: PipelineParams,
    log_: list[dict[str, object]],
) -> list[SearchResult]:
    """References of the newest turn that had any, kept when they overlap the query (seed:
    |q∩c| / min(|q|,|c|) >= threshold), score × factor, at most N."""
    raw: list[SearchResult] = []
    for h in reversed(history):
        if h.knowledge_references:
            raw = h.knowledge_references
            break
    if not raw:
        return []
    q_tokens = tokenize_simple(query)
    present = {r.id for r in current}
    kept: list[SearchResult] = []
    for ref in raw:
        if len(kept) >= params.history_max_refs:
            break
        if ref.id in present:
            continue
        overlap = content_overlap_ratio(query, ref.content)
        if overlap < params.history_overlap_threshold:
            log_.append({"step": "history", "id": ref.id, "action": "dropped", "overlap": overlap})
            continue
        r = ref.copy()
        r.match_type = MatchType.HISTORY
        r.score *= params.history_score_factor
        r.metadata["history_similarity"] = _fmt_sim(jaccard(q_tokens, tokenize_simple(r.content)))
        r.metadata["history_overlap"] = _fmt_sim(overlap)
        kept.append(r)
        log_.append({"step": "history", "id": r.id, "action": "injected", "overlap": overlap})
    return kept


def _trusted(r: SearchResult) -> bool:
    return (
        r.content_revision == 0
        and not r.content_rewritten
        and r.end_at > r.start_at
        and len(r.content) == r.end_at - r.start_at
    )


def _record(last: SearchResult, cur: SearchResult) -> None:
    if cur.id not in last.sub_chunk_id:
        last.sub_chunk_id.append(cur.id)
    try:
        last.image_info = merge_image_info(last.image_info, cur.image_info)
    except ValueError as exc:
        log.warning("merge image info of %s into %s: %s", cur.id, last.id, exc)


def merge_sequential_chunks(
    group: list[SearchResult], params: PipelineParams, log_: list[dict[str, object]]
) -> list[SearchResult]:
    """One (knowledge_id, chunk_type) group, sorted by chunk_index then id (§4.8.3). A group of
    one result (most of them) has nothing to merge: it is returned as it is."""
    if len(group) < 2:
        return list(group)
    group = sorted(group, key=lambda r: (r.chunk_index, r.id))
    out = [group[0]]
    last_index = group[0].chunk_index
    for cur in group[1:]:
        last = out[-1]
        if _trusted(last) and _trusted(cur) and cur.start_at >= last.start_at:
            if cur.start_at > last.end_at:
                action = "separate"
            elif cur.end_at > last.end_at:
                action = "extend"
            elif contains_chunk_content(last.content, cur.content, params.join_min_overlap):
                action = "subsume"
            else:
                action = "join_distinct"
        elif (
            contains_chunk_content(last.content, cur.content, params.join_min_overlap)
            or contains_chunk_content(cur.content, last.content, params.join_min_overlap)
            or cur.chunk_index == last_index + 1
        ):
            action = "join_text"
        else:
            action = "separate"

        if action == "separate":
            out.append(cur)
            last_index = cur.chunk_index
            continue
        if action == "extend":
            overlap = last.end_at - cur.start_at
            text, ok = append_with_exact_overlap(last.content, cur.content, overlap)
            last.content = (
                text
                if ok
                else append_with_overlap(
                    last.content,
                    cur.content,
                    overlap,
                    params.join_min_overlap,
                    params.join_span,
                    params.append_head_slack,
                )
            )
            last.end_at = cur.end_at
        elif action in ("join_distinct", "join_text"):
            last.content = join_chunk_content(last.content, cur.content, SEP, params.join_min_overlap, params.join_span)
            last.content_rewritten = True
        _record(last, cur)
        last_index = max(last_index, cur.chunk_index)
        last.score = max(last.score, cur.score)
        log_.append({"step": "merge", "into": last.id, "id": cur.id, "action": action})
    out.sort(key=lambda r: -r.score)
    return out


def group_and_merge(
    results: list[SearchResult], params: PipelineParams, log_: list[dict[str, object]]
) -> list[SearchResult]:
    groups: dict[tuple[str, str], list[SearchResult]] = {}
    for r in results:
        groups.setdefault((r.knowledge_id, r.chunk_type), []).append(r)
    merged: list[SearchResult] = []
    for group in groups.values():
        merged.extend(merge_sequential_chunks(group, params, log_))
    return [r for r in sort_search_results_deterministically(list[SearchResult | None](merged)) if r is not None]


def merge_ordered(prev: str, base: str, nxt: str, params: PipelineParams) -> str:
    c = base
    if prev:
        c = join_chunk_content(prev, c, SEP, params.join_min_overlap, params.join_span)
    if nxt:
        c = join_chunk_content(c, nxt, SEP, params.join_min_overlap, params.join_span)
    return c[: params.expansion_max_len]


def mark_image_vector_matches(
    dropped: list[SearchResult], kept: list[SearchResult], log_: list[dict[str, object]]
) -> None:
    """An image hit deduplicated against its description: the kept result carries
    ``image_vector_match = "true"`` and the image info, so the image still reaches the model."""
    for hit in dropped:
        if not is_image_hit(hit):
            continue
        norm_hit = normalize_content(hit.content)
        for r in kept:
            same = hit.id in r.sub_chunk_id or (
                r.knowledge_id == hit.knowledge_id
                and norm_hit
                and (norm_hit in normalize_content(r.content) or normalize_content(r.content) in norm_hit)
            )
            if same:
                r.metadata["image_vector_match"] = "true"
                try:
                    r.image_info = merge_image_info(r.image_info, hit.image_info)
                except ValueError:
                    pass
                log_.append({"step": "image_vector_match", "id": r.id, "image_hit": hit.id})
                break


def merge_results(
    results: list[SearchResult],
    history: list[History],
    query: str,
    params: PipelineParams,
    store: ChunkStore | None,
    mlog: list[dict[str, object]],
) -> list[SearchResult]:
    """Steps 2–8 on the stage's input (step 1: the rerank result, else the search result by score):
    dedup, history references, parent chunks, sequential merge, FAQ answers, neighbour expansion,
    merge again, dedup and partial-overlap removal. ``store`` (``get_chunks(ids)``; may be None)
    gives parents, FAQ entries and neighbours. Results are changed in place; decisions go to
    ``mlog``. The tuning evaluator calls this on copies."""
    p = params
    results = remove_duplicate_results(results)
    injected = inject_history_references(results, history, query, p, mlog)
    if injected:
        results = remove_duplicate_results(results + injected)
    if not results:
        log.info("chunk_merge: nothing to merge")
        return []
    if store is not None:
        results = resolve_parent_chunks(results, store, mlog)
    results = group_and_merge(results, p, mlog)
    if store is not None:
        populate_faq_answers(results, store)
        expand_short_contexts(results, store, p, mlog)
    results = group_and_merge(results, p, mlog)
    before = list(results)
    results = remove_partial_overlaps(remove_duplicate_results(results), p.overlap_threshold)
    after = {r.id for r in results}
    for r in before:
        if r.id not in after:
            mlog.append({"step": "overlap", "id": r.id, "action": "dropped"})
    mark_image_vector_matches([r for r in before if r.id not in after], results, mlog)
    return results


class PluginMerge(StagePlugin):
    events = (EventType.CHUNK_MERGE,)
    contract = StageContract(
        reads=(
            "request.query",
            "request.rerank_top_k",
            "state.history",
            "state.intent",
            "state.rerank_result",
            "state.rewrite_query",
            "state.search_result",
        ),
        writes=("state.diagnostics.merge", "state.merge_result"),
        params=(
            "append_head_slack",
            "expansion_max_len",
            "expansion_min_len",
            "history_max_refs",
            "history_overlap_threshold",
            "history_score_factor",
            "join_min_overlap",
            "join_span",
            "overlap_threshold",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        if not needs_retrieval(chat):
            return await next()
        state, p = chat.state, chat.request.params
        mlog: list[dict[str, object]] = []
        state.diagnostics["merge"] = MergeDiagnostics(steps=mlog)
        results = merge_input(state.rerank_result, state.search_result, chat.request.rerank_top_k, mlog)
        store = self.services.workspace.store if self.services.workspace is not None else None
        state.merge_result = merge_results(
            results, state.history, state.rewrite_query or chat.request.query, p, store, mlog
        )
        return await next()


# -- step 1 -------------------------------------------------------------------------------
def merge_input(
    rerank_result: list[SearchResult], search_result: list[SearchResult], top_k: int, mlog: list[dict[str, object]]
) -> list[SearchResult]:
    """The stage's input (seed): the rerank result when there is one; else the search results by
    score, descending (stable), cut to ``top_k`` when it is positive. Copies: the stage rewrites
    contents and sub-chunk lists, and its inputs stay as they were."""
    if rerank_result:
        source, results = "rerank_result", [r.copy() for r in rerank_result]
    else:
        ranked = sorted(search_result, key=lambda r: -r.score)
        source, results = "search_result", [r.copy() for r in (ranked[:top_k] if top_k > 0 else ranked)]
    mlog.append({"step": "input", "source": source, "ids": [r.id for r in results]})
    return results


# -- step 4 -------------------------------------------------------------------------------
def resolve_parent_chunks(
    results: list[SearchResult], store: ChunkStore, mlog: list[dict[str, object]]
) -> list[SearchResult]:
    parent_ids = sorted({r.parent_chunk_id for r in results if r.parent_chunk_id})
    if not parent_ids:
        return results
    try:
        parents = store.get_chunks(parent_ids)
    except Exception as exc:
        log.warning("parent chunks: load failed: %s", exc)
        return results
    grand_ids = sorted(
        {
            par.parent_chunk_id
            for r in results
            if r.chunk_type in ("image_ocr", "image_caption")
            for par in [parents.get(r.parent_chunk_id)]
            if par is not None
            and par.chunk_type == "text"
            and par.parent_chunk_id
            and par.parent_chunk_id not in parents
        }
    )
    if grand_ids:
        try:
            parents.update(store.get_chunks(grand_ids))
        except Exception as exc:
            log.warning("grandparent chunks: load failed: %s", exc)
    # step 3: image info scoped to the text chunk (a text result under a parent_text chunk: its
    # own id; an image result: its text parent's id), gathered from the image chunks under it
    scoped_ids: list[str] = []
    for r in results:
        if not r.parent_chunk_id:
            continue
        par = parents.get(r.parent_chunk_id)
        if r.chunk_type == "text" and par is not None and par.chunk_type == "parent_text":
            scoped_ids.append(r.id)
        elif r.chunk_type in ("image_ocr", "image_caption"):  # loaded or not (spec §4.8.2 3)
            scoped_ids.append(r.parent_chunk_id)
    scoped_ids = list(dict.fromkeys(scoped_ids))
    scoped = collect_image_info_by_chunk_ids(store, scoped_ids) if scoped_ids else {}

    def scoped_info(key: str, content: str, info: str) -> str:
        """Assign scoped image info: the gathered entry for ``key``, else ``info`` narrowed to the
        images ``content`` shows."""
        if scoped.get(key):
            return scoped[key]
        return filter_image_info_by_content_urls(content, info) if info else ""

    for r in results:
        par = parents.get(r.parent_chunk_id) if r.parent_chunk_id else None
        if par is None or not par.content:
            continue
        if r.chunk_type == "text" and par.chunk_type == "parent_text":
            r.image_info = scoped_info(r.id, r.content, r.image_info)
            pruned = prune_markdown_images_by_image_info(par.content, r.image_info)
            r.content = join_chunk_content(pruned, r.content, SEP)
            r.content_rewritten = True
            if r.id not in r.sub_chunk_id:
                r.sub_chunk_id.append(r.id)
            mlog.append({"step": "parent", "id": r.id, "parent": par.id})
        elif r.chunk_type in ("image_ocr", "image_caption") and par.chunk_type == "text":
            hit_info = r.image_info
            grand = parents.get(par.parent_chunk_id) if par.parent_chunk_id else None
            source = grand if grand is not None and grand.chunk_type == "parent_text" and grand.content else par
            r.chunk_index = par.chunk_index
            info = scoped_info(par.id, par.content, r.image_info)
            if not info and hit_info:
                info = filter_image_info_by_content_urls(par.content, hit_info)
            r.image_info = info
            r.content = join_chunk_content(
                prune_markdown_images_by_image_info(source.content, info),
                prune_markdown_images_by_image_info(par.content, info),
                SEP,
            )
            r.content_rewritten = True
            if r.id not in r.sub_chunk_id:
                r.sub_chunk_id.append(r.id)
            mlog.append({"step": "parent", "id": r.id, "parent": par.id})
    return results


# -- step 6 -------------------------------------------------------------------------------
def populate_faq_answers(results: list[SearchResult], store: ChunkStore) -> None:
    faq_ids = sorted({r.id for r in results if r.chunk_type == "faq"})
    if not faq_ids:
        return
    try:
        chunks = store.get_chunks(faq_ids)
    except Exception as exc:
        log.warning("faq answers: load failed: %s", exc)
        return
    for cid, chunk in chunks.items():
        meta = chunk.metadata
        if isinstance(meta, str):
            try:
                meta = json.loads(meta)
            except ValueError:
                continue
        if not isinstance(meta, dict) or not meta:
            continue
        entry = FAQEntry(
            standard_question=str(meta.get("standard_question") or ""),
            answers=[str(a) for a in meta.get("answers") or []],
        )
        text = faq_content(entry)
        if text:
            for r in results:
                if r.id == cid:
                    r.content = text


# -- step 7 -------------------------------------------------------------------------------
class _ExpansionChunk(NamedTuple):
    """The fields neighbour expansion reads of a stored chunk."""

    id: str
    content: str
    chunk_type: str
    knowledge_id: str
    pre_chunk_id: str
    next_chunk_id: str


_EXPANSION_COLUMNS = _ExpansionChunk._fields[1:]


def _expansion_chunks(store: ChunkStore, ids: list[str]) -> dict[str, Chunk | _ExpansionChunk]:
    """``store.get_chunks(ids)``, or only the columns expansion reads when the store gives plain
    columns (``get_chunk_columns``: no JSON decoding, no full chunk built)."""
    columns = getattr(store, "get_chunk_columns", None)
    if columns is None:
        return dict(store.get_chunks(ids))
    return {cid: _ExpansionChunk(cid, *row) for cid, row in columns(ids, _EXPANSION_COLUMNS).items()}


def expand_short_contexts(
    results: list[SearchResult], store: ChunkStore, p: PipelineParams, mlog: list[dict[str, object]]
) -> None:
    targets = [
        r
        for r in results
        if r is not None and r.id and r.content and r.chunk_type == "text" and len(r.content) < p.expansion_min_len
    ]
    if not targets:
        return
    try:
        cache: dict[str, Any] = dict(_expansion_chunks(store, [r.id for r in targets]))
    except Exception as exc:
        log.warning("neighbour expansion: load failed: %s", exc)
        return
    neighbour_ids = sorted(
        {x for c in cache.values() for x in (c.pre_chunk_id, c.next_chunk_id) if x and x not in cache}
    )
    if neighbour_ids:
        try:
            cache.update(_expansion_chunks(store, neighbour_ids))
        except Exception:
            pass

    def load(cid: str) -> Any:
        if cid not in cache:
            try:
                cache[cid] = _expansion_chunks(store, [cid]).get(cid)
            except Exception:
                cache[cid] = None
        return cache[cid]

    for r in targets:
        base = load(r.id)
        if base is None or not base.content or base.chunk_type != "text":
            continue
        prev = nxt = ""
        prev_ids: list[str] = []
        next_ids: list[str] = []
        pc = load(base.pre_chunk_id) if base.pre_chunk_id else None
        if pc is not None and pc.knowledge_id == base.knowledge_id:
            prev, prev_ids, prev_cursor = pc.content, [pc.id], pc.pre_chunk_id
        else:
            prev_cursor = ""
        nc = load(base.next_chunk_id) if base.next_chunk_id else None
        if nc is not None and nc.knowledge_id == base.knowledge_id:
            nxt, next_ids, next_cursor = nc.content, [nc.id], nc.next_chunk_id
        else:
            next_cursor = ""
        while True:
            merged = merge_ordered(prev, base.content, nxt, p)
            if not merged or len(merged) >= p.expansion_min_len or (not prev_cursor and not next_cursor):
                break
            progress = False
            if prev_cursor:
                c = load(prev_cursor)
                if c is not None and c.knowledge_id == base.knowledge_id:
                    prev = join_chunk_content(c.content, prev, SEP, p.join_min_overlap, p.join_span)
                    prev_ids.insert(0, c.id)
                    prev_cursor = c.pre_chunk_id
                    progress = True
                else:
                    prev_cursor = ""
            merged = merge_ordered(prev, base.content, nxt, p)
            if len(merged) >= p.expansion_min_len:
                break
            if next_cursor:
                c = load(next_cursor)
                if c is not None and c.knowledge_id == base.knowledge_id:
                    nxt = join_chunk_content(nxt, c.content, SEP, p.join_min_overlap, p.join_span)
                    next_ids.append(c.id)
                    next_cursor = c.next_chunk_id
                    progress = True
                else:
                    next_cursor = ""
            if not progress:
                break
        if merged:  # what the loop last merged: prev and nxt have not changed since
            r.content = merged
            r.content_rewritten = True
            for cid in prev_ids + next_ids:
                if cid not in r.sub_chunk_id:
                    r.sub_chunk_id.append(cid)
            if prev_ids or next_ids:
                mlog.append({"step": "expand", "id": r.id, "prev": prev_ids, "next": next_ids, "length": len(merged)})
