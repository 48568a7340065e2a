"""Evaluation data in and out: TREC run / qrels files, Hugging Face-style JSONL, ragas datasets.

* TREC: :func:`write_trec_run` (``qid Q0 docid rank score run_name``, the documents of each
  question's final contexts in rank order, first occurrence only, score = n - rank + 1 so that
  sorting by score keeps our order) and :func:`write_trec_qrels` (``qid 0 docid 1``). Both are what
  ``trec_eval``, ``pytrec_eval``, ``ranx`` and ``ir_measures`` read; :func:`read_trec_run` and
  :func:`read_trec_qrels` read them back, :func:`trec_ranking` ranks a question's documents of a
  run as trec_eval does. ``pytrec_eval`` on these files gives the report's
  recall@k, nDCG@k, MRR and MAP (tests/eval/test_eval_formats.py), except that trec_eval leaves
  out a question with no retrieved document where our means count it as 0.
* JSONL: one sample per line, ``{"id", "question", "answer", "answers", "gold_ids",
  "contexts", "context_ids", "context_doc_ids"}``, with the context texts so samples can be
  re-scored elsewhere. :func:`write_samples_jsonl` / :func:`read_samples_jsonl` round-trip
  :class:`~rag_lab.eval.records.QueryRecord` s.
* ragas: :func:`to_ragas_dataset` builds a ``ragas.EvaluationDataset`` of single-turn samples
  (``user_input``, ``retrieved_contexts``, ``response``, ``reference``, ``reference_contexts``);
  :func:`rag_lab.eval.datasets.from_ragas_dataset` reads one as a dataset.
* :func:`export_records` writes the evaluated set of one suite in the formats asked,
  :func:`export_report` those of every suite of a report
  (``rag-lab eval --export trec --export jsonl --export ragas``): ``<stem>.run.trec`` and
  ``<stem>.qrels.trec``, ``<stem>.samples.jsonl``, ``<stem>.ragas.jsonl`` (ragas'
  ``EvaluationDataset.to_jsonl``, read back with ``EvaluationDataset.from_jsonl``).
Bad lines fail with the file, the line number and the field.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_lab.eval.metrics import dedupe_ranking
from rag_lab.eval.records import QueryRecord

if TYPE_CHECKING:  # pragma: no cover
    from ragas import EvaluationDataset
    from ragas.dataset_schema import MultiTurnSample, SingleTurnSample

    from rag_lab.eval.report import EvalReport

__all__ = [
    "EXPORT_FORMATS",
    "FormatError",
    "export_records",
    "export_report",
    "jsonl_objects",
    "read_samples_jsonl",
    "read_trec_qrels",
    "read_trec_run",
    "to_ragas_dataset",
    "trec_ranking",
    "write_samples_jsonl",
    "write_trec_qrels",
    "write_trec_run",
]


class FormatError(ValueError):
    """A file in one of these formats cannot be read; names the file, line and field."""


def _check_token(value: str, what: str, qid: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise FormatError(
            f"TREC files are whitespace-separated: {what} {value!r} of question {qid!r} is empty or has spaces"
        )
    return value


# -- TREC ----------------------------------------------------------------------------------
def write_trec_run(records: Iterable[QueryRecord], path: str | Path, run_name: str = "rag_lab") -> Path:
    """The final contexts' documents of each record as a TREC run file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _check_token(run_name, "run name", "-")
    lines = []
    for r in records:
        ranked = dedupe_ranking(r.retrieved_doc_ids)
        for rank, doc in enumerate(ranked, 1):
            lines.append(
                f"{_check_token(r.qid, 'id', r.qid)} Q0 {_check_token(doc, 'document id', r.qid)} "
                f"{rank} {len(ranked) - rank + 1} {run_name}\n"
            )
    p.write_text("".join(lines), encoding="utf-8")
    return p


