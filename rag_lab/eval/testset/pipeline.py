"""The one test-set pipeline (``rag-lab testset``): :func:`build` with a pluggable
:class:`QuestionWriter` — the rule-based forms (:mod:`.build`) or a chat model (:mod:`.llm_build`)
— that proposes questions; the pipeline does the rest:

1. the KB's documents and the chunks a question can come from (:func:`kb_sources`), in
   :func:`stratified_order` (seeded, one chunk per document in turn);
2. the filters every writer's questions pass (:class:`Screen`), each drop counted in the report:
   ``copies a source sentence`` (equal to a sentence of a source, normalised: :func:`copies_source`),
   ``duplicate`` (the same normalised question kept already) and ``not findable`` (a plain BM25
   over the KB's documents, :class:`Findability`, does not rank each gold document within
   ``depth``, 50);
3. saturation: the KB's own keyword and vector search is run on the kept questions only, to
   measure them (the report's ``saturation``, each question's ``search_ranks``) — what the
   evaluated pipeline retrieves decides nothing here;
4. the dataset (:func:`write_testset`): every document of the KB (its text rebuilt from its
   chunks, so ``rag-lab eval --dataset OUT`` ingests the same documents under the same ids), the
   kept questions with their provenance, and :data:`.report.REPORT_FILE`.

Questions people asked (:mod:`.from_file`, :mod:`.from_sessions`) share :func:`first_asked`,
:func:`keep_asked` and :func:`write_testset`; their gold is a guess to label.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem, write_dataset
from rag_lab.eval.testset.answerable import FINDABLE_DEPTH, PlainBM25
from rag_lab.eval.testset.generate import SourceChunk, normalize_question, sentences
from rag_lab.eval.testset.report import REPORT_FILE, TestsetReport, rank_bin
from rag_lab.retrieval.base import SearchScope
from rag_lab.searchutil.language import han_ratio

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.knowledge.models import KnowledgeBase
    from rag_lab.lab.lab import Lab

__all__ = [
    "Findability",
    "Job",
    "Kept",
    "QuestionWriter",
    "Screen",
    "build",
    "copies_source",
    "first_asked",
    "kb_sources",
    "keep_asked",
    "retrieved_docs",
    "stratified_order",
    "write_testset",
]

_TABLE_KINDS = ("table_summary", "table_column")
_T = TypeVar("_T")


def kb_sources(lab: Lab, kb: KnowledgeBase) -> tuple[list[CorpusDoc], list[SourceChunk]]:
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


def stratified_order(chunks: Sequence[SourceChunk], seed: int) -> list[SourceChunk]:
    """Chunks in a seeded order that takes one chunk per document in turn: documents shuffled,
    each document's chunks shuffled, then round robin (so n questions cover min(n, #docs)
    documents)."""
    rng = random.Random(seed)
    by_doc: dict[str, list[SourceChunk]] = {}
    for c in sorted(chunks, key=lambda c: (c.doc_id, c.chunk_id)):
        by_doc.setdefault(c.doc_id, []).append(c)
    docs = sorted(by_doc)
    rng.shuffle(docs)
    queues = []
    for d in docs:
        q = list(by_doc[d])
        rng.shuffle(q)
        queues.append(q)
    out: list[SourceChunk] = []
    depth = 0
    while any(depth < len(q) for q in queues):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


class Findability:
    """The plain BM25 of :mod:`.answerable` over the KB's documents (title and text)."""

    def __init__(self, docs: list[CorpusDoc]) -> None:
        self._bm25 = PlainBM25([f"{d.title}\n{d.text}" for d in docs])
        self._index = {d.id: i for i, d in enumerate(docs)}

    def rank(self, question: str, doc_id: str) -> int | None:
        """The plain BM25 rank of ``doc_id`` for ``question`` (None: no shared term, or not a document)."""
        at = self._index.get(doc_id)
        return None if at is None else self._bm25.rank(question, at)


