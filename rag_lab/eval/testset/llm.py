"""Test-set questions written by a chat model (``rag-lab testset --generator llm``).

:class:`LLMQuestionWriter` asks any OpenAI-compatible chat model (or the lab's own chat model)
three kinds of prompt, all in ``config/prompt_templates/testset_generation.yaml``:

* ``testset_question``: one question that one passage answers;
* ``testset_multihop_question``: one question that needs two passages (from two documents that
  the entity graph links through a shared entity);
* ``testset_answer``: the reference answer to a question, from its source passage(s).

Every reply must be one JSON object (a fenced block or text around it is tolerated; ``<think>``
blocks are skipped); the request asks for ``json_object``, or, on an endpoint that honours schema
bounds (llama-server), for the object's bounded ``json_schema``. Anything else is a *malformed reply*: counted as an error, never a crash,
never a question. A model fault (HTTP error, connection, timeout) is retried ``retries`` times and
then counted as a *model error*. Calls to a remote model run under ``timeout`` seconds
(:func:`rag_lab.models.timeouts.call_with_timeout`); temperature 0 and the run's seed are sent,
so a deterministic endpoint gives the same set twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_lab.eval.testset.generate import SourceChunk
from rag_lab.knowledge.entities.llm import extract_json_block, first_balanced_json
from rag_lab.models.base import ChatMessage, ChatOptions, ModelError
from rag_lab.models.timeouts import call_with_timeout, is_in_process
from rag_lab.prompts.templates import PromptTemplates, default_templates, render_prompt_placeholders
from rag_lab.searchutil.language import detect_language, sample_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.models.base import ChatModel
    from rag_lab.models.chat import OpenAIChatModel

__all__ = [
    "ANSWER_TEMPLATE",
    "MULTIHOP_TEMPLATE",
    "QUESTION_TEMPLATE",
    "LLMQuestionWriter",
    "MalformedReply",
    "Outcome",
    "corpus_language",
    "model_from_options",
    "model_name",
    "parse_reply",
]

QUESTION_TEMPLATE = "testset_question"
MULTIHOP_TEMPLATE = "testset_multihop_question"
ANSWER_TEMPLATE = "testset_answer"
#: the passage text sent to the model is cut at this many characters (a chunk rarely is longer)
MAX_PASSAGE_CHARS = 4000
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


class MalformedReply(ValueError):
    """A model reply that is not the JSON object a test-set prompt asks for."""


def parse_reply(text: str, keys: Sequence[str]) -> dict[str, str]:
    """The JSON object in a model reply, with each of ``keys`` as a stripped string (a missing
    key reads as ``""``). Raises :class:`MalformedReply` when there is no JSON object, or a key
    holds something other than a string."""
    body = extract_json_block(_THINK.sub("", text or ""))
    obj: object = None
    try:
        obj = json.loads(body)
    except ValueError:
        found = first_balanced_json(body)
        if found is not None:
            try:
                obj = json.loads(found)
            except ValueError:
                obj = None
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    if not isinstance(obj, dict):
        raise MalformedReply(f"no JSON object in the reply: {text[:160]!r}")
    out: dict[str, str] = {}
    for k in keys:
        v = obj.get(k, "")
        if v is None:
            v = ""
        if not isinstance(v, str):
            raise MalformedReply(f"reply field {k!r} is {type(v).__name__}, expected a string: {text[:160]!r}")
        out[k] = v.strip()
    return out


def corpus_language(texts: Sequence[str]) -> str:
    """What ``{{language}}`` says in the prompts: Chinese for a corpus detected as ``zh``
    (:func:`rag_lab.searchutil.language.detect_language`), else the passages' own language."""
    if detect_language(sample_text(texts)) == "zh":
        return "Chinese (简体中文), the language of the passages"
    return "the same language as the passage"


def model_name(model: object) -> str:
    """The model's name for provenance (``model`` attribute, else ``model_id``)."""
    return str(getattr(model, "model", "") or getattr(model, "model_id", "") or type(model).__name__)


