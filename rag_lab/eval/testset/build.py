"""A test set from a knowledge base: sample chunks, generate questions offline, keep the answerable
ones, write a dataset in rag_lab's format (``rag-lab testset``).

Each sampled chunk (text, or a table's summary and column chunks) gives its questions
(:func:`generate_candidates`); they are tried in turn, the form used least so far first, and the
first one through the filters is kept. A chunk none of whose questions passes is counted once,
under the reason its first question failed:

* ``no question``: no form applies to the chunk;
* ``copies a source sentence``: the question, normalised, equals a sentence of its chunk;
* ``duplicate``: the same normalised question was kept already;
* ``answer not in source``: the answer span does not occur in the source chunk;
* ``answer in the question``: the question gives its answer away (a comparison names both
  candidates by design and is exempt);
* ``not findable``: a plain BM25 over the KB's documents (:class:`.answerable.PlainBM25`, its own
  tokenizer and fixed parameters) does not rank the source document within ``depth`` (50) for the
  question — the question does not point at its document at all.

Neither filter runs the KB's own search: what the evaluated pipeline retrieves decides nothing
here. It is measured afterwards, for the report's ``saturation`` (how many questions the KB's
keyword or vector search already answers first / in its top 10) and each question's
``search_ranks``. Other passages holding the answer span become the question's ``gold_candidates``.

The corpus is every document of the KB (its text rebuilt from its text chunks; a table's from its
summary and column chunks), so ``rag-lab eval --dataset OUT`` ingests the same documents under the
same ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem, write_dataset
from rag_lab.eval.testset.answerable import FINDABLE_DEPTH, PlainBM25, answer_passages, contains_span, names_title
from rag_lab.eval.testset.bridge import Bridges, Comparisons
from rag_lab.eval.testset.generate import (
    FORMS,
    Candidate,
    SourceChunk,
    generate_candidates,
    normalize_question,
    sentences,
    stratified_order,
)
from rag_lab.eval.testset.report import LLM_NOTE, REPORT_FILE, WEAKER_NOTE, TestsetReport, rank_bin
from rag_lab.retrieval.base import SearchScope

__all__ = [
    "LLM_NOTE",
    "REPORT_FILE",
    "WEAKER_NOTE",
    "Findability",
    "TestsetReport",
    "build_testset",
    "generation_sources",
    "kb_sources",
    "ranks_of",
    "retrieved_docs",
    "search_saturation",
    "write_testset",
]

_TABLE_KINDS = ("table_summary", "table_column")
#: other documents holding the answer listed as gold candidates, at most
MAX_CANDIDATES = 5


def kb_sources(lab: Any, kb: Any) -> tuple[list[CorpusDoc], list[SourceChunk]]:
    """The KB's documents and their chunks a question can come from: enabled text chunks (the
    document's text rebuilt from them), or, for a table document, its summary and column chunks
    (joined in order)."""
    from rag_lab.searchutil.chunkmerge import merge_text_chunks

    store = lab.workspace.store
    docs: list[CorpusDoc] = []
    sources: list[SourceChunk] = []
    for k in store.list_knowledge(kb.id):
        enabled = [c for c in store.list_chunks(kb.id, k.id) if c.is_enabled]
        chunks = [c for c in enabled if c.chunk_type == "text"]
        if chunks:
            text = merge_text_chunks(chunks, "\n")
        else:
            chunks = sorted((c for c in enabled if c.chunk_type in _TABLE_KINDS), key=lambda c: c.chunk_index)
            text = "\n\n".join(c.content for c in chunks)
        if not text.strip():
            continue
        docs.append(CorpusDoc(id=k.id, title=k.title, text=text))
        sources.extend(SourceChunk(c.id, k.id, k.title, c.content, c.chunk_type) for c in chunks if c.content.strip())
    return docs, sources


def generation_sources(
    lab: Any, kb_name: str, n: int, multihop: float
) -> tuple[Any, list[CorpusDoc], list[SourceChunk]]:
    """KB ``kb_name`` and its :func:`kb_sources` for a generator asked for ``n`` questions, ``multihop``
    of them two-hop; ``ValueError`` on a bad ``n`` or share, or a KB with nothing to ask about."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not 0.0 <= multihop <= 1.0:
        raise ValueError(f"multihop must be a share between 0 and 1, got {multihop!r}")
    kb = lab.kb(kb_name, create=False)
    docs, sources = kb_sources(lab, kb)
    if not sources:
        raise ValueError(f"knowledge base {kb_name!r} holds no text or table chunks to generate questions from")
    return kb, docs, sources


