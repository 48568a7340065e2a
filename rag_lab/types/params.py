"""PipelineParams: every constant of the spec and the seed as one typed, validated object.

Each field has its default (the value the spec or seed gives) and its valid range. Plugins read
these fields instead of literals, which is what lets sweeps and notebooks tune the pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ParamsError(ValueError):
    """A params file or override is invalid. The message names the source, field and value."""


def _f(default: Any, lo: float | None = None, hi: float | None = None, doc: str = "", section: str = "") -> Any:
    extra = {"section": section} if section else None
    kwargs: dict[str, Any] = {"description": doc, "json_schema_extra": extra}
    if lo is not None:
        kwargs["ge"] = lo
    if hi is not None:
        kwargs["le"] = hi
    return Field(default, **kwargs)


class PipelineParams(BaseModel):
    """All tunables. Defaults follow spec §11.1 (conversation config) and the seed's constants."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    # --- request defaults (§11.1) -------------------------------------------------------------
    max_rounds: int = _f(5, 0, 100, "History rounds to load; 0 disables history", "§4.1")
    embedding_top_k: int = _f(30, 0, 500, "Match count per retrieval call", "§4.4.1")
    vector_threshold: float = _f(0.2, 0.0, 1.0, "Minimum vector similarity", "§5")
    keyword_threshold: float = _f(
        0.3, 0.0, 1000.0, "Keyword threshold (not applied by the BM25 engine, App. B.19)", "§5"
    )
    rerank_top_k: int = _f(30, 0, 500, "MMR size and final top-K cap", "§4.6.1")
    rerank_threshold: float = _f(0.3, -10.0, 10.0, "Minimum rerank relevance", "§4.6.1")
    enable_rewrite: bool = _f(True, doc="Run query understanding (rewrite + intent)", section="§4.3")
    enable_query_expansion: bool = _f(True, doc="Keyword-only expansion when recall is low", section="§4.5")
    citation_enabled: bool = _f(True, doc="Inline <ref/> citations", section="§7.1")
    fallback_strategy: Literal["fixed", "model"] = _f("model", doc="Answer when nothing is found", section="§3.6")
    fallback_response: str = _f(
        "Sorry, I am unable to answer this question.", doc="Fixed fallback text", section="§3.6"
    )
    model_failure_answer: Literal["references", "fixed"] = _f(
        "references", doc="Answer when the chat model fails: the references found, or the fixed text", section="§3.6"
    )
    model_failure_deadline_s: float = _f(
        30.0, 0.0, 600.0, "Longest wait for a failing answer stream to recover before the fallback answer", "§3.6"
    )
    faq_priority_enabled: bool = _f(False, doc="FAQ first in context and FAQ score boost", section="§4.11")
    faq_direct_answer_threshold: float = _f(0.9, 0.0, 10.0, "FAQ 'exact' hint threshold", "§4.11")
    faq_score_boost: float = _f(1.2, 0.0, 10.0, "FAQ score multiplier when > 1 (not capped)", "§4.6.1")
    data_analysis_enabled: bool = _f(False, doc="Opt-in DATA_ANALYSIS stage", section="§4.10")
    web_search_enabled: bool = _f(False, doc="Web search alongside KB search", section="§4.4.2")
    web_fetch_enabled: bool = _f(False, doc="Fetch full pages of top web results", section="§4.7")
    web_search_max_results: int = _f(10, 1, 100, "Web results per query", "§4.4.2")
    web_fetch_top_n: int = _f(3, 1, 50, "Web results fetched in WEB_FETCH", "§4.7")
    temperature: float = _f(0.3, 0.0, 2.0, "Answer temperature (summary config)", "§4.12.1")
    max_completion_tokens: int = _f(2048, 1, 1_000_000, "Answer token cap", "§4.12.1")

    # --- hybrid search (§5, §1.10) -----------------------------------------------------------
    default_retrieval_top_k: int = _f(50, 1, 1000, "Match count when a call asks for <= 0", "§5.1")
    over_recall_factor: int = _f(5, 1, 100, "Pool = max(count*factor, min) * n_kbs", "§5.6")
    over_recall_min: int = _f(50, 1, 5000, "Minimum per-KB over-recall pool", "§5.6")
    retrieval_pool_max: int = _f(500, 1, 100_000, "Over-recall pool cap", "§5.6")
    rrf_k: int = _f(60, 1, 100_000, "Reciprocal-rank-fusion k", "§5.12")
    rrf_vector_weight: float = _f(0.7, 0.0, 1.0, "RRF weight of the vector list", "§1.10")
    rrf_keyword_weight: float = _f(0.3, 0.0, 1.0, "RRF weight of the keyword list", "§1.10")
    faq_iteration_start_factor: int = _f(3, 1, 100, "FAQ iterative retrieval starts at match_count × this", "§5.13")
    faq_iteration_max_rounds: int = _f(5, 1, 100, "FAQ iterative retrieval rounds at most", "§5.13")
    store_fanout_concurrency: int = _f(4, 1, 64, "Concurrent store groups", "§5.9")
    store_fanout_timeout_s: float = _f(30.0, 0.1, 3600.0, "Per-group retrieval timeout", "§5.9")
    image_recall_top_k_factor: float = _f(
        1.5, 1.0, 10.0, "Image recall top-k = ceil(pool × this), capped at the pool max", "seed §5 step 5"
    )
    image_vector_threshold: float = _f(
        0.1, 0.0, 1.0, "Image hits keep score >= min(vector threshold, this)", "seed §5 step 5"
    )
    image_recall_max_requests: int = _f(
        4, 1, 20, "Image recall requests at most (first + refills doubling top-k)", "seed §5 step 5"
    )

    # --- query expansion (§4.5) --------------------------------------------------------------
    query_expansion_max_variants: int = _f(5, 0, 50, "Variants generated without an LLM", "§4.5")
    query_expansion_keyword_factor: float = _f(0.8, 0.0, 1.0, "Keyword threshold multiplier", "§4.5")
    query_expansion_top_k_factor: int = _f(2, 1, 20, "top-k = max(embedding_top_k, rerank_top_k) * factor", "§4.5")
    query_expansion_concurrency: int = _f(16, 1, 256, "Concurrent expansion searches", "§4.5")

    # --- rerank (§4.6, seed) -----------------------------------------------------------------
    rerank_fallback_min_score: float = _f(
        0.15, 0.0, 1.0, "Top-1 kept when all fall below threshold and it is >= this", "§4.6.1"
    )
    rerank_degrade_factor: float = _f(0.7, 0.0, 1.0, "Retry threshold = threshold * factor", "§4.6.1")
    rerank_degrade_floor: float = _f(
        0.3, 0.0, 1.0, "Retry only when threshold > floor; retry threshold >= floor", "§4.6.1"
    )
    rerank_max_candidates: int = _f(200, 1, 10_000, "Candidates sent to the reranker, by search score", "seed")
    rerank_timeout_s: float = _f(60.0, 0.1, 3600.0, "Rerank model call timeout (→ raw search order)", "seed")
    search_timeout_s: float = _f(30.0, 0.1, 3600.0, "One HybridSearch call (→ recorded as that call's error)", "§4.4.1")
    query_understand_timeout_s: float = _f(
        30.0, 0.1, 3600.0, "Rewrite/intent call (→ original query, empty intent)", "§4.3.4"
    )
    chat_stream_idle_timeout_s: float = _f(
        120.0, 0.1, 3600.0, "Longest wait for the next answer chunk (→ error event)", "§4.12.3"
    )
    composite_model_weight: float = _f(0.6, 0.0, 1.0, "Composite: weight of the model score", "§4.6.2")
    composite_base_weight: float = _f(0.3, 0.0, 1.0, "Composite: weight of the search score", "§4.6.2")
    composite_source_weight: float = _f(0.1, 0.0, 1.0, "Composite: weight of the source weight", "§4.6.2")
    web_source_weight: float = _f(0.95, 0.0, 1.0, "Source weight of web results (others 1.0)", "§4.6.2")
    mmr_lambda: float = _f(0.7, 0.0, 1.0, "MMR relevance/redundancy trade-off", "§6.8")
    image_keep_min_score: float = _f(
        0.25, 0.0, 1.0, "Image hits kept by vector score >= max(vector threshold, this)", "seed"
    )
    image_max_kept: int = _f(2, 0, 100, "Image hits kept by vector score at most", "seed")
    image_ocr_text_min_chars: int = _f(200, 0, 100_000, "OCR at least this long is reranked as text", "seed")
    wiki_boost_factor: float = _f(1.3, 1.0, 10.0, "Wiki page score multiplier", "§4.6.6")
    memory_affinity_max_boost: float = _f(0.15, 0.0, 1.0, "Max affinity boost (x1.15)", "§4.6.5")
    memory_affinity_min_hits: int = _f(2, 1, 1000, "Citations needed before boosting", "§4.6.5")
    memory_affinity_saturation_hits: int = _f(8, 1, 1000, "Citations at which the boost saturates", "§4.6.5")
    memory_affinity_max_ids: int = _f(200, 1, 100_000, "Documents looked up at most", "§4.6.5")

    # --- data analysis (§4.10) ---------------------------------------------------------------
    data_analysis_temperature: float = _f(0.1, 0.0, 2.0, "SQL-writing call temperature", "§4.10")
    data_analysis_max_rows: int = _f(50, 1, 10_000, "SQL result rows shown to the model", "§4.10")
    data_analysis_timeout_s: float = _f(30.0, 0.1, 3600.0, "DuckDB load/query timeout", "§4.10")

    # --- context assembly (§4.11, seed) ---------------------------------------------------------
    context_images_max: int = _f(3, 0, 100, "Retrieved images attached for a vision chat model", "seed")
    context_image_max_bytes: int = _f(5 * 1024 * 1024, 1, 1 << 30, "Largest retrieved image attached (bytes)", "seed")

    # --- merge (§4.8, §6) --------------------------------------------------------------------
    history_overlap_threshold: float = _f(
        0.3, 0.0, 1.0, "History ref kept when |q∩c|/min(|q|,|c|) >= this (seed)", "§4.8.1"
    )
    history_score_factor: float = _f(0.6, 0.0, 1.0, "History reference score multiplier", "§4.8.1")
    history_max_refs: int = _f(3, 0, 100, "History references injected at most", "§4.8.1")
    expansion_min_len: int = _f(350, 0, 100_000, "Text chunks shorter than this (runes) get neighbours", "§4.8.5")
    expansion_max_len: int = _f(850, 1, 1_000_000, "Neighbour expansion cap (runes)", "§4.8.5")
    overlap_threshold: float = _f(0.85, 0.0, 1.0, "Token-overlap ratio that removes a partial overlap", "§6.6")
    join_min_overlap: int = _f(12, 1, 10_000, "Minimum rune overlap joined without separator", "§6.12")
    join_span: int = _f(400, 1, 100_000, "Maximum rune overlap searched when joining", "§6.12")
    append_head_slack: int = _f(320, 0, 100_000, "Synthetic prefix (runes) skipped when appending by overlap", "§6.14")

    # --- web (§4.4.2, §4.7, §7.2) ------------------------------------------------------------
    web_result_score: float = _f(0.6, 0.0, 1.0, "Search score given to web results", "§4.4.2")
    web_fetch_max_bytes: int = _f(8000, 1, 10_000_000, "Fetched page text cap (UTF-8 bytes)", "§4.7")
    web_snippet_max_runes: int = _f(500, 1, 1_000_000, "Web text the model sees (runes)", "§7.2")

    # --- entities (§4.3.7, §4.4.3) -------------------------------------------------------------
    entity_search_max_chunks: int = _f(30, 0, 10_000, "Graph chunks loaded at most", "seed")
    entity_hit_score: float = _f(0.0, 0.0, 1.0, "Search score of graph hits (the reranker scores them)", "seed")
    entity_extract_temperature: float = _f(0.3, 0.0, 2.0, "Entity extraction temperature", "§4.3.7")
    entity_extract_max_tokens: int = _f(4096, 1, 100_000, "Entity extraction token cap", "§4.3.7")

    # --- query understanding (§4.3) ----------------------------------------------------------
    query_understand_temperature: float = _f(0.3, 0.0, 2.0, "Rewrite call temperature", "§4.3.4")
    query_understand_max_tokens: int = _f(150, 1, 100_000, "Rewrite call token cap (text)", "§4.3.4")
    query_understand_max_tokens_images: int = _f(
        2048, 1, 100_000, "Rewrite call token cap with images (seed)", "§4.3.4"
    )
    history_fetch_extra: int = _f(10, 0, 1000, "History fetch = max_rounds*2 + this", "§4.1")
    query_understand_history_fetch: int = _f(
        20, 0, 1000, "Messages read when rewriting without loaded history", "§4.3.2"
    )

    # --- streams and SSE (§8, §11.4) --------------------------------------------------------------
    sse_poll_interval_ms: int = _f(100, 10, 10_000, "SSE loop polls the stream store this often", "§8.3")
    stop_watch_interval_ms: int = _f(300, 10, 60_000, "Stop watcher poll interval", "§8.5")
    stop_watch_max_s: float = _f(7200.0, 1.0, 86_400.0, "Stop watcher gives up after this long", "§8.5")
    stream_ttl_s: int = _f(3600, 1, 30 * 86_400, "Redis stream key TTL", "§8.1")

    # --- sessions and memory (§9) ---------------------------------------------------------------
    session_title_max_runes: int = _f(100, 1, 10_000, "Generated session title cap", "§9.2")
    session_title_temperature: float = _f(0.3, 0.0, 2.0, "Session title call temperature", "§9.2")
    memory_explicit_importance: int = _f(4, 1, 5, "Importance of a 'remember …' fact", "§9.1")

    # --- fallback (§3.6) ---------------------------------------------------------------------
    fallback_listing_max_docs: int = _f(50, 0, 100_000, "Documents listed in the model fallback prompt", "§3.6")
    fallback_description_max_runes: int = _f(100, 0, 100_000, "Description cut in that listing", "§3.6")

    # ----------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, source: str = "<params>") -> PipelineParams:
        data = dict(data or {})
        try:
            return cls(**data)
        except ValidationError as exc:
            raise ParamsError(_format_errors(exc, data, source)) from None

    @classmethod
    def from_yaml(cls, path: str | Path, key: str | None = "params") -> PipelineParams:
        """Load from a YAML file; ``key`` selects a sub-mapping (``params:`` in ``lab.yaml``)."""
        p = Path(path)
        try:
            raw = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except FileNotFoundError:
            raise ParamsError(f"{p}: file not found") from None
        except yaml.YAMLError as exc:
            raise ParamsError(f"{p}: invalid YAML: {exc}") from None
        if key is not None and isinstance(raw, dict) and key in raw:
            raw = raw[key] or {}
        if not isinstance(raw, dict):
            raise ParamsError(f"{p}: expected a mapping of params, got {type(raw).__name__}")
        return cls.from_mapping(raw, source=str(p))

    def with_changes(self, **changes: object) -> PipelineParams:
        """A validated copy with some fields changed."""
        merged = self.model_dump()
        merged.update(changes)
        return type(self).from_mapping(merged, source="with_changes")

    def to_yaml(self) -> str:
        return str(yaml.safe_dump({"params": self.model_dump()}, sort_keys=False, allow_unicode=True))

    @classmethod
    def field_ranges(cls) -> dict[str, tuple[float | None, float | None]]:
        """``{field: (min, max)}`` for numeric fields, for sweeps and widgets."""
        out: dict[str, tuple[float | None, float | None]] = {}
        for name, info in cls.model_fields.items():
            lo = hi = None
            for m in info.metadata:
                lo = getattr(m, "ge", lo)
                hi = getattr(m, "le", hi)
            if lo is not None or hi is not None:
                out[name] = (lo, hi)
        return out


def suggest_fields(name: str, n: int = 3) -> list[str]:
    """Closest PipelineParams field names to ``name`` (typos, a missing ``rerank_`` prefix)."""
    import difflib

    fields = list(PipelineParams.model_fields)
    close = difflib.get_close_matches(name, fields, n=n, cutoff=0.6)
    if not close:  # a fragment: "lambda" → mmr_lambda
        close = [f for f in fields if name and name.lower() in f][:n]
    return close


def did_you_mean(name: str) -> str:
    """``"; did you mean 'mmr_lambda'?"`` for an unknown field name, or ``""``."""
    hint = suggest_fields(name)
    return f"; did you mean {' or '.join(repr(h) for h in hint)}?" if hint else ""


def _format_errors(exc: ValidationError, data: Mapping[str, object], source: str) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err.get("loc", ())) or "<root>"
        value = data.get(str(err["loc"][0])) if err.get("loc") else None
        if err.get("type") == "extra_forbidden":
            lines.append(f"{source}: unknown field '{loc}' (value {value!r}){did_you_mean(loc)}")
        else:
            lines.append(f"{source}: field '{loc}' = {value!r}: {err.get('msg')}")
    return "; ".join(lines)
