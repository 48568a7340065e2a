"""DATA_ANALYSIS (opt-in): a CSV / Excel document among the merge results is loaded into DuckDB,
the chat model writes one SQL query for the question, and the result joins the contexts as a
synthetic result (spec §4.10, seed "DATA_ANALYSIS — Analyse tabulaire DuckDB").

Every failure after the table chunks are removed continues the pipeline without the result (the
spec's "on error, continue"), except a chat model that cannot be found, which returns
ErrGetChatModel. Each run records what happened, and why, in ``state.diagnostics["data_analysis"]``.
A chat model that cannot follow instructions (the offline extractive answerer,
``follows_instructions = False``) cannot write SQL: the stage is skipped with that reason, never
faked.
"""

from __future__ import annotations

import asyncio
import logging

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import ErrGetChatModel, NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.prompts.templates import PromptTemplate, PromptTemplates, TemplateError, render_prompt_placeholders
from rag_lab.tools.data_analysis import DATA_FILE_SUFFIXES  # DuckDB itself is imported lazily
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import DataAnalysisDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import needs_retrieval
from rag_lab.types.search_result import ChunkType, MatchType, SearchResult

log = logging.getLogger(__name__)

TABLE_CHUNK_TYPES = frozenset({ChunkType.TABLE_COLUMN.value, ChunkType.TABLE_SUMMARY.value})
PROMPT_ID = "default_data_analysis"
RESULT_ID_PREFIX = "analysis_"

#: the JSON schema the model's reply must follow (OpenAI ``response_format``)
RESPONSE_FORMAT: dict[str, object] = {
    "type": "json_schema",
    "json_schema": {
        "name": "data_analysis_input",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "knowledge_id": {"type": "string", "description": "the knowledge id of the data file"},
                "sql": {
                    "type": "string",
                    "description": "one DuckDB SELECT query, or empty when no analysis is needed",
                },
            },
            "required": ["knowledge_id", "sql"],
            "additionalProperties": False,
        },
    },
}


def is_data_file(result: SearchResult | None) -> bool:
    """True when the result's file name, lower-cased, ends with .csv, .xlsx or .xls (step 1)."""
    return result is not None and result.knowledge_filename.lower().endswith(DATA_FILE_SUFFIXES)


