"""Harder evaluation sets made from the same raw files as :mod:`rag_lab.eval.datasets.bundled`:
slices with headroom for the regression gate.

* ``hotpotqa_distractor40``: the first 40 HippoRAG HotpotQA questions with *their own* distractor
  setting — each question's 10 context paragraphs (2 gold + 8 that HotpotQA retrieved by bigram
  TF-IDF as hard distractors), pooled over the 40 questions: gold is 20 % of the corpus and every
  question competes with topically close paragraphs, not random ones.
* ``cmrc2018_pool``: CMRC 2018 dev questions (the first question of each dev paragraph) over a pool
  of every dev and trial paragraph (1,104 Chinese Wikipedia paragraphs), so a slice draws its
  distractors from the whole pool.
* ``pubmedqa_long``: the 500 PubMedQA PQA-L test questions with the **long answer** (the
  abstract's conclusion) as the reference, over all 1,000 abstracts — the yes/no/maybe label
  cannot be compared with an extracted answer, the conclusion can.
"""

from __future__ import annotations

from pathlib import Path

from rag_lab.eval.datasets.bundled import (
    CMRC_HEAD,
    CMRC_TRIAL,
    HOTPOT_HEAD,
    PUBMED_DATA,
    PUBMED_HEAD,
    PUBMED_TEST,
    convert_cmrc2018,
    convert_hotpotqa,
    convert_pubmedqa,
)
from rag_lab.eval.datasets.raw import ConversionError, Converted, dedupe_keep_order, load_json

CMRC_DEV = ("cmrc2018/cmrc2018_dev.json", "e9ff74231f05c230c6fa88b84441ee334d97234cbb610991cd94b82db00c7f1f")
HOTPOT_HARD_QUESTIONS = 40


def convert_hotpotqa_distractor(raw: Path) -> Converted:
    """The first 40 HotpotQA questions over the union of their own 10-paragraph contexts."""
    base = convert_hotpotqa(raw)
    queries = base.queries[:HOTPOT_HARD_QUESTIONS]
    keep: list[str] = []
    for q in queries:
        keep += q["gold_ids"] + q["metadata"]["context_ids"]
    keep_set = set(dedupe_keep_order(keep))
    corpus = [d for d in base.corpus if d["id"] in keep_set]
    missing = keep_set - {d["id"] for d in corpus}
    if missing:
        raise ConversionError(f"hotpotqa_distractor40: context ids not in the corpus: {sorted(missing)[:5]}")
    n_gold = len({g for q in queries for g in q["gold_ids"]})
    notes = [
        f"Made from the `hotpotqa_hipporag100` conversion (same ids, texts and query fields): its first "
        f"{HOTPOT_HARD_QUESTIONS} queries, and as corpus the union of those queries' own context paragraphs "
        "(`metadata.context_ids`: HotpotQA's distractor setting, 2 gold + 8 distractors retrieved by "
        "bigram TF-IDF for that question) in the pooled corpus' order.",
        f"{n_gold} gold documents of {len(corpus)} ({100 * n_gold / len(corpus):.0f} %): every question "
        "competes with topically close paragraphs and with the other questions' paragraphs.",
    ] + base.conversion_notes[2:]
    return Converted(
        name="hotpotqa_distractor40",
        corpus=corpus,
        queries=queries,
        license_text=base.license_text,
        provenance_head=HOTPOT_HEAD.replace(
            "# HotpotQA — HippoRAG's 100-question subset with its pooled corpus (English, multi-hop)",
            "# HotpotQA distractor setting — 40 HippoRAG questions over their own context paragraphs",
        ),
        conversion_notes=notes,
        stats=[("language", "English (Wikipedia), multi-hop"), ("gold share of the corpus", f"{n_gold}/{len(corpus)}")],
    )


