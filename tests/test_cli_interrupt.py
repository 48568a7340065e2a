"""The first Ctrl-C stops a command with one line and exit code 130, keeps what finished and leaves
no half-written document (a real ``rag-lab ingest`` in a subprocess, interrupted mid-ingest)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

TOPICS = ["lighthouse", "volcano", "glacier", "harbour", "canyon", "meadow", "reef", "delta"]


def test_ctrl_c_during_ingest_stops_with_one_line_and_keeps_whole_documents(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    n_docs = 400
    for i in range(n_docs):
        t = TOPICS[i % len(TOPICS)]
        (docs / f"d{i:03d}.md").write_text(f"# Note {i}\n\nA short note {i} about the {t} number {i}.\n")
    ws = tmp_path / "ws"
    env = dict(os.environ, PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_lab.cli", "--workspace", str(ws), "ingest", str(docs), "--kb", "notes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    err = bytearray()
    started = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        while chunk := proc.stderr.read1(4096):
            err.extend(chunk)
            # the bar counts stored bytes: at 5 % some documents are in
            if re.search(rb"\s([5-9]|[1-9]\d)%\|", bytes(err)):
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert started.wait(120), "the ingest never started: " + err.decode(errors="replace")[-2000:]
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(120)  # a hang guard only: no assertion on how long it took
    reader.join(10)
    text = err.decode(errors="replace")
    assert rc == 130, text[-2000:]
    assert "rag-lab ingest: interrupted (Ctrl-C); what had finished is kept" in text
    assert "Traceback" not in text and "KeyboardInterrupt" not in text

    from rag_lab.knowledge.workspace import Workspace

    with Workspace(ws) as w:
        kb = w.get_kb("notes")
        stored = w.store.list_knowledge(kb.id)
        assert 0 < len(stored) < n_docs  # stopped midway, the finished documents kept
        for k in stored:  # each one whole: its chunk, searchable
            chunks = w.store.list_chunks(kb.id, k.id)
            assert chunks and all(c.content for c in chunks)
        assert len(w.vector_index(kb)) >= len(stored)  # every kept document has its vectors
