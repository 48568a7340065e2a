"""The query-understanding request (spec §4.3.4): the ``response_format`` JSON schema, the intent
labels a request can act on, and the ``conversation`` and ``query`` placeholders with the asker
background block (§4.3.6)."""

from __future__ import annotations

from typing import Any

from rag_lab.types.chat_manage import History
from rag_lab.types.intent import QueryIntent

ASKER_BACKGROUND_NOTE = (
    "who is asking: use this only to resolve references and complete search terms; it is not part of the question"
)
_TEXT_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def understanding_response_format(
    intents: list[str] | None = None, max_tokens: int | None = None, images: bool = True
) -> dict[str, Any]:
    """The ``response_format`` of the query-understanding call: a strict JSON schema of the three
    keys, in the prompt's order, the intent one of ``intents`` (default: every label).

    With ``max_tokens`` (for an endpoint that honours the bounds) the strings are bounded so that
    the object closes within that many tokens (:func:`rag_lab.models.structured.bounded_schema`;
    a model that repeats itself inside the rewrite is stopped at its ``maxLength``), and without
    ``images`` the image description must be empty (``maxLength`` 0)."""
    labels = intents if intents is not None else [i.value for i in QueryIntent if i.value]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "rewrite_query": {"type": "string"},
            "intent": {"type": "string", "enum": list(labels)},
            "image_description": {"type": "string"},
        },
        "required": ["rewrite_query", "intent", "image_description"],
        "additionalProperties": False,
    }
    if max_tokens is not None:
        from rag_lab.models.structured import bounded_schema

        if not images:
            schema["properties"]["image_description"]["maxLength"] = 0
        schema = bounded_schema(schema, max_tokens, min_length=1)
    return {"type": "json_schema", "json_schema": {"name": "query_understanding", "strict": True, "schema": schema}}


UNDERSTANDING_RESPONSE_FORMAT: dict[str, object] = understanding_response_format()


def allowed_intents(web_search: bool, images: bool, attachments: bool) -> list[str]:
    """The labels the request can act on: ``web_search`` only with web search on, ``image_only``
    only with images, ``doc_only`` only with an attached document (a small model constrained to the
    schema otherwise picks labels whose path is switched off)."""
    out = []
    for i in QueryIntent:
        if not i.value:
            continue
        if (i is QueryIntent.WEB_SEARCH and not web_search) or (i is QueryIntent.IMAGE_ONLY and not images):
            continue
        if i is QueryIntent.DOC_ONLY and not attachments:
            continue
        out.append(i.value)
    return out


def format_conversation(history: list[History]) -> str:
    """The ``conversation`` placeholder: one BEGIN/END block per round (spec §4.3.4)."""
    return "".join(
        f"------BEGIN------\nUser question: {h.query}\nAssistant answer: {h.answer}\n------END------\n" for h in history
    )


def _field(obj: object, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def asker_background_block(background: object) -> str:
    """``\\n\\n<asker_background note="...">`` + optional background / interests / documents lines +
    ``\\n</asker_background>``; "" when the memory service has nothing (spec §4.3.6)."""
    if background is None:
        return ""
    text = str(_field(background, "background") or "").strip()
    interests = [str(x).strip() for x in (_field(background, "interests") or []) if str(x).strip()]
    documents = [str(x).strip() for x in (_field(background, "documents") or []) if str(x).strip()]
    if not (text or interests or documents):
        return ""
    out = f'\n\n<asker_background note="{ASKER_BACKGROUND_NOTE}">'
    if text:
        out += "\n" + text.translate(_TEXT_ESCAPE)
    if interests:
        out += "\nLong-term interests: " + ", ".join(interests).translate(_TEXT_ESCAPE)
    if documents:
        out += "\nOften consulted: " + ", ".join(documents).translate(_TEXT_ESCAPE)
    return out + "\n</asker_background>"


def build_understanding_query(query: str, image_count: int, attachment_prompt: str, background_block: str = "") -> str:
    """The ``query`` placeholder: the question, the image marker, the attachment prompt (or
    ``<no_document_attached />``) and the asker background (spec §4.3.4)."""
    out = query + (f'\n\n<images_uploaded count="{image_count}" />' if image_count > 0 else "\n\n<no_image_attached />")
    out += attachment_prompt if attachment_prompt else "\n<no_document_attached />"
    return out + background_block
