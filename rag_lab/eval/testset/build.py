"""The rule-based question writer (``--generator offline``) of :mod:`.pipeline`: the forms of
:mod:`.generate` and the two-hop questions of :mod:`.bridge`, no model.

Up to ``multihop`` × n two-hop questions are sought first (bridges, then comparisons), then
one-hop ones. A chunk's questions are tried in turn — one that does not name its document's title
first, then the form used least so far — and the first through the filters is kept; a chunk none
of whose questions passes is counted once, under its first question's reason. Besides the
pipeline's filters (a two-hop question's second document is looked up with the question and the
entity linking the hops, as a reader would): ``no question`` (no form applies), ``answer not in
source`` (the span is not in the source chunk), ``answer in the question`` (comparisons, which
name both candidates, excepted). Other passages holding the answer become ``gold_candidates``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets import Dataset
from rag_lab.eval.testset.answerable import FINDABLE_DEPTH, answer_passages, contains_span, names_title
from rag_lab.eval.testset.bridge import Bridges, Comparisons
from rag_lab.eval.testset.generate import FORMS, Candidate, SourceChunk, generate_candidates
from rag_lab.eval.testset.pipeline import Job, Kept, build
from rag_lab.eval.testset.report import LLM_NOTE, REPORT_FILE, WEAKER_NOTE, TestsetReport

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.lab.lab import Lab

__all__ = ["LLM_NOTE", "REPORT_FILE", "WEAKER_NOTE", "FormsWriter", "TestsetReport", "build_testset"]

#: other documents holding the answer listed as gold candidates, at most
MAX_CANDIDATES = 5


def _refusal(cand: Candidate, chunk: SourceChunk, job: Job) -> tuple[str, dict[str, int] | None]:
    """``(drop reason, None)``, or ``("", {document: plain BM25 rank})`` when the candidate of
    ``chunk`` passes."""
    if reason := job.screen.refusal(cand.question, [chunk.text], stretch=False):
        return reason, None
    if not cand.answers or not contains_span(cand.source.text, cand.answers[0]):
        return "answer not in source", None
    if cand.generator != "comparison" and contains_span(cand.question, cand.answers[0]):
        return "answer in the question", None
    hint = f" {cand.entity}" if cand.via is not None else ""
    ranks = job.screen.findable(
        {doc: cand.question + (hint if doc == cand.source.doc_id else "") for doc in cand.gold_ids}
    )
    return ("not findable", None) if ranks is None else ("", ranks)


def _candidate_md(cand: Candidate, sources: list[SourceChunk]) -> dict[str, object]:
    passages = [(s.chunk_id, s.doc_id, s.text) for s in sources]
    others = answer_passages(cand.answers[0], cand.question, passages, cand.source.chunk_id)
    if not others:
        return {}
    docs = list(dict.fromkeys([*cand.gold_ids, *(d for _, d in others)]))[: len(cand.gold_ids) + MAX_CANDIDATES]
    out: dict[str, object] = {"candidate_passages": [{"passage": c, "doc_id": d} for c, d in others if d in docs]}
    if len(docs) > len(cand.gold_ids):
        out["gold_candidates"] = docs
    return out


class FormsWriter:
    """The rule-based writer of :class:`.pipeline.QuestionWriter` (module docstring)."""

    kind = "offline"
    model = "none"
    proof: dict[str, object] = {"answer_in_source": True}

    def write(self, job: Job) -> list[Kept]:
        cache: dict[str, list[Candidate]] = {}

        def candidates(src: SourceChunk) -> list[Candidate]:
            if src.chunk_id not in cache:
                cache[src.chunk_id] = generate_candidates(src)
            return cache[src.chunk_id]

        kept: list[Kept] = []
        used: Counter[str] = Counter()
        bridges, comparisons = Bridges(job.sources, candidates), Comparisons(candidates)
        for two_hop in (bridges.of, comparisons.of):  # bridges first, comparisons fill the rest
            for src in job.order:
                if len(kept) >= job.multihop:
                    break
                if found := two_hop(src):
                    self._take(job, src, found, used, kept)
        for src in job.order:
            if len(kept) >= job.n:
                break
            self._take(job, src, candidates(src), used, kept)
        return kept

    @staticmethod
    def _take(job: Job, src: SourceChunk, cands: list[Candidate], used: Counter[str], kept: list[Kept]) -> None:
        """Keep the first of ``cands`` (questions of ``src``) through the filters, in the module
        docstring's order; count the chunk's drop under its first question's reason when none passes."""
        report = job.report
        report.examined_chunks += 1
        if not cands:
            report.dropped["no question"] += 1
            return
        cands = sorted(
            cands, key=lambda c: (names_title(c.question, src.title), used[c.generator], FORMS.index(c.generator))
        )
        first_reason = ""
        for cand in cands:
            reason, ranks = _refusal(cand, src, job)
            if ranks is not None:
                job.screen.keep(cand.question)
                used[cand.generator] += 1
                via = cand.via
                kept.append(
                    Kept(
                        cand.question,
                        list(cand.answers),
                        cand.gold_ids,
                        ranks,
                        cand.generator,
                        cand.source.chunk_id,
                        [via.chunk_id, cand.source.chunk_id] if via else None,
                        {"linked_by": cand.entity} if cand.entity else {},
                        _candidate_md(cand, job.sources),
                    )
                )
                return
            first_reason = first_reason or reason
        report.dropped[first_reason] += 1


def build_testset(
    lab: Lab,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    seed: int = 0,
    depth: int = FINDABLE_DEPTH,
    overwrite: bool = False,
    multihop: float = 0.25,
) -> tuple[Dataset, TestsetReport]:
    """:func:`.pipeline.build` with the rule-based writer: deterministic for a KB, ``seed``,
    ``depth`` (the plain BM25 rank a gold document must reach) and ``multihop``."""
    return build(
        lab, kb_name, n, out_dir, FormsWriter(), seed=seed, depth=depth, overwrite=overwrite, multihop=multihop
    )
