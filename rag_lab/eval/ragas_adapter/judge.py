"""The LLM judge: its configuration (:class:`JudgeConfig`, from a lab config's ``models.judge``),
the httpx transport that records every judge HTTP attempt in a ledger, the totals of those calls,
and the projection of the judge calls a run will make."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from rag_lab.eval.ragas_adapter.samples import LLM_METRICS, RagasError

if TYPE_CHECKING:  # pragma: no cover
    import httpx

    from rag_lab.eval.suite_spec import SuiteSpec
    from rag_lab.lab.lab import Lab
    from rag_lab.observability.ledger import Ledger
    from rag_lab.observability.projection import Projection
    from rag_lab.types.params import PipelineParams

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
    "seed",
    "structured_output",
}
#: ``models.judge.structured_output``: how replies are constrained (see :mod:`.schema_llm`)
STRUCTURED_OUTPUTS = ("auto", "json_schema", "json_object")


@dataclass
class JudgeConfig:
    """An OpenAI-compatible chat endpoint used as the ragas judge: temperature 0 and a fixed
    ``seed`` by default, so a server that honours them (llama-server) gives the same verdicts
    twice; ``structured_output`` one of :data:`STRUCTURED_OUTPUTS`."""

    model: str
    base_url: str
    api_key: str = field(default="", repr=False)  # never in printed forms or logs
    timeout: float = 60.0
    max_retries: int = 0
    temperature: float = 0.0
    max_tokens: int = 1024
    concurrency: int = 4
    seed: int | None = 0
    structured_output: str = "auto"

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
        mode = str(cfg.get("structured_output", "auto"))
        if mode not in STRUCTURED_OUTPUTS:
            raise RagasError(f"{source}: structured_output {mode!r} is not one of {', '.join(STRUCTURED_OUTPUTS)}")
        seed = cfg.get("seed", 0)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise RagasError(f"{source}: seed {seed!r} is not an integer (or null for none)")
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
                seed=seed,
                structured_output=mode,
            )
        except (TypeError, ValueError) as exc:
            raise RagasError(f"{source}: {exc}") from None


def resolve_structured_output(judge: JudgeConfig) -> str:
    """``json_schema`` or ``json_object``: the judge's ``structured_output``, ``auto`` resolved by
    probing the endpoint: ``json_schema`` for a llama-server (it answers ``/props``,
    :func:`rag_lab.models.endpoint_props.server_props`), else ``json_object``."""
    if judge.structured_output != "auto":
        return judge.structured_output
    from rag_lab.models.endpoint_props import server_props

    return "json_schema" if server_props(judge.base_url) is not None else "json_object"


def judge_from_lab_config(config: Mapping[str, Any]) -> JudgeConfig | None:
    """The judge of a lab config's ``models.judge`` section, or ``None`` when there is none."""
    models = (config or {}).get("models") or {}
    cfg = models.get("judge") if isinstance(models, Mapping) else None
    return JudgeConfig.from_mapping(cfg, source="models.judge") if cfg else None


#: calls ragas makes per sample: faithfulness (statements, then verdicts), answer_relevancy
#: (``strictness`` = 3 generated questions), llm_context_precision (one per retrieved context)
JUDGE_CALLS_PER_SAMPLE = {"faithfulness": 2, "answer_relevancy": 3}
#: ragas' instructor client re-asks when a reply does not validate: up to this many attempts per call
JUDGE_MAX_ATTEMPTS = 4


def judge_ledger_transport(ledger: Ledger, model_id: str, *, keepalive: bool = True) -> httpx.AsyncBaseTransport:
    """An httpx transport that records every HTTP attempt of the judge client in ``ledger``
    (kind ``judge``): tokens from the reply's ``usage`` (0 and flagged when absent), failures with
    the status or exception, connection failures at 0 tokens. ``keepalive=False`` pools no
    connection, for a client that several event loops use one after another (ragas' test-set
    pipeline runs each stage in a loop of its own; a pooled connection dies with its loop)."""
    import httpx

    from rag_lab.observability.ledger import call_error, never_connected

    class _Recording(httpx.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = (
                httpx.AsyncHTTPTransport()
                if keepalive
                else httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
            )

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


class JudgeSummary(TypedDict):
    """Totals of the judge calls of a ledger (:func:`judge_summary`)."""

    calls: int
    failed: int
    tokens_in: int
    tokens_out: int
    cost_usd: float
    ms: float
    first_error: str


def judge_summary(ledger: Ledger) -> JudgeSummary:
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
    samples: int,
    metrics: Sequence[str],
    contexts_per_sample: int,
    context_tokens: float,
    judge: JudgeConfig,
    attempts: int = JUDGE_MAX_ATTEMPTS,
) -> tuple[int, int, int]:
    """Calls, tokens in and tokens out of the judge for ``samples`` samples: the calls ragas makes
    per metric (:data:`JUDGE_CALLS_PER_SAMPLE`, one per context for llm_context_precision) times
    ``attempts`` per call (1 with ``json_schema`` output, asked once; up to
    :data:`JUDGE_MAX_ATTEMPTS` with ragas' instructor client, which re-asks when a reply does not
    validate); each prompt ≤ the contexts plus 600 tokens of instructions, each reply ≤
    ``judge.max_tokens``."""
    per_sample = 0
    for m in metrics:
        if m == "llm_context_precision":
            per_sample += max(1, contexts_per_sample)
        elif m in LLM_METRICS:
            per_sample += JUDGE_CALLS_PER_SAMPLE[m]
    calls = samples * per_sample * max(1, attempts)
    prompt = int(contexts_per_sample * context_tokens) + 600
    return calls, calls * prompt, calls * judge.max_tokens


def add_judge_projection(
    projection: Projection,
    lab: Lab,
    suites: Sequence[SuiteSpec],
    judge: JudgeConfig | None,
    ragas_metrics: Sequence[str] = (),
    params: PipelineParams | None = None,
    repeat: int = 1,
) -> Projection:
    """Add the judge calls of the LLM metrics (each suite's own metrics, else ``ragas_metrics``)
    to ``projection`` (an :class:`~rag_lab.observability.projection.Projection`) as kind ``judge``,
    priced under the judge's model; returns it."""
    from rag_lab.observability.projection import Projection, corpus_chunk_tokens

    if judge is None:
        return projection
    schema = resolve_structured_output(judge) == "json_schema"
    attempts = 1 if schema else JUDGE_MAX_ATTEMPTS
    note = (
        "judge calls: json_schema output, each asked once"
        if schema
        else f"judge calls counted with ragas' re-asks (up to {JUDGE_MAX_ATTEMPTS} attempts each)"
    )
    p = params or lab.params
    for suite in suites:
        metrics = getattr(suite, "ragas_metrics", None)
        metrics = list(ragas_metrics) if metrics is None else metrics
        if not any(m in LLM_METRICS for m in metrics):
            continue
        ds = suite.load()
        calls, tin, tout = project_judge(
            len(ds.queries) * max(1, repeat),
            metrics,
            min(p.rerank_top_k, 10),
            corpus_chunk_tokens(ds),
            judge,
            attempts,
        )
        projection.add(
            Projection(
                0,
                {"judge": calls},
                tin,
                tout,
                lab.prices.cost(judge.model, tin, tout),
                [note],
            )
        )
    return projection
