"""Table ingestion: CSV and Excel files → one ``table_summary`` and one ``table_column`` chunk per
column, indexed like text chunks (spec §1.6), plus a copy of the file kept for DATA_ANALYSIS.

Layout added to the workspace::

    <root>/files/<kb_id>/<quoted knowledge id>/<file name>

(the knowledge id is percent-quoted into one folder name). The document row records the copy's
path relative to the root in ``metadata["stored_path"]``; :func:`stored_table_path` resolves it.

The table is read and profiled by :class:`rag_lab.tools.data_analysis.DataAnalysisTool`, so the
column types in the chunks are exactly those the analysis SQL will meet. Like the other entry
points, ingestion is idempotent by content hash (file bytes, title, description, knowledge id):
an unchanged file is left alone, a changed one has its chunks, index entries and copy replaced, and
the document row is written last.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from rag_lab.knowledge.ingest_common import (
    DEFAULT_BATCH_SIZE,
    IngestError,
    IngestReport,
    _check_kb,
    _content_hash,
    _embed,
    _remove_document,
)
from rag_lab.knowledge.models import Chunk, Knowledge, KnowledgeBase

if TYPE_CHECKING:
    from rag_lab.knowledge.workspace import Workspace
    from rag_lab.models.base import Embedder
    from rag_lab.tools.data_analysis import TableSchema

#: suffix (lower-case) → ``Knowledge.file_type``
TABLE_SUFFIXES = {".csv": "csv", ".xlsx": "xlsx", ".xls": "xls"}
FILES_DIR = "files"
#: rows of the file shown in the summary chunk
SUMMARY_SAMPLE_ROWS = 3
#: caps checked before a table is loaded (a small .xlsx can unpack into a million rows)
MAX_TABLE_FILE_BYTES = 100 << 20
MAX_TABLE_ROWS = 200_000
MAX_XLSX_EXPANDED_BYTES = 128 << 20


def check_table_limits(
    src: Path,
    *,
    sheet: int | str = 0,
    max_bytes: int = MAX_TABLE_FILE_BYTES,
    max_rows: int = MAX_TABLE_ROWS,
    max_expanded_bytes: int = MAX_XLSX_EXPANDED_BYTES,
) -> None:
    """Refuse a table file before loading it when it is larger than ``max_bytes``, an ``.xlsx``
    whose parts unpack to more than ``max_expanded_bytes``, or a sheet / CSV with more than
    ``max_rows`` data rows. Counting streams the file (constant memory); the error names the
    file, the measured value and the cap."""
    import zipfile

    size = src.stat().st_size
    if size > max_bytes:
        raise IngestError(f"{src}: {size} bytes is larger than the table cap of {max_bytes} bytes (max_bytes)")
    suffix = src.suffix.lower()
    rows: int | None = None
    exact = True
    if suffix == ".csv":
        lines, last = 0, b"\n"
        with src.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
                if lines > max_rows + 1:
                    exact = False
                    break
        rows = lines + (exact and last != b"\n") - 1  # minus the header line
    elif suffix == ".xlsx" and zipfile.is_zipfile(src):
        with zipfile.ZipFile(src) as zf:
            expanded = sum(i.file_size for i in zf.infolist())
        if expanded > max_expanded_bytes:
            raise IngestError(
                f"{src}: the workbook unpacks to {expanded} bytes, more than the cap of {max_expanded_bytes} "
                "(max_expanded_bytes)"
            )
        rows = _xlsx_rows(src, sheet, max_rows)
        exact = rows is None or rows <= max_rows
        rows = max_rows if not exact else rows
    if rows is not None and (rows > max_rows or not exact):
        what = f"more than {max_rows} rows" if not exact else f"{rows} rows"
        raise IngestError(f"{src}: {what}; the cap is {max_rows} (max_rows)")


def _xlsx_rows(src: Path, sheet: int | str, cap: int) -> int | None:
    """Data rows of one sheet, counted by streaming its XML (stops at ``cap + 1``); None when
    openpyxl cannot read it (the loader then reports the problem)."""
    try:
        import openpyxl
    except ImportError:
        return None
    try:
        book = openpyxl.load_workbook(src, read_only=True, data_only=True)
    except Exception:
        return None
    try:
        names = book.sheetnames
        name = names[sheet] if isinstance(sheet, int) and 0 <= sheet < len(names) else sheet
        if name not in names:
            return None
        n = 0
        for _ in book[name].iter_rows(values_only=True):
            n += 1
            if n > cap + 1:
                return n - 1
        return max(0, n - 1)
    finally:
        book.close()


def table_file_dir(ws: Workspace, kb_id: str, knowledge_id: str) -> Path:
    """The folder that holds the copy of one table document's file."""
    return ws.root / FILES_DIR / kb_id / quote(knowledge_id, safe="")


