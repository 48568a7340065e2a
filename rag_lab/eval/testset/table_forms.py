"""Questions about the cells of a table document (CSV / Excel, ingested as ``table_summary`` and
``table_column`` chunks by :mod:`rag_lab.knowledge.tables`).

* a ``table_summary`` chunk shows the file's first rows as a Markdown table: each row's key (the
  first column whose shown values are distinct and not numbers) and each other non-empty cell
  make "What is the <column> of <key>?" ("<key>的<column>是什么？" when Chinese), answer the cell;
* a ``table_column`` chunk of a numeric column states its range: "What is the highest / lowest
  <column> in <table title>?", answer the bound.

Only cells the KB's chunks hold are asked about, so the answer is in the source chunk.
"""

from __future__ import annotations

import re

from rag_lab.eval.testset.forms_en import Form
from rag_lab.searchutil.text import contains_han

__all__ = ["markdown_rows", "table_questions"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_EMPTY = {"", "NULL", "nan", "None"}
_NUMERIC_TYPES = ("INT", "DOUBLE", "FLOAT", "DECIMAL", "REAL", "NUMERIC", "HUGEINT", "BIGINT", "SMALLINT", "TINYINT")


def _cells(line: str) -> list[str]:
    """The cells of one Markdown table line, ``\\|`` and ``\\\\`` unescaped."""
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    cells, cur, i = [], "", 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            cur += body[i + 1]
            i += 2
            continue
        if ch == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
        i += 1
    cells.append(cur.strip())
    return cells


def markdown_rows(text: str) -> tuple[list[str], list[list[str]]]:
    """The header and body rows of the first Markdown table in ``text`` (``([], [])`` when none);
    rows whose cell count differs from the header's are skipped."""
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 2 or not re.fullmatch(r"\|(?:\s*-+\s*\|)+", lines[1].replace(" ", "")):
        return [], []
    head = _cells(lines[0])
    rows = [r for r in (_cells(ln) for ln in lines[2:]) if len(r) == len(head)]
    return head, rows


def _key_column(head: list[str], rows: list[list[str]]) -> int | None:
    for j in range(len(head)):
        values = [r[j] for r in rows]
        if all(v not in _EMPTY and not _NUMBER.fullmatch(v) for v in values) and len(set(values)) == len(values):
            return j
    return None


def _row_questions(text: str) -> list[Form]:
    head, rows = markdown_rows(text)
    key = _key_column(head, rows) if rows else None
    if key is None:
        return []
    out: list[Form] = []
    for row in rows:
        for j, (col, cell) in enumerate(zip(head, row, strict=True)):
            if j == key or cell in _EMPTY or not col:
                continue
            if contains_han(col + row[key]):
                q = f"{row[key]}的{col}是{'多少' if _NUMBER.fullmatch(cell) else '什么'}？"
            else:
                q = f"What is the {col} of {row[key]}?"
            out.append(Form(q, cell, "table"))
    return out


def _column_questions(text: str, title: str) -> list[Form]:
    m = re.match(r"Column (.+?) \(([A-Z0-9_]+)[^)]*\) of table file", text)
    r = re.search(r"\brange (-?[\d.]+) to (-?[\d.]+)", text)
    if m is None or r is None or not m.group(2).startswith(_NUMERIC_TYPES) or not title:
        return []
    col = m.group(1)
    if contains_han(col + title):
        return [Form(f"{title}中{col}的最大值是多少？", r.group(2), "table")]
    return [
        Form(f"What is the highest {col} in {title}?", r.group(2), "table"),
        Form(f"What is the lowest {col} in {title}?", r.group(1), "table"),
    ]


def table_questions(kind: str, text: str, title: str) -> list[Form]:
    """The questions of one table chunk of chunk type ``kind`` (module doc); none for other kinds."""
    if kind == "table_summary":
        return _row_questions(text)
    if kind == "table_column":
        return _column_questions(text, title)
    return []
