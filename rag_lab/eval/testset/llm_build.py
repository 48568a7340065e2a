"""The chat-model question writer (``--generator llm``) of :mod:`.pipeline`: single-chunk
questions from the chunks in the pipeline's order (gold = the chunk's document), and a share
``multihop`` of multi-hop questions from two chunks of two documents the entity graph links
(:mod:`.links`; gold = both documents); each question's reference answer comes from its source
passage(s) (``testset_answer``). Besides the pipeline's filters (``copies a source sentence``
also when the question is a stretch of a source's text), each drop counted under its reason:
``no question`` (the model said there is none), ``not in the corpus language`` (a Chinese passage,
a question without Chinese), ``not answerable from the source`` (the answer prompt found none).
Malformed replies and model faults are errors (``report.errors``), not drops.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets import Dataset
from rag_lab.eval.testset.answerable import FINDABLE_DEPTH
from rag_lab.eval.testset.generate import SourceChunk, normalize_question
from rag_lab.eval.testset.links import entity_nodes, linked_pairs
from rag_lab.eval.testset.llm import (
    ANSWER_TEMPLATE,
    MULTIHOP_TEMPLATE,
    QUESTION_TEMPLATE,
    LLMQuestionWriter,
    Outcome,
    corpus_language,
    model_name,
)
from rag_lab.eval.testset.pipeline import Job, Kept, build
from rag_lab.eval.testset.report import TestsetReport
from rag_lab.searchutil.language import detect_language, han_ratio

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab
    from rag_lab.models.base import ChatModel

__all__ = ["LLMWriter", "build_llm_testset"]

_MAX_ERROR_EXAMPLES = 5


@dataclass(slots=True)
class _Item:
    sources: tuple[SourceChunk, ...]
    generator: str
    entity: str = ""
    question: str = ""
    found: dict[str, int] | None = None


def _count_error(report: TestsetReport, out: Outcome) -> None:
    report.errors[out.error] += 1
    if len(report.error_examples) < _MAX_ERROR_EXAMPLES:
        report.error_examples.append(f"{out.error}: {out.message[:200]}")


class LLMWriter:
    """The chat-model writer of :class:`.pipeline.QuestionWriter` (module docstring): ``model`` is
    any chat model with ``chat(messages, options)``; ``timeout``, ``retries`` and ``concurrency``
    bound its calls (:class:`.llm.LLMQuestionWriter`)."""

    kind = "llm"
    proof: dict[str, object] = {}

    def __init__(self, model: ChatModel, *, timeout: float = 60.0, retries: int = 1, concurrency: int = 4) -> None:
        self.model = model_name(model)
        self._writer = LLMQuestionWriter(model, timeout=timeout, retries=retries, concurrency=concurrency)

    def write(self, job: Job) -> list[Kept]:
        writer = self._writer
        writer.seed, writer.language = job.seed, corpus_language([s.text for s in job.sources])
        hashes = {
            "llm": writer.prompt_hash(QUESTION_TEMPLATE, ANSWER_TEMPLATE),
            "llm-multihop": writer.prompt_hash(MULTIHOP_TEMPLATE, ANSWER_TEMPLATE),
        }
        multi_work: list[_Item] = []
        if job.multihop:
            nodes, job.report.graph = entity_nodes(job.lab, job.kb, job.sources)
            pairs = linked_pairs(nodes, job.sources, job.seed)
            multi_work = [_Item((p.a, p.b), "llm-multihop", p.entity) for p in pairs]
        single_work = [_Item((s,), "llm") for s in job.order]

        async def run() -> list[tuple[_Item, str]]:
            multi = await _collect(writer, job, multi_work, job.multihop)
            return multi + await _collect(writer, job, single_work, job.n - len(multi))

        from rag_lab.asyncutil import run_sync

        kept = run_sync(run, thread_name="rag_lab-testset-llm")
        job.report.model_calls = writer.calls
        job.report.prompt_hash = dict(hashes)
        return [
            Kept(
                it.question,
                [answer],
                list(dict.fromkeys(s.doc_id for s in it.sources)),
                it.found or {},
                it.generator,
                it.sources[0].chunk_id,
                [s.chunk_id for s in it.sources],
                {"prompt_hash": hashes[it.generator]},
                end={"linked_by": it.entity} if it.entity else {},
            )
            for it, answer in kept
        ]


async def _one_round(writer: LLMQuestionWriter, job: Job, items: list[_Item]) -> list[tuple[_Item, str]]:
    """Questions for ``items`` through the filters: the kept ``(item, answer)`` in input order."""
    report, screen = job.report, job.screen
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
            reason = "no question"
        elif detect_language(" ".join(texts)) == "zh" and han_ratio(q) < 0.3:
            reason = "not in the corpus language"
        else:
            reason = screen.refusal(q, texts) or ("duplicate" if key in batch_seen else "")
        if reason:
            report.dropped[reason] += 1
            continue
        batch_seen.add(key)
        it.question = q
        pending.append(it)
    findable: list[_Item] = []
    for it in pending:
        it.found = screen.findable({s.doc_id: it.question for s in it.sources})
        if it.found is None:
            report.dropped["not findable"] += 1
        else:
            findable.append(it)
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


async def _collect(writer: LLMQuestionWriter, job: Job, work: list[_Item], want: int) -> list[tuple[_Item, str]]:
    """Rounds over ``work`` (in order) until ``want`` questions are kept or the work runs out."""
    kept: list[tuple[_Item, str]] = []
    pos = 0
    while len(kept) < want and pos < len(work):
        size = max(4, want - len(kept))
        got = await _one_round(writer, job, work[pos : pos + size])
        pos += size
        for it, ans in got[: want - len(kept)]:
            job.screen.keep(it.question)
            kept.append((it, ans))
    return kept


def build_llm_testset(
    lab: Lab,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    model: ChatModel,
    *,
    seed: int = 0,
    depth: int = FINDABLE_DEPTH,
    overwrite: bool = False,
    multihop: float = 0.25,
    timeout: float = 60.0,
    retries: int = 1,
    concurrency: int = 4,
) -> tuple[Dataset, TestsetReport]:
    """:func:`.pipeline.build` with the chat-model writer of ``model``."""
    writer = LLMWriter(model, timeout=timeout, retries=retries, concurrency=concurrency)
    return build(lab, kb_name, n, out_dir, writer, seed=seed, depth=depth, overwrite=overwrite, multihop=multihop)
