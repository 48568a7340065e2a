"""The report every test-set generator writes next to its dataset (:data:`REPORT_FILE`): what was
kept and dropped and why, how the kept questions were found answerable, and how saturated the set
is against the KB's own search."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["LLM_NOTE", "REPORT_FILE", "WEAKER_NOTE", "TestsetReport", "rank_bin"]

REPORT_FILE = "testset_report.json"
WEAKER_NOTE = (
    "synthetic questions (offline generator, no model): fixed templates that name what they ask about "
    "with the source's words, and nobody reviewed them; scores on this set are weaker evidence than "
    "human-labelled questions"
)
LLM_NOTE = (
    "synthetic questions (written by a chat model from your chunks, filtered for findability, "
    "copies and duplicates): nobody reviewed them; review a sample before trusting a baseline on them"
)


def rank_bin(rank: int, depth: int) -> str:
    """The report's bin of a plain-BM25 rank: ``rank 1``, ``rank 2-10`` or ``rank 11-DEPTH``."""
    if rank == 1:
        return "rank 1"
    if rank <= 10:
        return "rank 2-10"
    return f"rank 11-{depth}"


@dataclass(slots=True)
class TestsetReport:
    """What a generator kept and dropped, and why.

    ``answerable_by``: the kept questions by the rank the plain BM25 gave their source document
    (:func:`rank_bin`); ``saturation``: the share of the kept questions whose source document the
    KB's own keyword or vector search already returns first (``hit@1``) and in its top 10
    (``recall@10``), measured after the filters (they do not use it)."""

    kb: str
    seed: int
    requested: int
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    by_generator: Counter[str] = field(default_factory=Counter)
    examined_chunks: int = 0
    answerable_by: Counter[str] = field(default_factory=Counter)
    saturation: dict[str, float] = field(default_factory=dict)
    #: ``offline``, ``llm`` or ``file``; the fields below are the LLM generator's (absent from an offline report)
    generator: str = "offline"
    model: str = "none"
    #: failed prompts by kind (``model error``, ``malformed reply``) and the first messages
    errors: Counter[str] = field(default_factory=Counter)
    error_examples: list[str] = field(default_factory=list)
    model_calls: int = 0
    prompt_hash: dict[str, str] = field(default_factory=dict)
    multihop: int = 0
    graph: str = ""

    def to_dict(self) -> dict[str, object]:
        """The report as written next to the dataset (the model generators' extra fields in place)."""
        by_model = self.generator != "offline"
        out: dict[str, object] = {
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
            answerable_by=dict(sorted(self.answerable_by.items())),
            saturation={"of": "the KB's own keyword and vector search, top 10", **self.saturation},
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

    def saturation_text(self) -> str:
        """``KB search finds the source first for 62% of the questions, in its top 10 for 91%``."""
        if not self.saturation:
            return ""
        parts = []
        if "hit@1" in self.saturation:
            parts.append(f"first for {round(100 * self.saturation['hit@1'])}%")
        if "recall@10" in self.saturation:
            parts.append(f"in its top 10 for {round(100 * self.saturation['recall@10'])}%")
        return "the KB's own search finds the gold " + ", ".join(parts) + " of the questions"

    def __str__(self) -> str:
        drops = ", ".join(f"{k}: {v}" for k, v in sorted(self.dropped.items())) or "none"
        gens = ", ".join(f"{k} {v}" for k, v in sorted(self.by_generator.items()))
        line = (
            f"testset from KB {self.kb!r} (seed {self.seed}): kept {self.kept} of {self.requested} asked "
            f"({gens}); {self.examined_chunks} chunks examined; dropped: {drops}"
        )
        if sat := self.saturation_text():
            line += f"; saturation: {sat}"
        if self.generator != "offline":
            errs = ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items())) or "none"
            line += f"; model {self.model!r}, {self.model_calls} calls, errors: {errs}"
        return line