def stored_table_path(ws: Workspace, knowledge: Knowledge) -> Path:
    """The workspace copy of a table document's file; ``FileNotFoundError`` naming the document
    when the document has none or the copy is gone."""
    rel = (knowledge.metadata or {}).get("stored_path", "")
    if not rel:
        raise FileNotFoundError(
            f"document {knowledge.id!r} ({knowledge.file_name or 'no file name'}) has no stored data file; "
            "ingest it with ingest_table"
        )
    root = ws.root.resolve()
    path = (root / rel).resolve()
    if root not in path.parents:
        raise FileNotFoundError(f"document {knowledge.id!r}: stored_path {rel!r} points outside the workspace")
    if not path.is_file():
        raise FileNotFoundError(f"document {knowledge.id!r}: data file {path} is missing")
    return path


def summary_text(schema: TableSchema, sample_columns: list[str], sample_rows: list[tuple[object, ...]]) -> str:
    """The ``table_summary`` chunk: file, size, columns with types and stats, first rows."""
    from rag_lab.tools.data_analysis import render_markdown_table

    head = f"Table file {schema.file_name}" + (f" (sheet {schema.sheet})" if schema.sheet else "")
    lines = [f"{head}: {schema.row_count} rows, {len(schema.columns)} columns.", "Columns:"]
    for c in schema.columns:
        lines.append(f"- {c.name} ({c.type}): {c.stats_text(schema.row_count)}")
    if sample_rows:
        lines += ["First rows:", render_markdown_table(sample_columns, sample_rows)]
    return "\n".join(lines)


def column_text(schema: TableSchema, index: int) -> str:
    """The ``table_column`` chunk of column ``index``."""
    c = schema.columns[index]
    return (
        f"Column {c.name} ({c.type}) of table file {schema.file_name}, column {index + 1} of {len(schema.columns)}.\n"
        f"{c.stats_text(schema.row_count)}"
    )