class Findability:
    """The plain BM25 of :mod:`.answerable` over the KB's documents (title and text)."""

    def __init__(self, docs: list[CorpusDoc]) -> None:
        self._bm25 = PlainBM25([f"{d.title}\n{d.text}" for d in docs])
        self._index = {d.id: i for i, d in enumerate(docs)}

    def rank(self, question: str, doc_id: str) -> int | None:
        """The plain BM25 rank of ``doc_id`` for ``question`` (None: no shared term, or not a document)."""
        at = self._index.get(doc_id)
        return None if at is None else self._bm25.rank(question, at)


def retrieved_docs(lab: Any, kb: Any, questions: list[str], depth: int) -> list[dict[str, list[str]]]:
    """Per question ``{path: document ids in rank order}`` of the KB's keyword search and (when
    the KB has vectors) its vector search, ``depth`` hits each."""
    engine = lab.workspace.engine()
    embedder = lab._embedder_for(kb) if kb.embedding_dim > 0 and questions else None  # the KB's space
    embs = embedder.embed(questions) if embedder is not None else None
    scope = SearchScope([kb.id], depth, 0.0)
    out = []
    for i, q in enumerate(questions):
        paths = [("keyword", engine.keyword_search(q, scope))]
        if embs is not None:
            paths.append(("vector", engine.vector_search(embs[i], scope)))
        out.append({name: list(dict.fromkeys(h.knowledge_id for h in hits)) for name, hits in paths})
    return out


def ranks_of(doc_id: str, lists: dict[str, list[str]]) -> dict[str, int]:
    """``{path: 1-based rank of doc_id}`` for the paths of :func:`retrieved_docs` that return it."""
    return {name: docs.index(doc_id) + 1 for name, docs in lists.items() if doc_id in docs}


def search_saturation(
    lab: Any, kb: Any, items: list[tuple[str, list[str]]]
) -> tuple[dict[str, float], list[dict[str, dict[str, int]]]]:
    """For ``(question, gold document ids)`` pairs: the share of questions at the ceiling of
    ``hit@1`` (a gold document first on either search path) and ``recall@10`` (every gold document
    in either path's top 10) of the KB's own search, and per question ``{gold: {path: rank}}``."""
    from rag_lab.eval.saturation import saturation

    lists = retrieved_docs(lab, kb, [q for q, _ in items], 10) if items else []
    per: list[dict[str, dict[str, int]]] = []
    hit1: list[float] = []
    recall: list[float] = []
    for (_, gold), found in zip(items, lists, strict=True):
        ranks = {g: ranks_of(g, found) for g in gold}
        per.append(ranks)
        hit1.append(float(any(1 in r.values() for r in ranks.values())))
        recall.append(sum(1 for r in ranks.values() if r) / len(gold))
    sat = saturation({"hit@1": hit1, "recall@10": recall})
    return {m: round(s.ceiling_share, 4) for m, s in sat.items() if s.n}, per


def _refusal(
    cand: Candidate, own: set[str], seen: set[str], finder: Findability, depth: int
) -> tuple[str, dict[str, int] | None]:
    """``(drop reason, None)``, or ``("", {document: plain BM25 rank})`` when the candidate passes
    (module doc); a two-hop question's second document is looked up with the question and the
    entity that links the hops, as a reader would."""
    key = normalize_question(cand.question)
    if key in own:
        return "copies a source sentence", None
    if key in seen:
        return "duplicate", None
    if not cand.answers or not contains_span(cand.source.text, cand.answers[0]):
        return "answer not in source", None
    if cand.generator != "comparison" and contains_span(cand.question, cand.answers[0]):
        return "answer in the question", None
    ranks: dict[str, int] = {}
    for doc in cand.gold_ids:
        query = cand.question if doc != cand.source.doc_id or cand.via is None else f"{cand.question} {cand.entity}"
        rank = finder.rank(query, doc)
        if rank is None or rank > depth:
            return "not findable", None
        ranks[doc] = rank
    return "", ranks


def _candidate_md(cand: Candidate, sources: list[SourceChunk]) -> dict[str, Any]:
    passages = [(s.chunk_id, s.doc_id, s.text) for s in sources]
    others = answer_passages(cand.answers[0], cand.question, passages, cand.source.chunk_id)
    if not others:
        return {}
    docs = list(dict.fromkeys([*cand.gold_ids, *(d for _, d in others)]))[: len(cand.gold_ids) + MAX_CANDIDATES]
    out: dict[str, Any] = {"candidate_passages": [{"passage": c, "doc_id": d} for c, d in others if d in docs]}
    if len(docs) > len(cand.gold_ids):
        out["gold_candidates"] = docs
    return out