def convert_cmrc2018_pool(raw: Path) -> Converted:
    """CMRC 2018 dev: one query per dev paragraph (its first question) over every dev + trial paragraph."""
    dev = load_json(raw, *CMRC_DEV)
    trial = convert_cmrc2018(raw)
    corpus: list[dict[str, object]] = []
    queries: list[dict[str, object]] = []
    doc_by_context: dict[str, dict[str, object]] = {}
    n_dev_questions = n_merged = 0
    for article in dev["data"]:
        for para in article["paragraphs"]:
            doc = doc_by_context.get(para["context"])
            if doc is None:
                doc = {
                    "id": para["id"],
                    "title": article["title"],
                    "text": para["context"],
                    "metadata": {"article_id": article["id"], "split": "dev"},
                }
                doc_by_context[para["context"]] = doc
                corpus.append(doc)
            else:
                n_merged += 1
            qas = [qa for qa in para["qas"] if qa["question"].strip()]
            n_dev_questions += len(para["qas"])
            if not qas:
                continue
            qa = qas[0]
            answers = dedupe_keep_order([a["text"] for a in qa["answers"] if a["text"].strip()])
            queries.append(
                {
                    "id": qa["id"],
                    "question": qa["question"],
                    "answers": answers,
                    "gold_ids": [doc["id"]],
                    "metadata": {"paragraph_id": para["id"], "split": "dev"},
                }
            )
    dev_ids = {d["id"] for d in corpus}
    clash = [d["id"] for d in trial.corpus if d["id"] in dev_ids]
    if clash:
        raise ConversionError(f"cmrc2018_pool: trial paragraph ids also in dev: {clash[:5]}")
    corpus += [d for d in trial.corpus if d["text"] not in doc_by_context]
    notes = [
        f"Inputs: `squad-style-data/cmrc2018_dev.json` (sha256 `{CMRC_DEV[1]}`, checked) and the trial "
        f"file (`{CMRC_TRIAL[0]}`, as converted for `cmrc2018`).",
        f"Corpus: every dev paragraph ({len(dev_ids)} documents; {n_merged} identical contexts merged) "
        f"followed by every trial paragraph ({len(corpus) - len(dev_ids)}), ids, titles and texts verbatim, "
        "`metadata` = `{article_id, split}`: the distractor pool of any slice.",
        f"Queries: the first non-empty question of each dev paragraph ({len(queries)} of the "
        f"{n_dev_questions} dev questions), so no paragraph is asked about more than once; `answers` = "
        "the annotators' answers, repeats and empty ones removed; `gold_ids` = [its paragraph].",
    ]
    return Converted(
        name="cmrc2018_pool",
        corpus=corpus,
        queries=queries,
        license_text=trial.license_text,
        provenance_head=CMRC_HEAD.replace(
            "# CMRC 2018 (trial split) — Chinese span-extraction reading comprehension, as a retrieval set",
            "# CMRC 2018 (dev questions over the dev + trial paragraph pool) — Chinese retrieval set",
        ).replace(
            "| upstream file | `squad-style-data/cmrc2018_trial.json`",
            f"| upstream files | `squad-style-data/cmrc2018_dev.json` (sha256 `{CMRC_DEV[1]}`), "
            "`squad-style-data/cmrc2018_trial.json`",
        ),
        conversion_notes=notes,
        stats=[("language", "Chinese (simplified)")],
    )


def convert_pubmedqa_long(raw: Path) -> Converted:
    """PubMedQA PQA-L test questions with the long answer as the only reference, all abstracts."""
    base = convert_pubmedqa(raw)
    data = load_json(raw, *PUBMED_DATA)
    test = load_json(raw, *PUBMED_TEST)
    queries = []
    for q in base.queries:
        if q["metadata"]["split"] != "test":
            continue
        long_answer = data[q["id"]]["LONG_ANSWER"]
        if not long_answer.strip():
            raise ConversionError(f"{raw / PUBMED_DATA[0]}: PMID {q['id']}: empty LONG_ANSWER")
        queries.append({**q, "answers": [long_answer]})
    notes = [
        f"Made from the `pubmedqa_pqal` conversion: the same 1,000 abstracts as corpus, and the {len(test)} "
        "official test questions only, each with `answers` = [`LONG_ANSWER`] (the abstract's conclusion, "
        "which is not part of the document text); the yes/no/maybe label stays in `metadata.final_decision`.",
        "Why: answer-similarity metrics compare the pipeline's answer with the first reference; against "
        "a one-word label every extracted answer scores near 0, against the conclusion it can score.",
    ]
    return Converted(
        name="pubmedqa_long",
        corpus=base.corpus,
        queries=queries,
        license_text=base.license_text,
        provenance_head=PUBMED_HEAD.replace(
            "# PubMedQA — PQA-L (expert-labelled), English biomedical",
            "# PubMedQA — PQA-L test questions with the long answer as reference, English biomedical",
        ),
        conversion_notes=notes,
        stats=[("language", "English (biomedical abstracts)")],
    )


HARD_CONVERTERS = {
    "hotpotqa_distractor40": convert_hotpotqa_distractor,
    "cmrc2018_pool": convert_cmrc2018_pool,
    "pubmedqa_long": convert_pubmedqa_long,
}
