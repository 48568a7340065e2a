"""ragas plumbing: importing ragas (tracking off), the offline and LLM metrics as
``async (sample) -> float`` closures over ragas metric objects, the lab-embedder adapter for
answer relevancy, and the guards around them (missing inputs, float clamping, absl's logging)."""

from __future__ import annotations

import asyncio
import math
import os
import warnings
from collections.abc import Awaitable, Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, SupportsFloat, TypedDict

from rag_lab.eval.ragas_adapter.judge import JudgeConfig, judge_ledger_transport, resolve_structured_output
from rag_lab.eval.ragas_adapter.samples import RagasError, RagasSample, _MissingInput, metric_tokens

if TYPE_CHECKING:  # pragma: no cover
    from ragas.embeddings.base import BaseRagasEmbedding
    from ragas.metrics.base import SingleTurnMetric

    from rag_lab.models.base import Embedder
    from rag_lab.observability.ledger import Ledger


def _import_ragas() -> ModuleType:
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    try:
        import ragas  # noqa: F401
    except Exception as exc:  # ImportError, or an incompatible dependency raising at import
        raise RagasError(
            f"ragas is not usable ({type(exc).__name__}: {exc}); install the eval extra: pip install 'rag_lab[eval]'"
        ) from exc
    return ragas


def _legacy(name: str) -> Any:
    """A metric class of the legacy ``ragas.metrics`` API (deprecation warning silenced)."""
    import ragas.metrics as rm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(rm, name)


def _embeddings_adapter(embedder: Embedder) -> BaseRagasEmbedding:
    """Wrap a rag_lab Embedder as ragas' modern embedding interface (for answer relevancy)."""
    from ragas.embeddings.base import BaseRagasEmbedding

    class _LabEmbeddings(BaseRagasEmbedding):
        #: the ``aembed_*`` methods run the embedder in a worker thread (ragas' test-set
        #: extractors check this flag before awaiting them)
        is_async = True

        def __init__(self, inner: Embedder) -> None:
            super().__init__()
            self.inner = inner

        def embed_text(self, text: str, **kwargs: object) -> list[float]:
            return [float(x) for x in self.inner.embed([text])[0]]

        async def aembed_text(self, text: str, **kwargs: object) -> list[float]:
            return await asyncio.to_thread(self.embed_text, text)

        def embed_texts(self, texts: list[str], **kwargs: object) -> list[list[float]]:
            return [[float(x) for x in row] for row in self.inner.embed(list(texts))]

        async def aembed_texts(self, texts: list[str], **kwargs: object) -> list[list[float]]:
            return await asyncio.to_thread(self.embed_texts, texts)

    return _LabEmbeddings(embedder)


class _NoRootConfig:
    """Keep absl (imported by rouge_score) from calling ``logging.basicConfig()``, which it does
    when the root logger has no handler: a NullHandler sits on the root for the duration."""

    def __enter__(self) -> None:
        import logging

        root = logging.getLogger()
        self.handler = None if root.handlers else logging.NullHandler()
        if self.handler is not None:
            root.addHandler(self.handler)

    def __exit__(self, *exc: object) -> None:
        import logging

        if self.handler is not None:
            logging.getLogger().removeHandler(self.handler)


def _clamp(value: SupportsFloat) -> float:
    """A float score; values within 1e-9 outside [0, 1] (float rounding) are clamped."""
    v = float(value)
    if math.isfinite(v):
        if -1e-9 < v < 0.0:
            v = 0.0
        elif 1.0 < v < 1.0 + 1e-9:
            v = 1.0
    return v


ScoreFn = Callable[[RagasSample], Awaitable[float]]


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise _MissingInput(what)


