"""Hybrid search latency and recall@10: rag_lab vs the rank-bm25 + FAISS stack vs bm25s + numpy vs
exact search.

Usage:
    .venv/bin/python benchmarks/search.py            # bundled corpora + synthetic 10k and 100k
    .venv/bin/python benchmarks/search.py --quick    # hotpotqa + synthetic 10k, 50 queries
    .venv/bin/python benchmarks/search.py --sizes 10000 --datasets none --queries 100

For every corpus, in one process and on the same chunks, vectors and queries:

* **rag_lab** — ``HybridSearcher.search`` over a Workspace (the path CHUNK_SEARCH takes): faiss
  (flat below ``IndexPolicy.quantized_min_vectors`` vectors, from there on the 8-bit pre-scan with
  exact re-scoring, in one part per core from 40,000 vectors, which returns the flat scan's
  results; HNSW where a policy opts in) + bm25s, over-recall pool 50, weighted RRF (k 60,
  0.7 / 0.3) normalised to [0, 1], hydration from SQLite rows, top 10. The KB's chunk and document rows are read once on its
  first search (``KbRows``), as the 8-bit copy is built on its first query; both times are
  noted, like the anchor's index build. Where the policy picks another structure, a second row forces the flat scan
  (``rag_lab (flat)``), and the time the first query took to build that structure is noted.
  Where the 8-bit copy is scanned in parallel parts, the search runs its retrievers in turn in
  the caller's thread; a row ``rag_lab, worker threads`` runs them in worker threads instead,
  in the same pass.
* **rank-bm25 + FAISS flat** — the common LangChain-style stack: ``rank_bm25.BM25Okapi``
  (k1 1.5, b 0.75, epsilon 0 so that its ranking is BM25's, the same as bm25s') over the same
  tokens, a ``faiss.IndexFlatIP``, the same pool of 50 per retriever and the same weighted RRF
  (:func:`rag_lab.retrieval.fusion.fuse_hits`), documents from an in-memory list.
* **bm25s + numpy** — what a careful user writes in ten lines: a bm25s index over the same tokens
  and the vectors as one numpy matrix (``vectors @ q``, ``argpartition`` for the pool of 50), the
  same fusion, documents from an in-memory dict.
* **exact** — the reference for recall: every cosine with numpy, every BM25 score (bm25s), full
  sorts by (score, chunk id), the same fusion. It runs in a pass of its own, before the other
  two take turns per query: at 100k its numpy scan reads 150 MB per query, which takes the
  next stack's data out of the CPU caches (rag_lab's 100k p50 was 6.46 ms in the run of this
  script before the change and 5.57 ms in the run after it, minutes apart).

recall@10 = |top-10 ∩ exact top-10| / |exact top-10|, averaged over the queries. Latencies are per
query with the query embedding given (embedding time is the same for every stack and excluded).
``speed-up`` = the rank-bm25 + FAISS stack's p50 / this row's p50, measured in the same run.

Bundled corpora (``datasets/*``) are embedded with the offline MiniLM model and queried with their
own questions. Synthetic corpora are topic-clustered word documents (one chunk each) embedded by a
bag-of-words topic model (384-d, low intrinsic dimension like sentence embeddings), queried with
words drawn from a random document; they measure scale, not retrieval quality.
"""

from __future__ import annotations

import os

# One BLAS thread: after a matrix product OpenBLAS' worker threads spin for a while, and on 2 cores
# they took the CPU from whichever stack ran next (measured: rag_lab 33 ms p50 at 100k interleaved
# with the numpy "exact" stack vs 6.8 ms in a pass without it). Every stack here answers one query
# at a time, where one thread is what they use anyway.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import asyncio  # noqa: E402
import dataclasses
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_lab.retrieval.base import IndexWithScore, SearchParams  # noqa: E402
from rag_lab.retrieval.fusion import fuse_hits, resolve_rrf_k, resolve_rrf_weights  # noqa: E402
from rag_lab.retrieval.tokenization import DEFAULT_TOKENIZER  # noqa: E402
from rag_lab.types.params import PipelineParams  # noqa: E402

TOP_K = 10
BUNDLED = ("hotpotqa_hipporag100", "pubmedqa_pqal", "cmrc2018")


# -- synthetic corpus --------------------------------------------------------------------------
_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vi",
    "so",
    "pe",
    "du",
    "ga",
    "li",
    "mo",
    "na",
    "ri",
    "te",
    "zu",
    "ba",
    "fe",
    "ho",
]


