"""QUERY_UNDERSTAND (outer plugin): rewrite + intent (+ image description) in one model call
(spec §4.3, seed "QUERY_UNDERSTAND").

* **Gate** (§4.3.1): ``rewrite_query = query``; skipped when rewriting is off and no image came.
* **History** (§4.3.2): LOAD_HISTORY's result, else the same algorithm with 20 messages.
* **Model** (§4.3.3): with images, the chat model when it has vision, else the VLM, else the text
  path (warning); on the text path the dedicated query-understanding model, falling back to the
  chat model when it cannot be loaded; no model at all skips the stage.
* **Prompt** (§4.3.4): the rewrite templates with ``conversation``, ``query`` (+ image marker,
  attachment prompt or ``<no_document_attached />``, asker background from the memory service)
  and ``language``; temperature 0.3, 150 tokens, 2,048 with images (seed), thinking off.
* **Parsing** (§4.3.5): tolerant JSON (fences, aliases, OCR merge); when the reply was cut by the
  token limit or does not parse, :func:`recover_truncated_understanding` reads what it can of the
  cut object. A rewrite or intent is taken only when its string is complete; a cut image
  description is kept (the text up to the cut). Nothing readable: original query, intent "".
* The intent is normalised (seed ``NormalizeQueryIntent``); a non-retrieval intent applies the
  intent prompt override; the image description is written, in the background, to the first
  image caption of the user message.
* **Structured output**: the call sends an OpenAI ``response_format`` of type ``json_schema``
  (:func:`understanding_response_format`; llama-server, vLLM and OpenAI constrain decoding to it,
  so even a tiny model replies with the object), its intent limited to the labels the request can
  act on (:func:`allowed_intents`); the tolerant parser still reads replies from endpoints that
  ignore it.
* **Rewrite check**: a rewrite that is not a question about the user's message —
  empty, without any word, a timestamp or the prompt's runtime line copied over, a piece of the
  prompt echoed back, a bare intent label — is dropped and the original query is kept
  (:func:`rewrite_rejection`; the reason goes to ``diagnostics["query_understand"]["rewrite_rejected"]``).
* A failed or timed-out call (one timeout: ``query_understand_timeout_s``, the stage's, also given
  to the HTTP client) keeps the original query; the progress window reports it as not successful.
* **Offline** (a model with ``follows_instructions = False``, the extractive answerer): no model
  call and no rewrite; :func:`detect_smalltalk` labels clear greetings and small talk (English and
  Chinese) ``greeting`` / ``chitchat``, everything else keeps intent "" (retrieval).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import unicodedata
from typing import Any

from rag_lab.models.base import ChatMessage, ChatOptions
from rag_lab.pipeline.contracts import StageContract
from rag_lab.pipeline.plugin import NextFn, PluginError
from rag_lab.pipeline.plugins.base import StagePlugin
from rag_lab.pipeline.plugins.load_history import load_and_process_history
from rag_lab.prompts.templates import render_prompt_placeholders
from rag_lab.types.chat_manage import ChatManage, History
from rag_lab.types.diagnostics import QueryUnderstandDiagnostics
from rag_lab.types.events import EventType
from rag_lab.types.intent import QueryIntent, needs_retrieval, normalize_query_intent

log = logging.getLogger(__name__)

REWRITE_KEYS = ("rewrite_query", "rewritten_query", "query", "question")
DESC_KEYS = ("image_description", "image_desc", "image_text", "image_ocr_text", "description")
OCR_KEYS = ("ocr_text", "ocr", "full_ocr", "image_ocr", "ocr_content")
OCR_LABEL = "\n\n[OCR]\n"
#: history fetched by this stage when LOAD_HISTORY left none (spec §4.3.2)
#: finish reasons that mean "cut by the token limit" (spec §4.12.3)
TRUNCATION_REASONS = frozenset({"length", "max_tokens", "max_output_tokens"})
ASKER_BACKGROUND_NOTE = (
    "who is asking: use this only to resolve references and complete search terms; it is not part of the question"
)
_TEXT_ESCAPE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


def understanding_response_format(intents: list[str] | None = None) -> dict[str, Any]:
    """The ``response_format`` of the query-understanding call: a strict JSON schema of the three
    keys, in the prompt's order, the intent one of ``intents`` (default: every label)."""
    labels = intents if intents is not None else [i.value for i in QueryIntent if i.value]
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "query_understanding",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {
                    "rewrite_query": {"type": "string"},
                    "intent": {"type": "string", "enum": list(labels)},
                    "image_description": {"type": "string"},
                },
                "required": ["rewrite_query", "intent", "image_description"],
                "additionalProperties": False,
            },
        },
    }