def copies_source(question: str, texts: Sequence[str], stretch: bool = True) -> bool:
    """The question is a copy of its source(s): it equals a sentence of one, normalised, or (with
    ``stretch``) is a verbatim stretch of one's text of at least six words (twelve characters for
    Chinese)."""
    q = normalize_question(question)
    long_enough = stretch and (len(q) >= 12 if han_ratio(q) >= 0.3 else len(q.split()) >= 6)
    for t in texts:
        if q in {normalize_question(s) for s in sentences(t)}:
            return True
        if long_enough and q in " ".join(t.lower().split()):
            return True
    return False


class Screen:
    """The filters of the module docstring, with the questions kept so far."""

    def __init__(self, docs: list[CorpusDoc], depth: int) -> None:
        self.finder, self.depth = Findability(docs), depth
        self.seen: set[str] = set()

    def refusal(self, question: str, texts: Sequence[str], stretch: bool = True) -> str:
        """``copies a source sentence`` or ``duplicate`` (:func:`copies_source` of ``texts``), else ""."""
        if copies_source(question, texts, stretch):
            return "copies a source sentence"
        return "duplicate" if normalize_question(question) in self.seen else ""

    def findable(self, queries: dict[str, str]) -> dict[str, int] | None:
        """``{document: plain BM25 rank}`` when each document of ``queries`` (document → the text
        it is looked up with) ranks within ``depth``, else None (``not findable``)."""
        ranks = {doc: self.finder.rank(q, doc) for doc, q in queries.items()}
        if any(r is None or r > self.depth for r in ranks.values()):
            return None
        return {d: r for d, r in ranks.items() if r is not None}

    def keep(self, question: str) -> None:
        """Count ``question`` as kept: a later question equal to it, normalised, is a duplicate."""
        self.seen.add(normalize_question(question))


@dataclass(slots=True)
class Kept:
    """A question a writer kept: its gold documents with their plain BM25 ranks (:meth:`Screen.findable`),
    its form (``generator``), its source chunk (``source_chunk_ids``: every source, for a question
    of several) and the writer's own metadata fields, written after ``source_kb`` (``head``),
    before ``synthetic`` (``tail``) and last (``end``)."""

    question: str
    answers: list[str]
    gold_ids: list[str]
    ranks: dict[str, int]
    generator: str
    source_chunk_id: str
    source_chunk_ids: list[str] | None = None
    head: dict[str, object] = field(default_factory=dict)
    tail: dict[str, object] = field(default_factory=dict)
    end: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class Job:
    """What a writer is given: the lab and KB, the source chunks in :func:`stratified_order`, how
    many questions (``n``, ``multihop`` of them over two documents), the run's seed, the screen
    and the report it counts its drops in."""

    lab: Lab
    kb: KnowledgeBase
    sources: list[SourceChunk]
    order: list[SourceChunk]
    n: int
    multihop: int
    seed: int
    screen: Screen
    report: TestsetReport


class QuestionWriter(Protocol):
    """A pluggable writer: ``kind`` and ``model`` name it in the report (``offline`` / ``none``);
    ``proof`` opens each question's ``answerable_by``; :meth:`write` returns at most ``job.n``
    questions, each through ``job.screen``, its drops counted in ``job.report``."""

    kind: str
    model: str
    proof: dict[str, object]

    def write(self, job: Job) -> list[Kept]: ...