def _word(i: int) -> str:
    """Distinct pronounceable words: 3 syllables, then 4 (base-20 digits)."""
    n = 3 if i < 20**3 else 4
    i = i if n == 3 else i - 20**3
    return "".join(_SYLLABLES[(i // 20**k) % 20] for k in range(n))


class TopicEmbedder:
    """Bag-of-words embeddings with topic structure: a word's vector is its topic's centre plus
    a component in a 16-d topic subspace; a text's vector is the normalised mean of its known
    words' vectors. Deterministic for a seed; ``model_key`` names it."""

    def __init__(self, n_topics: int, words_per_topic: int, n_common: int, dim: int = 384, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.dimension = dim
        self.model_key = f"synthetic-topic-bow-{n_topics}x{words_per_topic}-{dim}|benchmark"
        n_words = n_topics * words_per_topic + n_common
        self.words = [_word(i) for i in range(n_words)]
        self.ids = {w: i for i, w in enumerate(self.words)}
        centres = rng.normal(size=(n_topics, dim)).astype(np.float32)
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        k = 16
        vecs = np.empty((n_words, dim), dtype=np.float32)
        for t in range(n_topics):
            basis = rng.normal(size=(dim, k)).astype(np.float32) / np.sqrt(dim)
            z = rng.normal(size=(words_per_topic, k)).astype(np.float32)
            vecs[t * words_per_topic : (t + 1) * words_per_topic] = centres[t] + 2.5 * z @ basis.T
        common_basis = rng.normal(size=(dim, k)).astype(np.float32) / np.sqrt(dim)
        vecs[n_topics * words_per_topic :] = 0.8 * rng.normal(size=(n_common, k)).astype(np.float32) @ common_basis.T
        self.vectors = vecs
        self.n_topics, self.words_per_topic, self.n_common = n_topics, words_per_topic, n_common

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = [self.ids[w] for w in text.lower().split() if w in self.ids]
            if ids:
                v = self.vectors[ids].mean(axis=0)
                out[i] = v / (np.linalg.norm(v) or 1.0)
        return out


def synthetic_corpus(n_docs: int, n_queries: int, seed: int = 1) -> tuple[TopicEmbedder, list[dict], list[str]]:
    """``n_docs`` one-chunk documents over ``n_docs // 200`` topics and ``n_queries`` questions."""
    n_topics = max(20, n_docs // 200)
    emb = TopicEmbedder(n_topics=n_topics, words_per_topic=80, n_common=300, seed=seed)
    rng = np.random.default_rng(seed + 1)
    topic_p = 1.0 / np.arange(1, n_topics + 1) ** 0.6
    topic_p /= topic_p.sum()
    word_p = 1.0 / np.arange(1, emb.words_per_topic + 1)
    word_p /= word_p.sum()
    common_p = 1.0 / np.arange(1, emb.n_common + 1)
    common_p /= common_p.sum()
    base_common = n_topics * emb.words_per_topic
    topics = rng.choice(n_topics, size=n_docs, p=topic_p)
    lengths = rng.integers(30, 55, size=n_docs)
    docs, words_of = [], []
    for i in range(n_docs):
        n_topic = int(lengths[i] * 0.75)
        tw = topics[i] * emb.words_per_topic + rng.choice(emb.words_per_topic, size=n_topic, p=word_p)
        cw = base_common + rng.choice(emb.n_common, size=int(lengths[i]) - n_topic, p=common_p)
        ids = np.concatenate([tw, cw])
        rng.shuffle(ids)
        words_of.append(tw)
        docs.append({"id": f"s{i:06d}", "title": "", "text": " ".join(emb.words[j] for j in ids)})
    queries = []
    for d in rng.choice(n_docs, size=n_queries, replace=False):
        picked = rng.choice(np.unique(words_of[d]), size=min(3, len(np.unique(words_of[d]))), replace=False)
        queries.append(" ".join(emb.words[j] for j in picked))
    return emb, docs, queries


class DiskCachedEmbedder:
    """Wraps an embedder with an on-disk cache (text sha256 → vector, one ``.npz`` per model),
    so that re-running the benchmark does not re-embed the bundled corpora."""

    def __init__(self, inner: Any, cache_dir: Path) -> None:
        import hashlib

        self.inner, self.model_key, self.dimension = inner, inner.model_key, inner.dimension
        self._sha = lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest()
        safe = hashlib.sha256(self.model_key.encode()).hexdigest()[:16]
        self.path = cache_dir / f"embeddings-{safe}.npz"
        self.cache: dict[str, np.ndarray] = {}
        if self.path.exists():
            with np.load(self.path) as z:
                self.cache = dict(zip(z["keys"].tolist(), z["vectors"]))
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._sha(t) for t in texts]
        todo = [i for i, k in enumerate(keys) if k not in self.cache]
        if todo:
            self.misses += len(todo)
            vecs = np.asarray(self.inner.embed([texts[i] for i in todo]), dtype=np.float32)
            for i, v in zip(todo, vecs):
                self.cache[keys[i]] = v
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, self.dimension), np.float32)

    def save(self) -> None:
        if not self.misses:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        np.savez(tmp, keys=np.asarray(list(self.cache)), vectors=np.stack(list(self.cache.values())))
        tmp.replace(self.path)


# -- corpora in a workspace --------------------------------------------------------------------
@dataclass
class Corpus:
    name: str
    ws: Any
    kb: Any
    embedder: Any
    chunk_ids: list[str]
    texts: list[str]
    vectors: np.ndarray
    queries: list[str]
    query_vectors: np.ndarray
    ingest_s: float
    notes: list[str] = field(default_factory=list)


def build_corpus(name: str, root: Path, embedder: Any, docs: list[dict], queries: list[str]) -> Corpus:
    from rag_lab.knowledge.workspace import Workspace

    ws = Workspace(root / name)
    kb = ws.create_kb(name, embedder)
    t0 = time.perf_counter()
    ws.ingest_documents(kb, docs, embedder, progress=False)
    ingest_s = time.perf_counter() - t0
    entries, vectors = ws.vector_index(kb).export_vectors()
    order = np.argsort([e.chunk_id for e in entries], kind="stable")
    chunk_ids = [entries[i].chunk_id for i in order]
    vectors = np.ascontiguousarray(vectors[order])
    chunks = ws.store.get_chunks(chunk_ids)
    texts = [chunks[c].content for c in chunk_ids]
    qv = np.asarray(embedder.embed(queries), dtype=np.float32)
    return Corpus(name, ws, kb, embedder, chunk_ids, texts, vectors, queries, qv, ingest_s)


# -- the three stacks ----------------------------------------------------------------------------
def _hits(ids: Sequence[str], scores: Sequence[float], match_type: int) -> list[IndexWithScore]:
    return [
        IndexWithScore(
            id=c, content="", chunk_id=c, knowledge_id="", knowledge_base_id="", score=float(s), match_type=match_type
        )
        for c, s in zip(ids, scores)
    ]


class Fusion:
    def __init__(self, params: PipelineParams, top_k: int = TOP_K) -> None:
        self.k = resolve_rrf_k(params.rrf_k)
        self.wv, self.wk = resolve_rrf_weights(params.rrf_vector_weight, params.rrf_keyword_weight)
        self.top_k = top_k

    def __call__(self, vec: list[IndexWithScore], kw: list[IndexWithScore]) -> list[str]:
        return [h.chunk_id for h in fuse_hits(vec, kw, self.k, self.wv, self.wk)[: self.top_k]]


class RankBm25FaissStack:
    """rank_bm25.BM25Okapi + faiss.IndexFlatIP, fused with the same weighted RRF."""

    def __init__(self, c: Corpus, pool: int, fusion: Fusion, threshold: float) -> None:
        import faiss
        from rank_bm25 import BM25Okapi

        t0 = time.perf_counter()
        self.bm25 = BM25Okapi([DEFAULT_TOKENIZER.tokenize(t) for t in c.texts], k1=1.5, b=0.75, epsilon=0.0)
        self.index = faiss.IndexFlatIP(c.vectors.shape[1])
        self.index.add(c.vectors)
        self.build_s = time.perf_counter() - t0
        self.ids = c.chunk_ids
        self.docs = dict(zip(c.chunk_ids, c.texts))  # the docstore
        self.pool, self.fusion, self.threshold = pool, fusion, threshold

    def search(self, query: str, qvec: np.ndarray) -> list[str]:
        scores = self.bm25.get_scores(DEFAULT_TOKENIZER.tokenize(query))
        top = np.argsort(-scores, kind="stable")[: self.pool]
        top = top[scores[top] > 0]
        kw = _hits([self.ids[i] for i in top], scores[top], 1)
        d, idx = self.index.search(qvec.reshape(1, -1), self.pool)
        keep = [(i, s) for i, s in zip(idx[0], d[0]) if i >= 0 and s >= self.threshold]
        vec = _hits([self.ids[i] for i, _ in keep], [s for _, s in keep], 0)
        out = self.fusion(vec, kw)
        self.last_docs = [self.docs[cid] for cid in out]  # what the retriever hands on
        return out


class Bm25sNumpyStack:
    """What a careful user writes in ten lines: a bm25s index (numpy backend, k1 1.5, b 0.75, the
    same tokens) and the vectors as one numpy matrix (``vectors @ q``, ``argpartition`` for the
    pool), fused with the same weighted RRF, documents from an in-memory dict."""

    def __init__(self, c: Corpus, pool: int, fusion: Fusion, threshold: float) -> None:
        import bm25s

        t0 = time.perf_counter()
        self.bm25 = bm25s.BM25(k1=1.5, b=0.75, backend="numpy")
        self.bm25.index([DEFAULT_TOKENIZER.tokenize(t) for t in c.texts], show_progress=False)
        self.vectors = np.ascontiguousarray(c.vectors, dtype=np.float32)
        self.build_s = time.perf_counter() - t0
        self.ids = c.chunk_ids
        self.docs = dict(zip(c.chunk_ids, c.texts))
        self.pool, self.fusion, self.threshold = pool, fusion, threshold

    def _top(self, scores: np.ndarray) -> np.ndarray:
        k = min(self.pool, scores.size)
        top = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
        return top[np.argsort(-scores[top], kind="stable")]

    def search(self, query: str, qvec: np.ndarray) -> list[str]:
        tids = self.bm25.get_tokens_ids(DEFAULT_TOKENIZER.tokenize(query))
        kw: list[IndexWithScore] = []
        if tids:
            scores = np.asarray(self.bm25.get_scores_from_ids(tids))
            top = self._top(scores)
            top = top[scores[top] > 0]
            kw = _hits([self.ids[i] for i in top], scores[top], 1)
        cos = self.vectors @ qvec
        top = self._top(cos)
        top = top[cos[top] >= self.threshold]
        vec = _hits([self.ids[i] for i in top], cos[top], 0)
        out = self.fusion(vec, kw)
        self.last_docs = [self.docs[cid] for cid in out]
        return out


class ExactStack:
    """Every cosine (numpy) and every BM25 score (bm25s scores the whole corpus), exact top-50s
    with ties by chunk id, the same fusion."""

    def __init__(self, c: Corpus, pool: int, fusion: Fusion, threshold: float) -> None:
        self.kindex = c.ws.keyword_index(c.kb)
        self.vectors, self.ids = c.vectors, c.chunk_ids
        self.pool, self.fusion, self.threshold = pool, fusion, threshold

    def search(self, query: str, qvec: np.ndarray) -> list[str]:
        cos = self.vectors @ qvec
        k = min(len(cos), self.pool + 16)
        cand = np.argpartition(-cos, k - 1)[:k]
        cand = cand[np.lexsort((cand, -cos[cand]))][: self.pool]  # ids are sorted: ties by chunk id
        cand = cand[cos[cand] >= self.threshold]
        vec = _hits([self.ids[i] for i in cand], cos[cand], 0)
        kw_pairs = self.kindex.search(query, self.pool)  # full BM25 scoring, exact order
        kw = _hits([c for c, _ in kw_pairs], [s for _, s in kw_pairs], 1)
        return self.fusion(vec, kw)


class RagLabStack:
    """``HybridSearcher.search`` on the corpus' workspace."""

    def __init__(self, c: Corpus, params: PipelineParams, threshold: float, top_k: int = TOP_K) -> None:
        from rag_lab.retrieval.hybrid_search import HybridSearcher

        self.searcher = HybridSearcher(c.ws, lambda kb: c.embedder, params)
        self.kb_id, self.threshold, self.top_k = c.kb.id, threshold, top_k

    async def search(self, query: str, qvec: np.ndarray) -> list[str]:
        sp = SearchParams(
            query_text=query,
            query_embedding=qvec,
            match_count=self.top_k,
            vector_threshold=self.threshold,
            knowledge_base_ids=[self.kb_id],
        )
        return [r.id for r in await self.searcher.search(self.kb_id, sp)]


def _with_policy(vindex: Any, policy: Any, ours: RagLabStack) -> Callable[[str, np.ndarray], Any]:
    """``ours.search`` with the vector index switched to ``policy`` for the call (derived structures
    are kept across switches: only data changes drop them)."""

    async def search(query: str, qvec: np.ndarray) -> list[str]:
        vindex.policy = policy
        return await ours.search(query, qvec)

    return search


def _in_threads(engine: Any, vindex: Any, policy: Any, ours: RagLabStack) -> Callable[[str, np.ndarray], Any]:
    """``ours.search`` with the vector and keyword retrievers in worker threads (as for any search
    before ``LocalEngine.inline_max_parallel_vectors``; the search's own rows run them in turn in
    the caller's thread)."""

    async def search(query: str, qvec: np.ndarray) -> list[str]:
        vindex.policy = policy
        saved = engine.inline_max_parallel_vectors
        engine.inline_max_parallel_vectors, engine._inline = 0, {}
        try:
            return await ours.search(query, qvec)
        finally:
            engine.inline_max_parallel_vectors, engine._inline = saved, {}

    return search


# -- measuring -----------------------------------------------------------------------------------
@dataclass
class Row:
    corpus: str
    chunks: int
    setting: str
    index: str
    stack: str
    p50: float
    p95: float
    cpu: float  # mean CPU ms per query (this process)
    recall: float
    anchor_p50: float  # the rank-bm25 + FAISS stack's p50 measured in the same interleaved pass


@dataclass(frozen=True)
class Setting:
    """What a search asks for: results, over-recall pool and vector threshold."""

    name: str
    top_k: int
    pool: int
    threshold: float


def settings_for(params: PipelineParams) -> list[Setting]:
    """The light setting (top 10, pool 50, no threshold) and the pipeline's own (CHUNK_SEARCH asks
    for ``embedding_top_k`` results with the over-recall pool and ``vector_threshold``)."""
    from rag_lab.retrieval.hybrid_search import pool_size

    return [
        Setting("light", TOP_K, pool_size(TOP_K, 1, params), 0.0),
        Setting(
            "pipeline",
            params.embedding_top_k,
            pool_size(params.embedding_top_k, 1, params),
            params.vector_threshold,
        ),
    ]


def _pct(xs: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q))


def recall_at_k(got: list[list[str]], ref: list[list[str]], k: int = TOP_K) -> float:
    vals = [len(set(g[:k]) & set(r[:k])) / len(r[:k]) for g, r in zip(got, ref) if r]
    return statistics.fmean(vals) if vals else float("nan")


def interleaved(
    stacks: dict[str, Callable[[str, np.ndarray], Any]], c: Corpus, warm: int = 5
) -> dict[str, tuple[list[float], list[float], list[list[str]]]]:
    """Every stack on every query, the stacks taking turns within each query (the order rotates),
    so that a load spike on this shared machine hits all of them alike. Returns per stack the wall
    ms, the CPU ms and the results, per query. Coroutine functions are awaited in one event loop."""
    names = list(stacks)
    out: dict[str, tuple[list[float], list[float], list[list[str]]]] = {n: ([], [], []) for n in names}

    async def run() -> None:
        async def call(fn: Callable[[str, np.ndarray], Any], q: str, v: np.ndarray) -> list[str]:
            res = fn(q, v)
            return await res if asyncio.iscoroutine(res) else res

        pairs = list(zip(c.queries, c.query_vectors))
        for q, v in pairs[:warm]:
            for n in names:
                await call(stacks[n], q, v)
        for i, (q, v) in enumerate(pairs):
            order = names[i % len(names) :] + names[: i % len(names)]
            for n in order:
                t0, c0 = time.perf_counter(), time.process_time()
                res = await call(stacks[n], q, v)
                out[n][0].append((time.perf_counter() - t0) * 1000)
                out[n][1].append((time.process_time() - c0) * 1000)
                out[n][2].append(res)

    asyncio.run(run())
    return out


def held_rows_mb(store: Any) -> float:
    """Memory of the whole-KB rows a store holds (``KbRows``: chunk and document rows), by
    ``sys.getsizeof``: the dicts, each row tuple and its values (values shared between rows, such
    as the chunk type, counted once per row: an upper bound)."""
    total = 0
    for table in store.kb_rows.tables():
        total += sys.getsizeof(table.rows)
        for rid, row in table.rows.items():
            total += sys.getsizeof(rid) + sys.getsizeof(row) + sum(sys.getsizeof(v) for v in row)
    return total / 2**20


def scan_kernels(c: Corpus, vindex: Any, k: int) -> str:
    """p50 of one scan for ``k`` candidates, per kernel, over the corpus' queries: faiss' flat
    index, its float 8-bit decoder (``QT_8bit``, trained on the same vectors) and the integer
    kernel rag_lab's 8-bit structure scans (``_Quantized.scan``: its parts in parallel threads,
    and one after the other in one thread), interleaved per query."""
    import faiss

    flat = faiss.IndexFlatIP(c.vectors.shape[1])
    flat.add(c.vectors)
    sq8 = faiss.IndexScalarQuantizer(c.vectors.shape[1], faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    sq8.train(c.vectors)
    sq8.add(c.vectors)
    ours = vindex._quantized
    parts = len(ours.parts)
    serial = f"integer kernel, {parts} parts in one thread"
    times: dict[str, list[float]] = {"flat": [], "QT_8bit": [], "integer kernel": [], serial: []}
    for qv in c.query_vectors:
        q = np.ascontiguousarray(qv[None, :], dtype=np.float32)
        for name, fn, args in (
            ("flat", flat.search, (q, k)),
            ("QT_8bit", sq8.search, (q, k)),
            ("integer kernel", ours.scan, (q, k)),
            (serial, ours.scan, (q, k, False)),
        ):
            t0 = time.perf_counter()
            fn(*args)
            times[name].append((time.perf_counter() - t0) * 1000)
    if parts == 1:
        del times[serial]
    else:
        times[f"integer kernel, {parts} parts in parallel"] = times.pop("integer kernel")
    return f"one vector scan for {k} candidates, p50: " + ", ".join(
        f"{name} {_pct(ts, 50):.2f} ms" for name, ts in times.items()
    )


def bench_corpus(c: Corpus, params: PipelineParams, ef_search: Sequence[int] = ()) -> list[Row]:
    from rag_lab.retrieval.vector_index import IndexPolicy

    n = len(c.chunk_ids)
    vindex = c.ws.vector_index(c.kb)
    kind = vindex.kind
    rows: list[Row] = []
    for st in settings_for(params):
        vindex.quantized_stats = dict.fromkeys(vindex.quantized_stats, 0)
        fusion = Fusion(params, st.top_k)
        exact = ExactStack(c, st.pool, fusion, st.threshold)
        anchor = RankBm25FaissStack(c, st.pool, fusion, st.threshold)
        if st.name == "light":
            c.notes.append(f"rank-bm25 + FAISS index build {anchor.build_s:.1f} s")
            if kind != "flat":  # the derived structure is built on the first unrestricted query
                t0 = time.perf_counter()
                vindex.search(c.query_vectors[0], 1)
                c.notes.append(f"rag_lab {kind} structure built on first query in {time.perf_counter() - t0:.2f} s")
            if kind == "sq8":
                c.notes.append(scan_kernels(c, vindex, st.pool))
        ours = RagLabStack(c, params, st.threshold, st.top_k)
        t0 = time.perf_counter()  # a query of none of the corpus' words, the vector of none of the queries
        asyncio.run(ours.search("qqqq", -c.query_vectors[0]))
        c.notes.append(
            f"{st.name}: rag_lab's first search (the KB's chunk and document rows read once) "
            f"{time.perf_counter() - t0:.2f} s; rows held {held_rows_mb(c.ws.store):.0f} MB"
        )
        label = {"flat": "rag_lab", "sq8": "rag_lab (sq8 + exact)"}.get(
            kind, f"rag_lab (efSearch {vindex.policy.hnsw_ef_search})"
        )
        # the recall reference in a pass of its own: its full numpy scan (4 bytes x dim x n per
        # query) takes the other stacks' data out of the CPU caches when it takes turns with them
        got = interleaved({"exact": exact.search}, c)
        simple = Bm25sNumpyStack(c, st.pool, fusion, st.threshold)
        got.update(
            interleaved(
                {"rank-bm25 + FAISS flat": anchor.search, "bm25s + numpy": simple.search, label: ours.search}, c
            )
        )
        ref = got["exact"][2]
        anchor_p50 = _pct(got["rank-bm25 + FAISS flat"][0], 50)
        for stack, (wall, cpu, res) in got.items():
            index = {"exact": "numpy", "rank-bm25 + FAISS flat": "flat", "bm25s + numpy": "numpy"}.get(stack, kind)
            rows.append(
                Row(
                    c.name,
                    n,
                    f"{st.name} (top {st.top_k}, pool {st.pool}, thr {st.threshold:g})",
                    index,
                    stack,
                    _pct(wall, 50),
                    _pct(wall, 95),
                    statistics.fmean(cpu),
                    1.0 if stack == "exact" else recall_at_k(res, ref, st.top_k),
                    anchor_p50,
                )
            )
        if kind != "flat":  # other efSearch values, then the forced flat scan, each against the anchor
            saved = vindex.policy
            variants = []
            if kind == "hnsw":
                variants = [
                    (f"rag_lab (efSearch {ef})", dataclasses.replace(saved, hnsw_ef_search=ef)) for ef in ef_search
                ]
                variants = [v for v in variants if v[1].hnsw_ef_search != saved.hnsw_ef_search]
            variants.append(("rag_lab (flat)", IndexPolicy(ann_min_vectors=0, quantized_min_vectors=0)))
            callers = [(stack, _with_policy(vindex, policy, ours)) for stack, policy in variants]
            if kind == "sq8" and vindex.scans_in_parallel():
                callers.append(("rag_lab, worker threads", _in_threads(c.ws.engine(), vindex, saved, ours)))
            for stack, call in callers:
                # this variant and the index's own policy, interleaved in one pass with the anchor
                got = interleaved({"anchor": anchor.search, label: _with_policy(vindex, saved, ours), stack: call}, c)
                wall, cpu, res = got[stack]
                a_wall = got["anchor"][0]
                rows.append(
                    Row(
                        c.name,
                        n,
                        rows[-1].setting,
                        kind,
                        f"{label}, same pass",
                        _pct(got[label][0], 50),
                        _pct(got[label][0], 95),
                        statistics.fmean(got[label][1]),
                        recall_at_k(got[label][2], ref, st.top_k),
                        _pct(a_wall, 50),
                    )
                )
                rows.append(
                    Row(
                        c.name,
                        n,
                        rows[-1].setting,
                        "flat" if "flat" in stack else kind,
                        stack,
                        _pct(wall, 50),
                        _pct(wall, 95),
                        statistics.fmean(cpu),
                        recall_at_k(res, ref, st.top_k),
                        _pct(a_wall, 50),
                    )
                )
            vindex.policy = saved
        if kind == "sq8":
            qs = vindex.quantized_stats
            c.notes.append(
                f"{st.name}: 8-bit scans in this setting's passes {qs['queries']}, re-scans with 4x the candidates {qs['rescans']}, "
                f"flat fallbacks {qs['flat_fallbacks']}; the first scan now asks for "
                f"{vindex._first_candidates(st.pool)} candidates ({st.pool * vindex.policy.quantized_candidates} at most)"
            )
        del anchor
        gc.collect()
    return rows


def print_table(rows: list[Row]) -> None:
    head = (
        f"| {'corpus':<16}| {'chunks':>8} | {'setting':<36}| {'index':<6}| {'stack':<24}| {'p50 ms':>7} | "
        f"{'p95 ms':>7} | {'CPU ms':>7} | {'recall':>6} | {'speed-up':>8} |"
    )
    print(head)
    print("|" + "|".join("-" * (len(p)) for p in head.split("|")[1:-1]) + "|")
    for r in rows:
        sp = r.anchor_p50 / r.p50 if r.p50 > 0 else float("nan")
        print(
            f"| {r.corpus:<16}| {r.chunks:>8,} | {r.setting:<36}| {r.index:<6}| {r.stack:<24}| {r.p50:>7.2f} | "
            f"{r.p95:>7.2f} | {r.cpu:>7.2f} | {r.recall:>6.3f} | {sp:>7.2f}× |"
        )


def print_scale_curve(rows: list[Row]) -> None:
    """rag_lab's p50 and speed-up over the anchor by corpus size, per setting (the index the policy
    picks: the first rag_lab row of each corpus and setting)."""
    print("\nscale curve (synthetic corpora; speed-up = anchor p50 / rag_lab p50 in the same interleaved pass):")
    for setting in dict.fromkeys(r.setting for r in rows):
        seen: set[str] = set()
        pts = []
        for r in rows:
            if r.setting == setting and r.corpus.startswith("synthetic") and r.stack.startswith("rag_lab"):
                if r.corpus not in seen:
                    seen.add(r.corpus)
                    pts.append(r)
        line = ", ".join(
            f"{r.chunks:,}: {r.p50:.2f} ms ({r.anchor_p50 / r.p50:.1f}×, recall {r.recall:.3f})" for r in pts
        )
        print(f"  {setting}: {line}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="hotpotqa + synthetic 10k, 50 queries (~1-2 min)")
    ap.add_argument("--sizes", default=None, help="synthetic corpus sizes, comma-separated (default 1000,10000,100000)")
    ap.add_argument("--with-300k", action="store_true", help="add the 300k synthetic corpus (HNSW build: minutes)")
    ap.add_argument(
        "--datasets", default=None, help=f"bundled corpora, comma-separated or 'none' (default {','.join(BUNDLED)})"
    )
    ap.add_argument("--queries", type=int, default=None, help="queries per corpus (default 200, quick 50)")
    ap.add_argument(
        "--ef-search",
        default="64,1024",
        help="extra HNSW efSearch values measured where the index is HNSW (default 64,1024)",
    )
    ap.add_argument(
        "--cache",
        default=str(Path.home() / ".cache" / "rag_lab" / "benchmarks"),
        help="where MiniLM embeddings of the bundled corpora are kept between runs ('' = nowhere)",
    )
    args = ap.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick else "1000,10000,100000")).split(",") if s]
    if args.with_300k:
        sizes.append(300_000)
    names = args.datasets or ("hotpotqa_hipporag100" if args.quick else ",".join(BUNDLED))
    datasets = [] if names == "none" else [n for n in names.split(",") if n]
    n_queries = args.queries or (50 if args.quick else 200)
    ef_search = [int(x) for x in args.ef_search.split(",") if x]
    params = PipelineParams()

    import faiss

    from rag_lab.retrieval.vector_index import VectorIndex

    print(
        f"python {sys.version.split()[0]}, faiss {faiss.__version__}, cores {__import__('os').cpu_count()}, "
        f"{n_queries} queries per corpus, top {TOP_K}, pool {params.over_recall_min}, "
        f"8-bit pre-scan + exact re-scoring from {VectorIndex.default_policy.quantized_min_vectors:,} vectors, "
        f"HNSW from {VectorIndex.default_policy.ann_min_vectors or 'never (opt-in)'}"
    )
    rows: list[Row] = []
    notes: list[str] = []
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if datasets:
            from rag_lab.eval.datasets import load_dataset
            from rag_lab.models.embedding import OnnxMiniLMEmbedder

            emb = OnnxMiniLMEmbedder()
            if args.cache:
                emb = DiskCachedEmbedder(emb, Path(args.cache))
            for name in datasets:
                ds = load_dataset(name)
                docs = [{"id": d.id, "title": d.title, "text": d.text} for d in ds.corpus]
                qs = [q.question for q in ds.queries[:n_queries]]
                c = build_corpus(name, root, emb, docs, qs)
                cached = (
                    "" if not isinstance(emb, DiskCachedEmbedder) else f", {emb.misses} texts embedded, rest cached"
                )
                c.notes.append(
                    f"ingested {len(docs)} docs → {len(c.chunk_ids)} chunks in {c.ingest_s:.1f} s "
                    f"(MiniLM embedding included{cached})"
                )
                if isinstance(emb, DiskCachedEmbedder):
                    emb.save()
                    emb.misses = 0
                rows += bench_corpus(c, params, ef_search)
                notes += [f"{name}: {n}" for n in c.notes]
                c.ws.close()
        for size in sizes:
            emb, docs, qs = synthetic_corpus(size, n_queries)
            name = f"synthetic-{size // 1000}k"
            c = build_corpus(name, root, emb, docs, qs)
            c.notes.append(f"ingested {size:,} docs in {c.ingest_s:.1f} s (index kind {c.ws.vector_index(c.kb).kind})")
            rows += bench_corpus(c, params, ef_search)
            notes += [f"{name}: {n}" for n in c.notes]
            c.ws.close()
            del c
            gc.collect()
    print()
    print_table(rows)
    print_scale_curve(rows)
    print()
    for n in notes:
        print(f"- {n}")
    print(f"- total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
