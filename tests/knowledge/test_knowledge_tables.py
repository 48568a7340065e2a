"""Table ingestion: CSV / Excel → table_summary + table_column chunks, a stored copy, search."""

from __future__ import annotations

import datetime as dt

import pytest

from rag_lab.knowledge.tables import (
    delete_table_document,
    ingest_table,
    stored_table_path,
    table_file_dir,
)
from rag_lab.knowledge.workspace import IngestError
from rag_lab.retrieval.hybrid_search import HybridSearcher, SearchParams

SALES = (
    "region,month,amount,units,note\n"
    "North,2024-01-01,100.5,3,ok\n"
    "South,2024-01-01,200,4,\n"
    "North,2024-02-01,150,2,late\n"
    "East,2024-02-01,50.25,1,ok\n"
)


@pytest.fixture
def sales_csv(tmp_path):
    p = tmp_path / "src" / "sales.csv"
    p.parent.mkdir()
    p.write_text(SALES, encoding="utf-8")
    return p


def test_csv_becomes_summary_and_column_chunks(workspace, embedder, sales_csv):
    kb = workspace.create_kb("tables", embedder)
    rep = ingest_table(workspace, kb, sales_csv, embedder)
    assert rep.added == ["sales.csv"] and rep.chunks_added == 6 and rep.vectors_added == 6
    doc = workspace.store.get_document(kb.id, "sales.csv")
    assert (doc.title, doc.file_name, doc.file_type, doc.source) == ("sales", "sales.csv", "csv", "file")
    assert doc.metadata == {
        "stored_path": f"files/{kb.id}/sales.csv/sales.csv",
        "table_name": "sales",
        "rows": "4",
        "columns": "5",
    }
    chunks = workspace.store.list_chunks(kb.id, "sales.csv")
    by_type = {}
    for c in chunks:
        by_type.setdefault(c.chunk_type, []).append(c)
    assert [c.id for c in by_type["table_summary"]] == [f"{kb.id}:sales.csv#table"]
    cols = sorted(by_type["table_column"], key=lambda c: c.chunk_index)
    assert [c.chunk_index for c in cols] == [1, 2, 3, 4, 5]
    assert [(c.metadata["column"], c.metadata["type"]) for c in cols] == [
        ("region", "VARCHAR"),
        ("month", "DATE"),
        ("amount", "DOUBLE"),
        ("units", "BIGINT"),
        ("note", "VARCHAR"),
    ]
    summary = by_type["table_summary"][0].content
    assert summary.startswith("Table file sales.csv: 4 rows, 5 columns.\nColumns:\n- region (VARCHAR): ")
    assert "| region | month | amount | units | note |" in summary
    assert "| North | 2024-01-01 | 100.5 | 3 | ok |" in summary and "| East |" not in summary  # 3 sample rows
    assert cols[2].content == (
        "Column amount (DOUBLE) of table file sales.csv, column 3 of 5.\n"
        "4 values, 0 empty, 4 distinct, range 50.25 to 200, mean 125.1875; examples: 100.5, 200, 150, 50.25"
    )
    assert cols[0].content.endswith("4 values, 0 empty, 3 distinct; most frequent: North (2)")
    assert "1 empty, 2 distinct; most frequent: ok (2)" in cols[4].content
    # the copy is what DATA_ANALYSIS will load
    stored = stored_table_path(workspace, doc)
    assert stored == (workspace.root / "files" / kb.id / "sales.csv" / "sales.csv").resolve()
    assert stored.read_text(encoding="utf-8") == SALES
    assert len(workspace.vector_index(kb)) == 6


async def test_table_chunks_are_retrieved_like_text(workspace, embedder, sales_csv):
    kb = workspace.create_kb("tables", embedder)
    workspace.ingest_documents(
        kb,
        [{"id": "prose", "title": "Lighthouse", "text": "The lighthouse keeper lit the lamp."}],
        embedder,
        progress=False,
    )
    ingest_table(workspace, kb, sales_csv, embedder)
    hs = HybridSearcher(workspace, lambda k: embedder)
    res = await hs.search(kb.id, SearchParams(query_text="amount per region", match_count=5))
    top = res[0]
    assert top.chunk_type in ("table_column", "table_summary") and top.knowledge_filename == "sales.csv"
    assert {r.knowledge_id for r in res if r.chunk_type.startswith("table_")} == {"sales.csv"}


def test_reingest_is_idempotent_and_a_change_replaces_everything(workspace, embedder, sales_csv):
    kb = workspace.create_kb("tables", embedder)
    ingest_table(workspace, kb, sales_csv, embedder)
    again = ingest_table(workspace, kb, sales_csv, embedder)
    assert again.unchanged == ["sales.csv"] and again.chunks_added == 0
    sales_csv.write_text("region,total\nNorth,1\nSouth,2\n", encoding="utf-8")
    rep = ingest_table(workspace, kb, sales_csv, embedder)
    assert rep.updated == ["sales.csv"] and rep.chunks_removed == 6 and rep.chunks_added == 3
    ids = sorted(c.id for c in workspace.store.list_chunks(kb.id))
    assert ids == [f"{kb.id}:sales.csv#col0", f"{kb.id}:sales.csv#col1", f"{kb.id}:sales.csv#table"]
    assert len(workspace.vector_index(kb)) == 3
    doc = workspace.store.get_document(kb.id, "sales.csv")
    assert stored_table_path(workspace, doc).read_text(encoding="utf-8") == "region,total\nNorth,1\nSouth,2\n"
    # a lost copy is restored on the next ingestion even though the file did not change
    stored_table_path(workspace, doc).unlink()
    assert ingest_table(workspace, kb, sales_csv, embedder).updated == ["sales.csv"]
    assert stored_table_path(workspace, doc).is_file()