class _Picker:
    """The build's state: the questions kept so far, their keys, the counts in the report."""

    def __init__(self, report: TestsetReport, finder: Findability, depth: int) -> None:
        self.report, self.finder, self.depth = report, finder, depth
        self.kept: list[tuple[Candidate, dict[str, int]]] = []
        self.seen: set[str] = set()

    def take(self, src: SourceChunk, cands: list[Candidate]) -> bool:
        """Keep the first of ``cands`` (questions of ``src``) through the filters, the form used
        least so far and a question that does not name its document's title first; count the
        chunk's drop under its first question's reason when none passes."""
        report = self.report
        report.examined_chunks += 1
        if not cands:
            report.dropped["no question"] += 1
            return False
        cands = sorted(
            cands,
            key=lambda c: (
                names_title(c.question, src.title),
                report.by_generator[c.generator],
                FORMS.index(c.generator),
            ),
        )
        own = {normalize_question(s) for s in sentences(src.text)}
        first_reason = ""
        for cand in cands:
            reason, ranks = _refusal(cand, own, self.seen, self.finder, self.depth)
            if ranks is not None:
                self.seen.add(normalize_question(cand.question))
                report.by_generator[cand.generator] += 1
                self.kept.append((cand, ranks))
                return True
            first_reason = first_reason or reason
        report.dropped[first_reason] += 1
        return False


def build_testset(
    lab: Any,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    seed: int = 0,
    depth: int = FINDABLE_DEPTH,
    overwrite: bool = False,
    multihop: float = 0.25,
) -> tuple[Dataset, TestsetReport]:
    """Generate up to ``n`` questions from KB ``kb_name`` and write them with the KB's documents as a
    dataset under ``out_dir`` (plus :data:`REPORT_FILE`): up to ``multihop`` × n two-hop
    questions (:mod:`.bridge`) first, then one-hop ones. Deterministic for a KB, ``seed``,
    ``depth`` (the plain BM25 rank a source document must reach) and ``multihop``."""
    kb, docs, sources = generation_sources(lab, kb_name, n, multihop)
    report = TestsetReport(kb=kb_name, seed=seed, requested=n)
    pick = _Picker(report, Findability(docs), depth)
    cache: dict[str, list[Candidate]] = {}

    def candidates(src: SourceChunk) -> list[Candidate]:
        if src.chunk_id not in cache:
            cache[src.chunk_id] = generate_candidates(src)
        return cache[src.chunk_id]

    order = stratified_order(sources, seed)
    want_multi = round(n * multihop)
    bridges, comparisons = Bridges(sources, candidates), Comparisons(candidates)
    for two_hop in (bridges.of, comparisons.of):  # bridges first, comparisons fill the rest
        for src in order:
            if len(pick.kept) >= want_multi:
                break
            if found := two_hop(src):
                pick.take(src, found)
    for src in order:
        if len(pick.kept) >= n:
            break
        pick.take(src, candidates(src))
    report.kept = len(pick.kept)
    report.multihop = sum(1 for c, _ in pick.kept if c.via is not None)
    report.saturation, search = search_saturation(lab, kb, [(c.question, c.gold_ids) for c, _ in pick.kept])
    kept: list[QueryItem] = []
    for (cand, ranks), found in zip(pick.kept, search, strict=True):
        report.answerable_by[rank_bin(max(ranks.values()), depth)] += 1
        two = cand.via is not None
        md: dict[str, Any] = {
            "generator": cand.generator,
            "model": "none",
            "seed": seed,
            "source_chunk_id": cand.source.chunk_id,
            **({"source_chunk_ids": [cand.via.chunk_id, cand.source.chunk_id]} if cand.via else {}),
            "source_kb": kb_name,
            **({"linked_by": cand.entity} if cand.entity else {}),
            "answerable_by": {"answer_in_source": True, "plain_bm25_rank": ranks if two else ranks[cand.source.doc_id]},
            "search_ranks": found if two else found[cand.source.doc_id],
            **_candidate_md(cand, sources),
            "synthetic": True,
            "reviewed": False,
        }
        kept.append(
            QueryItem(
                id=f"gen-{len(kept) + 1:04d}",
                question=cand.question,
                answers=list(cand.answers),
                gold_ids=cand.gold_ids,
                metadata=md,
            )
        )
    return write_testset(docs, kept, out_dir, report, overwrite=overwrite), report


def write_testset(
    docs: list[CorpusDoc], kept: list[QueryItem], out_dir: str | Path, report: TestsetReport, overwrite: bool = False
) -> Dataset:
    """The end every generator shares: refuse an empty set (the report says why), else write the
    dataset (the KB's documents, the kept questions) and :data:`REPORT_FILE` under ``out_dir``."""
    if not kept:
        raise ValueError(f"{report}: no question survived the filters")
    ds = write_dataset(docs, kept, out_dir, overwrite=overwrite)
    (Path(out_dir) / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return ds
