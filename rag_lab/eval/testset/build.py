"""A test set from a knowledge base: sample chunks, generate questions offline, keep the answerable
ones, write a dataset in rag_lab's format (``rag-lab testset``).

Filters, in order, each drop counted under its reason in :class:`TestsetReport`:

* ``no question``: no generator could make a question of the chunk (too short, no distinctive term);
* ``copies a source sentence``: the question, normalised, equals a sentence of its chunk;
* ``duplicate``: the same normalised question was kept already;
* ``not retrieved``: neither the KB's keyword search nor its vector search returns the source
  chunk's document in the top ``depth`` (the question cannot be answered from what retrieval finds).

The corpus is every document of the KB (its text rebuilt from its text chunks), so
``rag-lab eval --dataset OUT`` ingests the same documents under the same ids.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem, write_dataset
from rag_lab.eval.testset.generate import (
    GENERATORS,
    Candidate,
    SourceChunk,
    TermStats,
    generate_candidates,
    normalize_question,
    sentences,
    stratified_order,
)

__all__ = [
    "LLM_NOTE",
    "REPORT_FILE",
    "WEAKER_NOTE",
    "TestsetReport",
    "build_testset",
    "kb_sources",
    "ranks_of",
    "retrieved_docs",
    "write_testset",
]

REPORT_FILE = "testset_report.json"
WEAKER_NOTE = (
    "synthetic questions (offline generator, no model): they reuse the source's own words, which "
    "favours keyword search, and nobody reviewed them; scores on this set are a smoke test of your "
    "retrieval, weaker evidence than human-labelled questions"
)
LLM_NOTE = (
    "synthetic questions (written by a chat model from your chunks, filtered for retrievability, "
    "copies and duplicates): nobody reviewed them; review a sample before trusting a baseline on them"
)


@dataclass(slots=True)
class TestsetReport:
    """What :func:`build_testset` kept and dropped, and why."""

    kb: str
    seed: int
    requested: int
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    by_generator: Counter[str] = field(default_factory=Counter)
    examined_chunks: int = 0
    retrieved_by: Counter[str] = field(default_factory=Counter)
    #: ``offline`` or ``llm``; the fields below are the LLM generator's (absent from an offline report)
    generator: str = "offline"
    model: str = "none"
    #: failed prompts by kind (``model error``, ``malformed reply``) and the first messages
    errors: Counter[str] = field(default_factory=Counter)
    error_examples: list[str] = field(default_factory=list)
    model_calls: int = 0
    prompt_hash: dict[str, str] = field(default_factory=dict)
    multihop: int = 0
    graph: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report as written next to the dataset (the model generators' extra fields in place)."""
        by_model = self.generator != "offline"
        out: dict[str, Any] = {
            "kb": self.kb,
            "seed": self.seed,
            "requested": self.requested,
            "kept": self.kept,
            "dropped": dict(sorted(self.dropped.items())),
        }
        if by_model:
            out.update(errors=dict(sorted(self.errors.items())), error_examples=list(self.error_examples))
        out.update(
            by_generator=dict(sorted(self.by_generator.items())),
            retrieved_by=dict(sorted(self.retrieved_by.items())),
            examined_chunks=self.examined_chunks,
        )
        if not by_model:
            out.update(generator_model="none", note=WEAKER_NOTE)
            return out
        out.update(
            multihop=self.multihop,
            graph=self.graph,
            generator=self.generator,
            generator_model=self.model,
            model_calls=self.model_calls,
            prompt_hash=dict(self.prompt_hash),
            note=LLM_NOTE,
        )
        return out

    def __str__(self) -> str:
        drops = ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items())) or "none"
        gens = ", ".join(f"{k} {v}" for k, v in sorted(self.by_generator.items()))
        line = (
            f"testset from KB {self.kb!r} (seed {self.seed}): kept {self.kept} of {self.requested} asked "
            f"({gens}); {self.examined_chunks} chunks examined; dropped: {drops}"
        )
        if self.generator != "offline":
            errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
            line += f"; model {self.model!r}, {self.model_calls} calls, errors: {errs}"
        return line


def kb_sources(lab: Any, kb: Any) -> tuple[list[CorpusDoc], list[SourceChunk]]:
    """The KB's documents (text rebuilt from their enabled text chunks) and those chunks."""
    from rag_lab.searchutil.chunkmerge import merge_text_chunks

    store = lab.workspace.store
    docs: list[CorpusDoc] = []
    sources: list[SourceChunk] = []
    for k in store.list_knowledge(kb.id):
        chunks = [c for c in store.list_chunks(kb.id, k.id) if c.chunk_type == "text" and c.is_enabled]
        text = merge_text_chunks(chunks, "\n")
        if not text.strip():
            continue
        docs.append(CorpusDoc(id=k.id, title=k.title, text=text))
        sources.extend(SourceChunk(c.id, k.id, k.title, c.content) for c in chunks if c.content.strip())
    return docs, sources


