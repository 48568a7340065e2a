"""A test set from ragas' ``TestsetGenerator`` (``rag-lab testset --generator ragas``), for users
who already generate with ragas (0.4.3, the eval extra) and want its questions in rag_lab's
dataset format, with rag_lab's filters and report.

* **Models**: the chat model is an OpenAI-compatible endpoint (:class:`JudgeConfig`, as the ragas
  judge is built: ``llm_factory`` over an ``AsyncOpenAI`` client whose transport records every
  attempt, temperature 0, the run's seed sent); ragas' embeddings are the lab's embedder
  (``models.embedder``, offline by default) wrapped as a ragas embedding.
* **Input**: one langchain ``Document`` per KB document (its chunks merged, ``doc_id`` and
  ``title`` in the metadata) through ragas' own default transforms (summaries, themes, entities,
  similarity links) into its knowledge graph; then ragas' default query distribution (single-hop
  specific, multi-hop abstract / specific, those the graph supports), each synthesizer run on its
  share of ``n`` (ragas' own split), Python's and numpy's RNGs seeded with ``seed`` for the run
  (restored after) and the seed sent to the model. The set is **not reproducible** from the seed
  even so: ragas' graph nodes get random ``uuid4`` ids and its multi-hop clusters are sets of
  nodes, so which documents a multi-hop question pairs (and in what order) varies run to run.
* **Conversion** (:mod:`.ragas_convert`): question = ``user_input``, answer = ``reference``, gold =
  the documents containing each ``reference_contexts`` entry (normalised text; no match → dropped
  as ``context not in the KB``).
* **Filters** as the LLM generator's: ``copies a source sentence``, ``duplicate``, ``not
  retrieved`` (a gold document in neither top ``depth``); at most ``n`` kept.

A ragas job that fails (an HTTP error after the client's retries, a reply that never validates)
yields no sample: counted under ``errors`` (``no sample``; each failed HTTP attempt as ``model
error``), never a crash. A failure before any question (the knowledge-graph transforms) raises
:class:`RagasError` with nothing written; the dataset is written only at the end.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets import CorpusDoc, Dataset, QueryItem
from rag_lab.eval.ragas_adapter.judge import JudgeConfig, judge_ledger_transport
from rag_lab.eval.ragas_adapter.samples import RagasError
from rag_lab.eval.testset.build import TestsetReport, kb_sources, ranks_of, retrieved_docs, write_testset
from rag_lab.eval.testset.generate import normalize_question
from rag_lab.eval.testset.llm_build import copies_source
from rag_lab.eval.testset.ragas_convert import convert_rows, rows_from_samples

__all__ = ["build_ragas_testset", "check_ragas", "ragas_chat_config"]

_MAX_ERROR_EXAMPLES = 5
_CHAT_KEYS = ("model", "base_url", "api_key", "api_key_env", "timeout", "max_retries")


def ragas_chat_config(
    model: str | None,
    base_url: str | None,
    api_key_env: str | None = None,
    timeout: float = 60.0,
    retries: int = 1,
    concurrency: int = 4,
    lab_config: Mapping[str, Any] | None = None,
) -> JudgeConfig:
    """The chat endpoint for ragas: ``--model`` / ``--base-url`` (``--api-key-env``), else the lab
    config's ``models.chat`` when it is an OpenAI-compatible endpoint (``type: openai``)."""
    if model or base_url:
        cfg: dict[str, Any] = {"model": model, "base_url": base_url, "timeout": timeout, "max_retries": retries}
        if api_key_env:
            cfg["api_key_env"] = api_key_env
        return JudgeConfig.from_mapping({**cfg, "concurrency": concurrency}, source="testset --model/--base-url")
    chat = ((lab_config or {}).get("models") or {}).get("chat") or {}
    if isinstance(chat, Mapping) and chat.get("type") == "openai":
        cfg = {k: chat[k] for k in _CHAT_KEYS if k in chat}
        cfg.setdefault("timeout", timeout)
        cfg.setdefault("max_retries", retries)
        return JudgeConfig.from_mapping({**cfg, "concurrency": concurrency}, source="models.chat")
    raise RagasError(
        "--generator ragas needs an OpenAI-compatible chat model: give --model and --base-url, or set "
        "models.chat in the lab config to one (type: openai)"
    )


