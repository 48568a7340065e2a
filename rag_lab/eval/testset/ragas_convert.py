"""ragas test-set samples → rag_lab question rows (``rag-lab testset --generator ragas``).

A ragas sample carries ``user_input`` (the question), ``reference`` (the answer) and
``reference_contexts``: the ``page_content`` of the knowledge-graph nodes it was written from,
multi-hop ones tagged ``<1-hop>``, ``<2-hop>``, … in front. ragas keeps no document id on a
context, so the gold documents are found by text: a context belongs to every document whose text
(its chunks merged, what ragas was fed) contains it, both NFKC-normalised with whitespace
collapsed. A sample with a context that no document contains is dropped (``context not in the
KB``), never given a guessed gold; one without question or answer is dropped as ``no question`` /
``no answer``. Nothing here imports ragas.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rag_lab.eval.datasets import CorpusDoc

__all__ = ["RagasRow", "convert_rows", "gold_documents", "normalize_text", "rows_from_samples"]

_HOP_TAG = re.compile(r"^\s*<\d+-hop>\s*")


@dataclass(frozen=True, slots=True)
class RagasRow:
    """One ragas sample, reduced to what rag_lab keeps."""

    question: str
    answer: str
    contexts: tuple[str, ...]
    synthesizer: str


def normalize_text(text: str) -> str:
    """NFKC, a leading ``<k-hop>`` tag removed, whitespace runs collapsed to one space, stripped."""
    text = _HOP_TAG.sub("", unicodedata.normalize("NFKC", text or ""))
    return " ".join(text.split())


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def rows_from_samples(samples: Iterable[Any]) -> tuple[list[RagasRow], int]:
    """``(rows, failed)`` from ragas ``TestsetSample``-like objects (``.eval_sample.user_input`` /
    ``.reference`` / ``.reference_contexts``, ``.synthesizer_name``) or from ``(synthesizer,
    SingleTurnSample)`` pairs. A ``None`` or NaN in place of a sample (a ragas job that failed)
    counts in ``failed``."""
    rows: list[RagasRow] = []
    failed = 0
    for item in samples:
        if isinstance(item, tuple):
            synthesizer, sample = item
        else:
            synthesizer, sample = getattr(item, "synthesizer_name", ""), getattr(item, "eval_sample", None)
        if sample is None or isinstance(sample, float):
            failed += 1
            continue
        contexts = getattr(sample, "reference_contexts", None) or []
        rows.append(
            RagasRow(
                question=_text(getattr(sample, "user_input", "")),
                answer=_text(getattr(sample, "reference", "")),
                contexts=tuple(str(c) for c in contexts),
                synthesizer=str(synthesizer or "ragas"),
            )
        )
    return rows, failed


def gold_documents(contexts: Sequence[str], docs: Sequence[CorpusDoc]) -> list[str] | None:
    """The ids (corpus order, each once) of the documents containing each context, or ``None``
    when a context is in no document (or there is no context at all)."""
    if not contexts:
        return None
    texts = [(d.id, normalize_text(d.text)) for d in docs]
    gold: dict[str, None] = {}
    for ctx in contexts:
        want = normalize_text(ctx)
        found = [doc_id for doc_id, text in texts if want and want in text]
        if not found:
            return None
        gold.update(dict.fromkeys(found))
    order = {d.id: i for i, d in enumerate(docs)}
    return sorted(gold, key=order.__getitem__)


def convert_rows(
    rows: Sequence[RagasRow], docs: Sequence[CorpusDoc]
) -> tuple[list[tuple[RagasRow, list[str]]], Counter[str]]:
    """``([(row, gold ids)], dropped by reason)``: the rows whose contexts all match documents."""
    kept: list[tuple[RagasRow, list[str]]] = []
    dropped: Counter[str] = Counter()
    for row in rows:
        if not row.question:
            dropped["no question"] += 1
            continue
        if not row.answer:
            dropped["no answer"] += 1
            continue
        gold = gold_documents(row.contexts, docs)
        if gold is None:
            dropped["context not in the KB"] += 1
            continue
        kept.append((row, gold))
    return kept, dropped