UNDERSTANDING_RESPONSE_FORMAT: dict[str, Any] = understanding_response_format()


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


_DATE_TIME_RE = re.compile(
    r"\d{4}[-/.年]\d{1,2}[-/.月]\d{1,2}日?(?:[ T]*\d{1,2}:\d{2}(?::\d{2})?)?|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
_WEEKDAY_RE = re.compile(
    r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|星期[一二三四五六日天]|周[一二三四五六日]", re.IGNORECASE
)
_ECHO_NGRAM = 5


def _words_of(text: str) -> list[str]:
    return re.findall(r"\w+", unicodedata.normalize("NFKC", text or "").casefold())


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def rewrite_rejection(rewrite: str, user_text: str, prompt_text: str = "") -> str:
    """Why ``rewrite`` cannot stand for the user's message, or "" when it can.

    ``user_text`` is what the user wrote (the question and the conversation), ``prompt_text`` the
    instructions around it. Rejected: an empty rewrite; one without a single letter; one that
    carries a date or time (or a weekday) the user never wrote — the prompt's runtime line copied
    over; one that is mostly that date/time; one repeating five or more consecutive words of the
    prompt that the user did not write (the prompt echoed); a bare intent label.
    """
    text = (rewrite or "").strip()
    if not text:
        return "empty rewrite"
    if not any(ch.isalpha() for ch in text):
        return f"no words in the rewrite ({text[:40]!r})"
    user = user_text or ""
    stamps = [m.group(0) for m in _DATE_TIME_RE.finditer(text)] + [m.group(0) for m in _WEEKDAY_RE.finditer(text)]
    foreign = [st for st in stamps if st.casefold() not in user.casefold()]
    if foreign:
        return f"the rewrite carries a date/time the user did not write ({foreign[0]!r}): the prompt's runtime line"
    if text.casefold() in {i.value for i in QueryIntent if i.value} and text.casefold() not in user.casefold():
        return f"the rewrite is an intent label ({text!r})"
    words = _words_of(text)
    if prompt_text and len(words) >= _ECHO_NGRAM:
        echoed = (_ngrams(words, _ECHO_NGRAM) & _ngrams(_words_of(prompt_text), _ECHO_NGRAM)) - _ngrams(
            _words_of(user), _ECHO_NGRAM
        )
        if echoed:
            return f"the rewrite repeats the prompt ({' '.join(sorted(echoed)[0])!r})"
    return ""


# -- output parsing ------------------------------------------------------------------------------
def _first_str(obj: dict[str, Any], keys: tuple[str, ...]) -> str:
    for k in keys:
        v = obj.get(k)
        if isinstance(v, str):
            return v.strip()
    return ""


def merge_image_description(desc: str, ocr: str) -> str:
    """One of them when the other is empty; ``desc`` alone when it already holds the OCR text;
    otherwise ``desc + "\\n\\n[OCR]\\n" + ocr`` (spec §4.3.5)."""
    if desc and ocr and ocr not in desc:
        return f"{desc}{OCR_LABEL}{ocr}"
    return desc or ocr


def parse_query_understanding(text: str) -> dict[str, str] | None:
    """``{"rewrite_query", "intent", "image_description"}`` from a complete model reply, or None
    when no JSON object can be read (spec §4.3.5: the whole text, then first ``{`` to last ``}``)."""
    t = text.strip()
    if not t:
        return None
    obj: Any = None
    try:
        obj = json.loads(t)
    except ValueError:
        a, b = t.find("{"), t.rfind("}")
        if a != -1 and b > a:
            try:
                obj = json.loads(t[a : b + 1])
            except ValueError:
                obj = None
    if not isinstance(obj, dict):
        return None
    intent = obj.get("intent")
    return {
        "rewrite_query": _first_str(obj, REWRITE_KEYS),
        "intent": intent.strip() if isinstance(intent, str) else "",
        "image_description": merge_image_description(_first_str(obj, DESC_KEYS), _first_str(obj, OCR_KEYS)),
    }


_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_BARE_KEY = re.compile(r"[A-Za-z_][\w-]*")
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|True|False|None")
_NOT_STRING = object()


def _scan_string(s: str, i: int) -> tuple[str, int, bool]:
    """Decode the string literal opening at ``s[i]`` (``"`` or ``'``): ``(text, end, complete)``.

    A literal cut by the end of the text returns what was decoded so far (an escape sequence cut
    in the middle, or half of a surrogate pair, is dropped). Raw control characters are kept and
    unknown escapes yield the escaped character: models emit both.
    """
    quote, n = s[i], len(s)
    out: list[str] = []
    j = i + 1
    while j < n:
        c = s[j]
        if c == quote:
            return "".join(out), j + 1, True
        if c != "\\":
            out.append(c)
            j += 1
            continue
        if j + 1 >= n:
            break  # cut right after the backslash
        e = s[j + 1]
        if e != "u":
            out.append(_ESCAPES.get(e, e))
            j += 2
            continue
        hex4 = s[j + 2 : j + 6]
        if not _HEX4.fullmatch(hex4):
            if j + 6 > n and all(ch in "0123456789abcdefABCDEF" for ch in hex4):
                break  # cut inside \uXXXX
            out.append("u")
            j += 2
            continue
        code = int(hex4, 16)
        j += 6
        if 0xD800 <= code < 0xDC00:  # high surrogate: needs its low half
            low = s[j + 2 : j + 6] if s[j : j + 2] == "\\u" else ""
            if _HEX4.fullmatch(low) and 0xDC00 <= int(low, 16) < 0xE000:
                out.append(chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)))
                j += 6
                continue
            rest = s[j:]
            if len(rest) < 6 and "\\u".startswith(rest[:2]) and all(ch in "0123456789abcdefABCDEF" for ch in rest[2:]):
                break  # the pair is cut by the end of the text
            out.append("\ufffd")
            continue
        out.append("\ufffd" if 0xDC00 <= code < 0xE000 else chr(code))
    return "".join(out), n, False


