"""Converters of the raw third-party QA datasets bundled under ``datasets/`` (CMRC 2018 trial,
HotpotQA HippoRAG-100, PubMedQA PQA-L); their command line is :mod:`rag_lab.commands.convert`.

Long because each converter carries its dataset's provenance text; the shared helpers are in
:mod:`rag_lab.eval.datasets.raw`."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

from rag_lab.eval.datasets.raw import (
    ConversionError,
    Converted,
    cc_by_sa_text,
    dedupe_keep_order,
    load_json,
    norm_title,
)

# --------------------------------------------------------------------------- CMRC 2018

CMRC_TRIAL = ("cmrc2018/cmrc2018_trial.json", "f3fae95b57da8e03afb2b57467dd221417060ef4d82db13bf22fc88589f3a6f3")


def convert_cmrc2018(raw: Path) -> Converted:
    """CMRC 2018 trial split: one corpus doc per distinct context, one query per question."""
    data = load_json(raw, *CMRC_TRIAL)
    corpus: list[dict[str, object]] = []
    queries: list[dict[str, object]] = []
    doc_by_context: dict[str, dict[str, Any]] = {}
    n_paragraphs = n_merged = n_empty_answers = n_dup_answers = 0
    skipped_questions: list[str] = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            n_paragraphs += 1
            context = para["context"]
            doc = doc_by_context.get(context)
            if doc is None:
                doc = {
                    "id": para["id"],
                    "title": article["title"],
                    "text": context,
                    "metadata": {"article_id": article["id"], "split": "trial"},
                }
                doc_by_context[context] = doc
                corpus.append(doc)
            else:
                n_merged += 1
                doc["metadata"].setdefault("merged_paragraph_ids", []).append(para["id"])
            for qa in para["qas"]:
                if not qa["question"].strip():
                    skipped_questions.append(qa["id"])
                    continue
                texts = [a["text"] for a in qa["answers"]]
                non_empty = [t for t in texts if t.strip()]
                n_empty_answers += len(texts) - len(non_empty)
                answers = dedupe_keep_order(non_empty)
                n_dup_answers += len(non_empty) - len(answers)
                queries.append(
                    {
                        "id": qa["id"],
                        "question": qa["question"],
                        "answers": answers,
                        "gold_ids": [doc["id"]],
                        "metadata": {
                            "paragraph_id": para["id"],
                            "answer_starts": [a["answer_start"] for a in qa["answers"] if a["text"].strip()],
                        },
                    }
                )
    notes = [
        "Input: `squad-style-data/cmrc2018_trial.json` only (the trial split, the smallest; the dev split "
        "— 848 paragraphs, 3,219 questions — is not converted here).",
        f"Corpus: one document per distinct `context` ({n_paragraphs} paragraphs, {n_merged} identical "
        "contexts merged into the first occurrence, listed in its `metadata.merged_paragraph_ids`). "
        "`id` = upstream paragraph id, `title` = article title, `text` = the context verbatim, "
        "`metadata` = `{article_id, split}`.",
        "Queries: one per question; `id` = upstream question id, `answers` = the answer texts verbatim "
        f"with repeats removed ({n_dup_answers} repeats) and empty answers removed ({n_empty_answers}), "
        "`gold_ids` = [the id of the document holding the question's paragraph], "
        "`metadata` = `{paragraph_id, answer_starts}` (upstream character offsets into the context; "
        "the raw PROVENANCE notes 5 trial offsets that are off by one, so match answers on text).",
        f"Skipped: {len(skipped_questions)} upstream questions whose text is empty "
        f"({', '.join(f'`{q}`' for q in skipped_questions) or 'none'}); every other question is kept.",
    ]
    head = CMRC_HEAD
    return Converted(
        name="cmrc2018",
        corpus=corpus,
        queries=queries,
        license_text=cc_by_sa_text(raw),
        provenance_head=head,
        conversion_notes=notes,
        stats=[
            ("language", "Chinese (simplified)"),
            (
                "upstream questions / kept / skipped (empty text)",
                f"{len(queries) + len(skipped_questions):,} / {len(queries):,} / {len(skipped_questions)}",
            ),
        ],
    )


CMRC_HEAD = """\
# CMRC 2018 (trial split) — Chinese span-extraction reading comprehension, as a retrieval set