def retrieved_docs(lab: Any, kb: Any, questions: list[str], depth: int) -> list[dict[str, list[str]]]:
    """Per question ``{path: document ids in rank order}`` of the KB's keyword search and (when
    the KB has vectors) its vector search, ``depth`` hits each: the answerable filter's evidence."""
    engine = lab.workspace.engine()
    embs = lab.embedder.embed(questions) if kb.embedding_dim > 0 and questions else None
    out = []
    for i, q in enumerate(questions):
        paths = [("keyword", engine.keyword_search([kb.id], q, depth, 0.0))]
        if embs is not None:
            paths.append(("vector", engine.vector_search([kb.id], embs[i], depth, 0.0)))
        out.append({name: list(dict.fromkeys(h.knowledge_id for h in hits)) for name, hits in paths})
    return out


def ranks_of(doc_id: str, lists: dict[str, list[str]]) -> dict[str, int]:
    """``{path: 1-based rank of doc_id}`` for the paths of :func:`retrieved_docs` that return it."""
    return {name: docs.index(doc_id) + 1 for name, docs in lists.items() if doc_id in docs}


def _retrieved_by(lab: Any, kb: Any, cands: list[Candidate], depth: int) -> list[dict[str, int]]:
    """Per candidate ``{path: rank of the source document}`` for the keyword and vector paths
    that return it in the top ``depth`` (rank 1-based); empty when neither does."""
    lists = retrieved_docs(lab, kb, [c.question for c in cands], depth)
    return [ranks_of(c.source.doc_id, found) for c, found in zip(cands, lists, strict=True)]


def build_testset(
    lab: Any, kb_name: str, n: int, out_dir: str | Path, seed: int = 0, depth: int = 10, overwrite: bool = False
) -> tuple[Dataset, TestsetReport]:
    """Generate up to ``n`` questions from KB ``kb_name`` and write them with the KB's documents as a
    dataset under ``out_dir`` (plus :data:`REPORT_FILE`). Deterministic for a KB, ``seed`` and
    ``depth``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    kb = lab.kb(kb_name, create=False)
    docs, sources = kb_sources(lab, kb)
    if not sources:
        raise ValueError(f"knowledge base {kb_name!r} holds no text chunks to generate questions from")
    stats = TermStats.from_texts([s.text for s in sources])
    report = TestsetReport(kb=kb_name, seed=seed, requested=n)
    kept: list[QueryItem] = []
    seen: set[str] = set()
    order = stratified_order(sources, seed)
    batch = max(8, n)
    pos = 0
    while len(kept) < n and pos < len(order):
        chunk_batch = order[pos : pos + batch]
        pending: list[Candidate] = []
        for j, src in enumerate(chunk_batch):
            report.examined_chunks += 1
            own = {normalize_question(s) for s in sentences(src.text)}
            cands = generate_candidates(src, stats, GENERATORS[(pos + j) % len(GENERATORS)])
            if not cands:
                report.dropped["no question"] += 1
                continue
            fresh = [c for c in cands if normalize_question(c.question) not in own]
            if not fresh:
                report.dropped["copies a source sentence"] += 1
                continue
            pending.append(fresh[0])
        pos += len(chunk_batch)
        for cand, found in zip(pending, _retrieved_by(lab, kb, pending, depth), strict=True):
            key = normalize_question(cand.question)
            if key in seen:
                report.dropped["duplicate"] += 1
                continue
            if not found:
                report.dropped["not retrieved"] += 1
                continue
            if len(kept) >= n:
                break
            seen.add(key)
            report.kept += 1
            report.by_generator[cand.generator] += 1
            report.retrieved_by.update(found)
            kept.append(
                QueryItem(
                    id=f"gen-{len(kept) + 1:04d}",
                    question=cand.question,
                    answers=list(cand.answers),
                    gold_ids=[cand.source.doc_id],
                    metadata={
                        "generator": cand.generator,
                        "model": "none",
                        "seed": seed,
                        "source_chunk_id": cand.source.chunk_id,
                        "source_kb": kb_name,
                        "retrieved_by": found,
                        "synthetic": True,
                        "reviewed": False,
                    },
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