def table_chunks(
    schema: TableSchema,
    kb_id: str,
    knowledge_id: str,
    sample_columns: list[str],
    sample_rows: list[tuple[object, ...]],
    tag_id: str = "",
) -> list[Chunk]:
    """Summary chunk (index 0, id ``<kb>:<kid>#table``) then one chunk per column (index i+1,
    id ``<kb>:<kid>#col<i>``)."""
    prefix = f"{kb_id}:{knowledge_id}"
    meta = {"table_name": schema.table_name, "rows": schema.row_count}
    summary = summary_text(schema, sample_columns, sample_rows)
    chunks = [
        Chunk(
            id=f"{prefix}#table",
            knowledge_id=knowledge_id,
            knowledge_base_id=kb_id,
            content=summary,
            chunk_index=0,
            chunk_type="table_summary",
            end_at=len(summary),
            metadata=dict(meta),
            tag_id=tag_id,
        )
    ]
    for i, col in enumerate(schema.columns):
        text = column_text(schema, i)
        chunks.append(
            Chunk(
                id=f"{prefix}#col{i}",
                knowledge_id=knowledge_id,
                knowledge_base_id=kb_id,
                content=text,
                chunk_index=i + 1,
                chunk_type="table_column",
                end_at=len(text),
                metadata={**meta, "column": col.name, "type": col.type},
                tag_id=tag_id,
            )
        )
    return chunks


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ingest_table(
    ws: Workspace,
    kb: KnowledgeBase,
    path: str | Path,
    embedder: Embedder | None,
    progress: bool = False,
    *,
    knowledge_id: str | None = None,
    title: str | None = None,
    description: str = "",
    tag_id: str = "",
    sheet: int | str = 0,
    report: IngestReport | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    max_rows: int = MAX_TABLE_ROWS,
    max_bytes: int = MAX_TABLE_FILE_BYTES,
    max_expanded_bytes: int = MAX_XLSX_EXPANDED_BYTES,
) -> IngestReport:
    """Ingest one CSV / Excel file as a table document of ``kb``.

    ``knowledge_id`` defaults to the file name, ``title`` to the file stem. Pass ``report`` to
    accumulate into an existing report (``ingest_folder`` does). ``progress`` is accepted for
    symmetry with the other entry points (one file: nothing to show).
    """
    from rag_lab.tools.data_analysis import DataAnalysisError, DataAnalysisTool

    _check_kb(kb, embedder, want_faq=False)
    if batch_size <= 0:
        raise IngestError(f"batch_size={batch_size} must be positive")
    t0 = time.perf_counter()
    report = report if report is not None else IngestReport(kb_id=kb.id)
    src = Path(path)
    suffix = src.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise IngestError(
            f"{src}: unsupported table file type {suffix or '(none)'!r} (supported: {sorted(TABLE_SUFFIXES)})"
        )
    if not src.is_file():
        raise IngestError(f"{src}: file does not exist")
    kid = knowledge_id if knowledge_id is not None else src.name
    if not isinstance(kid, str) or not kid.strip():
        raise IngestError(f"{src}: knowledge_id={kid!r} must be a non-empty string")
    title = src.stem if title is None else title
    if not isinstance(title, str):
        raise IngestError(f"{src}: title={title!r} must be a string")

    check_table_limits(src, sheet=sheet, max_bytes=max_bytes, max_rows=max_rows, max_expanded_bytes=max_expanded_bytes)
    dest_dir = table_file_dir(ws, kb.id, kid)
    dest = dest_dir / src.name
    rel = dest.relative_to(ws.root).as_posix()
    try:
        with DataAnalysisTool(src, sheet=sheet) as tool:
            schema = tool.load()
            sample = tool.run_sql(f"SELECT * FROM {_quoted(schema.table_name)} LIMIT {SUMMARY_SAMPLE_ROWS}")
    except DataAnalysisError as exc:
        raise IngestError(f"{src}: cannot read as a table: {exc}") from None
    if schema.row_count > max_rows:  # the sheet's XML said fewer rows than it holds
        raise IngestError(f"{src}: {schema.row_count} rows; the cap is {max_rows} (max_rows)")
    meta = {
        "stored_path": rel,
        "table_name": schema.table_name,
        "rows": str(schema.row_count),
        "columns": str(len(schema.columns)),
    }
    if schema.sheet:
        meta["sheet"] = schema.sheet
    k = Knowledge(
        id=kid,
        knowledge_base_id=kb.id,
        title=title,
        file_name=src.name,
        file_type=TABLE_SUFFIXES[suffix],
        source="file",
        description=description,
        metadata=meta,
        content_hash=_content_hash(title, _file_hash(src), meta, {"description": description, "tag_id": tag_id}),
    )
    chunks = table_chunks(schema, kb.id, kid, sample.columns, sample.rows, tag_id=tag_id)

    store = ws.store
    with ws.kb_lock(kb, embedder):
        existing = store.get_document(kb.id, kid)
        if existing is not None and existing.content_hash == k.content_hash and dest.is_file():
            report.unchanged.append(kid)
            report.seconds += time.perf_counter() - t0
            return report
        vindex = ws.vector_index(kb)
        kindex = ws.keyword_index(kb) if kb.keyword_enabled else None
        if existing is not None:
            report.chunks_removed += _remove_document(ws, kb, kid)
            report.updated.append(kid)
        else:
            report.added.append(kid)
        shutil.rmtree(dest_dir, ignore_errors=True)
        dest_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
        store.add_chunks(chunks)
        report.chunks_added += len(chunks)
        if kindex is not None:
            kindex.add([c.id for c in chunks], [c.content for c in chunks])
        if vindex is not None and embedder is not None:
            for start in range(0, len(chunks), batch_size):
                part = chunks[start : start + batch_size]
                vecs = _embed(embedder, [c.content for c in part], f"table {src.name} in knowledge base {kb.name!r}")
                vindex.add([c.id for c in part], vecs)
                report.vectors_added += len(part)
            vindex.save(ws.index_dir(kb.id))
        if kindex is not None:
            kindex.save()
        store.add_knowledge([k])
    report.seconds += time.perf_counter() - t0
    return report


def delete_table_document(ws: Workspace, kb: KnowledgeBase, knowledge_id: str) -> int:
    """Delete a table document (chunks, index entries, row) and its stored file copy; returns
    the chunks removed."""
    n = ws.delete_knowledge(kb, knowledge_id)
    shutil.rmtree(table_file_dir(ws, kb.id, knowledge_id), ignore_errors=True)
    return n


def _quoted(name: str) -> str:
    from rag_lab.tools.data_analysis import quote_ident

    return quote_ident(name)


__all__ = [
    "TABLE_SUFFIXES",
    "ingest_table",
    "delete_table_document",
    "stored_table_path",
    "table_file_dir",
    "table_chunks",
    "summary_text",
    "column_text",
]
