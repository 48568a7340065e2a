"""Low-recall query expansion without an LLM (spec §4.5, seed "Extension de requête").

Up to N local variants (keywords, quoted phrases, clause segments, question word removed), each
searched keyword-side against every target with a lowered keyword threshold.
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from typing import TYPE_CHECKING

from rag_lab.retrieval.base import SearchParams
from rag_lab.types.chat_manage import ChatManage, SearchTarget
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.pipeline.container import Services

log = logging.getLogger(__name__)

STOPWORDS = frozenset(
    "的 是 在 了 和 与 或 a an the is are was were be been being have has had do does did will would "
    "could should may might must can to of in for on with at by from as into through about what how "
    "why when where which who whom whose".split()
)
QUESTION_PREFIXES = (
    "什么是",
    "什么",
    "如何",
    "怎么",
    "怎样",
    "为什么",
    "为何",
    "哪个",
    "哪些",
    "谁",
    "何时",
    "何地",
    "请问",
    "请告诉我",
    "帮我",
    "我想知道",
    "我想了解",
)
_QUOTE_CHARS = "\"'「」『』"
_PHRASE = re.compile(f"[{_QUOTE_CHARS}]([^{_QUOTE_CHARS}]+)[{_QUOTE_CHARS}]")
_SEGMENT_SPLIT = re.compile(r"[,，;；、。！？!?\t\n\v\f\r ]+")


def _is_han(ch: str) -> bool:
    return "HAN" in unicodedata.name(ch, "") or "\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"


def _is_alnum(ch: str) -> bool:
    return ch.isalpha() or unicodedata.category(ch) == "Nd"


def expansion_tokens(text: str) -> list[str]:
    """Han runs segmented with jieba search mode; other letter/digit runs kept whole."""
    tokens: list[str] = []
    run, run_han = "", False

    def flush() -> None:
        nonlocal run
        if not run:
            return
        if run_han:
            from rag_lab.searchutil.text import quiet_jieba

            tokens.extend(w.strip() for w in quiet_jieba().cut_for_search(run, HMM=True) if w.strip())
        else:
            tokens.append(run)
        run = ""

    for ch in text:
        if _is_han(ch):
            if run and not run_han:
                flush()
            run_han = True
            run += ch
        elif _is_alnum(ch):
            if run and run_han:
                flush()
            run_han = False
            run += ch
        else:
            flush()
    flush()
    return tokens


def generate_expansion_variants(rewrite_query: str, query: str = "", max_variants: int = 5) -> list[str]:
    q = rewrite_query.strip()
    if not q:
        return []
    seen = {q.lower()}
    if query:
        seen.add(query.lower())
    out: list[str] = []

    def add(s: str) -> None:
        s = s.strip()
        if not s or len(s.encode("utf-8")) < 3 or s.lower() in seen:
            return
        seen.add(s.lower())
        out.append(s)

    keywords = [t for t in expansion_tokens(q) if t.lower() not in STOPWORDS and len(t) > 1]
    if len(keywords) >= 2:
        add(" ".join(keywords))
    for m in _PHRASE.finditer(q):
        if len(m.group(1).encode("utf-8")) > 2:
            add(m.group(1))
    for piece in _SEGMENT_SPLIT.split(q):
        piece = piece.strip()
        if piece and len(piece.encode("utf-8")) > 5:
            add(piece)
    stripped = q
    for prefix in QUESTION_PREFIXES:
        if stripped.startswith(prefix):
            stripped = stripped[len(prefix) :]
            break
    stripped = stripped.strip()
    if stripped != q:
        add(stripped)
    return out[:max_variants]


def keyword_searchable(target: SearchTarget, services: Services) -> bool:
    """Whether the target's knowledge base searches keywords (expansion searches nothing else)."""
    if not target.knowledge_base_id or services.workspace is None:
        return False
    try:
        kb = services.workspace.get_kb(target.knowledge_base_id)
    except Exception:
        return False
    return kb is not None and bool(getattr(kb, "keyword_enabled", True))


async def expand_search(chat: ChatManage, services: Services) -> list[SearchResult] | None:
    """Keyword-side searches for each (variant × target whose KB searches keywords); errors are
    logged and ignored. ``None`` when no target searches keywords: no expansion (seed)."""
    req, p = chat.request, chat.request.params
    targets = [t for t in req.search_targets if t is not None and keyword_searchable(t, services)]
    if services.searcher is None or not targets:
        return None
    searcher = services.searcher.with_params(p)
    variants = generate_expansion_variants(chat.state.rewrite_query, req.query, p.query_expansion_max_variants)
    chat.state.diagnostics["query_expansion_variants"] = list(variants)
    exp_top_k = max(
        req.embedding_top_k * p.query_expansion_top_k_factor, req.rerank_top_k * p.query_expansion_top_k_factor
    )
    exp_kw = req.keyword_threshold * p.query_expansion_keyword_factor
    jobs = [(v, t) for v in variants for t in targets]
    if not jobs:
        return []
    sem = asyncio.Semaphore(max(1, min(p.query_expansion_concurrency, len(jobs))))

    async def one(variant: str, target: SearchTarget) -> list[SearchResult]:
        vt, kt = target.recall_thresholds(req.vector_threshold, exp_kw)
        sp = SearchParams(
            query_text=variant,
            vector_threshold=vt,
            keyword_threshold=kt,
            match_count=exp_top_k,
            tag_ids=list(target.tag_ids),
            scope_tag_ids=list(target.scope_tag_ids),
            knowledge_ids=list(target.knowledge_ids) if target.type == "knowledge" else [],
            # seed: keyword-only (a variant's embedding is nearly the original query's)
            disable_vector_match=True,
        )
        async with sem:
            try:
                hits: list[SearchResult] = await searcher.search(target.knowledge_base_id, sp)
            except Exception as exc:
                log.warning("query expansion search failed for %r: %s", variant, exc)
                return []
        for h in hits:
            h.knowledge_base_id = target.knowledge_base_id
        return hits

    out: list[SearchResult] = []
    for hits in await asyncio.gather(*(one(v, t) for v, t in jobs)):
        out.extend(hits)
    return out
