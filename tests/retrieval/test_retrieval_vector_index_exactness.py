"""The 8-bit pre-scan's exactness, pinned where equivalence on insertion-ordered ids cannot see it
(issue 23): whole tie groups with shuffled ids, and how tight the rounding bound is."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.retrieval.vector_index import IndexPolicy, VectorIndex, _Quantized


def _pair(x: np.ndarray, ids: list[str]) -> tuple[VectorIndex, VectorIndex]:
    sq = VectorIndex(x.shape[1], policy=IndexPolicy(quantized_min_vectors=1, quantized_shards=1))
    flat = VectorIndex(x.shape[1], policy=IndexPolicy(quantized_min_vectors=0))
    sq.add(ids, x)
    flat.add(ids, x)
    return sq, flat


def _corpus_with_duplicates(n_dup: int, n_other: int, d: int, seed: int) -> tuple[np.ndarray, list[str], list[str]]:
    """``n_dup`` copies of one vector among ``n_other`` random ones, rows shuffled, ids shuffled
    (so neither the insertion order nor the faiss ids follow the entry ids)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_dup + n_other, d)).astype(np.float32)
    x[:n_dup] = x[0]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rows = rng.permutation(len(x))
    x = x[rows]
    ids = [f"c{i}" for i in rng.permutation(len(x))]  # unpadded: "c10" < "c9", bytes order
    dup_ids = [ids[j] for j in np.flatnonzero(rows < n_dup)]
    return x, ids, dup_ids


@pytest.mark.parametrize("top_k", [1, 2, 7, 64, 300, 301, 302])
def test_tied_duplicates_return_the_lowest_entry_ids_like_the_flat_scan(top_k: int) -> None:
    """301 exact duplicates (shuffled ids) and 2,000 others: the flat scan's tie rule is score
    descending, then entry id ascending (string order) over the whole tie group; the 8-bit path
    answers (no flat fallback) with the same entries and bit-identical scores."""
    x, ids, dup_ids = _corpus_with_duplicates(301, 2000, 8, seed=0)
    sq, flat = _pair(x, ids)
    q = x[ids.index(dup_ids[0])]
    want = flat.search(q, top_k)
    got = sq.search(q, top_k)
    assert got == want  # entries and float scores, bit for bit
    tied = sorted(dup_ids)[: min(top_k, 301)]
    assert [c for c, _ in want[: len(tied)]] == tied  # the flat scan's rule, pinned
    assert len({s for _, s in want[: len(tied)]}) == 1
    assert sq.quantized_stats["flat_fallbacks"] == 0  # the pre-scan answered, not its fallback


@given(
    n_dup=st.integers(2, 400),
    n_other=st.integers(300, 1500),
    top_k=st.integers(1, 80),
    threshold=st.sampled_from([-1.0, 0.0, 0.5]),
    seed=st.integers(0, 10_000),
)
@settings(max_examples=15)
def test_tie_groups_with_shuffled_ids_equal_the_flat_scan(
    n_dup: int, n_other: int, top_k: int, threshold: float, seed: int
) -> None:
    x, ids, dup_ids = _corpus_with_duplicates(n_dup, n_other, 8, seed)
    sq, flat = _pair(x, ids)
    for q in (x[ids.index(dup_ids[-1])], np.random.default_rng(seed).normal(size=8).astype(np.float32)):
        assert sq.search(q, top_k, threshold) == flat.search(q, top_k, threshold)


@pytest.mark.parametrize(
    ("n_other", "top_k", "rescans", "fallbacks"),
    [(2000, 1, 2, 0), (2000, 64, 1, 0), (2000, 300, 0, 0), (50, 1, 1, 1), (50, 64, 0, 1)],
)
def test_the_scan_widens_4x_then_falls_back_to_the_flat_scan(
    n_other: int, top_k: int, rescans: int, fallbacks: int
) -> None:
    """The widening schedule behind ``quantized_stats``: the first scan takes ``max(4 · k, k + 64)``
    candidates, each re-scan 4× more, and the flat scan answers once 4× would reach every vector.
    With 301 tied vectors the check holds only once all of them and one more are candidates: for
    k = 1 at 65 → 260 → 1,040 of 2,301 (two re-scans) and at 65 → 260 → flat of 351."""
    x, ids, dup_ids = _corpus_with_duplicates(301, n_other, 8, seed=0)
    sq, flat = _pair(x, ids)
    q = x[ids.index(dup_ids[0])]
    assert sq.search(q, top_k) == flat.search(q, top_k)
    assert sq.quantized_stats == {"queries": 1, "rescans": rescans, "flat_fallbacks": fallbacks}


# --------------------------------------------------------------------------- the rounding bound


