"""A test set written by a chat model (``rag-lab testset --generator llm``): sampling, the
filters, the dataset.

* **Single-chunk questions** come from the KB's chunks in :func:`stratified_order` (seeded, one
  chunk per document in turn), gold = the chunk's document.
* **Multi-hop questions** (a share ``multihop`` of ``n``) come from two chunks of two documents
  that the entity graph links (:mod:`.links`), gold = both documents.

Each question then gets its reference answer from its source passage(s) (``testset_answer``).
Filters, in order, each drop counted under its reason in the report:

* ``no question``: the model said the passage(s) hold no question;
* ``not in the corpus language``: a Chinese passage got a question without Chinese;
* ``copies a source sentence``: the question, normalised, equals a sentence of a source or is a
  stretch of a source's text (six words / twelve characters or more);
* ``duplicate``: the same normalised question was kept already;
* ``not findable``: a plain BM25 over the KB's documents (:class:`.build.Findability`: its own
  tokenizer and fixed parameters, not the KB's search) does not rank a gold document within
  ``depth`` (50) for the question;
* ``not answerable from the source``: the answer prompt found no answer in the passage(s).

Malformed replies and model faults are errors (``report.errors``), not drops. The KB's own
search is run on the kept questions only to measure the set's saturation (the report's
``saturation``, each question's ``search_ranks``); it filters nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets import Dataset, QueryItem
from rag_lab.eval.testset.answerable import FINDABLE_DEPTH
from rag_lab.eval.testset.build import (
    Findability,
    TestsetReport,
    generation_sources,
    search_saturation,
    write_testset,
)
from rag_lab.eval.testset.generate import SourceChunk, normalize_question, sentences, stratified_order
from rag_lab.eval.testset.links import LinkedPair, entity_nodes, linked_pairs
from rag_lab.eval.testset.llm import (
    ANSWER_TEMPLATE,
    MULTIHOP_TEMPLATE,
    QUESTION_TEMPLATE,
    LLMQuestionWriter,
    Outcome,
    corpus_language,
    model_name,
)
from rag_lab.eval.testset.report import rank_bin
from rag_lab.searchutil.language import detect_language, han_ratio

__all__ = ["build_llm_testset", "copies_source"]

_MAX_ERROR_EXAMPLES = 5


@dataclass(slots=True)
class _Item:
    sources: tuple[SourceChunk, ...]
    generator: str
    entity: str = ""
    question: str = ""
    found: dict[str, int] | None = None


def copies_source(question: str, texts: Sequence[str]) -> bool:
    """The question is a copy of its source(s): it equals a sentence of one, normalised, or is a
    verbatim stretch of one's text of at least six words (twelve characters for Chinese)."""
    q = normalize_question(question)
    long_enough = len(q) >= 12 if han_ratio(q) >= 0.3 else len(q.split()) >= 6
    for t in texts:
        if q in {normalize_question(s) for s in sentences(t)}:
            return True
        if long_enough and q in " ".join(t.lower().split()):
            return True
    return False


def _count_error(report: TestsetReport, out: Outcome) -> None:
    report.errors[out.error] += 1
    if len(report.error_examples) < _MAX_ERROR_EXAMPLES:
        report.error_examples.append(f"{out.error}: {out.message[:200]}")


async def _one_round(
    writer: LLMQuestionWriter,
    finder: Findability,
    items: list[_Item],
    depth: int,
    seen: set[str],
    report: TestsetReport,
) -> list[tuple[_Item, str]]:
    """Questions for ``items`` through the filters: the kept ``(item, answer)`` in input order."""
    outs = await asyncio.gather(
        *(
            writer.question(it.sources[0])
            if len(it.sources) == 1
            else writer.multihop_question(it.sources[0], it.sources[1], it.entity)
            for it in items
        )
    )
    pending: list[_Item] = []
    batch_seen: set[str] = set()
    for it, out in zip(items, outs, strict=True):
        report.examined_chunks += len(it.sources)
        if out.fields is None:
            _count_error(report, out)
            continue
        q = out.fields["question"]
        texts = [s.text for s in it.sources]
        key = normalize_question(q)
        if not key:
            report.dropped["no question"] += 1
        elif detect_language(" ".join(texts)) == "zh" and han_ratio(q) < 0.3:
            report.dropped["not in the corpus language"] += 1
        elif copies_source(q, texts):
            report.dropped["copies a source sentence"] += 1
        elif key in seen or key in batch_seen:
            report.dropped["duplicate"] += 1
        else:
            batch_seen.add(key)
            it.question = q
            pending.append(it)
    findable: list[_Item] = []
    for it in pending:
        ranks = {s.doc_id: finder.rank(it.question, s.doc_id) for s in it.sources}
        if all(r is not None and r <= depth for r in ranks.values()):
            it.found = {d: r for d, r in ranks.items() if r is not None}
            findable.append(it)
        else:
            report.dropped["not findable"] += 1
    answers = await asyncio.gather(*(writer.answer(it.question, it.sources) for it in findable))
    kept: list[tuple[_Item, str]] = []
    for it, out in zip(findable, answers, strict=True):
        if out.fields is None:
            _count_error(report, out)
        elif not out.fields["answer"]:
            report.dropped["not answerable from the source"] += 1
        else:
            kept.append((it, out.fields["answer"]))
    return kept