def _skip_ws(s: str, i: int, extra: str = "") -> int:
    n = len(s)
    while i < n and (s[i].isspace() or s[i] in extra):
        i += 1
    return i


def _skip_value(s: str, i: int) -> tuple[int, bool]:
    """Skip a non-string JSON value at ``s[i]``: ``(end, complete)``."""
    if s[i] in "{[":
        depth, j, n = 0, i, len(s)
        while j < n:
            c = s[j]
            if c in "\"'":
                _, j, ok = _scan_string(s, j)
                if not ok:
                    return n, False
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1, True
            j += 1
        return n, False
    m = _SCALAR.match(s, i)
    if m is None:
        return len(s), False
    end = m.end()
    # a number or literal touching the end of the text may itself be cut ("tru", "12" of "123")
    return end, end < len(s)


def scan_object_prefix(text: str) -> dict[str, tuple[Any, bool]]:
    """The members of the first JSON object in ``text``, read as far as the text goes.

    Maps each key to ``(value, complete)``: the decoded string for string values (possibly cut),
    or a marker for any other value. Tolerates fences and prose around the object, trailing
    commas, single quotes and bare keys. Reading stops at the first member that cannot be read.
    """
    s = text
    start = s.find("{")
    if start == -1:
        return {}
    found: dict[str, tuple[Any, bool]] = {}
    i, n = start + 1, len(s)
    while True:
        i = _skip_ws(s, i, ",")
        if i >= n or s[i] == "}":
            break
        if s[i] in "\"'":
            key, i, ok = _scan_string(s, i)
            if not ok:
                break
        else:
            m = _BARE_KEY.match(s, i)
            if m is None:
                break
            key, i = m.group(), m.end()
        i = _skip_ws(s, i)
        if i >= n or s[i] != ":":
            break
        i = _skip_ws(s, i + 1)
        if i >= n:
            break
        value: Any
        if s[i] in "\"'":
            value, i, ok = _scan_string(s, i)
        else:
            i, ok = _skip_value(s, i)
            value = _NOT_STRING
        if ok or key not in found or not found[key][1]:
            found[key] = (value, ok)
        if not ok:
            break
    return found


