"""OpenTelemetry spans around the pipeline: ``pipeline.request`` for a question, one
``pipeline.<event_type>`` per stage, and ``pipeline.chat_completion_stream.lifetime`` for the
answer stream (the stage's own span ends when its handler returns, as in the seed).

Tracing is off by default: :class:`NullTracer` makes no OpenTelemetry call at all, so a run
without tracing pays one attribute lookup per stage. ``build_tracer({"exporter": "console" |
"otlp" | "memory" | "none", ...})`` turns it on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.intent import needs_retrieval

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span


class _NullSpan:
    def set_attribute(self, key: str, value: object) -> None:  # noqa: D401 - protocol
        pass

    def set_attributes(self, attrs: Mapping[str, object]) -> None:
        pass

    def record_error(self, kind: str, message: str) -> None:
        pass


NULL_SPAN = _NullSpan()


class NullTracer:
    """Tracing off."""

    enabled = False

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, object] | None = None) -> Iterator[_NullSpan]:
        yield NULL_SPAN

    def start_span(self, name: str, attributes: Mapping[str, object] | None = None) -> None:
        return None

    def end_span(self, span: object, attributes: Mapping[str, object] | None = None, error: str = "") -> None:
        pass


class _OtelSpan:
    def __init__(self, span: Span) -> None:
        self._span = span

    def set_attribute(self, key: str, value: object) -> None:
        if value is not None:
            self._span.set_attribute(key, _attr(value))

    def set_attributes(self, attrs: Mapping[str, object]) -> None:
        for k, v in attrs.items():
            self.set_attribute(k, v)

    def record_error(self, kind: str, message: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.kind", kind)
        self._span.set_status(Status(StatusCode.ERROR, message))


def _attr(value: object) -> bool | int | float | str | list[bool | int | float | str]:
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(x, (bool, int, float, str)) for x in value):
        return list(value)
    return str(value)


class OtelTracer:
    """Spans through an OpenTelemetry tracer provider (its exporter decides where they go)."""

    enabled = True

    def __init__(self, provider: TracerProvider, exporter: SpanExporter | None = None) -> None:
        self.provider = provider
        self.exporter = exporter  # kept for the in-memory exporter used by tests
        self._tracer = provider.get_tracer("rag_lab")

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, object] | None = None) -> Iterator[_OtelSpan]:
        with self._tracer.start_as_current_span(name, record_exception=False, set_status_on_exception=False) as s:
            wrapped = _OtelSpan(s)
            if attributes:
                wrapped.set_attributes(attributes)
            yield wrapped

    def start_span(self, name: str, attributes: Mapping[str, object] | None = None) -> Span:
        """A span that outlives the current block (the answer stream); end it with end_span."""
        s = self._tracer.start_span(name)
        if attributes:
            _OtelSpan(s).set_attributes(attributes)
        return s

    def end_span(self, span: Any, attributes: Mapping[str, object] | None = None, error: str = "") -> None:
        if span is None:
            return
        w = _OtelSpan(span)
        if attributes:
            w.set_attributes(attributes)
        if error:
            w.record_error("stream_error", error)
        span.end()

    def shutdown(self) -> None:
        self.provider.shutdown()


def build_tracer(cfg: Mapping[str, Any] | None) -> NullTracer | OtelTracer:
    """``{"exporter": "none" | "console" | "memory" | "otlp", "endpoint": ..., "service_name": ...}``."""
    cfg = dict(cfg or {})
    kind = str(cfg.get("exporter", "none")).lower()
    if kind in ("none", "", "off"):
        return NullTracer()
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ValueError(
            f"tracing exporter '{kind}' needs opentelemetry-sdk: pip install 'rag_lab[tracing]' ({exc})"
        ) from None
    provider = TracerProvider(resource=Resource.create({"service.name": str(cfg.get("service_name", "rag_lab"))}))
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        exporter: SpanExporter = ConsoleSpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif kind == "memory":
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif kind == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError as exc:
            raise ValueError(f"tracing exporter 'otlp' needs opentelemetry-exporter-otlp-proto-http ({exc})") from None
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        endpoint = cfg.get("endpoint") or "http://127.0.0.1:4318/v1/traces"
        exporter = OTLPSpanExporter(endpoint=str(endpoint), headers=dict(cfg.get("headers") or {}))
        provider.add_span_processor(BatchSpanProcessor(exporter))
    else:
        raise ValueError(f"tracing.exporter is '{kind}'; allowed: none, console, memory, otlp")
    return OtelTracer(provider, exporter)


def stage_attributes_before(chat: ChatManage, event: str) -> dict[str, object]:
    """What a stage is about to work on: inputs, thresholds, top-k, model ids."""
    r, s = chat.request, chat.state
    attrs: dict[str, object] = {"pipeline.stage": event, "pipeline.needs_retrieval": needs_retrieval(chat)}
    if event in ("chunk_search_parallel", "chunk_search"):
        attrs.update(
            {
                "retrieval.vector_threshold": r.vector_threshold,
                "retrieval.keyword_threshold": r.keyword_threshold,
                "retrieval.embedding_top_k": r.embedding_top_k,
                "retrieval.targets": len(r.search_targets),
            }
        )
    elif event == "chunk_rerank":
        attrs.update(
            {
                "results.in": len(s.search_result),
                "rerank.model_id": r.rerank_model_id,
                "rerank.threshold": r.rerank_threshold,
                "rerank.top_k": r.rerank_top_k,
                "rerank.mmr_lambda": r.params.mmr_lambda,
            }
        )
    elif event == "chunk_merge":
        attrs["results.in"] = len(s.rerank_result or s.search_result)
    elif event == "filter_top_k":
        attrs.update({"results.in": len(s.merge_result or s.rerank_result or s.search_result), "top_k": r.rerank_top_k})
    elif event in ("chat_completion_stream", "chat_completion", "query_understand"):
        attrs["chat.model_id"] = r.chat_model_id
    return attrs


def stage_attributes_after(chat: ChatManage, event: str) -> dict[str, object]:
    s = chat.state
    out = {
        "chunk_search_parallel": len(s.search_result),
        "chunk_search": len(s.search_result),
        "chunk_rerank": len(s.rerank_result),
        "chunk_merge": len(s.merge_result),
        "filter_top_k": len(s.merge_result or s.rerank_result or s.search_result),
        "into_chat_message": len(s.merge_result),
    }
    attrs: dict[str, object] = {}
    if event in out:
        attrs["results.out"] = out[event]
    if event == "query_understand":
        attrs.update({"query.rewritten": s.rewrite_query != chat.request.query, "query.intent": s.intent})
    if event == "chunk_rerank":
        from rag_lab.types.diagnostics import RerankDiagnostics

        raw = s.diagnostics.get("rerank")
        diag = RerankDiagnostics.from_dict(raw) if raw is not None else RerankDiagnostics()
        if diag.outcome:
            attrs["rerank.outcome"] = diag.outcome
        if diag.threshold_used is not None:
            attrs["rerank.threshold_used"] = diag.threshold_used
    return attrs
