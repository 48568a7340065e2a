"""The judge's structured output: ``json_schema`` where the endpoint constrains decoding to it.

ragas' own client (instructor, JSON mode) asks for ``response_format: json_object`` and puts the
output model's schema in the prompt. A small local model, which llama-server then only holds to
"some JSON object", answers with nested objects of its own or the schema itself, and every judge
metric is NaN. :func:`schema_judge_llm` gives ragas' metrics an LLM that sends each prompt with
``response_format: json_schema`` instead — the output model's schema, its strings and arrays
bounded (:func:`rag_lab.models.structured.bounded_schema`) so that even a model that loops closes
the object within ``max_tokens``, its 0/1 verdicts limited to 0 and 1 (:func:`binary_verdicts`) —
at the judge's temperature and seed, and validates the reply
against the output model. The grammar makes the reply valid JSON of that shape, so it is asked
once: a reply that still does not validate is the metric's failure (NaN with the reason), not a
reason to ask again at temperature 0.

``structured_output`` in ``models.judge`` picks the mode: ``json_schema``, ``json_object``
(ragas' instructor client, up to :data:`~rag_lab.eval.ragas_adapter.judge.JUDGE_MAX_ATTEMPTS`
attempts per call) or ``auto`` (the default): ``json_schema`` when the endpoint is a llama-server
(it answers ``/props``), else ``json_object``
(:func:`~rag_lab.eval.ragas_adapter.judge.resolve_structured_output`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from openai import AsyncOpenAI
    from pydantic import BaseModel
    from ragas.llms.base import InstructorBaseRagasLLM

    from rag_lab.eval.ragas_adapter.judge import JudgeConfig

#: the output model a metric asks the judge for
_Out = TypeVar("_Out", bound="BaseModel")

__all__ = ["JudgeReplyError", "binary_verdicts", "schema_judge_llm"]

#: an integer field whose description says it is 0 or 1: ragas' verdicts ("the verdict(0/1) …",
#: "Binary (0/1) verdict …") and answer relevancy's "1 if … evasive …, 0 if …"
_BINARY = re.compile(r"\(?\b0\s*/\s*1\b\)?|\b1 if\b.*\b0 if\b|\b0 if\b.*\b1 if\b", re.IGNORECASE | re.DOTALL)


class JudgeReplyError(ValueError):
    """The judge's reply does not validate against the metric's output model."""


def binary_verdicts(schema: dict[str, object]) -> dict[str, object]:
    """``schema`` with every integer property described as a 0/1 verdict limited to ``enum [0, 1]``
    (in place; returned). The output models type verdicts as plain integers, and a small model
    constrained only to "an integer" writes 10000000000, which ragas' averages take as a weight."""

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "integer" and _BINARY.search(str(node.get("description", ""))):
                node["enum"] = [0, 1]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return schema


def schema_judge_llm(client: AsyncOpenAI, judge: JudgeConfig) -> InstructorBaseRagasLLM:
    """A ragas ``InstructorBaseRagasLLM`` sending each prompt to ``client`` (an
    ``openai.AsyncOpenAI``) with the bounded ``json_schema`` of the metric's output model."""
    from pydantic import ValidationError
    from ragas.llms.base import InstructorBaseRagasLLM

    from rag_lab.models.structured import bounded_schema, json_schema_format

    schemas: dict[type, dict[str, object]] = {}

    class SchemaJudgeLLM(InstructorBaseRagasLLM):
        is_async = True

        def __init__(self) -> None:
            self.client, self.model = client, judge.model

        def response_format(self, response_model: type[BaseModel]) -> dict[str, object]:
            if response_model not in schemas:
                schema = binary_verdicts(bounded_schema(response_model.model_json_schema(), judge.max_tokens))
                schemas[response_model] = json_schema_format(response_model.__name__, schema)
            return schemas[response_model]

        async def agenerate(self, prompt: str, response_model: type[_Out]) -> _Out:
            kwargs: dict[str, Any] = {
                "model": judge.model,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": judge.temperature,
                "top_p": 1.0,
                "max_tokens": judge.max_tokens,
                "response_format": self.response_format(response_model),
            }
            if judge.seed is not None:
                kwargs["seed"] = judge.seed
            resp = await client.chat.completions.create(**kwargs)
            choice = resp.choices[0]
            content = choice.message.content or ""
            try:
                return response_model.model_validate_json(content)
            except ValidationError as exc:
                errors = exc.errors()
                where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
                what = errors[0]["msg"] if errors else str(exc)
                raise JudgeReplyError(
                    f"{response_model.__name__}: the judge's reply does not validate at {where or 'reply'}: "
                    f"{what} (finish_reason={choice.finish_reason}; reply {content[:160]!r})"
                ) from None

        def generate(self, prompt: str, response_model: type[_Out]) -> _Out:
            from rag_lab.asyncutil import run_sync

            return run_sync(lambda: self.agenerate(prompt, response_model))

    return SchemaJudgeLLM()