def recover_truncated_understanding(text: str) -> dict[str, str] | None:
    """What a cut or malformed reply still tells (seed: partial recovery).

    ``rewrite_query`` (with its aliases) and ``intent`` count only when their string is complete;
    the image description (and OCR text) may be cut and is kept up to the cut. None when none of
    these keys could be read (then nothing changes).
    """
    found = scan_object_prefix(text)

    def complete_str(keys: tuple[str, ...]) -> str | None:
        for k in keys:
            if k in found:
                v, ok = found[k]
                if ok and isinstance(v, str):
                    return v.strip()
        return None

    def any_str(keys: tuple[str, ...]) -> str | None:
        for k in keys:
            if k in found and isinstance(found[k][0], str):
                return str(found[k][0]).strip()
        return None

    rewrite, intent = complete_str(REWRITE_KEYS), complete_str(("intent",))
    desc, ocr = any_str(DESC_KEYS), any_str(OCR_KEYS)
    if rewrite is None and intent is None and desc is None and ocr is None:
        return None
    return {
        "rewrite_query": rewrite or "",
        "intent": intent or "",
        "image_description": merge_image_description(desc or "", ocr or ""),
    }


# -- offline small-talk detector -----------------------------------------------------------------
_EN_GREETING = """hi|hello|hey|heya|hiya|howdy|greetings|yo|hallo|good morning|good afternoon|good evening|
good day|morning|evening|nice to meet you|pleased to meet you|long time no see"""
_EN_CHITCHAT = """thanks|thank you|thankyou|thx|ty|many thanks|thanks a lot|thanks so much|thank you very much|
thank you so much|much appreciated|appreciate it|cheers|bye|goodbye|good bye|bye bye|see you|see you later|
see ya|good night|take care|ok|okay|k|cool|great|nice|awesome|perfect|got it|sounds good|alright|all right|
sure|no problem|np|lol|haha|hahaha|how are you|how are you doing|how is it going|hows it going|how's it going|
what's up|whats up|sup|how do you do|who are you|what are you|what is your name|what's your name|whats your name|
are you a bot|are you there|you are welcome|you're welcome|welcome|well done|good job|i see"""
_EN_SUFFIX = (
    "there|all|everyone|everybody|folks|guys|team|friend|buddy|bot|assistant|again|mate|man|so much|a lot|very much"
)
_ZH_GREETING = "你好|您好|你们好|大家好|嗨|哈喽|哈啰|喂|早|早上好|早安|上午好|中午好|下午好|晚上好|在吗|在不在|很高兴认识你|初次见面"
_ZH_CHITCHAT = """谢谢|谢谢你|谢谢您|多谢|感谢|非常感谢|太感谢了|谢了|辛苦了|再见|拜拜|回头见|晚安|好的|好|嗯|嗯嗯|哦|明白了|
知道了|收到|没问题|哈哈|哈哈哈|你好吗|最近怎么样|你是谁|你叫什么名字|你是机器人吗|不客气|太棒了|厉害|棒"""
_ZH_PARTICLES = "啊呀哦呢吗哈啦嘛哟喔~～"
_SMALLTALK_MAX_CHARS = 80


