"""Progress windows: the UI timeline's query_understand and knowledge_search pseudo-tools (§3.5)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from rag_lab.pipeline.plugin import ErrSearchNothing, PluginError
from rag_lab.stream.bus import BusEventType
from rag_lab.types.chat_manage import ChatManage, has_knowledge_retrieval_scope
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval

E = EventType
_RETRIEVAL_STAGES = {E.CHUNK_SEARCH_PARALLEL, E.CHUNK_RERANK, E.CHUNK_MERGE, E.FILTER_TOP_K}


def is_consolidated_retrieval_stage(stage: EventType, chat: ChatManage) -> bool:
    if stage in _RETRIEVAL_STAGES:
        return needs_retrieval(chat)
    if stage == E.WEB_FETCH:
        return bool(chat.request.web_search_enabled)
    if stage == E.DATA_ANALYSIS:
        return bool(chat.request.data_analysis_enabled) and needs_retrieval(chat)
    return False


def should_close_retrieval(stage: EventType, last: EventType | None, err: PluginError | None) -> bool:
    return stage == last or err is not None


def search_source(chat: ChatManage) -> str:
    r = chat.request
    kb = has_knowledge_retrieval_scope(r.search_targets, r.knowledge_base_ids, r.knowledge_ids)
    web = bool(r.web_search_enabled)
    if kb and web:
        return "mixed"
    return "web" if web else "knowledge"


#: the progress windows' texts per session language (the upstream product shows the Chinese ones)
PROGRESS_TEXTS: dict[str, dict[str, str]] = {
    "en": {
        "query_done": "Question understood",
        "found": "Found {count} relevant passage(s)",
        "candidates": "{candidate} candidate(s) found, none relevant enough to answer from",
        "none": "No relevant content found",
    },
    "zh": {
        "query_done": "已完成问题理解",
        "found": "检索到 {count} 条相关内容",
        "candidates": "命中 {candidate} 条候选，相关性不足，未用于回答",
        "none": "未检索到相关内容",
    },
}
_ZH_NAMES = ("zh", "chinese", "中文", "汉语", "漢語", "简体", "繁體", "mandarin", "cantonese")


def progress_text(language: str, key: str, **values: object) -> str:
    """A progress text in the session's ``language`` (a name like "English" or "Chinese", or a
    code like "zh-CN"); languages without a table get English."""
    lang = "zh" if str(language or "").strip().lower().startswith(_ZH_NAMES) else "en"
    return PROGRESS_TEXTS[lang][key].format(**values)


@dataclass(slots=True)
class _Window:
    tool_name: str
    call_id: str
    started: float


class ProgressTracker:
    """Opens and closes the two windows on the request's bus; every open window gets closed."""

    def __init__(self, chat: ChatManage) -> None:
        self.chat = chat
        self.query_window: _Window | None = None
        self.retrieval_window: _Window | None = None

    def _emit(self, event_type: str, data: dict[str, object]) -> None:
        bus = self.chat.context.event_bus
        if bus is not None:
            bus.emit(event_type, data)

    def _open(self, tool: str, args: dict[str, object]) -> _Window:
        w = _Window(tool, str(uuid.uuid4()), time.time())
        self._emit(
            BusEventType.TOOL_CALL, {"tool_call_id": w.call_id, "tool_name": tool, "arguments": args, "iteration": 0}
        )
        return w

    def _close(self, w: _Window, success: bool, output: str, error: str, data: Mapping[str, object]) -> None:
        self._emit(
            BusEventType.TOOL_RESULT,
            {
                "tool_call_id": w.call_id,
                "tool_name": w.tool_name,
                "output": output,
                "error": error,
                "success": success,
                "duration_ms": int((time.time() - w.started) * 1000),
                "iteration": 0,
                "data": data,
            },
        )

    # -- query understanding
    def open_query_understand(self) -> None:
        r = self.chat.request
        args: dict[str, object] = {}
        if r.query:
            args["query"] = r.query
        if r.images:
            args["has_images"] = True
        self.query_window = self._open("query_understand", args)

    def close_query_understand(self, err: PluginError | None) -> None:
        if self.query_window is None:
            return
        ok = err is None or err is ErrSearchNothing
        s = self.chat.state
        data = {"rewrite_query": s.rewrite_query, "intent": s.intent}
        # the stage degrades to the original query on a failed / timed-out model call: not a success
        failed_call = str((s.diagnostics.get("query_understand") or {}).get("error") or "")
        if ok and failed_call:
            msg = f"query understanding model call failed ({failed_call}); kept the original query"
            self._close(self.query_window, False, "", msg, data)
            self.query_window = None
            return
        done = progress_text(self.chat.request.language, "query_done")
        self._close(self.query_window, ok, done if ok else "", "" if ok else str(err), data)
        self.query_window = None

    # -- retrieval
    def open_retrieval(self) -> None:
        args: dict[str, object] = {"search_source": search_source(self.chat)}
        q = self.chat.state.rewrite_query or self.chat.request.query
        if q:
            args["query"] = q
        self.retrieval_window = self._open("knowledge_search", args)

    def close_retrieval(self, err: PluginError | None) -> None:
        if self.retrieval_window is None:
            return
        s = self.chat.state
        results = s.merge_result or s.rerank_result or s.search_result
        results = [r for r in results if r is not None]
        count = len(results)
        web = sum(1 for r in results if r.is_web())
        doc = count - web
        candidate = 0
        if err is ErrSearchNothing:
            candidate, count, doc, web = count, 0, 0, 0
        source = search_source(self.chat)
        if count > 0:
            source = "mixed" if (doc and web) else ("web" if web else "knowledge")
        ok = err is None or err is ErrSearchNothing
        if not ok:
            output = ""
        elif count > 0:
            output = progress_text(self.chat.request.language, "found", count=count)
        elif candidate > 0:
            output = progress_text(self.chat.request.language, "candidates", candidate=candidate)
        else:
            output = progress_text(self.chat.request.language, "none")
        data = {
            "count": count,
            "doc_count": doc,
            "web_count": web,
            "search_source": source,
            "candidate_count": candidate,
        }
        self._close(self.retrieval_window, ok, output, "" if ok else str(err), data)
        self.retrieval_window = None

    def close_all(self, err: PluginError | None) -> None:
        self.close_query_understand(err)
        self.close_retrieval(err)
