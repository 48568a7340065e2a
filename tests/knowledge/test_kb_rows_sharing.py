"""Held KB rows keep one object per distinct value of the repeating columns (KbRows memory, issue
28): the rows are equal to the store's, the shared values are the same objects, and a chunk's
document id is its document row's own id object."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_lab.knowledge.kb_rows import KbRows, share_values

values = st.one_of(
    st.integers(-3, 1000),
    st.sampled_from(["", "{}", "text", "kb_1", "enabled", 0.0, -0.0, 1.0, True, False]),
    st.floats(0, 2),
)
strings = st.sampled_from(["", "{}", "text", "kb_1", "enabled"])


@settings(max_examples=120)
@given(st.lists(st.tuples(st.text(max_size=3), values, strings), max_size=30))
def test_shared_rows_equal_the_rows_and_share_equal_values(rows: list[tuple[object, ...]]) -> None:
    out = share_values(rows, ("id", "a", "b"), {"a", "b"})
    assert out == [tuple(r) for r in rows]
    # every value keeps its type and sign (1 == 1.0 == True, 0.0 == -0.0: none is swapped)
    for r, o in zip(rows, out):
        assert [type(v) for v in r] == [type(v) for v in o]
        assert [repr(v) for v in r] == [repr(v) for v in o]
    for col in (1, 2):
        column = [r[col] for r in out]
        if len({type(v) for v in column}) == 1 and isinstance(column[0], str):
            assert len({id(v) for v in column}) == len(set(column))  # one object per distinct string
    assert share_values(rows, ("id", "a", "b"), set()) == [tuple(r) for r in rows]


def test_held_tables_share_the_kb_id_and_the_document_ids(workspace, embedder, tmp_path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    for i in range(4):
        (d / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"Paragraph {i} about harbours. " * 40)
    kb = workspace.create_kb("shared", embedder, chunk_size=120, chunk_overlap=0)
    workspace.ingest_folder(kb, d, embedder, progress=False)
    rows = KbRows(workspace.store)
    docs, chunks = rows.documents(kb.id), rows.chunks(kb.id)
    assert docs is not None and chunks is not None and len(chunks) > len(docs)
    kid, kbid = chunks.at["knowledge_id"], chunks.at["knowledge_base_id"]
    doc_ids = {r[docs.at["id"]]: r[docs.at["id"]] for r in docs.rows.values()}
    assert len({id(r[kbid]) for r in chunks.rows.values()}) == 1  # one KB id object for every row
    for r in chunks.rows.values():
        assert r[kid] is doc_ids[r[kid]]  # the document row's own id object
    # decoded objects are unchanged
    for cid in list(chunks.rows)[:5]:
        assert chunks.get(cid) == workspace.store.get_chunks([cid])[cid]
