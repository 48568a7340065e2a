"""Scoring another system's outputs (``rag-lab eval --run FILE``): a deployed pipeline's TREC run,
samples JSONL or ragas ``EvaluationDataset`` JSONL, with the same metrics, report and gate as
rag_lab's own pipeline — but no funnel (the stages that produced the outputs are not known).

* ``trec`` — ``qid Q0 docid rank score run`` lines: the documents ranked by score (descending;
  ties by document id, descending, as trec_eval orders them). The gold comes from ``--qrels`` (a
  TREC qrels file: relevance 0 is not relevant, grades above 1 make nDCG graded) or from a dataset
  (its questions' gold ids and texts).
* ``jsonl`` — rag_lab's samples JSONL (:func:`rag_lab.eval.formats.read_samples_jsonl`: ``id``,
  ``question``, ``answer``, ``answers``, ``gold_ids``, ``contexts``, ``context_doc_ids``), the gold
  in the rows or from ``--qrels`` / a dataset.
* ``ragas`` — ragas' ``EvaluationDataset.to_jsonl`` rows (``user_input``, ``retrieved_contexts``,
  ``response``, ``reference``): they carry no ids, so ``--dataset`` is required. Each row is
  matched to the dataset's question of the same text (its id and gold), and each context to the
  first document of the corpus that contains it (a passage of that document), which gives the
  ranked document ids the retrieval metrics score; a context found in no document ranks as
  ``unknown:<n>``.

:func:`load_run` reads a file into :class:`~rag_lab.eval.records.QueryRecord` s;
:func:`evaluate_run` scores them into an :class:`~rag_lab.eval.report.EvalReport` whose
``meta["source_run"]`` names the file and its SHA-256 (the gate compares such reports with
``--current``; it cannot re-run them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rag_lab.eval.formats import FormatError, read_samples_jsonl, read_trec_qrels, read_trec_run, trec_ranking
from rag_lab.eval.metrics import DEFAULT_KS, evaluate_retrieval
from rag_lab.eval.records import QueryRecord

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.report import EvalReport

__all__ = ["RUN_FORMATS", "evaluate_run", "guess_format", "load_run"]

RUN_FORMATS = ("trec", "jsonl", "ragas")


def guess_format(path: str | Path) -> str:
    """``trec`` for a file whose first non-blank line has 6 whitespace-separated fields, ``ragas``
    for JSON rows with ``user_input``, else ``jsonl``."""
    import json

    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        if not line.lstrip().startswith("{"):
            return "trec"
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            return "jsonl"  # read_samples_jsonl names the line
        return "ragas" if isinstance(row, dict) and "user_input" in row else "jsonl"
    raise FormatError(f"{path}: the run file is empty")


def _from_trec(path: Path, dataset: Dataset | None) -> list[QueryRecord]:
    run = read_trec_run(path)
    questions = {q.id: q for q in dataset.queries} if dataset is not None else {}
    out = []
    for qid, docs in run.items():
        q = questions.get(qid)
        out.append(
            QueryRecord(
                qid=qid,
                question=q.question if q is not None else "",
                gold_ids=list(q.gold_ids) if q is not None else [],
                answers=list(q.answers) if q is not None else [],
                retrieved_doc_ids=trec_ranking(docs),
            )
        )
    return out


def _from_ragas(path: Path, dataset: Dataset | None) -> list[QueryRecord]:
    import json

    if dataset is None:
        raise FormatError(f"{path}: ragas rows carry no question ids; give --dataset to match them by question text")
    by_text = {q.question.strip(): q for q in dataset.queries}
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        text = str(row.get("user_input") or "").strip()
        q = by_text.get(text)
        if q is None:
            raise FormatError(f"{path}:{n}: field 'user_input' = {text[:80]!r} is not a question of {dataset.name}")
        contexts = row.get("retrieved_contexts") or []
        if not isinstance(contexts, list) or not all(isinstance(c, str) for c in contexts):
            raise FormatError(f"{path}:{n}: field 'retrieved_contexts' must be a list of strings")
        doc_ids = [_source_doc(c, dataset, f"unknown:{n}.{i}") for i, c in enumerate(contexts)]
        out.append(
            QueryRecord(
                qid=q.id,
                question=q.question,
                gold_ids=list(q.gold_ids),
                answers=[row["reference"]] if row.get("reference") else list(q.answers),
                retrieved_doc_ids=list(dict.fromkeys(doc_ids)),
                context_doc_ids=doc_ids,
                contexts=list(contexts),
                answer=str(row.get("response") or ""),
            )
        )
    return out


def _source_doc(context: str, dataset: Dataset, missing: str) -> str:
    """The first corpus document whose text contains ``context`` (whitespace collapsed)."""
    needle = " ".join(context.split())
    if needle:
        for d in dataset.corpus:
            if needle in " ".join(d.text.split()):
                return str(d.id)
    return missing


def load_run(
    path: str | Path, fmt: str | None = None, qrels: str | Path | None = None, dataset: Dataset | None = None
) -> tuple[list[QueryRecord], dict[str, dict[str, int]] | None]:
    """The records of a run file (``fmt``: :data:`RUN_FORMATS`, guessed when None) and the graded
    qrels when ``qrels`` names a TREC qrels file (its relevant documents become each record's gold)."""
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"{p}: run file not found")
    kind = fmt or guess_format(p)
    if kind not in RUN_FORMATS:
        raise FormatError(f"--run-format {kind!r}: use one of {', '.join(RUN_FORMATS)}")
    if kind == "trec":
        records = _from_trec(p, dataset)
    elif kind == "ragas":
        records = _from_ragas(p, dataset)
    else:
        records = read_samples_jsonl(p)
        gold = {q.id: q for q in dataset.queries} if dataset is not None else {}
        for r in records:
            if not r.gold_ids and r.qid in gold:
                r.gold_ids = list(gold[r.qid].gold_ids)
    graded = read_trec_qrels(qrels) if qrels is not None else None
    if graded is not None:
        for r in records:
            r.gold_ids = sorted(d for d, rel in graded.get(r.qid, {}).items() if rel > 0)
    return records, graded


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def evaluate_run(
    path: str | Path,
    name: str,
    *,
    fmt: str | None = None,
    qrels: str | Path | None = None,
    dataset: Dataset | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    ragas_metrics: Sequence[str] = (),
) -> EvalReport:
    """An :class:`~rag_lab.eval.report.EvalReport` of one suite ``name`` scoring the run file
    (:func:`load_run`): the retrieval metrics over its ranked document ids (questions of the
    qrels or the dataset that the run lacks count as retrieving nothing), and ``ragas_metrics``
    over its contexts and answers when it has them."""
    from rag_lab.eval.ragas_adapter import RagasSample, score_samples
    from rag_lab.eval.records import answer_text
    from rag_lab.eval.report import EvalReport, SuiteResult

    p = Path(path)
    records, graded = load_run(p, fmt, qrels, dataset)
    known = {r.qid for r in records}
    extra: list[str] = []
    if graded is not None:
        extra = [q for q in graded if q not in known and any(v > 0 for v in graded[q].values())]
    elif dataset is not None:
        extra = [q.id for q in dataset.queries if q.id not in known]
    questions = {q.id: q for q in dataset.queries} if dataset is not None else {}
    for qid in extra:  # asked but not answered by the run: nothing retrieved
        q = questions.get(qid)
        gold = sorted(d for d, rel in (graded or {}).get(qid, {}).items() if rel > 0) or (list(q.gold_ids) if q else [])
        records.append(QueryRecord(qid, q.question if q else "", gold, list(q.answers) if q else []))
    scored = [r for r in records if r.gold_ids]
    if not scored:
        raise FormatError(f"{p}: no question has gold documents: give --qrels FILE or --dataset NAME")
    texts = {d.id: d.text for d in dataset.corpus} if dataset is not None else {}
    retrieval = evaluate_retrieval(
        {r.qid: r.retrieved_doc_ids for r in scored},
        {r.qid: set(r.gold_ids) for r in scored},
        ks=ks,
        grades={q: {d: rel for d, rel in g.items() if rel > 0} for q, g in graded.items() if q in known}
        if graded and any(rel > 1 for g in graded.values() for rel in g.values())
        else None,
    )
    ragas = None
    if ragas_metrics:
        samples = [
            RagasSample(
                r.qid,
                r.question,
                list(r.contexts),
                list(r.context_doc_ids),
                r.answers[0] if r.answers else "",
                list(r.gold_ids),
                [texts[g] for g in r.gold_ids if g in texts],
                answer_text(r.answer),
            )
            for r in scored
        ]
        ragas = score_samples(samples, list(ragas_metrics))
    spec = {"name": name, "dataset": getattr(dataset, "name", ""), "n_queries": len(scored), "source_run": str(p)}
    suite = SuiteResult(name, getattr(dataset, "name", p.name), "", spec, {}, retrieval, scored, ragas)
    return EvalReport([suite], {"source_run": {"path": str(p), "sha256": _digest(p), "format": fmt or guess_format(p)}})
