"""Issue 23: a text's vector is the same bit for bit whatever batch it is embedded in, and a
cosine does not depend on how many other rows are scored with it (``row_dots``)."""

from __future__ import annotations

import numpy as np
import pytest

from rag_lab.models.embedding import OnnxMiniLMEmbedder, row_dots, shared_minilm

TEXT = "The Brightwater lighthouse was built in 1874 by the engineer Mara Quill."
LONG = "A long passage about the harbour, its keepers and the storms of the northern coast. " * 30
SHORT = ["Hi.", "Lava.", "Red and white bands."]


@pytest.mark.parametrize("batch_size", [1, 16])
def test_a_text_embeds_identically_alone_or_in_any_batch(batch_size):
    e = shared_minilm() if batch_size == 1 else OnnxMiniLMEmbedder(batch_size=batch_size)
    alone = e.embed([TEXT])[0]
    with_long = e.embed([LONG, TEXT])[1]  # padded to the long text's length
    with_short = e.embed([*SHORT, TEXT])[3]  # the longest member of its batch
    assert np.array_equal(alone, with_long) and np.array_equal(alone, with_short)
    assert np.array_equal(alone, shared_minilm().embed([TEXT])[0])  # and the same as batch 1


def test_row_dots_of_a_row_ignore_the_other_rows():
    rng = np.random.default_rng(3)
    m = rng.standard_normal((50, 384)).astype(np.float32)
    q = rng.standard_normal(384).astype(np.float32)
    full = row_dots(m, q)
    assert full.dtype == np.float32
    for n in range(1, 50):
        assert np.array_equal(row_dots(m[:n], q), full[:n]) and np.array_equal(row_dots(m[n:], q), full[n:])
    assert np.allclose(full, m.astype(np.float64) @ q.astype(np.float64), atol=1e-4)
    with pytest.raises(ValueError, match="do not match"):
        row_dots(m, q[:10])


def test_row_dots_ignore_alignment_and_gathering():
    rng = np.random.default_rng(5)
    m = rng.standard_normal((120, 384)).astype(np.float32)
    q = rng.standard_normal(384).astype(np.float32)
    ref = row_dots(m, q)
    for off in (1, 3, 5):  # rows and vector at addresses that are not 16-byte aligned
        buf = np.empty(m.size + 8, np.float32)
        shifted = buf[off : off + m.size].reshape(m.shape)
        shifted[:] = m
        qbuf = np.empty(392, np.float32)
        qs = qbuf[off + 1 : off + 385]
        qs[:] = q
        idx = rng.permutation(120)[:40]
        assert np.array_equal(row_dots(shifted, qs), ref) and np.array_equal(row_dots(shifted[idx], qs), ref[idx])
