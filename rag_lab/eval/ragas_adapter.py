"""ragas metrics over evaluation records: per-sample records, offline metrics, LLM-judge metrics.

Everything ragas-specific lives in this module (the adapter boundary): the rest of rag_lab sees
:class:`RagasSample` records in and :class:`RagasResult` (one float per sample and metric, NaN
when it could not be scored, with the reason) out. ragas (0.4.x) is imported lazily, with
``RAGAS_DO_NOT_TRACK=true`` set first so nothing is sent anywhere.

Offline metrics (no model at all):

==========================  ================================================================
``id_context_recall``       ragas IDBasedContextRecall: gold doc ids found among the contexts' doc ids
``id_context_precision``    ragas IDBasedContextPrecision: contexts' distinct doc ids that are gold
``nonllm_context_recall``   ragas NonLLMContextRecall: gold documents matched (Levenshtein similarity
                            > 0.5) by some context
``nonllm_context_precision`` ragas NonLLMContextPrecisionWithReference: average precision of the
                            contexts matching (>= 0.5) some gold document
``string_similarity``       ragas NonLLMStringSimilarity: 1 - normalised Levenshtein(answer, reference)
``bleu``                    ragas BleuScore, unchanged (sacrebleu corpus BLEU over the ". "-split
                            sentences, default options: an answer under 4 tokens scores 0)
``rouge_l``                 ragas RougeScore (rougeL F-measure), unchanged: rouge_score's default
                            tokenizer keeps only ASCII letters and digits, so on Chinese text it
                            scores (near) 0 — use ``rouge_l_zh`` there
``chrf``                    ragas CHRFScore (character n-grams, language-independent)
==========================  ================================================================

Segmented variants (computed here, not by ragas, hence their own names):

==========================  ================================================================
``bleu_zh``                 sentence BLEU (sacrebleu, effective order, ``tokenize="none"``) over
                            jieba tokens (precise mode, lower-cased, punctuation dropped)
``rouge_l_zh``              ROUGE-L F-measure (rouge_score) over the same jieba tokens
==========================  ================================================================

LLM metrics (a judge on any OpenAI-compatible endpoint, see :class:`JudgeConfig`):
``faithfulness`` (ragas Faithfulness), ``answer_relevancy`` (ragas AnswerRelevancy, embeddings from
the lab's embedder or ``models.judge_embedder``), ``llm_context_precision`` (ragas
ContextPrecisionWithReference).

Failures are never dropped: a metric that raises, or returns NaN, leaves NaN in
:attr:`RagasResult.values` and a reason in :attr:`RagasResult.reasons`; :meth:`RagasResult.counts`
reports ``n``, ``n_valid``, ``n_nan`` (the metric said NaN) and ``n_failed`` (it raised or its
inputs were missing), and means are taken over the valid samples only, next to those counts.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from rag_lab.eval.datasets import Dataset
    from rag_lab.eval.records import QueryRecord

__all__ = [
    "ALL_METRICS",
    "JudgeConfig",
    "LLM_METRICS",
    "OFFLINE_METRICS",
    "RagasError",
    "RagasResult",
    "RagasSample",
    "SEGMENTED_METRICS",
    "contains_han",
    "metric_tokens",
    "samples_from_records",
    "score_samples",
]

OFFLINE_METRICS: tuple[str, ...] = (
    "id_context_recall",
    "id_context_precision",
    "nonllm_context_recall",
    "nonllm_context_precision",
    "string_similarity",
    "bleu",
    "rouge_l",
    "chrf",
)
#: jieba-segmented answer metrics (rag_lab's own, for Chinese; see the module docstring)
SEGMENTED_METRICS: tuple[str, ...] = ("bleu_zh", "rouge_l_zh")
LLM_METRICS: tuple[str, ...] = ("faithfulness", "answer_relevancy", "llm_context_precision")
ALL_METRICS: tuple[str, ...] = OFFLINE_METRICS + SEGMENTED_METRICS + LLM_METRICS

_HAN_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
_WORDISH_RE = re.compile(r"[^\W_]", re.UNICODE)


class RagasError(ValueError):
    """ragas cannot be imported, or a judge / metric is misconfigured."""


def contains_han(text: str) -> bool:
    """True when ``text`` holds a Han (Chinese) character."""
    return bool(_HAN_RE.search(text or ""))


def metric_tokens(text: str) -> list[str]:
    """Tokens for BLEU / ROUGE on Chinese text: jieba precise mode, lower-cased, punctuation and
    whitespace pieces dropped."""
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    return [t.lower() for t in (p.strip() for p in jieba.lcut(text or "")) if t and _WORDISH_RE.search(t)]


# --------------------------------------------------------------------------- samples


@dataclass
class RagasSample:
    """One evaluation sample in ragas' field names (``qid`` is ours)."""

    qid: str
    user_input: str
    retrieved_contexts: list[str]
    retrieved_context_ids: list[str]
    reference: str
    reference_context_ids: list[str]
    reference_contexts: list[str]
    response: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def samples_from_records(records: Iterable[QueryRecord], dataset: Dataset) -> list[RagasSample]:
    """Samples from evaluation records: contexts = the final contexts (chunk texts, with their
    document ids), reference = the first reference answer, reference contexts = the gold
    documents' texts, response = the answer without citation tags."""
    from rag_lab.eval.records import answer_text

    texts = {d.id: d.text for d in dataset.corpus}
    out: list[RagasSample] = []
    for r in records:
        out.append(
            RagasSample(
                qid=r.qid,
                user_input=r.question,
                retrieved_contexts=list(r.contexts),
                retrieved_context_ids=list(r.context_doc_ids),
                reference=r.answers[0] if r.answers else "",
                reference_context_ids=list(r.gold_ids),
                reference_contexts=[texts[g] for g in r.gold_ids if g in texts],
                response=answer_text(r.answer),
            )
        )
    return out