def write_trec_qrels(qrels: Mapping[str, Iterable[str]] | Iterable[QueryRecord], path: str | Path) -> Path:
    """Gold documents as a TREC qrels file (relevance 1). ``qrels``: ``{qid: gold ids}`` or records."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    pairs = qrels.items() if isinstance(qrels, Mapping) else ((r.qid, r.gold_ids) for r in qrels)
    lines = []
    for qid, gold in pairs:
        for doc in dict.fromkeys(gold):
            lines.append(f"{_check_token(qid, 'id', qid)} 0 {_check_token(doc, 'document id', qid)} 1\n")
    p.write_text("".join(lines), encoding="utf-8")
    return p


def _trec_lines(path: str | Path, kind: str, fields: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of each non-blank line, which must have the ``fields`` named."""
    want = len(fields.split())
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not (parts := line.split()):
            continue
        if len(parts) != want:
            raise FormatError(f"{path}:{n}: a {kind} line has {want} fields ({fields}), got {len(parts)}")
        yield n, parts


def read_trec_run(path: str | Path) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}`` (the shape pytrec_eval takes)."""
    out: dict[str, dict[str, float]] = {}
    for n, parts in _trec_lines(path, "run", "qid Q0 docid rank score run"):
        try:
            out.setdefault(parts[0], {})[parts[2]] = float(parts[4])
        except ValueError:
            raise FormatError(f"{path}:{n}: field 'score' = {parts[4]!r} is not a number") from None
    return out


def read_trec_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``{qid: {docid: relevance}}``."""
    out: dict[str, dict[str, int]] = {}
    for n, parts in _trec_lines(path, "qrels", "qid 0 docid relevance"):
        try:
            out.setdefault(parts[0], {})[parts[2]] = int(parts[3])
        except ValueError:
            raise FormatError(f"{path}:{n}: field 'relevance' = {parts[3]!r} is not an integer") from None
    return out