def test_excel_workbook(workspace, embedder, tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    ws_ = wb.active
    ws_.title = "Q1"
    ws_.append(["Product", "Price", "Stock", "Added", "Code"])
    ws_.append(["Widget", 2.5, 10, dt.datetime(2024, 3, 1), "A1"])
    ws_.append(["Gadget", 10.0, 0, dt.datetime(2024, 3, 2), 7])  # a mixed text / number column
    wb.create_sheet("Other").append(["ignored"])
    path = tmp_path / "Stock List.xlsx"
    wb.save(path)
    kb = workspace.create_kb("tables", embedder)
    ingest_table(workspace, kb, path, embedder, knowledge_id="inventory/stock.xlsx", description="Stock levels")
    doc = workspace.store.get_document(kb.id, "inventory/stock.xlsx")
    assert (doc.file_name, doc.file_type, doc.description) == ("Stock List.xlsx", "xlsx", "Stock levels")
    assert doc.metadata["table_name"] == "stock_list" and doc.metadata["sheet"] == "Q1"
    # the knowledge id is quoted into one folder name
    assert table_file_dir(workspace, kb.id, "inventory/stock.xlsx").name == "inventory%2Fstock.xlsx"
    assert stored_table_path(workspace, doc).name == "Stock List.xlsx"
    types = {
        c.metadata["column"]: c.metadata["type"]
        for c in workspace.store.list_chunks(kb.id)
        if c.chunk_type == "table_column"
    }
    assert types == {
        "Product": "VARCHAR",
        "Price": "DOUBLE",
        "Stock": "BIGINT",
        "Added": "TIMESTAMP",
        "Code": "VARCHAR",
    }
    summary = next(c for c in workspace.store.list_chunks(kb.id) if c.chunk_type == "table_summary").content
    assert summary.startswith("Table file Stock List.xlsx (sheet Q1): 2 rows, 5 columns.")
    assert "- Code (VARCHAR): 2 values, 0 empty, 2 distinct; examples: A1, 7" in summary


def test_bad_inputs_name_the_file(workspace, embedder, tmp_path, sales_csv):
    kb = workspace.create_kb("tables", embedder)
    txt = tmp_path / "notes.txt"
    txt.write_text("x", encoding="utf-8")
    with pytest.raises(IngestError, match=r"notes\.txt: unsupported table file type '\.txt'"):
        ingest_table(workspace, kb, txt, embedder)
    with pytest.raises(IngestError, match=r"missing\.csv: file does not exist"):
        ingest_table(workspace, kb, tmp_path / "missing.csv", embedder)
    broken = tmp_path / "broken.xlsx"
    broken.write_bytes(b"not a zip file")
    with pytest.raises(IngestError, match=r"broken\.xlsx: cannot read as a table: .*Excel"):
        ingest_table(workspace, kb, broken, embedder)
    faq = workspace.create_kb("faq", embedder, kb_type="faq")
    with pytest.raises(IngestError, match="FAQ KB"):
        ingest_table(workspace, faq, sales_csv, embedder)
    with pytest.raises(IngestError, match=r"sales\.csv: knowledge_id=' ' must be a non-empty string"):
        ingest_table(workspace, kb, sales_csv, embedder, knowledge_id=" ")
    assert workspace.store.list_knowledge(kb.id) == []


def test_delete_removes_the_stored_copy(workspace, embedder, sales_csv):
    kb = workspace.create_kb("tables", embedder)
    ingest_table(workspace, kb, sales_csv, embedder)
    folder = table_file_dir(workspace, kb.id, "sales.csv")
    assert folder.is_dir()
    assert delete_table_document(workspace, kb, "sales.csv") == 6
    assert not folder.exists() and workspace.store.list_chunks(kb.id) == []


def test_stored_path_errors(workspace, embedder, sales_csv):
    from rag_lab.knowledge.models import Knowledge

    with pytest.raises(FileNotFoundError, match="has no stored data file"):
        stored_table_path(workspace, Knowledge(id="x.csv", knowledge_base_id="kb", file_name="x.csv"))
    with pytest.raises(FileNotFoundError, match="outside the workspace"):
        stored_table_path(
            workspace, Knowledge(id="x", knowledge_base_id="kb", metadata={"stored_path": "../../etc/passwd"})
        )
    with pytest.raises(FileNotFoundError, match="is missing"):
        stored_table_path(
            workspace, Knowledge(id="x", knowledge_base_id="kb", metadata={"stored_path": "files/kb/x/x.csv"})
        )


def test_ingest_folder_sends_tables_to_ingest_table(workspace, embedder, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nSales are reported per region every quarter.")
    (folder / "sales.csv").write_text("region,amount\nNorth,250.5\nSouth,120\n")
    kb = workspace.create_kb("mixed", embedder)
    report = workspace.ingest_folder(kb, folder, embedder, progress=False)
    assert sorted(report.added) == ["notes.md", "sales.csv"]
    types = {c.chunk_type for c in workspace.store.list_chunks(kb.id)}
    assert {"text", "table_summary", "table_column"} <= types
    again = workspace.ingest_folder(kb, folder, embedder, progress=False)
    assert sorted(again.unchanged) == ["notes.md", "sales.csv"] and not again.changed