class PluginDataAnalysis(StagePlugin):
    events = (EventType.DATA_ANALYSIS,)
    contract = StageContract(
        reads=("request.chat_model_id", "request.query", "state.intent", "state.merge_result"),
        writes=("state.diagnostics.data_analysis", "state.merge_result"),
        params=("data_analysis_max_rows", "data_analysis_temperature", "data_analysis_timeout_s"),
        kb=(),
    )

    def _template(self) -> PromptTemplate:
        prompts = self.services.prompts
        if prompts is not None:
            try:
                return prompts.get(PROMPT_ID)
            except TemplateError:
                pass
        return PromptTemplates().get(PROMPT_ID)

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        if not needs_retrieval(chat):
            return await next()
        state = chat.state
        diag = DataAnalysisDiagnostics(status="skipped", reason="")
        state.diagnostics["data_analysis"] = diag
        # 1-2: data files, then table chunks out of the contexts whatever happens next
        data_files = [r for r in state.merge_result if is_data_file(r)]
        diag["data_files"] = [r.knowledge_id for r in data_files]
        removed = [r.id for r in state.merge_result if r is not None and r.chunk_type in TABLE_CHUNK_TYPES]
        state.merge_result = [r for r in state.merge_result if r is None or r.chunk_type not in TABLE_CHUNK_TYPES]
        diag["removed_table_chunks"] = removed
        if not data_files:  # 3
            _skip(diag, "no CSV or Excel document among the merge results")
            return await next()
        outcome = await self._analyse(chat, data_files[0], diag)
        if isinstance(outcome, PluginError):
            return outcome
        if outcome is not None:  # 9
            state.merge_result.append(outcome)
            diag["status"], diag["result_id"] = "added", outcome.id
        return await next()

    async def _analyse(
        self, chat: ChatManage, first: SearchResult, diag: DataAnalysisDiagnostics
    ) -> SearchResult | PluginError | None:
        """Steps 4-8 for the first data file: the result to append, ErrGetChatModel, or None
        (continue without a result; the reason is in ``diag``)."""
        from rag_lab.knowledge.tables import stored_table_path
        from rag_lab.tools.data_analysis import DataAnalysisTool, parse_analysis_input

        diag["knowledge_id"] = first.knowledge_id
        ws = self.services.workspace
        if ws is None:
            return _skip(diag, "no workspace configured: the document cannot be loaded", "failed")
        try:  # 4
            kb_ids = [first.knowledge_base_id] if first.knowledge_base_id else None
            doc = ws.store.get_knowledge([first.knowledge_id], kb_ids=kb_ids).get(first.knowledge_id)
        except Exception as exc:
            return _skip(diag, f"loading document {first.knowledge_id!r} failed: {exc}", "failed")
        if doc is None:
            return _skip(diag, f"document {first.knowledge_id!r} not found in the knowledge store", "failed")
        diag["file_name"] = doc.file_name
        p = chat.request.params
        try:  # 5
            path = stored_table_path(ws, doc)  # type: ignore[arg-type]  # the Workspace behind the protocol
            tool = DataAnalysisTool(
                path,
                file_name=doc.file_name,
                table_name=(doc.metadata or {}).get("table_name") or None,
                max_rows=p.data_analysis_max_rows,
                timeout_s=p.data_analysis_timeout_s,
            )
        except Exception as exc:
            return _skip(diag, f"data file of {doc.id!r} unavailable: {exc}", "failed")
        try:
            try:
                schema = await asyncio.to_thread(tool.load)
            except Exception as exc:
                return _skip(diag, f"loading {doc.file_name} into DuckDB failed: {exc}", "failed")
            schema_text = schema.describe()
            diag["table"], diag["schema"] = schema.table_name, schema_text

            try:  # 6
                model = self.services.get_chat_model(chat.request.chat_model_id)
            except Exception as exc:
                _skip(diag, f"chat model {chat.request.chat_model_id!r} unavailable: {exc}", "failed")
                return ErrGetChatModel.with_error(exc)
            if not getattr(model, "follows_instructions", True):
                return _skip(
                    diag,
                    f"chat model {getattr(model, 'model_id', '?')!r} cannot write SQL (follows_instructions is "
                    "False, e.g. the offline extractive answerer); no analysis was run",
                )

            tpl = self._template()  # 7
            values = {
                "query": chat.request.query,
                "knowledge_id": doc.id,
                "schema": schema_text,
                "table": schema.table_name,
            }
            messages = [
                ChatMessage("system", render_prompt_placeholders(tpl.content, values)),
                ChatMessage("user", render_prompt_placeholders(tpl.user, values)),
            ]
            options = ChatOptions(
                temperature=p.data_analysis_temperature,
                response_format=RESPONSE_FORMAT,
            )
            try:
                resp = await model.chat(messages, options)
            except Exception as exc:
                return _skip(diag, f"model call failed: {exc}", "failed")
            raw = resp.content
            diag["raw"] = raw
            try:
                request = parse_analysis_input(raw)
            except Exception as exc:
                return _skip(diag, f"unreadable model reply: {exc}", "failed")
            diag["sql"] = request.sql
            if request.knowledge_id and request.knowledge_id != doc.id:
                diag["model_knowledge_id"] = request.knowledge_id
            if not request.sql:
                return _skip(diag, "the model returned an empty 'sql': no analysis needed for this question")
            try:  # 8
                output = await asyncio.to_thread(tool.execute, raw)
            except Exception as exc:
                return _skip(diag, f"running the SQL failed: {exc}", "failed")
        finally:
            tool.close()
        return SearchResult(
            id=RESULT_ID_PREFIX + doc.id,
            content=output,
            knowledge_id=doc.id,
            knowledge_title=doc.title,
            knowledge_filename=doc.file_name,
            knowledge_description=doc.description,
            knowledge_source=doc.source,
            knowledge_base_id=doc.knowledge_base_id,
            score=1.0,
            match_type=MatchType.DATA_ANALYSIS,
            metadata={"sql": request.sql, "table": schema.table_name},
        )


def _skip(diag: DataAnalysisDiagnostics, reason: str, status: str = "skipped") -> SearchResult | None:
    """Record why no result is added (``status`` "skipped" by choice, "failed" on an error); the
    analysis outcome is then ``None``."""
    diag["status"], diag["reason"] = status, reason
    log.info("data_analysis %s: %s", status, reason)
    return None
