"""A test set from questions people really asked (``rag-lab testset --kb KB --from-file FILE``):
a ``.txt`` (one question a line), a ``.csv`` (a ``question`` column, else the first one) or a
``.jsonl`` / ``.json`` (objects with ``question``).

The questions are the user's, but nobody has said yet which document answers each: the gold is a
guess — the document ranked best by the KB's keyword or vector search, the others of their top 3
kept as ``gold_candidates`` — so every question is written ``"synthetic": true, "reviewed":
false`` with ``"origin": "file"``. The labelling panel (accept, grade the passages) turns a guess
into a reviewed gold; until then the gate refuses a baseline built on them. Duplicates (after
normalising case, spaces and punctuation) and questions neither search path answers are dropped,
counted in the report.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.datasets.schema import QueryItem
from rag_lab.eval.testset.pipeline import first_asked, kb_sources, keep_asked, retrieved_docs, write_testset
from rag_lab.eval.testset.report import TestsetReport

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.lab.lab import Lab

__all__ = ["build_from_file", "read_questions"]


def read_questions(path: str | Path) -> list[str]:
    """The questions of a ``.txt``, ``.csv``, ``.jsonl`` or ``.json`` file (blank ones skipped);
    a bad row fails with the file, line and field."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"--from-file {p}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"--from-file {p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    suffix = p.suffix.lower()
    if suffix == ".txt":
        return [line.strip() for line in text.splitlines() if line.strip()]
    if suffix == ".csv":
        rows = list(csv.reader(io.StringIO(text)))
        if not rows:
            return []
        head = [h.strip().lower() for h in rows[0]]
        col = head.index("question") if "question" in head else 0
        body = rows[1:] if "question" in head else rows
        return [r[col].strip() for r in body if len(r) > col and r[col].strip()]
    if suffix in (".jsonl", ".json"):
        items: list[object]
        if suffix == ".json":
            try:
                items = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
            if not isinstance(items, list):
                raise ValueError(f"{p}: expected a list of questions")
            where = [f"{p}: item {i}" for i in range(len(items))]
        else:
            from rag_lab.eval.formats import jsonl_objects

            pairs = list(jsonl_objects(p, text))
            where, items = [w for w, _ in pairs], [row for _, row in pairs]
        out = []
        for item, at in zip(items, where):
            q = item if isinstance(item, str) else item.get("question") if isinstance(item, dict) else None
            if not isinstance(q, str) or not q.strip():
                raise ValueError(f"{at}: field 'question' = {q!r} must be a non-empty string")
            out.append(q.strip())
        return out
    raise ValueError(f"--from-file {p}: use a .txt, .csv, .jsonl or .json file")


def build_from_file(
    lab: Lab, kb_name: str, path: str | Path, out_dir: str | Path, depth: int = 10, overwrite: bool = False
) -> tuple[Dataset, TestsetReport]:
    """The questions of ``path`` against KB ``kb_name`` as an unreviewed dataset under ``out_dir``."""
    kb = lab.kb(kb_name, create=False)
    questions = read_questions(path)
    report = TestsetReport(kb=kb_name, seed=0, requested=len(questions), generator="file")
    fresh = list(first_asked(questions, str, report))
    kept: list[QueryItem] = []
    for q, lists in zip(fresh, retrieved_docs(lab, kb, fresh, depth) if fresh else []):
        ranked = sorted({d for docs in lists.values() for d in docs}, key=lambda d: _best_rank(d, lists))
        if not ranked:
            report.dropped["not retrieved"] += 1
            continue
        keep_asked(kept, report, "file", q, ranked, {"origin": "file", "source_file": str(path)})
    docs, _ = kb_sources(lab, kb)
    return write_testset(docs, kept, out_dir, report, overwrite=overwrite), report


def _best_rank(doc: str, lists: dict[str, list[str]]) -> tuple[int, str]:
    return (min(docs.index(doc) for docs in lists.values() if doc in docs), doc)