# --------------------------------------------------------------------------- results


@dataclass
class RagasResult:
    """Per-sample values (NaN when not scored) with the reason for each NaN."""

    metrics: list[str]
    qids: list[str]
    values: dict[str, list[float]]
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)  # metric -> qid -> reason
    failed: dict[str, list[str]] = field(default_factory=dict)  # metric -> qids that raised / lacked input
    #: the judge's HTTP calls (every attempt): calls, failed, tokens_in, tokens_out, cost_usd, ms
    judge: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        """Mean over the valid (finite) samples; NaN when there is none."""
        out: dict[str, float] = {}
        for m in self.metrics:
            ok = [v for v in self.values[m] if math.isfinite(v)]
            out[m] = math.fsum(ok) / len(ok) if ok else math.nan
        return out

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for m in self.metrics:
            vals = self.values[m]
            n_failed = len(self.failed.get(m, []))
            n_bad = sum(1 for v in vals if not math.isfinite(v))
            out[m] = {"n": len(vals), "n_valid": len(vals) - n_bad, "n_nan": n_bad - n_failed, "n_failed": n_failed}
        return out

    def per_query(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({m: self.values[m] for m in self.metrics}, index=pd.Index(self.qids, name="qid"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "qids": list(self.qids),
            "values": self.values,
            "reasons": self.reasons,
            "failed": self.failed,
            "judge": dict(self.judge),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RagasResult:
        return cls(
            list(data["metrics"]),
            list(data["qids"]),
            {k: [float(x) for x in v] for k, v in data["values"].items()},
            {k: dict(v) for k, v in (data.get("reasons") or {}).items()},
            {k: list(v) for k, v in (data.get("failed") or {}).items()},
            dict(data.get("judge") or {}),
        )


class _MissingInput(ValueError):
    """The sample lacks what the metric needs (counted as failed, with this reason)."""


# --------------------------------------------------------------------------- judge config


_JUDGE_KEYS = {
    "type",
    "model",
    "base_url",
    "api_key",
    "api_key_env",
    "timeout",
    "max_retries",
    "temperature",
    "max_tokens",
    "concurrency",
}


@dataclass
class JudgeConfig:
    """An OpenAI-compatible chat endpoint used as the ragas judge."""

    model: str
    base_url: str
    api_key: str = field(default="", repr=False)  # never in printed forms or logs
    timeout: float = 60.0
    max_retries: int = 0
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 4

    @classmethod
    def from_mapping(cls, cfg: Mapping[str, Any], source: str = "judge") -> JudgeConfig:
        """From ``{"type": "openai", "model", "base_url", "api_key" | "api_key_env", ...}``."""
        if not isinstance(cfg, Mapping):
            raise RagasError(f"{source}: expected a mapping, got {type(cfg).__name__}")
        unknown = sorted(set(cfg) - _JUDGE_KEYS)
        if unknown:
            raise RagasError(
                f"{source}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_JUDGE_KEYS))}"
            )
        if cfg.get("type", "openai") != "openai":
            raise RagasError(f"{source}: type {cfg.get('type')!r} is not supported (only 'openai')")
        for k in ("model", "base_url"):
            if not cfg.get(k):
                raise RagasError(f"{source}: missing required key {k!r}")
        key = str(cfg.get("api_key") or "")
        env = cfg.get("api_key_env")
        if env:
            if key:
                raise RagasError(f"{source}: give either 'api_key' or 'api_key_env', not both")
            key = os.environ.get(str(env), "")
            if not key:
                raise RagasError(f"{source}: environment variable {env!r} (api_key_env) is not set")
        try:
            return cls(
                model=str(cfg["model"]),
                base_url=str(cfg["base_url"]),
                api_key=key or "not-needed",
                timeout=float(cfg.get("timeout", 60.0)),
                max_retries=int(cfg.get("max_retries", 0)),
                temperature=float(cfg.get("temperature", 0.0)),
                max_tokens=int(cfg.get("max_tokens", 1024)),
                concurrency=max(1, int(cfg.get("concurrency", 4))),
            )
        except (TypeError, ValueError) as exc:
            raise RagasError(f"{source}: {exc}") from None


def judge_from_lab_config(config: Mapping[str, Any]) -> JudgeConfig | None:
    """The judge of a lab config's ``models.judge`` section, or ``None`` when there is none."""
    models = (config or {}).get("models") or {}
    cfg = models.get("judge") if isinstance(models, Mapping) else None
    return JudgeConfig.from_mapping(cfg, source="models.judge") if cfg else None


# --------------------------------------------------------------------------- ragas plumbing


def _import_ragas() -> Any:
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


def _embeddings_adapter(embedder: Any) -> Any:
    """Wrap a rag_lab Embedder as ragas' modern embedding interface (for answer relevancy)."""
    from ragas.embeddings.base import BaseRagasEmbedding

    class _LabEmbeddings(BaseRagasEmbedding):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def embed_text(self, text: str, **kwargs: Any) -> list[float]:
            return [float(x) for x in self.inner.embed([text])[0]]

        async def aembed_text(self, text: str, **kwargs: Any) -> list[float]:
            return await asyncio.to_thread(self.embed_text, text)

        def embed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
            return [[float(x) for x in row] for row in self.inner.embed(list(texts))]

        async def aembed_texts(self, texts: list[str], **kwargs: Any) -> list[list[float]]:
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


def _clamp(value: Any) -> float:
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

    async def id_context_recall(s: RagasSample) -> float:
        _need(bool(s.reference_context_ids), "no reference_context_ids (gold documents)")
        return await id_recall.single_turn_ascore(
            SingleTurnSample(
                retrieved_context_ids=list[str | int](s.retrieved_context_ids),
                reference_context_ids=list[str | int](s.reference_context_ids),
            )
        )

    async def id_context_precision(s: RagasSample) -> float:
        _need(bool(s.reference_context_ids), "no reference_context_ids (gold documents)")
        return await id_precision.single_turn_ascore(
            SingleTurnSample(
                retrieved_context_ids=list[str | int](s.retrieved_context_ids),
                reference_context_ids=list[str | int](s.reference_context_ids),
            )
        )

    async def nonllm_context_recall(s: RagasSample) -> float:
        _need(bool(s.reference_contexts), "no reference_contexts (gold document texts)")
        if not s.retrieved_contexts:
            return 0.0  # nothing retrieved: no reference context is matched
        return await nl_recall.single_turn_ascore(
            SingleTurnSample(retrieved_contexts=s.retrieved_contexts, reference_contexts=s.reference_contexts)
        )

    async def nonllm_context_precision(s: RagasSample) -> float:
        _need(bool(s.reference_contexts), "no reference_contexts (gold document texts)")
        _need(bool(s.retrieved_contexts), "no retrieved_contexts: precision is undefined")
        return await nl_precision.single_turn_ascore(
            SingleTurnSample(retrieved_contexts=s.retrieved_contexts, reference_contexts=s.reference_contexts)
        )

    def _answer_pair(s: RagasSample) -> tuple[str, str]:
        _need(bool(s.reference.strip()), "no reference answer")
        return s.reference, s.response

    async def string_similarity(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        return (await similarity.ascore(reference=ref, response=resp)).value

    async def bleu(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        return (await bleu_ragas.ascore(reference=ref, response=resp)).value

    async def rouge_l(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        with _NoRootConfig():
            return (await rouge.ascore(reference=ref, response=resp)).value

    async def bleu_zh(s: RagasSample) -> float:
        ref, resp = _answer_pair(s)
        ref_t, resp_t = " ".join(metric_tokens(ref)), " ".join(metric_tokens(resp))
        if not ref_t or not resp_t:
            return 0.0
        return (await bleu_tokens.ascore(reference=ref_t, response=resp_t)).value

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
        return (await chrf.ascore(reference=ref, response=resp)).value

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


#: calls ragas makes per sample: faithfulness (statements, then verdicts), answer_relevancy
#: (``strictness`` = 3 generated questions), llm_context_precision (one per retrieved context)
JUDGE_CALLS_PER_SAMPLE = {"faithfulness": 2, "answer_relevancy": 3}
#: ragas' instructor client re-asks when a reply does not validate: up to this many attempts per call
JUDGE_MAX_ATTEMPTS = 4


def judge_ledger_transport(ledger: Any, model_id: str) -> Any:
    """An httpx transport that records every HTTP attempt of the judge client in ``ledger``
    (kind ``judge``): tokens from the reply's ``usage`` (0 and flagged when absent), failures with
    the status or exception, connection failures at 0 tokens."""
    import httpx

    from rag_lab.observability.ledger import call_error, never_connected

    class _Recording(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            import json as _json
            import time as _time

            t0 = _time.perf_counter()
            try:
                resp = await self.inner.handle_async_request(request)
                body = await resp.aread()
            except BaseException as exc:
                down = never_connected(exc)
                ledger.record("judge", model_id, 1, 0, 0, (_time.perf_counter() - t0) * 1000, not down, call_error(exc))
                raise
            tin = tout = 0
            estimated = True
            try:
                usage = _json.loads(body).get("usage") or {}
                if isinstance(usage.get("prompt_tokens"), int) and isinstance(usage.get("completion_tokens"), int):
                    tin, tout, estimated = usage["prompt_tokens"], usage["completion_tokens"], False
            except (ValueError, AttributeError):
                pass
            error = "" if resp.status_code < 400 else f"HTTP {resp.status_code}"
            ledger.record("judge", model_id, 1, tin, tout, (_time.perf_counter() - t0) * 1000, estimated, error)
            return httpx.Response(
                resp.status_code, headers=resp.headers, content=body, request=request, extensions=resp.extensions
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    return _Recording()


def judge_summary(ledger: Any) -> dict[str, Any]:
    """Totals of the judge calls recorded in ``ledger``."""
    calls = [c for c in ledger.calls if c.kind == "judge"]
    return {
        "calls": len(calls),
        "failed": sum(1 for c in calls if c.error),
        "tokens_in": sum(c.tokens_in for c in calls),
        "tokens_out": sum(c.tokens_out for c in calls),
        "cost_usd": sum(c.cost for c in calls),
        "ms": round(sum(c.ms for c in calls), 1),
        "first_error": next((c.error for c in calls if c.error), ""),
    }


def project_judge(
    samples: int, metrics: Sequence[str], contexts_per_sample: int, context_tokens: float, judge: JudgeConfig
) -> tuple[int, int, int]:
    """Upper bound of the judge's calls, tokens in and tokens out for ``samples`` samples:
    calls per metric (:data:`JUDGE_CALLS_PER_SAMPLE`, one per context for llm_context_precision)
    times :data:`JUDGE_MAX_ATTEMPTS`; each prompt ≤ the contexts plus 600 tokens of instructions,
    each reply ≤ ``judge.max_tokens``."""
    per_sample = 0
    for m in metrics:
        if m == "llm_context_precision":
            per_sample += max(1, contexts_per_sample)
        elif m in LLM_METRICS:
            per_sample += JUDGE_CALLS_PER_SAMPLE[m]
    calls = samples * per_sample * JUDGE_MAX_ATTEMPTS
    prompt = int(contexts_per_sample * context_tokens) + 600
    return calls, calls * prompt, calls * judge.max_tokens


def add_judge_projection(
    projection: Any,
    lab: Any,
    suites: Sequence[Any],
    judge: JudgeConfig | None,
    ragas_metrics: Sequence[str] = (),
    params: Any = None,
    repeat: int = 1,
) -> Any:
    """Add the judge calls of the LLM metrics (each suite's own metrics, else ``ragas_metrics``)
    to ``projection`` (an :class:`~rag_lab.observability.projection.Projection`) as kind ``judge``,
    priced under the judge's model; returns it."""
    from rag_lab.observability.projection import Projection, corpus_chunk_tokens

    if judge is None:
        return projection
    p = params or lab.params
    for suite in suites:
        metrics = getattr(suite, "ragas_metrics", None)
        metrics = list(ragas_metrics) if metrics is None else metrics
        if not any(m in LLM_METRICS for m in metrics):
            continue
        ds = suite.load()
        calls, tin, tout = project_judge(
            len(ds.queries) * max(1, repeat), metrics, min(p.rerank_top_k, 10), corpus_chunk_tokens(ds), judge
        )
        projection.add(
            Projection(
                0,
                {"judge": calls},
                tin,
                tout,
                lab.prices.cost(judge.model, tin, tout),
                [f"judge calls counted with ragas' retries (up to {JUDGE_MAX_ATTEMPTS} attempts each)"],
            )
        )
    return projection


def _llm_scorers(judge: JudgeConfig, embedder: Any, wanted: Sequence[str], ledger: Any = None) -> dict[str, ScoreFn]:
    """The LLM metrics as closures; the OpenAI client is created here, in the running loop, with a
    transport that records every attempt in ``ledger``."""
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
    llm = llm_factory(judge.model, client=client, temperature=judge.temperature, max_tokens=judge.max_tokens, top_p=1.0)
    out: dict[str, ScoreFn] = {}
    if "faithfulness" in wanted:
        faith = Faithfulness(llm=llm)

        async def faithfulness(s: RagasSample) -> float:
            _need(bool(s.response.strip()), "empty response")
            _need(bool(s.retrieved_contexts), "no retrieved_contexts")
            return (
                await faith.ascore(
                    user_input=s.user_input, response=s.response, retrieved_contexts=s.retrieved_contexts
                )
            ).value

        out["faithfulness"] = faithfulness
    if "answer_relevancy" in wanted:
        if embedder is None:
            raise RagasError("answer_relevancy needs an embedder (the lab's, or models.judge_embedder)")
        relevancy = AnswerRelevancy(llm=llm, embeddings=_embeddings_adapter(embedder))

        async def answer_relevancy(s: RagasSample) -> float:
            _need(bool(s.response.strip()), "empty response")
            return (await relevancy.ascore(user_input=s.user_input, response=s.response)).value

        out["answer_relevancy"] = answer_relevancy
    if "llm_context_precision" in wanted:
        precision = ContextPrecisionWithReference(llm=llm)

        async def llm_context_precision(s: RagasSample) -> float:
            _need(bool(s.reference.strip()), "no reference answer")
            _need(bool(s.retrieved_contexts), "no retrieved_contexts")
            return (
                await precision.ascore(
                    user_input=s.user_input, reference=s.reference, retrieved_contexts=s.retrieved_contexts
                )
            ).value

        out["llm_context_precision"] = llm_context_precision
    return out


def _check_metric_names(metrics: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(metrics))
    unknown = [m for m in names if m not in ALL_METRICS]
    if unknown:
        raise RagasError(f"unknown ragas metric(s) {', '.join(unknown)}; known: {', '.join(ALL_METRICS)}")
    return names


async def ascore_samples(
    samples: Sequence[RagasSample],
    metrics: Sequence[str] = OFFLINE_METRICS,
    judge: JudgeConfig | None = None,
    embedder: Any = None,
    ledger: Any = None,
) -> RagasResult:
    """Score every sample on every metric (see the module docstring for names and policies).

    With LLM metrics every judge HTTP attempt is recorded in ``ledger`` (a fresh
    :class:`~rag_lab.observability.ledger.Ledger` when None) and summed in ``RagasResult.judge``."""
    names = _check_metric_names(metrics)
    llm_wanted = [m for m in names if m in LLM_METRICS]
    if llm_wanted and judge is None:
        raise RagasError(
            f"LLM metric(s) {', '.join(llm_wanted)} need a judge: set models.judge in the lab config "
            "or pass a JudgeConfig"
        )
    _import_ragas()
    scorers = _offline_scorers() if any(m not in LLM_METRICS for m in names) else {}
    if llm_wanted:
        assert judge is not None
        if ledger is None:
            from rag_lab.observability.ledger import Ledger

            ledger = Ledger()
        scorers.update(_llm_scorers(judge, embedder, llm_wanted, ledger))
    values: dict[str, list[float]] = {m: [math.nan] * len(samples) for m in names}
    reasons: dict[str, dict[str, str]] = {m: {} for m in names}
    failed: dict[str, list[str]] = {m: [] for m in names}
    sem = asyncio.Semaphore(judge.concurrency if judge else 1)

    async def one(metric: str, i: int, s: RagasSample) -> None:
        fn = scorers[metric]
        try:
            if metric in LLM_METRICS:
                async with sem:
                    v = _clamp(await fn(s))
            else:
                v = _clamp(await fn(s))
        except _MissingInput as exc:
            reasons[metric][s.qid] = f"missing input: {exc}"
            failed[metric].append(s.qid)
            return
        except Exception as exc:  # a metric or judge failure: NaN, counted, with the reason
            reasons[metric][s.qid] = f"{type(exc).__name__}: {str(exc)[:300]}"
            failed[metric].append(s.qid)
            return
        values[metric][i] = v
        if not math.isfinite(v):
            reasons[metric][s.qid] = "the metric returned NaN"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for metric in names:
            if metric in LLM_METRICS:
                await asyncio.gather(*(one(metric, i, s) for i, s in enumerate(samples)))
            else:
                for i, s in enumerate(samples):
                    await one(metric, i, s)
    for m in names:
        order = {s.qid: i for i, s in enumerate(samples)}
        failed[m].sort(key=lambda q: order.get(q, 0))
    return RagasResult(
        names,
        [s.qid for s in samples],
        values,
        {m: r for m, r in reasons.items() if r},
        {m: f for m, f in failed.items() if f},
        judge_summary(ledger) if llm_wanted else {},
    )


def score_samples(
    samples: Sequence[RagasSample],
    metrics: Sequence[str] = OFFLINE_METRICS,
    judge: JudgeConfig | None = None,
    embedder: Any = None,
    ledger: Any = None,
) -> RagasResult:
    """Synchronous :func:`ascore_samples` (also inside Jupyter's running loop)."""
    from rag_lab.asyncutil import run_sync

    return run_sync(lambda: ascore_samples(samples, metrics, judge, embedder, ledger))