def _offline_scorers() -> dict[str, ScoreFn]:
    """The offline metrics as ``async (sample) -> float`` closures over ragas metric objects."""
    from ragas.dataset_schema import SingleTurnSample
    from ragas.metrics.collections import BleuScore, CHRFScore, NonLLMStringSimilarity, RougeScore

    id_recall = _legacy("IDBasedContextRecall")()
    id_precision = _legacy("IDBasedContextPrecision")()
    nl_recall = _legacy("NonLLMContextRecall")()
    nl_precision = _legacy("NonLLMContextPrecisionWithReference")()
    similarity = NonLLMStringSimilarity()
    bleu_ragas = BleuScore()
    bleu_tokens = BleuScore(kwargs={"use_effective_order": True, "tokenize": "none"})
    rouge = RougeScore(rouge_type="rougeL", mode="fmeasure")
    chrf = CHRFScore()

    async def _by_ids(metric: SingleTurnMetric, s: RagasSample) -> float:
        _need(bool(s.reference_context_ids), "no reference_context_ids (gold documents)")
        ids = SingleTurnSample(
            retrieved_context_ids=list[str | int](s.retrieved_context_ids),
            reference_context_ids=list[str | int](s.reference_context_ids),
        )
        return float(await metric.single_turn_ascore(ids))

    async def id_context_recall(s: RagasSample) -> float:
        return await _by_ids(id_recall, s)

    async def id_context_precision(s: RagasSample) -> float:
        return await _by_ids(id_precision, s)

    async def nonllm_context_recall(s: RagasSample) -> float:
        _need(bool(s.reference_contexts), "no reference_contexts (gold document texts)")
        if not s.retrieved_contexts:
            return 0.0  # nothing retrieved: no reference context is matched
        return float(
            await nl_recall.single_turn_ascore(
                SingleTurnSample(retrieved_contexts=s.retrieved_contexts, reference_contexts=s.reference_contexts)
            )
        )

    async def nonllm_context_precision(s: RagasSample) -> float:
        _need(bool(s.reference_contexts), "no reference_contexts (gold document texts)")
        _need(bool(s.retrieved_contexts), "no retrieved_contexts: precision is undefined")
        return float(
            await nl_precision.single_turn_ascore(
                SingleTurnSample(retrieved_contexts=s.retrieved_contexts, reference_contexts=s.reference_contexts)
            )
        )

    def _answer_pair(s: RagasSample) -> tuple[str, str]:
        _need(bool(s.reference.strip()), "no reference answer")
        return s.reference, s.response

    async def string_similarity(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        return float((await similarity.ascore(reference=ref, response=resp)).value)

    async def bleu(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        return float((await bleu_ragas.ascore(reference=ref, response=resp)).value)

    async def rouge_l(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        with _NoRootConfig():
            return float((await rouge.ascore(reference=ref, response=resp)).value)

    async def bleu_zh(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        ref_t, resp_t = " ".join(metric_tokens(ref)), " ".join(metric_tokens(resp))
        if not ref_t or not resp_t:
            return 0.0
        return float((await bleu_tokens.ascore(reference=ref_t, response=resp_t)).value)

    async def rouge_l_zh(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        from rouge_score import rouge_scorer

        class _JiebaTokenizer:
            def tokenize(self, text: str) -> list[str]:
                return metric_tokens(text)

        with _NoRootConfig():
            scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_JiebaTokenizer())
            return float(scorer.score(ref, resp)["rougeL"].fmeasure)

    async def chrf_score(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        return float((await chrf.ascore(reference=ref, response=resp)).value)

    return {
        "id_context_recall": id_context_recall,
        "id_context_precision": id_context_precision,
        "nonllm_context_recall": nonllm_context_recall,
        "nonllm_context_precision": nonllm_context_precision,
        "string_similarity": string_similarity,
        "bleu": bleu,
        "rouge_l": rouge_l,
        "chrf": chrf_score,
        "bleu_zh": bleu_zh,
        "rouge_l_zh": rouge_l_zh,
    }


def prompt_hash(metric_obj: object) -> str:
    """SHA-256 (16 hex) of the prompts a ragas metric object sends its judge: for each attribute
    holding a prompt (an object with ``instruction`` and ``output_model``), in attribute order, its
    name, class, instruction, language, output JSON schema and few-shot examples as rendered."""
    import hashlib
    import json

    h = hashlib.sha256()
    for name, value in sorted(vars(metric_obj).items()):
        if not (hasattr(value, "instruction") and hasattr(value, "output_model")):
            continue
        examples = value._generate_examples() if hasattr(value, "_generate_examples") else ""
        schema = json.dumps(value.output_model.model_json_schema(), sort_keys=True)
        for part in (name, type(value).__name__, value.instruction, getattr(value, "language", ""), schema, examples):
            h.update(str(part).encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def prompt_hash_with(base: str, mode: str) -> str:
    """:func:`prompt_hash` ``base`` combined with the structured-output ``mode`` (16 hex)."""
    import hashlib

    return hashlib.sha256(f"{base}\0{mode}".encode()).hexdigest()[:16]


class _Seed(TypedDict, total=False):
    """``llm_factory``'s ``seed`` when the judge sets one."""

    seed: int


def _llm_scorers(
    judge: JudgeConfig,
    embedder: Embedder | None,
    wanted: Sequence[str],
    ledger: Ledger | None = None,
    prompts: dict[str, str] | None = None,
) -> dict[str, ScoreFn]:
    """The LLM metrics as closures; the OpenAI client is created here, in the running loop, with a
    transport that records every attempt in ``ledger``. ``prompts`` receives each metric's
    :func:`prompt_hash`."""
    import httpx
    from openai import AsyncOpenAI
    from ragas.llms.base import llm_factory
    from ragas.metrics.collections import AnswerRelevancy, ContextPrecisionWithReference, Faithfulness

    http_client = None
    if ledger is not None:
        http_client = httpx.AsyncClient(
            transport=judge_ledger_transport(ledger, f"{judge.model}|{judge.base_url}"), timeout=judge.timeout
        )
    client = AsyncOpenAI(
        base_url=judge.base_url,
        api_key=judge.api_key,
        timeout=judge.timeout,
        max_retries=judge.max_retries,
        http_client=http_client,
    )
    from rag_lab.eval.ragas_adapter.schema_llm import schema_judge_llm

    mode = resolve_structured_output(judge)
    if mode == "json_schema":
        llm = schema_judge_llm(client, judge)
    else:
        extra: _Seed = {} if judge.seed is None else {"seed": judge.seed}
        llm = llm_factory(
            judge.model, client=client, temperature=judge.temperature, max_tokens=judge.max_tokens, top_p=1.0, **extra
        )
    out: dict[str, ScoreFn] = {}

    def _hash(metric_obj: object) -> str:
        # the json_schema mode sends other requests (no schema in the prompt, a bounded schema as
        # the response format): its hash differs from the json_object one of the same prompts
        h = prompt_hash(metric_obj)
        return h if mode == "json_object" else prompt_hash_with(h, mode)

    if "faithfulness" in wanted:
        faith = Faithfulness(llm=llm)
        if prompts is not None:
            prompts["faithfulness"] = _hash(faith)

        async def faithfulness(s: RagasSample) -> float:
            _need(bool(s.response.strip()), "empty response")
            _need(bool(s.retrieved_contexts), "no retrieved_contexts")
            return float(
                (
                    await faith.ascore(
                        user_input=s.user_input, response=s.response, retrieved_contexts=s.retrieved_contexts
                    )
                ).value
            )

        out["faithfulness"] = faithfulness
    if "answer_relevancy" in wanted:
        if embedder is None:
            raise RagasError("answer_relevancy needs an embedder (the lab's, or models.judge_embedder)")
        relevancy = AnswerRelevancy(llm=llm, embeddings=_embeddings_adapter(embedder))
        if prompts is not None:
            prompts["answer_relevancy"] = _hash(relevancy)

        async def answer_relevancy(s: RagasSample) -> float:
            _need(bool(s.response.strip()), "empty response")
            return float((await relevancy.ascore(user_input=s.user_input, response=s.response)).value)

        out["answer_relevancy"] = answer_relevancy
    if "llm_context_precision" in wanted:
        precision = ContextPrecisionWithReference(llm=llm)
        if prompts is not None:
            prompts["llm_context_precision"] = _hash(precision)

        async def llm_context_precision(s: RagasSample) -> float:
            _need(bool(s.reference.strip()), "no reference answer")
            _need(bool(s.retrieved_contexts), "no retrieved_contexts")
            return float(
                (
                    await precision.ascore(
                        user_input=s.user_input, reference=s.reference, retrieved_contexts=s.retrieved_contexts
                    )
                ).value
            )

        out["llm_context_precision"] = llm_context_precision
    return out