def build(
    lab: Lab,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    writer: QuestionWriter,
    *,
    seed: int = 0,
    depth: int = FINDABLE_DEPTH,
    overwrite: bool = False,
    multihop: float = 0.25,
) -> tuple[Dataset, TestsetReport]:
    """Up to ``n`` questions of ``writer`` from KB ``kb_name`` (about ``multihop`` × n of them
    over two documents), written with the KB's documents as a dataset under ``out_dir`` (plus
    :data:`.report.REPORT_FILE`). ``ValueError`` on a bad ``n`` or share, or a KB with nothing to
    ask about."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not 0.0 <= multihop <= 1.0:
        raise ValueError(f"multihop must be a share between 0 and 1, got {multihop!r}")
    kb = lab.kb(kb_name, create=False)
    docs, sources = kb_sources(lab, kb)
    if not sources:
        raise ValueError(f"knowledge base {kb_name!r} holds no text or table chunks to generate questions from")
    report = TestsetReport(kb=kb_name, seed=seed, requested=n, generator=writer.kind, model=writer.model)
    order = stratified_order(sources, seed)
    job = Job(lab, kb, sources, order, n, round(n * multihop), seed, Screen(docs, depth), report)
    kept = writer.write(job)
    report.saturation, search = search_saturation(lab, kb, [(k.question, k.gold_ids) for k in kept])
    items: list[QueryItem] = []
    for k, found in zip(kept, search, strict=True):
        report.kept += 1
        report.by_generator[k.generator] += 1
        report.multihop += len(k.gold_ids) > 1
        report.answerable_by[rank_bin(max(k.ranks.values()), depth)] += 1
        single = len(k.gold_ids) == 1
        md: dict[str, object] = {
            "generator": k.generator,
            "model": writer.model,
            "seed": seed,
            "source_chunk_id": k.source_chunk_id,
            **({"source_chunk_ids": k.source_chunk_ids} if k.source_chunk_ids else {}),
            "source_kb": kb_name,
            **k.head,
            "answerable_by": {**writer.proof, "plain_bm25_rank": k.ranks[k.gold_ids[0]] if single else k.ranks},
            "search_ranks": found[k.gold_ids[0]] if single else found,
            **k.tail,
            "synthetic": True,
            "reviewed": False,
            **k.end,
        }
        items.append(QueryItem(f"gen-{len(items) + 1:04d}", k.question, list(k.answers), k.gold_ids, md))
    return write_testset(docs, items, out_dir, report, overwrite=overwrite), report


def retrieved_docs(lab: Lab, kb: KnowledgeBase, questions: list[str], depth: int) -> list[dict[str, list[str]]]:
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


def search_saturation(
    lab: Lab, kb: KnowledgeBase, items: list[tuple[str, list[str]]]
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
        ranks = {g: {name: docs.index(g) + 1 for name, docs in found.items() if g in docs} for g in gold}
        per.append(ranks)
        hit1.append(float(any(1 in r.values() for r in ranks.values())))
        recall.append(sum(1 for r in ranks.values() if r) / len(gold))
    sat = saturation({"hit@1": hit1, "recall@10": recall})
    return {m: round(s.ceiling_share, 4) for m, s in sat.items() if s.n}, per


def first_asked(items: Iterable[_T], question: Callable[[_T], str], report: TestsetReport) -> Iterator[_T]:
    """``items`` whose question (normalised) was not asked before, the others counted as ``duplicate``."""
    seen: set[str] = set()
    for it in items:
        key = normalize_question(question(it))
        if key in seen:
            report.dropped["duplicate"] += 1
            continue
        seen.add(key)
        yield it


def keep_asked(
    kept: list[QueryItem], report: TestsetReport, prefix: str, question: str, gold: list[str], where: dict[str, str]
) -> str:
    """Keep a question people asked, numbered ``{prefix}-0001`` on: its gold a guess to label (the
    first of ``gold``, the first three its ``gold_candidates``), ``where`` it was asked (``origin``
    and the file or session) in its metadata. Returns its id."""
    qid = f"{prefix}-{len(kept) + 1:04d}"
    md = {**where, "gold_candidates": gold[:3], "synthetic": True, "reviewed": False}
    kept.append(QueryItem(qid, question, [], [gold[0]], md))
    report.kept += 1
    return qid


def write_testset(
    docs: list[CorpusDoc], kept: list[QueryItem], out_dir: str | Path, report: TestsetReport, overwrite: bool = False
) -> Dataset:
    """The end every test set shares: refuse an empty set (the report says why), else write the
    dataset (the KB's documents, the kept questions) and :data:`.report.REPORT_FILE` under ``out_dir``."""
    if not kept:
        raise ValueError(f"{report}: no question survived the filters")
    ds = write_dataset(docs, kept, out_dir, overwrite=overwrite)
    (Path(out_dir) / REPORT_FILE).write_text(json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n")
    return ds