def check_ragas() -> None:
    """Raise :class:`RagasError` (naming the extra to install) unless ragas' test-set API imports,
    or unless tiktoken can load the encodings ragas counts tokens with (downloaded on first use)."""
    from rag_lab.eval.ragas_adapter.scorers import _import_ragas

    _import_ragas()
    try:
        import tiktoken
        from langchain_core.documents import Document  # noqa: F401
        from ragas.testset import TestsetGenerator  # noqa: F401
    except Exception as exc:
        raise RagasError(
            f"ragas' test-set generator is not usable ({type(exc).__name__}: {exc}); "
            "install the eval extra: pip install 'rag_lab[eval]'"
        ) from exc
    for name in ("cl100k_base", "o200k_base"):
        try:
            tiktoken.get_encoding(name)
        except Exception as exc:
            raise RagasError(
                f"ragas' test-set generator counts tokens with tiktoken's {name!r} encoding, which tiktoken "
                f"could not load ({type(exc).__name__}: {str(exc)[:160]}); it is downloaded on first use: run "
                "once with network access, or set TIKTOKEN_CACHE_DIR to a folder that holds it"
            ) from None


def _ragas_models(chat: JudgeConfig, embedder: Any, ledger: Any, seed: int) -> tuple[Any, Any]:
    import httpx
    from openai import AsyncOpenAI
    from ragas.llms.base import llm_factory

    from rag_lab.eval.ragas_adapter.scorers import _embeddings_adapter

    transport = judge_ledger_transport(ledger, f"{chat.model}|{chat.base_url}", keepalive=False)
    client = AsyncOpenAI(
        base_url=chat.base_url,
        api_key=chat.api_key,
        timeout=chat.timeout,
        max_retries=chat.max_retries,
        http_client=httpx.AsyncClient(transport=transport, timeout=chat.timeout),
    )
    llm = llm_factory(
        chat.model, client=client, temperature=chat.temperature, max_tokens=chat.max_tokens, top_p=1.0, seed=seed
    )
    return llm, _embeddings_adapter(embedder)


def _run_ragas(
    chat: JudgeConfig, embedder: Any, docs: list[CorpusDoc], n: int, seed: int, report: TestsetReport, ledger: Any
) -> list[tuple[str, Any]]:
    """``[(synthesizer name, sample or NaN)]`` from ragas' pipeline over ``docs``; a synthesizer
    whose scenarios fail counts under ``errors`` as ``synthesizer failed``."""
    from langchain_core.documents import Document
    from ragas.run_config import RunConfig
    from ragas.testset import TestsetGenerator
    from ragas.testset.graph import KnowledgeGraph, Node, NodeType
    from ragas.testset.synthesizers import default_query_distribution
    from ragas.testset.synthesizers.utils import calculate_split_values
    from ragas.testset.transforms import apply_transforms, default_transforms

    from rag_lab.eval.ragas_adapter.scorers import prompt_hash

    llm, emb = _ragas_models(chat, embedder, ledger, seed)
    run_config = RunConfig(timeout=max(1, int(chat.timeout)), max_workers=chat.concurrency, seed=seed)
    lc_docs = [Document(page_content=d.text, metadata={"doc_id": d.id, "title": d.title}) for d in docs]
    kg = KnowledgeGraph(
        nodes=[
            Node(type=NodeType.DOCUMENT, properties={"page_content": d.page_content, "document_metadata": d.metadata})
            for d in lc_docs
        ]
    )
    try:
        apply_transforms(kg, default_transforms(lc_docs, llm, emb), run_config)
        distribution = default_query_distribution(llm, kg)
    except Exception as exc:
        raise RagasError(f"ragas' knowledge-graph stage failed ({type(exc).__name__}: {str(exc)[:300]})") from exc
    generator = TestsetGenerator(llm=llm, embedding_model=emb, knowledge_graph=kg)
    splits, _ = calculate_split_values([p for _, p in distribution], n)
    out: list[tuple[str, Any]] = []
    for (synth, _), k in zip(distribution, splits, strict=True):
        if k < 1:
            continue
        report.prompt_hash[synth.name] = prompt_hash(synth)
        # the executor, not the Testset: ragas' generate() builds a TestsetSample from each result
        # and fails on the NaN of a failed job; one synthesizer per call keeps each sample's name
        try:
            executor: Any = generator.generate(
                testset_size=k,
                query_distribution=[(synth, 1.0)],
                run_config=run_config,
                raise_exceptions=False,
                return_executor=True,
            )
            out.extend((synth.name, s) for s in executor.results())
        except Exception as exc:
            report.errors["synthesizer failed"] += 1
            if len(report.error_examples) < _MAX_ERROR_EXAMPLES:
                report.error_examples.append(f"{synth.name}: {type(exc).__name__}: {str(exc)[:200]}")
    return out