def _quantized(x: np.ndarray) -> _Quantized:
    import faiss

    idx = faiss.IndexIDMap2(faiss.IndexFlatIP(x.shape[1]))
    idx.add_with_ids(x, np.arange(len(x), dtype=np.int64))
    return _Quantized.build(faiss, idx, x.shape[1])


def _worst_error(qz: _Quantized, x: np.ndarray, q: np.ndarray) -> tuple[float, float]:
    approx, pos, const, alpha, bound = qz.scan(q[None, :], len(x))
    exact = x.astype(np.float64) @ q.astype(np.float64)
    return float(np.abs(exact[pos] - (const + alpha * approx.astype(np.float64))).max()), bound


D = 16
STEP = 1.0 / 256  # levels k / 256 on every dimension: exact in float32


def _codes_adversary() -> tuple[np.ndarray, np.ndarray]:
    """The codes' rounding at its worst: every coordinate of the last vectors just above a half
    level (rounded down by almost half a step) and a query all of one sign with an exact integer
    scan (``qs_d = 127``, no query rounding), so the error adds up to ~``Σ |q_d| · step / 2``."""
    rng = np.random.default_rng(3)
    lo, hi = np.zeros(D, dtype=np.float32), np.full(D, 255 * STEP, dtype=np.float32)
    levels = rng.integers(0, 255, size=(30, D))
    half_up = ((levels + 0.5) * STEP - 2.0**-20).astype(np.float32)
    return np.vstack([lo, hi, half_up]), np.full(D, 0.25, dtype=np.float32)


def _codes_adversary_one_dimension() -> tuple[np.ndarray, np.ndarray]:
    """The same vectors, a query along one dimension: the half-step sum (``4 · step / 2``) is now
    the smaller of the two codes bounds (Cauchy-Schwarz would charge the residual of all 16)."""
    x, _ = _codes_adversary()
    q = np.zeros(D, dtype=np.float32)
    q[0] = 4.0
    return x, q


def _query_adversary() -> tuple[np.ndarray, np.ndarray]:
    """The query's rounding at its worst: vectors on the levels (no codes error) at the extreme
    codes, a query whose integer scan rounds exact halves (``qs_d = k + 0.5`` before rounding),
    codes signed like the rounding errors, so the error is ~``alpha · Σ |c_d - 128| / 2``."""
    q = np.empty(D, dtype=np.float32)
    q[0] = 1.0  # the largest: qs_0 = 127 exactly
    q[1:] = (np.arange(1, D) + 0.5) / 127.0  # halves after scaling (to float32's precision)
    scaled = q.astype(np.float64) * 127.0
    eps = scaled - np.rint(scaled)  # the scan's rounding error per dimension, ~±0.5
    codes = np.where(eps > 0, 255, 0)  # c - 128 = +127 / -128, with the error's sign
    codes[0] = 128  # no error there: do not widen the codes' L1 norm for nothing
    lo, hi = np.zeros(D, dtype=np.float32), np.full(D, 255 * STEP, dtype=np.float32)
    adv = (codes * STEP).astype(np.float32)
    return np.vstack([lo, hi, adv, 255 * STEP - adv]), q


@pytest.mark.parametrize(
    "case", [_codes_adversary, _codes_adversary_one_dimension, _query_adversary], ids=["codes", "codes-1d", "query"]
)
def test_the_bound_covers_the_worst_error_and_is_within_10_percent_of_it(case) -> None:
    """The bound must hold (a tighter one, e.g. the half-step term halved, would be broken by these
    vectors) and must not be loose (doubling a term makes the check widen needlessly): on vectors
    built to reach each rounding's worst case, the true error is >= 90 % of the bound."""
    x, q = case()
    err, bound = _worst_error(_quantized(x), x, q)
    assert err <= bound
    assert err >= 0.9 * bound, (err, bound)


@pytest.mark.parametrize("case", [_codes_adversary, _query_adversary], ids=["codes", "query"])
def test_search_stays_exact_on_the_adversarial_vectors(case) -> None:
    """Scores packed within the 8-bit error of each other: the pre-scan still returns the flat
    scan's entries and scores."""
    x, q = case()
    rng = np.random.default_rng(5)
    many = np.vstack([x, x[2:] + rng.integers(-1, 2, size=x[2:].shape).astype(np.float32) * np.float32(STEP / 64)])
    many = np.vstack([many] * 8)  # exact duplicates too
    ids = [f"v{i}" for i in rng.permutation(len(many))]
    sq, flat = _pair(many, ids)
    for top_k in (1, 5, 40):
        for thr in (-1.0, float(np.sort(many @ q)[-20])):
            assert sq.search(q, top_k, thr) == flat.search(q, top_k, thr)
    assert sq.quantized_stats["queries"] == 6
