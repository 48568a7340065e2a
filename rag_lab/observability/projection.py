"""How many model calls and tokens a batch of questions will cost, before running it.

Call counts follow the pipeline's rules (one query embedding per embedding space, one rerank
call, one answer call, plus the query-understanding call when rewriting is on and the chat model
follows instructions). Token counts are upper bounds from the prompts, the KB's chunk sizes and
the token caps; the cost uses the lab's price table.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rag_lab.models.extractive import estimate_tokens
from rag_lab.types.params import PipelineParams

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.datasets.schema import Dataset
    from rag_lab.eval.suite_spec import SuiteSpec
    from rag_lab.lab.lab import Lab


class BudgetExceeded(ValueError):
    pass


@dataclass
class Projection:
    questions: int
    calls: dict[str, int] = field(default_factory=dict)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        calls = ", ".join(f"{n} {k}" for k, n in sorted(self.calls.items())) or "no model calls"
        return (
            f"{self.questions} questions → {calls}; ≤ {self.tokens_in} tokens in, ≤ {self.tokens_out} tokens out; "
            f"≤ ${self.cost_usd:.4f}"
        )

    def add(self, other: Projection) -> None:
        """Add ``other``'s questions, calls, tokens and cost to this projection."""
        self.questions += other.questions
        for k, v in other.calls.items():
            self.calls[k] = self.calls.get(k, 0) + v
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out
        self.cost_usd += other.cost_usd
        self.notes += [n for n in other.notes if n not in self.notes]

    def check_budget(self, budget_usd: float | None) -> None:
        if budget_usd is not None and self.cost_usd > budget_usd:
            raise BudgetExceeded(
                f"projected cost ${self.cost_usd:.4f} is over the budget ${budget_usd:.4f} ({self.describe()}); "
                f"lower the number of questions or raise --budget"
            )


def project_suites(
    lab: Lab, suites: Sequence[SuiteSpec], params: PipelineParams | None = None, repeat: int = 1
) -> Projection:
    """The projection of an evaluation (or sweep) over dataset slices, before anything is ingested:
    chunk sizes are estimated from the corpus texts and the KB chunk size (the LLM judge's calls
    are added by :func:`rag_lab.eval.ragas_adapter.add_judge_projection`)."""
    total = Projection(questions=0)
    for suite in suites:
        ds = suite.load()
        part = project_run(
            lab,
            [q.question for q in ds.queries],
            params=params,
            chunk_tokens=corpus_chunk_tokens(ds),
            n_kbs=1,
            repeat=repeat,
        )
        total.add(part)
    return total


def corpus_chunk_tokens(ds: Dataset) -> float:
    """Mean tokens per chunk of a dataset not ingested yet: its documents' tokens, capped at the
    chunk size (~4 characters per token)."""
    docs = [estimate_tokens(d.text) for d in ds.corpus[:500]]
    return min(statistics.mean(docs) if docs else 0.0, 512 / 4)


def _mean_chunk_tokens(lab: Lab, kb_ids: Sequence[str]) -> float:
    sizes = [estimate_tokens(c.content) for kb in kb_ids for c in lab.workspace.store.list_chunks(kb)[:500]]
    return statistics.mean(sizes) if sizes else 0.0


def project_run(
    lab: Lab,
    questions: Sequence[str],
    kbs: Sequence[str] | None = None,
    params: PipelineParams | None = None,
    chunk_tokens: float | None = None,
    n_kbs: int | None = None,
    repeat: int = 1,
) -> Projection:
    """Calls and tokens for ``questions`` on ``kbs`` (or every KB). For KBs not ingested yet pass
    ``chunk_tokens`` (mean tokens per chunk) and ``n_kbs``; ``repeat`` multiplies everything
    (the configurations of a sweep, before any stage cache)."""
    p = params or lab.params
    kb_objs = [lab.workspace.get_kb(k) for k in kbs] if kbs else list(lab.workspace.list_kbs())
    n = len(questions) * max(1, repeat)
    proj = Projection(questions=n)
    q_tokens = sum(estimate_tokens(q) for q in questions) * max(1, repeat)
    if chunk_tokens is None:
        chunk_tokens = _mean_chunk_tokens(lab, [kb.id for kb in kb_objs])
    chat_id = lab.chat_model.model_id

    def add(kind: str, model_id: str, count: int, tin: float, tout: float) -> None:
        if count <= 0:
            return
        proj.calls[kind] = proj.calls.get(kind, 0) + count
        proj.tokens_in += int(tin)
        proj.tokens_out += int(tout)
        proj.cost_usd += lab.prices.cost(model_id, int(tin), int(tout))

    if n_kbs is None:
        spaces = {kb.embedding_model_key for kb in kb_objs if kb.embedding_model_key and kb.vector_enabled}
        n_spaces, n_kbs = len(spaces), len(kb_objs)
    else:  # KBs still to be created with the lab's embedder: one embedding space
        n_spaces = 1 if n_kbs else 0
    add("embedding", lab.embedder.model_key, n * n_spaces, q_tokens * n_spaces, 0)
    if lab.reranker is not None and n_kbs:
        cands = min(p.embedding_top_k * max(1, n_kbs), p.rerank_max_candidates)
        add("rerank", lab.reranker.model_id, n, q_tokens * cands + n * cands * chunk_tokens, 0)
        proj.notes.append("a rerank call that keeps nothing above a threshold > 0.3 is retried once (not counted)")
    follows = getattr(lab.chat_model, "follows_instructions", True)
    if p.enable_rewrite and follows:
        rewrite = lab.prompts.get(lab.prompt_ids["rewrite"])
        prompt = estimate_tokens(rewrite.content + rewrite.user)
        add("chat", chat_id, n, n * prompt + q_tokens, n * p.query_understand_max_tokens)
    system = estimate_tokens(lab.prompts.text(lab.prompt_ids["system_prompt"]))
    add("chat", chat_id, n, n * (system + p.rerank_top_k * chunk_tokens) + q_tokens, n * p.max_completion_tokens)
    return proj
