from __future__ import annotations

import os

import numpy as np
import pytest

from rag_lab.knowledge.ingestion import html_to_text, read_document
from rag_lab.knowledge.models import FAQEntry
from rag_lab.knowledge.workspace import (
    IngestError,
    KnowledgeBaseExists,
    KnowledgeBaseNotFound,
    MixedEmbeddingSpaces,
    Workspace,
    kb_id_for_name,
)
from rag_lab.retrieval.versioned import current_dir

HTML = """<html><head><title>The &amp; Title</title><style>body { color: red }</style>
<script>var secret = "drop me";</script></head>
<body><h1>Heading</h1><p>First   paragraph
text.</p><p>Second <b>bold</b> paragraph.</p><noscript>no</noscript></body></html>"""


def _folder(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("Plain text about volcanoes and magma.\n\nSecond paragraph on lava.", encoding="utf-8")
    (d / "b.md").write_text("# Markdown Title\n\nSome *markdown* about databases.", encoding="utf-8")
    (d / "sub" / "c.html").write_text(HTML, encoding="utf-8")
    (d / "image.png").write_bytes(b"\x89PNG")
    (d / "empty.txt").write_text("   \n", encoding="utf-8")
    (d / ".hidden.txt").write_text("hidden", encoding="utf-8")
    return d


def test_html_to_text_drops_script_and_style():
    title, text = html_to_text(HTML)
    assert title == "The & Title"
    assert text == "Heading\n\nFirst paragraph text.\n\nSecond bold paragraph."
    assert "secret" not in text and "color" not in text


def test_ingest_folder_report_and_idempotence(workspace, embedder, tmp_path):
    folder = _folder(tmp_path)
    kb = workspace.create_kb("docs", embedder, chunk_size=40, chunk_overlap=5)
    rep = workspace.ingest_folder(kb, folder, embedder, progress=False)
    assert sorted(rep.added) == ["a.txt", "b.md", "sub/c.html"]
    assert dict(rep.skipped) == {
        ".hidden.txt": "hidden file",
        "empty.txt": "empty after text extraction",
        "image.png": "unsupported file type '.png'",
    }
    chunks = workspace.store.list_chunks(kb.id)
    assert rep.chunks_added == len(chunks) == rep.vectors_added
    assert all(c.id.startswith(f"{kb.id}:") for c in chunks)
    doc = workspace.store.get_document(kb.id, "b.md")
    assert doc.title == "Markdown Title" and doc.file_type == "md" and doc.metadata == {"path": "b.md"}
    assert workspace.store.get_document(kb.id, "sub/c.html").title == "The & Title"
    assert len(workspace.vector_index(kb)) == len(chunks)
    assert len(workspace.keyword_index(kb)) == len(chunks)

    calls = embedder.calls
    again = workspace.ingest_folder(kb, folder, embedder, progress=False)
    assert again.added == [] and again.updated == [] and sorted(again.unchanged) == ["a.txt", "b.md", "sub/c.html"]
    assert embedder.calls == calls  # nothing re-embedded
    assert [c.id for c in workspace.store.list_chunks(kb.id)] == [c.id for c in chunks]

    # a changed file replaces its chunks; the others are untouched
    (folder / "a.txt").write_text("Short new text.", encoding="utf-8")
    upd = workspace.ingest_folder(kb, folder, embedder, progress=False)
    assert upd.updated == ["a.txt"] and sorted(upd.unchanged) == ["b.md", "sub/c.html"]
    new_a = workspace.store.list_chunks(kb.id, "a.txt")
    assert [c.content for c in new_a] == ["Short new text."]
    old_a = [c.id for c in chunks if c.knowledge_id == "a.txt"]
    assert upd.chunks_removed == len(old_a) == 2
    assert workspace.vector_index(kb).chunk_ids() == {c.id for c in workspace.store.list_chunks(kb.id)}
    assert set(workspace.keyword_index(kb).chunk_ids()) == {c.id for c in workspace.store.list_chunks(kb.id)}

    # delete a document: chunks and index entries go
    n = workspace.delete_knowledge(kb, "b.md")
    assert n == len([c for c in chunks if c.knowledge_id == "b.md"]) == 2
    assert workspace.store.get_document(kb.id, "b.md") is None
    assert not any(cid.startswith(f"{kb.id}:b.md") for cid in workspace.vector_index(kb).chunk_ids())


def test_ingest_documents_ids_are_knowledge_ids(workspace, embedder):
    kb = workspace.create_kb("ds", embedder, chunk_size=30, chunk_overlap=0)

    class Doc:  # objects work as well as dicts
        def __init__(self, id, title, text, metadata):
            self.id, self.title, self.text, self.metadata = id, title, text, metadata

    rep = workspace.ingest_documents(
        kb,
        [
            {
                "id": "q-17",
                "title": "T",
                "text": "A short document about lava flows.",
                "metadata": {"year": 2020},
                "tag_id": "geo",
            },
            Doc("q-18", "U", "Another one about databases and indexes.", None),
            {"id": "q-19", "title": "", "text": "   "},
        ],
        embedder,
        progress=False,
    )
    assert rep.added == ["q-17", "q-18"] and rep.skipped == [("q-19", "empty text")]
    assert workspace.store.get_document(kb.id, "q-17").metadata == {"year": "2020"}
    assert {c.tag_id for c in workspace.store.list_chunks(kb.id, "q-17")} == {"geo"}


@pytest.mark.parametrize(
    "docs, message",
    [
        ([{"title": "x", "text": "y"}], r"document #0: field 'id' = None"),
        ([{"id": "a", "text": 3}], r"document #0 \(id 'a'\): field 'text' = 3"),
        ([{"id": "a", "text": "t"}, {"id": "a", "text": "u"}], r"document #1: duplicate id 'a'"),
        ([{"id": "a", "text": "t", "metadata": [1]}], r"field 'metadata'"),
    ],
)
def test_ingest_documents_bad_rows(workspace, embedder, docs, message):
    kb = workspace.create_kb("bad", embedder)
    with pytest.raises(IngestError, match=message):
        workspace.ingest_documents(kb, docs, embedder, progress=False)
    assert workspace.store.list_knowledge(kb.id) == []  # validated before any write


def test_folder_errors(workspace, embedder, tmp_path):
    kb = workspace.create_kb("f", embedder)
    with pytest.raises(IngestError, match="does not exist"):
        workspace.ingest_folder(kb, tmp_path / "missing", embedder, progress=False)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(IngestError, match=r"empty: no ingestible"):
        workspace.ingest_folder(kb, empty, embedder, progress=False)
    only_pdf = tmp_path / "pdfs"
    only_pdf.mkdir()
    (only_pdf / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(IngestError, match=r"x.pdf \(unsupported file type '.pdf'\)"):
        workspace.ingest_folder(kb, only_pdf, embedder, progress=False)
    latin = tmp_path / "latin"
    latin.mkdir()
    (latin / "ok.txt").write_text("fine", encoding="utf-8")
    (latin / "bad.txt").write_bytes("caf\xe9".encode("latin-1"))
    # strict: the first bad file stops the folder before anything is written
    with pytest.raises(IngestError, match=r"bad.txt: not valid UTF-8"):
        workspace.ingest_folder(kb, latin, embedder, progress=False, strict=True)
    assert workspace.store.list_knowledge(kb.id) == []  # nothing written, ok.txt included
    # default: the bad file is listed with its reason, the others are ingested
    report = workspace.ingest_folder(kb, latin, embedder, progress=False)
    assert report.added == ["ok.txt"]
    assert report.failed == [("bad.txt", "not valid UTF-8 (byte 3: unexpected end of data)")]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs a non-root POSIX user")
def test_unreadable_file_names_path(tmp_path):
    f = tmp_path / "secret.txt"
    f.write_text("x", encoding="utf-8")
    f.chmod(0)
    try:
        with pytest.raises(IngestError, match="secret.txt: cannot read file"):
            read_document(f)
    finally:
        f.chmod(0o644)


def test_create_and_get_kb(workspace, embedder, embedder_cls):
    kb = workspace.create_kb("Main KB", embedder, chunk_size=100, chunk_overlap=10)
    assert kb.id == kb_id_for_name("Main KB")
    assert kb.embedding_model_key == embedder.model_key and kb.embedding_dim == 128
    assert workspace.get_kb("Main KB") == kb == workspace.get_kb(kb.id)
    with pytest.raises(KnowledgeBaseExists, match="'Main KB' already exists"):
        workspace.create_kb("Main KB", embedder)
    assert workspace.create_kb("Main KB", embedder, chunk_size=100, chunk_overlap=10, exist_ok=True) == kb
    with pytest.raises(KnowledgeBaseExists, match="chunk_size: existing 100, requested 512"):
        workspace.create_kb("Main KB", embedder, exist_ok=True)
    workspace.create_kb("Other", None)
    with pytest.raises(KnowledgeBaseNotFound) as ei:
        workspace.get_kb("nope")
    msg = str(ei.value)
    assert "'nope'" in msg and "'Main KB'" in msg and "'Other'" in msg


def test_embedder_mismatch(workspace, embedder, embedder_cls):
    kb = workspace.create_kb("m", embedder)
    other = embedder_cls(dimension=64)
    with pytest.raises(MixedEmbeddingSpaces) as ei:
        workspace.ingest_documents(kb, [{"id": "a", "text": "t"}], other, progress=False)
    assert embedder.model_key in str(ei.value) and other.model_key in str(ei.value)
    kw_only = workspace.create_kb("kw", None)
    with pytest.raises(MixedEmbeddingSpaces, match="keyword-only"):
        workspace.ingest_documents(kw_only, [{"id": "a", "text": "t"}], embedder, progress=False)
    rep = workspace.ingest_documents(kw_only, [{"id": "a", "text": "just keywords"}], None, progress=False)
    assert rep.vectors_added == 0 and workspace.vector_index(kw_only) is None


def test_parent_child_ingestion(workspace, embedder):
    kb = workspace.create_kb("pc", embedder, chunk_size=30, chunk_overlap=0, parent_chunk_size=80)
    text = "Sentence number one is here. Sentence number two is here.\n\nAnother paragraph with words in it."
    rep = workspace.ingest_documents(kb, [{"id": "d", "title": "", "text": text}], embedder, progress=False)
    chunks = workspace.store.list_chunks(kb.id)
    parents = [c for c in chunks if c.chunk_type == "parent_text"]
    kids = [c for c in chunks if c.chunk_type == "text"]
    assert parents and kids and all(k.parent_chunk_id in {p.id for p in parents} for k in kids)
    # parents are stored but never indexed
    assert rep.vectors_added == len(kids)
    assert workspace.vector_index(kb).chunk_ids() == {k.id for k in kids}
    assert set(workspace.keyword_index(kb).chunk_ids()) == {k.id for k in kids}


def test_faq_ingestion(workspace, embedder):
    kb = workspace.create_kb("faq", embedder, kb_type="faq")
    entries = [
        FAQEntry(
            "How do I reset my password?",
            answers=["Use the reset link.", " "],
            similar_questions=["forgot password"],
            negative_questions=["how do i reset my router?"],
        ),
        {"id": "shipping", "standard_question": "How long is shipping?", "answers": ["Three days."]},
    ]
    rep = workspace.ingest_faq(kb, entries, embedder, progress=False)
    assert len(rep.added) == 2 and rep.vectors_added == 3  # 2 + 1 questions
    c = workspace.store.list_chunks(kb.id, "shipping")[0]
    assert c.chunk_type == "faq" and c.id == f"{kb.id}:shipping#faq"
    assert c.content == "Q: How long is shipping?\nAnswer:\n- Three days."
    assert c.metadata["answers"] == ["Three days."]
    doc_kb = workspace.create_kb("docs", embedder)
    with pytest.raises(IngestError, match="'faq' KB"):
        workspace.ingest_faq(doc_kb, entries, embedder, progress=False)
    with pytest.raises(IngestError, match="ingest_faq"):
        workspace.ingest_documents(kb, [{"id": "x", "text": "y"}], embedder, progress=False)


def test_reopen_keeps_everything(tmp_path, embedder):
    root = tmp_path / "ws"
    with Workspace(root) as ws:
        kb = ws.create_kb("p", embedder, chunk_size=50, chunk_overlap=0)
        docs = [
            {"id": "a", "title": "A", "text": "alpha beta gamma delta"},
            {"id": "b", "title": "B", "text": "epsilon zeta"},
            {"id": "c", "title": "C", "text": "eta theta"},
        ]
        ws.ingest_documents(kb, docs, embedder, progress=False)
        vec_before = ws.vector_index(kb).search(embedder.embed(["alpha"])[0], 5)
    assert (current_dir(root / "indexes" / kb.id)[0] / "vectors.faiss").is_file()
    assert (current_dir(root / "indexes" / kb.id / "bm25")[0] / "meta.json").is_file()
    with Workspace(root) as ws2:
        kb2 = ws2.get_kb("p")
        assert kb2 == kb
        assert ws2.vector_index(kb2).search(embedder.embed(["alpha"])[0], 5) == vec_before
        assert ws2.keyword_index(kb2).search("gamma", 5)[0][0] == f"{kb.id}:a#c0"
        again = ws2.ingest_documents(kb2, docs, embedder, progress=False)
        assert again.unchanged == ["a", "b", "c"]


def test_embedder_returning_wrong_shape(workspace, embedder):
    class Broken:
        model_key = embedder.model_key
        dimension = embedder.dimension

        def embed(self, texts):
            return np.zeros((len(texts), 3), dtype=np.float32)

    kb = workspace.create_kb("broken", embedder)
    with pytest.raises(IngestError, match=r"returned shape \(1, 3\), expected \(1, 128\)"):
        workspace.ingest_documents(kb, [{"id": "a", "text": "t"}], Broken(), progress=False)


def test_unreadable_path_names_it(tmp_path):
    d = tmp_path / "folder.txt"  # a directory cannot be read as a file, even by root
    d.mkdir()
    with pytest.raises(IngestError, match=r"folder.txt: cannot read file"):
        read_document(d)
    with pytest.raises(IngestError, match=r"notes.docx: unsupported file type '.docx'"):
        read_document(tmp_path / "notes.docx")


def test_keyword_index_built_with_another_tokenizer_is_rebuilt(tmp_path, embedder):
    import json

    root = tmp_path / "ws"
    docs = [
        {"id": i, "title": "", "text": t}
        for i, t in [("a", "magma and lava"), ("b", "tea and bread"), ("c", "chess openings")]
    ]
    with Workspace(root) as ws:
        kb = ws.create_kb("k", embedder)
        ws.ingest_documents(kb, docs, embedder, progress=False)
    meta_file = current_dir(root / "indexes" / kb.id / "bm25")[0] / "meta.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    meta["tokenizer"] = "some-older-tokenizer/v0"
    meta_file.write_text(json.dumps(meta), encoding="utf-8")
    with Workspace(root) as ws2:
        idx = ws2.keyword_index(kb.id)  # rebuilt from the stored chunk texts
        assert idx.search("magma", 3)[0][0] == f"{kb.id}:a#c0"
    rebuilt = json.loads((current_dir(root / "indexes" / kb.id / "bm25")[0] / "meta.json").read_text("utf-8"))
    assert rebuilt["tokenizer"] == idx.tokenizer.identity