class _Seeded:
    """Python's and numpy's global RNGs seeded for the block, their states restored after."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __enter__(self) -> None:
        import numpy as np

        self.py, self.np = random.getstate(), np.random.get_state()
        random.seed(self.seed)
        np.random.seed(self.seed % 2**32)

    def __exit__(self, *exc: object) -> None:
        import numpy as np

        random.setstate(self.py)
        np.random.set_state(self.np)


def build_ragas_testset(
    lab: Any,
    kb_name: str,
    n: int,
    out_dir: str | Path,
    chat: JudgeConfig,
    *,
    seed: int = 0,
    depth: int = 10,
    overwrite: bool = False,
) -> tuple[Dataset, TestsetReport]:
    """Up to ``n`` questions from ragas' ``TestsetGenerator`` over KB ``kb_name`` (module
    docstring), written with the KB's documents as a dataset under ``out_dir`` (plus the report)."""
    from rag_lab.eval.datasets.converters import CORPUS_FILE, QUERIES_FILE
    from rag_lab.observability.ledger import Ledger

    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    out = Path(out_dir)
    if not overwrite and any((out / f).exists() for f in (CORPUS_FILE, QUERIES_FILE)):
        raise ValueError(f"{out}: a dataset exists there (pass overwrite=True / --overwrite to replace it)")
    kb = lab.kb(kb_name, create=False)
    docs, _ = kb_sources(lab, kb)
    if not docs:
        raise ValueError(f"knowledge base {kb_name!r} holds no text chunks to generate questions from")
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    check_ragas()
    import ragas

    report = TestsetReport(kb=kb_name, seed=seed, requested=n, generator="ragas", model=chat.model)
    ledger = Ledger()
    with _Seeded(seed):
        results = _run_ragas(chat, lab.embedder, docs, n, seed, report, ledger)
    calls = [c for c in ledger.calls if c.kind == "judge"]
    report.model_calls = len(calls)
    failed_calls = [c.error for c in calls if c.error]
    if failed_calls:
        report.errors["model error"] += len(failed_calls)
        report.error_examples.extend(
            f"model error: {e}" for e in failed_calls[: _MAX_ERROR_EXAMPLES - len(report.error_examples)]
        )
    rows, failed = rows_from_samples(results)
    if failed:
        report.errors["no sample"] += failed
    converted, dropped = convert_rows(rows, docs)
    report.dropped.update(dropped)
    by_id = {d.id: d for d in docs}
    pending = []
    seen: set[str] = set()
    for row, gold in converted:
        key = normalize_question(row.question)
        if copies_source(row.question, [by_id[g].text for g in gold]):
            report.dropped["copies a source sentence"] += 1
        elif key in seen:
            report.dropped["duplicate"] += 1
        else:
            seen.add(key)
            pending.append((row, gold))
    report.examined_chunks = sum(len(r.contexts) for r in rows)
    lists = retrieved_docs(lab, kb, [row.question for row, _ in pending], depth)
    kept: list[QueryItem] = []
    for (row, gold), found in zip(pending, lists, strict=True):
        ranks = {g: ranks_of(g, found) for g in gold}
        if not all(ranks.values()):
            report.dropped["not retrieved"] += 1
            continue
        if len(kept) >= n:
            break
        report.kept += 1
        report.by_generator[row.synthesizer] += 1
        report.multihop += len(gold) > 1
        for r in ranks.values():
            report.retrieved_by.update(r)
        kept.append(
            QueryItem(
                id=f"gen-{len(kept) + 1:04d}",
                question=row.question,
                answers=[row.answer],
                gold_ids=list(gold),
                metadata={
                    "generator": "ragas",
                    "synthesizer": row.synthesizer,
                    "model": chat.model,
                    "seed": seed,
                    "ragas_version": str(getattr(ragas, "__version__", "")),
                    "prompt_hash": report.prompt_hash.get(row.synthesizer, ""),
                    "source_kb": kb_name,
                    "reference_contexts": len(row.contexts),
                    "retrieved_by": ranks[gold[0]] if len(gold) == 1 else ranks,
                    "synthetic": True,
                    "reviewed": False,
                },
            )
        )
    return write_testset(docs, kept, out_dir, report, overwrite=overwrite), report