def trec_ranking(docs: Mapping[str, float]) -> list[str]:
    """A TREC run's documents in trec_eval's order: score descending, ties by document id descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda x: (x[1], x[0]), reverse=True)]


# -- JSONL ---------------------------------------------------------------------------------
_JSONL_FIELDS = ("id", "question", "answer", "answers", "gold_ids", "contexts", "context_ids", "context_doc_ids")


def write_samples_jsonl(records: Iterable[QueryRecord], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", encoding="utf-8") as fh:
        for r in records:
            row = {
                "id": r.qid,
                "question": r.question,
                "answer": r.answer,
                "answers": list(r.answers),
                "gold_ids": list(r.gold_ids),
                "contexts": list(r.contexts),
                "context_ids": list(r.context_ids),
                "context_doc_ids": list(r.context_doc_ids),
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p


def jsonl_objects(path: str | Path, text: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, row)`` of each non-blank line of a JSONL file (``where`` = ``"path:line"``); a line
    that is not JSON, or not an object, raises :class:`FormatError` naming the file and line."""
    lines = (Path(path).read_text(encoding="utf-8") if text is None else text).splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(f"{path}:{n}: not valid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise FormatError(f"{path}:{n}: expected a JSON object, got {type(row).__name__}")
        yield f"{path}:{n}", row


def read_samples_jsonl(path: str | Path) -> list[QueryRecord]:
    out = []
    for where, row in jsonl_objects(path):
        for f in ("id", "question"):
            if not isinstance(row.get(f), str) or not row[f]:
                raise FormatError(f"{where}: field '{f}' = {row.get(f)!r} must be a non-empty string")
        for f in ("answers", "gold_ids", "contexts", "context_ids", "context_doc_ids"):
            v = row.get(f, [])
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise FormatError(f"{where}: field '{f}' = {v!r} must be a list of strings")
        out.append(
            QueryRecord(
                qid=row["id"],
                question=row["question"],
                gold_ids=list(row.get("gold_ids", [])),
                answers=list(row.get("answers", [])),
                retrieved_doc_ids=dedupe_ranking(row.get("context_doc_ids", [])),
                context_ids=list(row.get("context_ids", [])),
                context_doc_ids=list(row.get("context_doc_ids", [])),
                contexts=list(row.get("contexts", [])),
                answer=str(row.get("answer", "")),
            )
        )
    return out


# -- ragas ---------------------------------------------------------------------------------
def to_ragas_dataset(
    records: Sequence[QueryRecord], reference_texts: Mapping[str, str] | None = None
) -> EvaluationDataset:
    """A ``ragas.EvaluationDataset``: one ``SingleTurnSample`` per record (reference contexts
    from ``reference_texts``: gold document id → text, when given)."""
    from ragas import EvaluationDataset
    from ragas.dataset_schema import SingleTurnSample

    from rag_lab.eval.records import answer_text

    texts = reference_texts or {}
    samples: list[SingleTurnSample | MultiTurnSample] = [
        SingleTurnSample(
            user_input=r.question,
            retrieved_contexts=list(r.contexts),
            response=answer_text(r.answer),
            reference=r.answers[0] if r.answers else None,
            reference_contexts=[texts[g] for g in r.gold_ids if g in texts] or None,
        )
        for r in records
    ]
    return EvaluationDataset(samples=samples)


# -- all of them ---------------------------------------------------------------------------
#: what :func:`export_records` writes (``rag-lab eval --export``)
EXPORT_FORMATS = ("trec", "jsonl", "ragas")


def export_records(
    records: Sequence[QueryRecord],
    out_dir: str | Path,
    stem: str,
    formats: Iterable[str] = EXPORT_FORMATS,
    reference_texts: Mapping[str, str] | None = None,
    run_name: str = "rag_lab",
) -> dict[str, Path]:
    """Write ``records`` in each of ``formats`` under ``out_dir``; returns ``{kind: path}`` with
    kinds ``trec_run``, ``trec_qrels``, ``jsonl``, ``ragas``. ``reference_texts`` (gold document id
    → text) fill the ragas samples' reference contexts."""
    fmts = list(dict.fromkeys(formats))
    unknown = [f for f in fmts if f not in EXPORT_FORMATS]
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(unknown)}; known: {', '.join(EXPORT_FORMATS)}")
    from rag_lab.cliutil import check_file_stem

    check_file_stem(stem)
    out = Path(out_dir)
    paths: dict[str, Path] = {}
    if "trec" in fmts:
        paths["trec_run"] = write_trec_run(records, out / f"{stem}.run.trec", run_name)
        paths["trec_qrels"] = write_trec_qrels(records, out / f"{stem}.qrels.trec")
    if "jsonl" in fmts:
        paths["jsonl"] = write_samples_jsonl(records, out / f"{stem}.samples.jsonl")
    if "ragas" in fmts:
        out.mkdir(parents=True, exist_ok=True)
        p = out / f"{stem}.ragas.jsonl"
        to_ragas_dataset(records, reference_texts).to_jsonl(str(p))
        paths["ragas"] = p
    return paths


def export_report(
    report: EvalReport, out_dir: str | Path, name: str, formats: Iterable[str] = EXPORT_FORMATS
) -> dict[str, Path]:
    """The evaluated set of every suite of an :class:`~rag_lab.eval.report.EvalReport` (as
    evaluated: a report read back from JSON has no context texts) next to its report files:
    ``<name>.*``, or ``<name>.<suite>.*`` per suite when there are several (question ids of two
    datasets may collide; keys are then ``<suite>:<kind>``). The ragas samples' reference contexts
    are the gold documents' texts, read from each suite's dataset."""
    from rag_lab.eval.runner import SuiteSpec

    fmts = list(dict.fromkeys(formats))
    paths: dict[str, Path] = {}
    several = len(report.suites) > 1
    run_name = name if name and not any(c.isspace() for c in name) else "rag_lab"
    for suite in report.suites:
        texts = None
        if "ragas" in fmts:
            gold = {g for r in suite.records for g in r.gold_ids}
            texts = {d.id: d.text for d in SuiteSpec.from_dict(suite.spec).load().corpus if d.id in gold}
        stem = f"{name}.{suite.name}" if several else name
        written = export_records(suite.records, out_dir, stem, fmts, reference_texts=texts, run_name=run_name)
        paths.update({(f"{suite.name}:{k}" if several else k): p for k, p in written.items()})
    return paths