def _phrases(spec: str) -> list[str]:
    return [p.strip() for p in spec.replace("\n", "").split("|") if p.strip()]


_LEXICON = sorted(
    [(p, QueryIntent.GREETING.value) for p in _phrases(_EN_GREETING) + _phrases(_ZH_GREETING)]
    + [(p, QueryIntent.CHITCHAT.value) for p in _phrases(_EN_CHITCHAT) + _phrases(_ZH_CHITCHAT)],
    key=lambda t: -len(t[0]),
)
_SUFFIXES = sorted(_phrases(_EN_SUFFIX), key=len, reverse=True)


def _is_separator(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch)[0] in "PSZC"


def _word_end(text: str, end: int) -> bool:
    """True when ``end`` does not cut a Latin word (Chinese needs no boundary)."""
    return end >= len(text) or not (text[end].isascii() and text[end].isalnum()) or not text[end - 1].isascii()


def detect_smalltalk(text: str) -> str:
    """``"greeting"``, ``"chitchat"`` or ``""`` for a user message, by rules (no model).

    The whole message must be made of greeting / thanks / small-talk phrases (English or
    Chinese), with punctuation, emoji, an addressee ("hi there", "thanks bot") or Chinese
    sentence particles ("你好呀") around them; anything else, however short, is left to retrieval
    (``""``). A message with at least one greeting is a greeting; otherwise it is chitchat.
    """
    t = unicodedata.normalize("NFKC", text).lower().replace("’", "'").strip()
    if not t or len(t) > _SMALLTALK_MAX_CHARS:
        return ""
    i, n, labels = 0, len(t), []
    while True:
        while i < n and _is_separator(t[i]):
            i += 1
        if i >= n:
            break
        for phrase, label in _LEXICON:
            end = i + len(phrase)
            if t.startswith(phrase, i) and _word_end(t, end):
                labels.append(label)
                i = end
                break
        else:
            return ""
        # what may follow a phrase: an addressee ("hi there") or Chinese particles ("谢谢啦")
        j = i
        while j < n and t[j] == " ":
            j += 1
        for suffix in _SUFFIXES:
            if t.startswith(suffix, j) and _word_end(t, j + len(suffix)) and j > i:
                i = j + len(suffix)
                break
        while i < n and t[i] in _ZH_PARTICLES:
            i += 1
    if not labels:
        return ""
    return QueryIntent.GREETING.value if QueryIntent.GREETING.value in labels else QueryIntent.CHITCHAT.value


# -- prompt assembly -----------------------------------------------------------------------------
def format_conversation(history: list[History]) -> str:
    """The ``conversation`` placeholder: one BEGIN/END block per round (spec §4.3.4)."""
    return "".join(
        f"------BEGIN------\nUser question: {h.query}\nAssistant answer: {h.answer}\n------END------\n" for h in history
    )


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def asker_background_block(background: Any) -> str:
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