| item | value |
|---|---|
| source | CMRC 2018, Cui et al., "A Span-Extraction Dataset for Chinese Machine Reading Comprehension", EMNLP-IJCNLP 2019 (https://aclanthology.org/D19-1600); HFL (Joint Laboratory of HIT and iFLYTEK Research) |
| repository | https://github.com/ymcui/cmrc2018 |
| commit | `c0eb1b6ba219847457e6af3180da722bbeb656af` (2022-04-27) |
| upstream file | `squad-style-data/cmrc2018_trial.json` (800,221 bytes, sha256 `f3fae95b57da8e03afb2b57467dd221417060ef4d82db13bf22fc88589f3a6f3`, checked by the converter) |
| licence | **CC BY-SA 4.0** — full text in `LICENSE` (copied from the repository's `LICENCE`) |

Attribution: CMRC 2018 by Cui et al. (HFL), licensed CC BY-SA 4.0. This folder is an adaptation
(format conversion described below) and is distributed under the same licence, CC BY-SA 4.0.
"""


# --------------------------------------------------------------------------- HotpotQA (HippoRAG 100)

HOTPOT_QUESTIONS = (
    "hotpotqa_hipporag100/hotpotqa_train.json",
    "6c0e2689d03c94b3bb4d5f94ed806ea4f4eb4f46c12132f8e91df774ad5c5a22",
)
HOTPOT_CORPUS = (
    "hotpotqa_hipporag100/hotpotqa_train_corpus.json",
    "2671af600095eabc5b3f3bc3728861682f14fcced84ef1386509a8ae92647f88",
)
HOTPOT_MIT = "hotpotqa_hipporag100/HIPPORAG_REPO_LICENSE.txt"


def hotpot_doc_id(title: str) -> str:
    """Stable corpus id of a HotpotQA paragraph: a hash of its (unique) title."""
    return "hotpot_" + hashlib.sha1(title.encode("utf-8")).hexdigest()[:12]


def convert_hotpotqa(raw: Path) -> Converted:
    """HippoRAG's 100 HotpotQA questions over the 994-paragraph pooled corpus."""
    questions = load_json(raw, *HOTPOT_QUESTIONS)
    title_to_sentences = load_json(raw, *HOTPOT_CORPUS)
    if not isinstance(title_to_sentences, dict):
        raise ConversionError(f"{raw / HOTPOT_CORPUS[0]}: expected an object title -> sentences")

    corpus: list[dict[str, object]] = []
    id_by_title: dict[str, str] = {}
    id_by_norm: dict[str, str] = {}
    for title, sentences in title_to_sentences.items():
        doc_id = hotpot_doc_id(title)
        if doc_id in id_by_title.values():
            raise ConversionError(f"hash collision on corpus id {doc_id} (title {title!r})")
        id_by_title[title] = doc_id
        id_by_norm.setdefault(norm_title(title), doc_id)
        starts: list[int] = []
        pos = 0
        for s in sentences:
            starts.append(pos)
            pos += len(s)
        corpus.append(
            {"id": doc_id, "title": title, "text": "".join(sentences), "metadata": {"sentence_starts": starts}}
        )

    def map_title(title: str) -> tuple[str | None, bool]:
        """Corpus id for a title (exact match first, then normalised); flag if normalised."""
        if title in id_by_title:
            return id_by_title[title], False
        found = id_by_norm.get(norm_title(title))
        return found, found is not None

    text_by_id = {d["id"]: d["text"] for d in corpus}
    queries: list[dict[str, object]] = []
    unmapped: list[tuple[str, str]] = []
    n_normalised = n_context_unmapped = n_context_mismatch = n_gold_links = 0
    for rec in questions:
        gold_ids: list[str] = []
        unmapped_titles: list[str] = []
        for title in dedupe_keep_order([t for t, _ in rec["supporting_facts"]]):
            doc_id, normalised = map_title(title)
            n_gold_links += 1
            if doc_id is None:
                unmapped.append((rec["_id"], title))
                unmapped_titles.append(title)
                continue
            n_normalised += normalised
            if doc_id not in gold_ids:
                gold_ids.append(doc_id)
        context_ids: list[str] = []
        for title, sentences in rec["context"]:
            doc_id, _ = map_title(title)
            if doc_id is None:
                n_context_unmapped += 1
                continue
            if text_by_id[doc_id] != "".join(sentences):
                n_context_mismatch += 1
            context_ids.append(doc_id)
        metadata: dict[str, object] = {
            "type": rec["type"],
            "level": rec["level"],
            "supporting_facts": [[t, i] for t, i in rec["supporting_facts"]],
            "context_ids": context_ids,
        }
        if unmapped_titles:
            metadata["unmapped_gold_titles"] = unmapped_titles
        queries.append(
            {
                "id": rec["_id"],
                "question": rec["question"],
                "answers": [rec["answer"]],
                "gold_ids": gold_ids,
                "metadata": metadata,
            }
        )

    if unmapped:
        for qid, title in unmapped:
            print(f"hotpotqa_hipporag100: query {qid}: supporting title {title!r} not in the corpus", file=sys.stderr)
    notes = [
        "Corpus: one document per entry of `hotpotqa_train_corpus.json` (an object title → list of "
        "sentences), in file order. `id` = `hotpot_` + the first 12 hex digits of sha1(title in UTF-8) "
        "(titles are unique; the converter fails on a collision), `title` = the title, `text` = the "
        "sentences concatenated verbatim (they carry their own leading spaces), "
        "`metadata.sentence_starts` = the character offset of each sentence in `text`.",
        "Queries: one per record of `hotpotqa_train.json`; `id` = `_id`, `answers` = [`answer`] "
        "(HotpotQA has no aliases), `gold_ids` = the distinct titles of `supporting_facts` in order, "
        "mapped to corpus ids by exact title (fallback: NFC + whitespace + case-insensitive match), "
        "`metadata` = `{type, level, supporting_facts ([title, sentence index] pairs, upstream), "
        "context_ids (the corpus ids of the record's own 10 context paragraphs: the distractor setting)}`.",
        f"Gold mapping: {n_gold_links} gold links, {n_gold_links - len(unmapped)} mapped "
        f"({n_normalised} only after normalisation), **{len(unmapped)} unmapped** "
        "(an unmapped title would be kept in the query's `metadata.unmapped_gold_titles`, never dropped "
        "silently). Context paragraphs not found in the corpus: "
        f"{n_context_unmapped}; found but with different text: {n_context_mismatch}.",
    ]
    mit = (raw / HOTPOT_MIT).read_text(encoding="utf-8")
    license_text = (
        "This folder holds two licences.\n\n"
        "1. The data (HotpotQA questions, answers and Wikipedia paragraphs) is licensed under the\n"
        "   Creative Commons Attribution-ShareAlike 4.0 International licence (CC BY-SA 4.0),\n"
        "   full text in part 1 below. Attribution: HotpotQA, Yang et al., EMNLP 2018\n"
        "   (https://hotpotqa.github.io/); paragraph text from Wikipedia.\n"
        "2. The 100-question subset and its corpus were selected and published by the HippoRAG\n"
        "   repository (https://github.com/OSU-NLP-Group/HippoRAG), under the MIT licence below\n"
        "   (part 2).\n\n"
        "==================================================================== part 1: CC BY-SA 4.0\n\n"
        + cc_by_sa_text(raw).rstrip("\n")
        + "\n\n==================================================================== part 2: MIT (HippoRAG)\n\n"
        + mit.rstrip("\n")
        + "\n"
    )
    return Converted(
        name="hotpotqa_hipporag100",
        corpus=corpus,
        queries=queries,
        license_text=license_text,
        provenance_head=HOTPOT_HEAD,
        conversion_notes=notes,
        stats=[
            ("language", "English (Wikipedia), multi-hop (2 gold paragraphs per question)"),
            ("gold links mapped / unmapped", f"{n_gold_links - len(unmapped)} / {len(unmapped)}"),
        ],
    )


HOTPOT_HEAD = """\
# HotpotQA — HippoRAG's 100-question subset with its pooled corpus (English, multi-hop)

| item | value |
|---|---|
| source | HotpotQA, Yang et al., "HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering", EMNLP 2018 (https://hotpotqa.github.io/), training split, distractor setting; subset selected by Gutiérrez et al., HippoRAG (NeurIPS 2024), OSU NLP Group |
| repository | https://github.com/OSU-NLP-Group/HippoRAG |
| commit | `b144c46df14cabe5f5822d8caded4bec5f709461` (2025-02-25; identical blobs since `3d95d255a8db0c1699b853cfb4fbe5056708162d`) |
| upstream files | `data/hotpotqa_train.json` (810,836 bytes, sha256 `6c0e2689d03c94b3bb4d5f94ed806ea4f4eb4f46c12132f8e91df774ad5c5a22`), `data/hotpotqa_train_corpus.json` (640,159 bytes, sha256 `2671af600095eabc5b3f3bc3728861682f14fcced84ef1386509a8ae92647f88`), both checked by the converter |
| licence | data **CC BY-SA 4.0** (HotpotQA; Wikipedia text); HippoRAG repository **MIT** — both texts in `LICENSE` |

Attribution: HotpotQA by Yang et al. (CC BY-SA 4.0), subset by the HippoRAG authors (MIT). This
folder is an adaptation (format conversion described below) distributed under CC BY-SA 4.0.
Caveat: the questions come from HotpotQA's *training* split.
"""


# --------------------------------------------------------------------------- PubMedQA PQA-L

PUBMED_DATA = ("pubmedqa_pqal/ori_pqal.json", "8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d")
PUBMED_TEST = (
    "pubmedqa_pqal/test_ground_truth.json",
    "939fe566f09017d13b1ca64d2ddfee0bc2374b366048152997669cccedc44d51",
)
PUBMED_MIT = "pubmedqa_pqal/UPSTREAM_LICENSE.txt"
PUBMED_SECTION_SEP = "\n\n"


def convert_pubmedqa(raw: Path) -> Converted:
    """PubMedQA PQA-L: one doc per PMID (sections joined), one query per PMID; test split first."""
    data = load_json(raw, *PUBMED_DATA)
    test = load_json(raw, *PUBMED_TEST)
    missing = [pmid for pmid in test if pmid not in data]
    if missing:
        raise ConversionError(f"{raw / PUBMED_TEST[0]}: PMIDs absent from ori_pqal.json: {missing[:5]}")
    disagree = [pmid for pmid, label in test.items() if data[pmid]["final_decision"] != label]
    if disagree:
        raise ConversionError(f"{raw / PUBMED_TEST[0]}: labels differ from ori_pqal.json for {disagree[:5]}")

    corpus: list[dict[str, object]] = []
    for pmid, rec in data.items():
        if len(rec["CONTEXTS"]) != len(rec["LABELS"]):
            raise ConversionError(f"{raw / PUBMED_DATA[0]}: PMID {pmid}: CONTEXTS and LABELS differ in length")
        starts: list[int] = []
        pos = 0
        for section in rec["CONTEXTS"]:
            starts.append(pos)
            pos += len(section) + len(PUBMED_SECTION_SEP)
        corpus.append(
            {
                "id": pmid,
                "title": f"PMID {pmid}",
                "text": PUBMED_SECTION_SEP.join(rec["CONTEXTS"]),
                "metadata": {
                    "section_labels": rec["LABELS"],
                    "section_starts": starts,
                    "meshes": rec["MESHES"],
                    "year": rec["YEAR"],
                },
            }
        )

    def query(pmid: str, split: str) -> dict[str, object]:
        rec = data[pmid]
        return {
            "id": pmid,
            "question": rec["QUESTION"],
            "answers": [rec["final_decision"], rec["LONG_ANSWER"]],
            "gold_ids": [pmid],
            "metadata": {"split": split, "final_decision": rec["final_decision"]},
        }

    queries = [query(p, "test") for p in data if p in test]
    queries += [query(p, "trainval") for p in data if p not in test]
    n_test = len(test)
    notes = [
        "Corpus: all 1,000 PQA-L abstracts, one document per PMID in `ori_pqal.json` order; `id` = PMID, "
        "`title` = `PMID <id>` (the article title is not in the data — the question is derived from it), "
        "`text` = the `CONTEXTS` sections joined with a blank line (the `LONG_ANSWER` conclusion is not "
        "part of it), `metadata` = `{section_labels, section_starts (character offsets in text), meshes, "
        "year (null for some abstracts)}`.",
        f"Queries: all 1,000 questions, the **{n_test} of the official test split** "
        "(`test_ground_truth.json`) first, then the other "
        f"{len(data) - n_test} (the train/dev pool), each group in `ori_pqal.json` order; "
        "`metadata.split` is `test` or `trainval`. `head(500)` is therefore the standard PQA-L test set; "
        "tune on the `trainval` queries. `id` = PMID, `answers` = [`final_decision` (yes/no/maybe), "
        "`LONG_ANSWER`], `gold_ids` = [PMID], `metadata.final_decision` repeats the label. "
        "The converter checks that the test labels equal `final_decision` (they all do).",
        "Every abstract is kept (not only the test half) so that each question has 999 distractor "
        "documents; the whole folder stays under 3 MB.",
    ]
    return Converted(
        name="pubmedqa_pqal",
        corpus=corpus,
        queries=queries,
        license_text=(raw / PUBMED_MIT).read_text(encoding="utf-8"),
        provenance_head=PUBMED_HEAD,
        conversion_notes=notes,
        stats=[
            ("language", "English (biomedical abstracts)"),
            ("test / trainval queries", f"{n_test} / {len(data) - n_test}"),
        ],
    )


PUBMED_HEAD = """\
# PubMedQA — PQA-L (expert-labelled), English biomedical

| item | value |
|---|---|
| source | PubMedQA, Jin et al., "PubMedQA: A Dataset for Biomedical Research Question Answering", EMNLP-IJCNLP 2019 |
| repository | https://github.com/pubmedqa/pubmedqa |
| commit | `1cbae8e92f72f20c8d3747cbb3bf5bc53554d997` (2023-04-18; data last changed in `1f00b98d`, 2019-08-23) |
| upstream files | `data/ori_pqal.json` (2,584,787 bytes, sha256 `8b3276be8942ebbd77f3ddcda12c1749bf0e490045a736fd8438ee40cf37a41d`), `data/test_ground_truth.json` (11,414 bytes, sha256 `939fe566f09017d13b1ca64d2ddfee0bc2374b366048152997669cccedc44d51`), both checked by the converter |
| licence | **MIT** ("Copyright (c) 2019 pubmedqa") — text in `LICENSE`, to be kept with any copy. The texts are PubMed abstracts. |
"""