def model_from_options(
    model: str, base_url: str, api_key_env: str | None = None, timeout: float = 60.0
) -> OpenAIChatModel:
    """An :class:`~rag_lab.models.chat.OpenAIChatModel` from ``--model`` / ``--base-url`` /
    ``--api-key-env``, checked as a judge config is (missing keys, an unset variable); the
    client does not retry by itself (the writer's ``retries`` bound the attempts)."""
    from rag_lab.eval.ragas_adapter.judge import JudgeConfig
    from rag_lab.models.chat import OpenAIChatModel

    cfg: dict[str, object] = {"model": model, "base_url": base_url, "timeout": timeout}
    if api_key_env:
        cfg["api_key_env"] = api_key_env
    jc = JudgeConfig.from_mapping(cfg, source="testset --model/--base-url")
    return OpenAIChatModel(jc.model, jc.base_url, jc.api_key, timeout=jc.timeout, max_retries=0)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One prompt's result: the parsed fields, or the error kind (``model error`` /
    ``malformed reply``) with its message."""

    fields: dict[str, str] | None
    error: str = ""
    message: str = ""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_PASSAGE_CHARS else text[:MAX_PASSAGE_CHARS] + " …"


class LLMQuestionWriter:
    """Questions and reference answers from a chat model (module docstring)."""

    def __init__(
        self,
        model: ChatModel,
        *,
        seed: int = 0,
        language: str = "the same language as the passage",
        prompts: PromptTemplates | None = None,
        timeout: float = 60.0,
        retries: int = 1,
        concurrency: int = 4,
        max_tokens: int = 512,
        json_mode: bool = True,
    ) -> None:
        if retries < 0 or concurrency < 1 or timeout <= 0:
            raise ValueError(f"retries={retries} must be >= 0, concurrency={concurrency} >= 1, timeout={timeout} > 0")
        if not getattr(model, "follows_instructions", True):
            raise ValueError(
                f"chat model {model_name(model)!r} cannot follow instructions (follows_instructions=False): "
                "give --model and --base-url of an OpenAI-compatible endpoint, or use --generator offline"
            )
        self.model = model
        self.seed, self.language = seed, language
        self.timeout, self.retries, self.max_tokens, self.json_mode = timeout, retries, max_tokens, json_mode
        self.prompts = prompts or default_templates()
        self._sem = asyncio.Semaphore(concurrency)
        self.calls = 0
        self._bounds: bool | None = None  # whether the endpoint honours schema bounds (probed once)

    def prompt_hash(self, *template_ids: str) -> str:
        """sha256 (16 hex digits) of the templates' texts, in the order given."""
        h = hashlib.sha256()
        for tid in template_ids:
            t = self.prompts.get(tid)
            h.update(f"{tid}\0{t.content}\0{t.user}\0".encode())
        return h.hexdigest()[:16]

    async def _ask(self, template_id: str, values: dict[str, str], keys: Sequence[str]) -> Outcome:
        t = self.prompts.get(template_id)
        vals = {**values, "language": self.language}
        messages = [
            ChatMessage("system", render_prompt_placeholders(t.content, vals)),
            ChatMessage("user", render_prompt_placeholders(t.user, vals)),
        ]
        options = ChatOptions(
            temperature=0.0,
            seed=self.seed,
            max_completion_tokens=self.max_tokens,
            thinking=False,
            timeout=self.timeout,
            response_format=await self._response_format(template_id, keys) if self.json_mode else None,
        )
        last = ""
        async with self._sem:
            for _ in range(1 + self.retries):
                self.calls += 1
                try:
                    resp = await call_with_timeout(
                        self.model.chat(messages, options),
                        in_process=is_in_process(self.model),
                        stage="testset",
                        param="timeout",
                        seconds=self.timeout,
                    )
                except ModelError as exc:
                    last = str(exc)
                    continue
                try:
                    return Outcome(parse_reply(resp.content, keys))
                except MalformedReply as exc:
                    return Outcome(None, "malformed reply", str(exc))
        return Outcome(None, "model error", last)

    async def _response_format(self, template_id: str, keys: Sequence[str]) -> dict[str, object]:
        """``json_object``; on an endpoint that honours schema bounds (llama-server, probed once off
        the loop) the object of ``keys`` as a ``json_schema`` whose strings fit ``max_tokens``, so
        that a small model's reply is the object even when it repeats itself."""
        if self._bounds is None:
            probe = getattr(self.model, "honours_schema_bounds", None)
            try:
                self._bounds = bool(await asyncio.to_thread(probe)) if callable(probe) else False
            except Exception:  # no answer about bounds: the plain JSON mode
                self._bounds = False
        if not self._bounds:
            return {"type": "json_object"}
        from rag_lab.models.structured import bounded_schema, json_schema_format

        schema = {"type": "object", "properties": {k: {"type": "string"} for k in keys}, "required": list(keys)}
        try:
            return json_schema_format(template_id, bounded_schema(schema, self.max_tokens))
        except ValueError:  # a token cap too small for bounded strings
            return {"type": "json_object"}

    async def question(self, src: SourceChunk) -> Outcome:
        return await self._ask(QUESTION_TEMPLATE, {"title": src.title, "passage": _cut(src.text)}, ("question",))

    async def multihop_question(self, a: SourceChunk, b: SourceChunk, entity: str) -> Outcome:
        values = {
            "entity": entity,
            "title_a": a.title,
            "passage_a": _cut(a.text),
            "title_b": b.title,
            "passage_b": _cut(b.text),
        }
        return await self._ask(MULTIHOP_TEMPLATE, values, ("question",))

    async def answer(self, question: str, sources: Sequence[SourceChunk]) -> Outcome:
        if len(sources) == 1:
            passages = f'Passage (document "{sources[0].title}"):\n{_cut(sources[0].text)}'
        else:
            passages = "\n\n".join(
                f'Passage {chr(65 + i)} (document "{s.title}"):\n{_cut(s.text)}' for i, s in enumerate(sources)
            )
        return await self._ask(ANSWER_TEMPLATE, {"question": question, "passages": passages}, ("answer", "evidence"))
