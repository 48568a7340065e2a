"""ragas metrics over evaluation records: per-sample records, offline metrics, LLM-judge metrics.

Everything ragas-specific lives in this package (the adapter boundary): the rest of rag_lab sees
:class:`RagasSample` records in and :class:`RagasResult` (one float per sample and metric, NaN
when it could not be scored, with the reason) out. ragas (0.4.x) is imported lazily, with
``RAGAS_DO_NOT_TRACK=true`` set first so nothing is sent anywhere.

Offline metrics (no model at all):

==========================  ================================================================
``id_context_recall``       ragas IDBasedContextRecall: gold doc ids found among the contexts' doc ids
``id_context_precision``    ragas IDBasedContextPrecision: contexts' distinct doc ids that are gold
``nonllm_context_recall``   ragas NonLLMContextRecall: gold documents matched (Levenshtein similarity
                            > 0.5) by some context
``nonllm_context_precision`` ragas NonLLMContextPrecisionWithReference: average precision of the
                            contexts matching (>= 0.5) some gold document
``string_similarity``       ragas NonLLMStringSimilarity: 1 - normalised Levenshtein(answer, reference)
``bleu``                    ragas BleuScore, unchanged (sacrebleu corpus BLEU over the ". "-split
                            sentences, default options: an answer under 4 tokens scores 0)
``rouge_l``                 ragas RougeScore (rougeL F-measure), unchanged: rouge_score's default
                            tokenizer keeps only ASCII letters and digits, so on Chinese text it
                            scores (near) 0 — use ``rouge_l_zh`` there
``chrf``                    ragas CHRFScore (character n-grams, language-independent)
==========================  ================================================================

Segmented variants (computed here, not by ragas, hence their own names):

==========================  ================================================================
``bleu_zh``                 sentence BLEU (sacrebleu, effective order, ``tokenize="none"``) over
                            jieba tokens (precise mode, lower-cased, punctuation dropped)
``rouge_l_zh``              ROUGE-L F-measure (rouge_score) over the same jieba tokens
==========================  ================================================================

LLM metrics (a judge on any OpenAI-compatible endpoint, see :class:`JudgeConfig`):
``faithfulness`` (ragas Faithfulness), ``answer_relevancy`` (ragas AnswerRelevancy, embeddings from
the lab's embedder or ``models.judge_embedder``), ``llm_context_precision`` (ragas
ContextPrecisionWithReference).

Failures are never dropped: a metric that raises, or returns NaN, leaves NaN in
:attr:`RagasResult.values` and a reason in :attr:`RagasResult.reasons`; :meth:`RagasResult.counts`
reports ``n``, ``n_valid``, ``n_nan`` (the metric said NaN) and ``n_failed`` (it raised or its
inputs were missing), and means are taken over the valid samples only, next to those counts.

The package is split by responsibility: :mod:`.samples` (metric names, samples, results),
:mod:`.judge` (judge config, call recording and projection), :mod:`.scorers` (the ragas metric
closures) and :mod:`.score` (scoring samples).
"""

from __future__ import annotations

from rag_lab.eval.ragas_adapter.judge import (
    JUDGE_CALLS_PER_SAMPLE,
    JUDGE_MAX_ATTEMPTS,
    JudgeConfig,
    add_judge_projection,
    judge_from_lab_config,
    judge_ledger_transport,
    judge_summary,
    project_judge,
)
from rag_lab.eval.ragas_adapter.samples import (
    ALL_METRICS,
    LLM_METRICS,
    OFFLINE_METRICS,
    SEGMENTED_METRICS,
    RagasError,
    RagasResult,
    RagasSample,
    contains_han,
    metric_tokens,
    samples_from_records,
)
from rag_lab.eval.ragas_adapter.score import ascore_repeated, ascore_samples, score_samples
from rag_lab.eval.ragas_adapter.scorers import prompt_hash

__all__ = [
    "ALL_METRICS",
    "JudgeConfig",
    "LLM_METRICS",
    "OFFLINE_METRICS",
    "RagasError",
    "RagasResult",
    "RagasSample",
    "SEGMENTED_METRICS",
    "contains_han",
    "metric_tokens",
    "samples_from_records",
    "score_samples",
    # used by the eval runner, the CLI and the tests
    "JUDGE_CALLS_PER_SAMPLE",
    "JUDGE_MAX_ATTEMPTS",
    "add_judge_projection",
    "ascore_repeated",
    "ascore_samples",
    "prompt_hash",
    "judge_from_lab_config",
    "judge_ledger_transport",
    "judge_summary",
    "project_judge",
]