async def _collect(
    writer: LLMQuestionWriter,
    finder: Findability,
    work: list[_Item],
    want: int,
    depth: int,
    seen: set[str],
    report: TestsetReport,
) -> list[tuple[_Item, str]]:
    """Rounds over ``work`` (in order) until ``want`` questions are kept or the work runs out."""
    kept: list[tuple[_Item, str]] = []
    pos = 0
    while len(kept) < want and pos < len(work):
        size = max(4, want - len(kept))
        got = await _one_round(writer, finder, work[pos : pos + size], depth, seen, report)
        pos += size
        for it, ans in got[: want - len(kept)]:
            seen.add(normalize_question(it.question))
            kept.append((it, ans))
    return kept


def build_llm_testset(
    lab: Any,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    model: Any,
    *,
    seed: int = 0,
    depth: int = FINDABLE_DEPTH,
    overwrite: bool = False,
    multihop: float = 0.25,
    timeout: float = 60.0,
    retries: int = 1,
    concurrency: int = 4,
) -> tuple[Dataset, TestsetReport]:
    """Up to ``n`` questions written by ``model`` (any chat model with ``chat(messages, options)``)
    from KB ``kb_name``, about ``multihop`` × n of them multi-hop, written with the KB's documents
    as a dataset under ``out_dir`` (plus :data:`REPORT_FILE`)."""
    kb, docs, sources = generation_sources(lab, kb_name, n, multihop)
    finder = Findability(docs)
    language = corpus_language([s.text for s in sources])
    writer = LLMQuestionWriter(
        model, seed=seed, language=language, timeout=timeout, retries=retries, concurrency=concurrency
    )
    name = model_name(model)
    report = TestsetReport(kb=kb_name, seed=seed, requested=n, generator="llm", model=name)
    hashes = {
        "llm": writer.prompt_hash(QUESTION_TEMPLATE, ANSWER_TEMPLATE),
        "llm-multihop": writer.prompt_hash(MULTIHOP_TEMPLATE, ANSWER_TEMPLATE),
    }
    pairs: list[LinkedPair] = []
    want_multi = round(n * multihop)
    if want_multi:
        nodes, report.graph = entity_nodes(lab, kb, sources)
        pairs = linked_pairs(nodes, sources, seed)
    multi_work = [_Item((p.a, p.b), "llm-multihop", p.entity) for p in pairs]
    single_work = [_Item((s,), "llm") for s in stratified_order(sources, seed)]

    async def run() -> list[tuple[_Item, str]]:
        seen: set[str] = set()
        multi = await _collect(writer, finder, multi_work, want_multi, depth, seen, report)
        single = await _collect(writer, finder, single_work, n - len(multi), depth, seen, report)
        return multi + single

    from rag_lab.asyncutil import run_sync

    kept_items = run_sync(run, thread_name="rag_lab-testset-llm")
    report.model_calls = writer.calls
    report.prompt_hash = dict(hashes)
    gold = [list(dict.fromkeys(s.doc_id for s in it.sources)) for it, _ in kept_items]
    report.saturation, search = search_saturation(lab, kb, [(it.question, g) for (it, _), g in zip(kept_items, gold)])
    kept: list[QueryItem] = []
    for (it, answer), ranks in zip(kept_items, search, strict=True):
        found = it.found or {}
        single = len(it.sources) == 1
        report.kept += 1
        report.by_generator[it.generator] += 1
        report.multihop += not single
        report.answerable_by[rank_bin(max(found.values()), depth)] += 1
        md: dict[str, Any] = {
            "generator": it.generator,
            "model": name,
            "seed": seed,
            "source_chunk_id": it.sources[0].chunk_id,
            "source_chunk_ids": [s.chunk_id for s in it.sources],
            "source_kb": kb_name,
            "prompt_hash": hashes[it.generator],
            "answerable_by": {"plain_bm25_rank": found[it.sources[0].doc_id] if single else found},
            "search_ranks": ranks[it.sources[0].doc_id] if single else ranks,
            "synthetic": True,
            "reviewed": False,
        }
        if it.entity:
            md["linked_by"] = it.entity
        kept.append(
            QueryItem(
                id=f"gen-{len(kept) + 1:04d}",
                question=it.question,
                answers=[answer],
                gold_ids=gold[len(kept)],
                metadata=md,
            )
        )
    return write_testset(docs, kept, out_dir, report, overwrite=overwrite), report
