"""Model context: request-local handles, citation protocol, retrieval XML and output decoding (spec §7)."""

from __future__ import annotations

from rag_lab.modelcontext.citations import (
    cited_chunk_ids,
    cited_web_urls,
    compact_public_citations,
    decode_output_text,
    expand_citations,
    expand_text,
)
from rag_lab.modelcontext.protocol import protocol_prompt, with_protocol_prompt
from rag_lab.modelcontext.registry import ChunkRef, HandleTable, Registry, WebRef, canonical_web_url
from rag_lab.modelcontext.render import (
    KnowledgeRow,
    WebRow,
    chat_passage,
    encode_messages,
    render_knowledge_rows,
    render_retrieval_contexts,
    render_web_rows,
    substitute_retrieval_contexts,
)
from rag_lab.modelcontext.resources import STORED_REF_RE
from rag_lab.modelcontext.stream import StreamDecoder
from rag_lab.modelcontext.toolargs import ToolArgsDecoding, decode_tool_call_arguments

__all__ = [
    "ChunkRef",
    "HandleTable",
    "KnowledgeRow",
    "Registry",
    "STORED_REF_RE",
    "StreamDecoder",
    "WebRef",
    "WebRow",
    "canonical_web_url",
    "chat_passage",
    "cited_chunk_ids",
    "cited_web_urls",
    "compact_public_citations",
    "decode_output_text",
    "encode_messages",
    "expand_citations",
    "expand_text",
    "protocol_prompt",
    "render_knowledge_rows",
    "render_retrieval_contexts",
    "render_web_rows",
    "substitute_retrieval_contexts",
    "with_protocol_prompt",
    "ToolArgsDecoding",
    "decode_tool_call_arguments",
]
