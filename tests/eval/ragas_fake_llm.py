"""A scripted OpenAI-compatible chat reply for ragas' test-set pipeline (tests only).

ragas (0.4.3, via instructor's JSON mode) sends each prompt with its output's JSON schema in the
system message and its input as JSON after ``input:`` in the user message. :class:`RagasScript`
answers by the schema's title with a small valid object made from that input: summaries are the
text's first words, themes and entities its capitalised words, the persona is fixed, a query
names its term(s) and its answer is the context's first sentence. ``fail_queries`` answers that
many query-generation prompts with an HTTP 500 (a model fault), the next ``copy_queries`` ones
with their context's first sentence as the question (a copy), ``counts`` tallies prompt kinds.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from tests.models.fake_openai import RecordedRequest, Reply

_SCHEMA = re.compile(r"json_schema:\s*(\{.*\})\s*Make sure", re.DOTALL)
_INPUT = re.compile(r"input: (\{.*\})\s*Output: ?$", re.DOTALL)
_HOP = re.compile(r"^<\d+-hop>\s*")


def _capitalised(text: str) -> list[str]:
    return list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]{3,}\b", text)))


def _first_sentence(text: str) -> str:
    text = _HOP.sub("", text.strip())
    return re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]


class RagasScript:
    def __init__(self, fail_queries: int = 0, copy_queries: int = 0) -> None:
        self.fail_queries = fail_queries
        self.copy_queries = copy_queries
        self.counts: Counter[str] = Counter()

    def __call__(self, req: RecordedRequest) -> Reply:
        system, user = req.json["messages"][0]["content"], req.json["messages"][-1]["content"]
        title = json.loads(_SCHEMA.search(system).group(1))["title"]
        m = _INPUT.search(user)
        data: dict[str, Any] = json.loads(m.group(1)) if m else {}
        self.counts[title] += 1
        if title == "GeneratedQueryAnswer" and self.fail_queries > 0:
            self.fail_queries -= 1
            return Reply.error(500, "scripted query failure")
        return Reply.chat(json.dumps(self._reply(title, data)))

    def _reply(self, title: str, data: dict[str, Any]) -> dict[str, Any]:
        text = str(data.get("text") or data.get("node_content") or "")
        if title == "StringIO":
            return {"text": " ".join(text.split()[:12])}
        if title == "QuestionPotentialOutput":
            return {"score": 5}
        if title == "ThemesAndConcepts":
            return {"output": _capitalised(text)[:4] or ["topic"]}
        if title == "NEROutput":
            return {"entities": _capitalised(text)[:6]}
        if title == "Persona":
            return {"name": "Curious Reader", "role_description": "Wants facts about the people in the texts."}
        if title == "PersonaThemesMapping":
            return {"mapping": {p["name"]: list(data["themes"]) for p in data["personas"]}}
        if title == "ConceptCombinations":
            lists = data["lists_of_concepts"]
            return {"combinations": [[lists[0][0], lists[1][0]]] if len(lists) > 1 else []}
        if title == "GeneratedQueryAnswer":
            terms = data.get("themes") or [data.get("term", "it")]
            ctx = data["context"]
            first = ctx[0] if isinstance(ctx, list) else ctx
            answer = _first_sentence(first)
            if self.copy_queries > 0:
                self.copy_queries -= 1
                return {"query": answer, "answer": answer}
            return {"query": f"What do the texts say about {' and '.join(map(str, terms))}?", "answer": answer}
        raise AssertionError(f"unscripted ragas prompt {title!r}")
