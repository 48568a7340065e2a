"""ChatManage and PipelineParams back from their JSON view (what a snapshot line stores): unknown
fields are reported as warnings, not errors, so an older or newer capture still loads."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from rag_lab.types.chat_manage import (
    ChatManage,
    History,
    PipelineContext,
    PipelineRequest,
    PipelineState,
    SearchTarget,
    SummaryConfig,
)
from rag_lab.types.diagnostics import diagnostics_from_dict
from rag_lab.types.params import PipelineParams
from rag_lab.types.search_result import SearchResult


def _known(cls: type, data: object, where: str, warnings: list[str] | None) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected an object, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown and warnings is not None:
        warnings.append(f"{where}: ignored unknown field(s) {', '.join(unknown)}")
    return {k: v for k, v in data.items() if k in names}


def params_from_dict(data: object, where: str = "params", warnings: list[str] | None = None) -> PipelineParams:
    """PipelineParams from a dump; fields this version does not know are dropped (and noted)."""
    if not isinstance(data, dict):
        raise TypeError(f"{where}: expected an object, got {type(data).__name__}")
    known = set(PipelineParams.model_fields)
    unknown = sorted(set(data) - known)
    if unknown and warnings is not None:
        warnings.append(f"{where}: ignored unknown params field(s) {', '.join(unknown)}")
    return PipelineParams.from_mapping({k: v for k, v in data.items() if k in known}, source=where)


def _results(data: object, where: str) -> list[SearchResult]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise TypeError(f"{where}: expected a list, got {type(data).__name__}")
    return [SearchResult.from_dict(x) for x in data]


def chat_manage_from_dict(
    data: object, params: PipelineParams | None = None, warnings: list[str] | None = None
) -> ChatManage:
    """Rebuild a ChatManage from :meth:`ChatManage.to_dict` output.

    ``params`` is used when the dict carries none (captures store them once). Values the JSON view
    turned into ``repr`` strings (chat response, graph result, attachments) stay strings.
    """
    if not isinstance(data, dict):
        raise TypeError(f"snapshot: expected an object, got {type(data).__name__}")
    req_d = dict(data.get("request") or {})
    raw_params = req_d.pop("params", None)
    if raw_params is not None:
        p = params_from_dict(raw_params, "request.params", warnings)
    else:
        p = params if params is not None else PipelineParams()
    summary = SummaryConfig(
        **_known(SummaryConfig, req_d.pop("summary_config", None) or {}, "request.summary_config", warnings)
    )
    targets = [
        SearchTarget(**_known(SearchTarget, t, f"request.search_targets[{i}]", warnings))
        for i, t in enumerate(req_d.pop("search_targets", None) or [])
    ]
    req = PipelineRequest(
        **_known(PipelineRequest, req_d, "request", warnings), summary_config=summary, search_targets=targets, params=p
    )
    st_d = dict(data.get("state") or {})
    history = []
    for i, h in enumerate(st_d.pop("history", None) or []):
        hd = _known(History, h, f"state.history[{i}]", warnings)
        hd["knowledge_references"] = _results(
            hd.get("knowledge_references"), f"state.history[{i}].knowledge_references"
        )
        history.append(History(**hd))
    lists: dict[str, Any] = {
        name: _results(st_d.pop(name, None), f"state.{name}")
        for name in ("search_result", "rerank_result", "merge_result")
    }
    diagnostics = diagnostics_from_dict(st_d.pop("diagnostics", None) or {})
    state = PipelineState(
        **_known(PipelineState, st_d, "state", warnings), history=history, diagnostics=diagnostics, **lists
    )
    ctx_d = data.get("context") or {}
    ctx = PipelineContext(
        message_id=str(ctx_d.get("message_id", "")), user_message_id=str(ctx_d.get("user_message_id", ""))
    )
    return ChatManage(request=req, state=state, context=ctx)