# -- the plugin ----------------------------------------------------------------------------------
class PluginQueryUnderstand(StagePlugin):
    events = (EventType.QUERY_UNDERSTAND,)
    contract = StageContract(
        reads=(
            "request.attachments",
            "request.chat_model_id",
            "request.chat_model_supports_vision",
            "request.enable_rewrite",
            "request.images",
            "request.intent_prompt_overrides",
            "request.language",
            "request.max_rounds",
            "request.query",
            "request.query_understand_model_id",
            "request.rewrite_prompt_system",
            "request.rewrite_prompt_user",
            "request.session_id",
            "request.user_id",
            "request.vlm_model_id",
            "state.history",
            "state.image_description",
            "state.intent",
            "state.system_prompt_override",
        ),
        writes=(
            "state.diagnostics.query_understand",
            "state.history",
            "state.image_description",
            "state.intent",
            "state.rewrite_query",
            "state.system_prompt_override",
        ),
        params=(
            "query_understand_history_fetch",
            "query_understand_max_tokens",
            "query_understand_max_tokens_images",
            "query_understand_temperature",
            "query_understand_timeout_s",
        ),
        kb=(),
    )

    async def on_event(self, event: EventType, chat: ChatManage, next: NextFn) -> PluginError | None:
        req, state = chat.request, chat.state
        state.rewrite_query = req.query
        has_images = bool(req.images)
        if not req.enable_rewrite and not has_images:
            return await next()
        diag = QueryUnderstandDiagnostics()
        state.diagnostics["query_understand"] = diag

        history = await self._history(chat)
        picked = self._select_model(chat, has_images)
        if picked is None:
            log.error("query_understand: no chat model could be loaded, skipping the stage")
            diag["skipped"] = "no model"
            return await next()
        model, use_images = picked
        diag.update(model=getattr(model, "model_id", ""), images=use_images)

        if not getattr(model, "follows_instructions", True):
            label = detect_smalltalk(req.query)
            diag.update(path="offline", detected=label)
            state.intent = label
            if not needs_retrieval(chat):
                self._apply_intent_prompt_override(chat)
            return await next()

        from rag_lab.session.attachments import build_attachment_prompt

        try:
            attachment_prompt = build_attachment_prompt(req.attachments)
        except (TypeError, ValueError) as exc:
            log.warning("query_understand: attachments ignored: %s", exc)
            attachment_prompt = ""
        query = build_understanding_query(
            req.query, len(req.images), attachment_prompt, await self._asker_background(chat)
        )
        prompts = self.services.prompts
        tpl = prompts.get("default_rewrite") if prompts is not None and "default_rewrite" in prompts.by_id else None
        system_t = req.rewrite_prompt_system or (tpl.content if tpl else "")
        user_t = req.rewrite_prompt_user or (tpl.user if tpl else "{{query}}")
        values = {"conversation": format_conversation(history), "query": query, "language": req.language}
        messages = [
            ChatMessage("system", render_prompt_placeholders(system_t, values)),
            ChatMessage(
                "user", render_prompt_placeholders(user_t, values), images=list(req.images) if use_images else []
            ),
        ]
        p = req.params
        options = ChatOptions(
            temperature=p.query_understand_temperature,
            max_completion_tokens=p.query_understand_max_tokens_images if use_images else p.query_understand_max_tokens,
            thinking=False,
            response_format=understanding_response_format(
                allowed_intents(bool(req.web_search_enabled), has_images, bool(req.attachments))
            ),
            timeout=p.query_understand_timeout_s,
        )
        try:
            resp = await asyncio.wait_for(model.chat(messages, options), p.query_understand_timeout_s)
        except TimeoutError:
            log.warning(
                "query_understand call timed out after %s s, keeping the original query", p.query_understand_timeout_s
            )
            diag["error"] = f"timed out after {p.query_understand_timeout_s} s"
            return await next()
        except Exception as exc:
            log.warning("query_understand call failed, keeping the original query: %s", exc)
            diag["error"] = str(exc)
            return await next()

        content = resp.content or ""
        finish = (resp.finish_reason or "").lower()
        parsed = parse_query_understanding(content)
        partial = False
        if parsed is None and content.strip():
            parsed = recover_truncated_understanding(content)
            partial = parsed is not None
        diag.update(
            raw=content, finish_reason=finish, truncated=finish in TRUNCATION_REASONS, partial=partial, parsed=parsed
        )
        if parsed is not None:
            rewrite = parsed["rewrite_query"]
            if rewrite:
                why = rewrite_rejection(
                    rewrite,
                    "\n".join([req.query, values["conversation"]]),
                    "\n".join([system_t, user_t]),
                )
                if why:
                    log.warning("query_understand: rewrite %r dropped, keeping the original query: %s", rewrite, why)
                    diag["rewrite_rejected"] = why
                else:
                    state.rewrite_query = rewrite
            state.intent = normalize_query_intent(parsed["intent"])
            state.image_description = parsed["image_description"]
            if state.image_description:
                self._write_back_caption(chat, state.image_description)
            if not needs_retrieval(chat):
                self._apply_intent_prompt_override(chat)
        return await next()

    # -- helpers ---------------------------------------------------------------------------------
    async def _history(self, chat: ChatManage) -> list[History]:
        """LOAD_HISTORY's rounds, else the fallback fetch of 20 messages (spec §4.3.2)."""
        req = chat.request
        if chat.state.history:
            return chat.state.history
        store = self.services.messages
        if req.max_rounds <= 0 or store is None or not req.session_id:
            return []
        try:
            history = await asyncio.to_thread(
                load_and_process_history,
                store,
                req.session_id,
                req.max_rounds,
                req.params.query_understand_history_fetch,
            )
        except Exception as exc:
            log.warning("query_understand: history unavailable, continuing without: %s", exc)
            return []
        chat.state.history = history
        return history

    def _load(self, model_id: str, role: str) -> Any:
        try:
            return self.services.get_chat_model(model_id)
        except Exception as exc:
            log.warning("query_understand: %s model '%s' unavailable: %s", role, model_id, exc)
            return None

    def _select_model(self, chat: ChatManage, has_images: bool) -> tuple[Any, bool] | None:
        """``(model, send_images)`` following spec §4.3.3, or None when nothing loads."""
        req = chat.request
        if has_images:
            if req.chat_model_supports_vision and req.chat_model_id:
                model = self._load(req.chat_model_id, "vision chat")
                if model is not None:
                    return model, True
            if req.vlm_model_id:
                model = self._load(req.vlm_model_id, "VLM")
                if model is not None:
                    return model, True
            log.warning("query_understand: %d image(s) but no vision model; using the text path", len(req.images))
        if req.query_understand_model_id:
            model = self._load(req.query_understand_model_id, "query-understanding")
            if model is not None:
                return model, False
        if req.chat_model_id:
            model = self._load(req.chat_model_id, "chat")
            if model is not None:
                return model, False
        return None

    async def _asker_background(self, chat: ChatManage) -> str:
        memory = self.services.memory
        fn = getattr(memory, "asker_background", None) if memory is not None else None
        if fn is None:
            return ""
        try:
            return asker_background_block(await asyncio.to_thread(fn, chat.request.user_id, chat.request.query))
        except Exception as exc:
            log.warning("query_understand: asker background unavailable: %s", exc)
            return ""

    def _write_back_caption(self, chat: ChatManage, description: str) -> None:
        """Store the description as the first image caption of the user message, off the
        request's path (the request only waits for it at its very end)."""
        store, ctx = self.services.messages, chat.context
        fn = getattr(store, "set_first_image_caption", None) if store is not None else None
        if fn is None or not ctx.user_message_id:
            return
        session_id, message_id = chat.request.session_id, ctx.user_message_id

        async def write() -> None:
            try:
                if not await asyncio.to_thread(fn, session_id, message_id, description):
                    log.info("query_understand: user message '%s' stores no image to caption", message_id)
            except Exception as exc:
                log.warning("query_understand: image caption not saved: %s", exc)

        ctx.background_tasks.append(asyncio.ensure_future(write()))

    def _apply_intent_prompt_override(self, chat: ChatManage) -> None:
        intent = chat.state.intent
        override = chat.request.intent_prompt_overrides.get(intent, "")
        if override.strip():
            chat.state.system_prompt_override = override
            return
        if not chat.state.system_prompt_override and self.services.prompts is not None:
            text = self.services.prompts.intent_prompts().get(intent)
            if text:
                chat.state.system_prompt_override = text
