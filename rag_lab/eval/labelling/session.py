"""A labelling session over one dataset folder: every question's :class:`QuestionState`, the
keyboard commands, and atomic writes of ``queries.jsonl``.

Saving never loses data: every row of the file is written back (rejected ones too, marked), the
new rows are validated against the corpus exactly as the loader validates them before anything is
written, the file is replaced atomically (a temporary file in the same folder, flushed, then
renamed over it), and a file changed by someone else since it was read is refused rather than
overwritten. ``corpus.jsonl`` and every other file of the folder are never written.

Commands (the panel's command box; case does not matter, several separated by spaces)::

    a            accept the question
    r            reject it (kept in the file, marked, left out of evaluations)
    e "NEW TEXT" edit it to NEW TEXT (quoted, "..." with backslash escapes or '...'; the generated
                 text is kept; what follows the closing quote is read as more commands)
    e            alone: edit it in the panel's text box
    210          grade the shown passages by position: 1st relevant (2), 2nd partly (1), 3rd not (0)
    3=2          grade passage 3 as 2 (``3=-`` clears its grade)
    n / p        next / previous question

A grade is stored with the passage's id, not its position: after an edit the panel retrieves
passages for the new text, and a passage graded before keeps its grade wherever it is shown.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rag_lab.eval.datasets import CORPUS_FILE, QUERIES_FILE, Dataset, DatasetError, jsonl_bytes, load_dataset
from rag_lab.eval.datasets.converters import query_row
from rag_lab.eval.datasets.loading import _iter_rows, _load_corpus
from rag_lab.eval.datasets.schema import _query_items
from rag_lab.eval.labelling.model import GRADES, Clock, QuestionState, state_from_item, utc_now

__all__ = ["Command", "LabelSession", "PassageRef", "parse_commands", "quote_text"]


@dataclass(frozen=True, slots=True)
class PassageRef:
    """A passage shown for a question: its chunk id and its document (corpus) id."""

    passage: str
    doc_id: str


@dataclass(frozen=True, slots=True)
class Command:
    """One parsed command: ``kind`` in accept, reject, edit, edit_box, grade, clear, next, prev."""

    kind: str
    text: str = ""
    position: int = 0  # 1-based passage position (grade, clear)
    grade: int = 0


_GRADE_AT = re.compile(r"^(\d+)[=:]([012-])$")
#: ``e "text"`` (JSON-style escapes) or ``e 'text'``, then the rest of the line
_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"|^\'([^\']*)\'')


def parse_commands(line: str) -> list[Command]:
    """The commands of one line of the command box (see the module docstring); ValueError naming
    the token that is not one."""
    out: list[Command] = []
    rest = line.strip()
    while rest:
        token, _, tail = rest.partition(" ")
        low = token.lower()
        if low == "e":
            tail = tail.strip()
            if not tail:
                out.append(Command("edit_box"))
                break
            m = _QUOTED.match(tail)
            if m is None:
                raise ValueError(
                    f'quote the new text, so that what follows is read as commands: e "{short(tail)}" '
                    "(or e alone to edit it in the text box)"
                )
            text = json.loads(f'"{m.group(1)}"') if m.group(1) is not None else m.group(2)
            if not text.strip():
                raise ValueError("'e' needs the new question text in the quotes: e \"What is ...?\"")
            out.append(Command("edit", text=text.strip()))
            rest = tail[m.end() :].strip()
            continue
        if low in ("a", "r", "n", "p"):
            out.append(Command({"a": "accept", "r": "reject", "n": "next", "p": "prev"}[low]))
        elif low.isdigit() and all(int(c) in GRADES for c in low):
            out.extend(Command("grade", position=i, grade=int(c)) for i, c in enumerate(low, 1))
        elif m := _GRADE_AT.match(low):
            pos = int(m.group(1))
            if pos < 1:
                raise ValueError(f"{token!r}: passages are numbered from 1")
            if m.group(2) == "-":
                out.append(Command("clear", position=pos))
            else:
                out.append(Command("grade", position=pos, grade=int(m.group(2))))
        else:
            raise ValueError(
                f'{token!r} is not a command: a (accept), r (reject), e "TEXT" (edit), grades like 210 or 3=2 '
                "(2 relevant, 1 partly, 0 not; 3=- clears), n / p (next / previous)"
            )
        rest = tail.strip()
    return out


def short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote_text(text: str) -> str:
    """``text`` as the quoted argument of an ``e`` command."""
    return json.dumps(text, ensure_ascii=False)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a temporary file beside it, flushed and synced,
    renamed over it (readers see the old file or the new one, never a part)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class LabelSession:
    """The review state of every question of a dataset folder (rejected ones included), in file
    order, and its persistence. ``who``: the labeller's name (default: the login name); ``clock``:
    the ``at`` of each label (default :func:`utc_now`)."""

    def __init__(self, folder: str | Path, who: str | None = None, clock: Clock | None = None) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise DatasetError(f"{self.folder}: not a dataset folder (it must hold {CORPUS_FILE} and {QUERIES_FILE})")
        self.who = who or _login()
        self.clock = clock or utc_now
        self.reload()

    # ------------------------------------------------------------------ persistence

    def reload(self) -> None:
        """Read (and validate) the folder again, dropping unsaved changes."""
        path = self.folder / QUERIES_FILE
        skipped: list[str] = []
        self._corpus_ids = {d.id for d in _load_corpus(self.folder / CORPUS_FILE, skipped)}
        data = path.read_bytes() if path.is_file() else b""
        rows = list(_iter_rows(path, skipped))
        items = _query_items(path, rows, self._corpus_ids)
        self._digest = _digest(data)
        self.questions: list[QuestionState] = [
            state_from_item(item, str(path), line) for (line, _), item in zip(rows, items, strict=True)
        ]
        self._by_id = {q.id: q for q in self.questions}

    def save(self) -> Path:
        """Write every question back to ``queries.jsonl`` (validated first, atomic, refused when
        the file changed since it was read); returns the file."""
        path = self.folder / QUERIES_FILE
        current = path.read_bytes() if path.is_file() else b""
        if _digest(current) != self._digest:
            raise DatasetError(
                f"{path}: changed on disk since this session read it (someone else labelled or edited it); "
                "nothing was written: call reload() and redo the labels not yet saved"
            )
        rows = [query_row(q.to_item()) for q in self.questions]
        data = jsonl_bytes(rows)
        _query_items(path, enumerate(rows, 1), self._corpus_ids)  # what the loader will check
        atomic_write(path, data)
        self._digest = _digest(data)
        return path

    def dataset(self) -> Dataset:
        """The folder as every evaluator loads it (rejected questions set aside)."""
        return load_dataset(self.folder)

    # ------------------------------------------------------------------ edits

    def question(self, qid: str) -> QuestionState:
        try:
            return self._by_id[qid]
        except KeyError:
            raise KeyError(f"{self.folder / QUERIES_FILE}: no question with id {qid!r}") from None

    def accept(self, qid: str) -> None:
        self.question(qid).accept(self.who, self.clock())

    def edit(self, qid: str, text: str) -> None:
        self.question(qid).edit(text, self.who, self.clock())

    def reject(self, qid: str) -> None:
        self.question(qid).reject(self.who, self.clock())

    def grade(self, qid: str, passage: str, doc_id: str, grade: int) -> None:
        if doc_id not in self._corpus_ids:
            raise ValueError(
                f"question {qid}: passage {passage} belongs to document {doc_id!r}, which is not in "
                f"{self.folder / CORPUS_FILE} (was the KB ingested from another corpus?)"
            )
        self.question(qid).grade(passage, doc_id, grade, self.who, self.clock())

    def apply(self, qid: str, commands: Sequence[Command] | str, passages: Sequence[PassageRef] = ()) -> int:
        """Apply commands to question ``qid`` (``passages``: those shown, in order, for the
        positional grades); returns the move asked for (+1 next, -1 previous, 0 none). Every
        command is checked before any is applied, so a bad line changes nothing."""
        cmds = parse_commands(commands) if isinstance(commands, str) else list(commands)
        for c in cmds:
            if c.kind in ("grade", "clear") and c.position > len(passages):
                raise ValueError(f"passage {c.position} asked, but {len(passages)} passage(s) are shown")
        move = 0
        for c in cmds:
            if c.kind == "accept":
                self.accept(qid)
            elif c.kind == "reject":
                self.reject(qid)
            elif c.kind == "edit":
                self.edit(qid, c.text)
            elif c.kind == "edit_box":
                continue  # the panel opens its text box
            elif c.kind == "grade":
                p = passages[c.position - 1]
                self.grade(qid, p.passage, p.doc_id, c.grade)
            elif c.kind == "clear":
                self.question(qid).clear_grade(passages[c.position - 1].passage)
            else:
                move = 1 if c.kind == "next" else -1
        return move

    # ------------------------------------------------------------------ summary

    def counts(self) -> dict[str, int]:
        """How many questions per status, and how many synthetic ones are still unreviewed."""
        out = {s: 0 for s in ("unreviewed", "accepted", "edited", "rejected")}
        for q in self.questions:
            out[q.status] += 1
        out["unreviewed_synthetic"] = sum(1 for q in self.questions if q.synthetic and not q.reviewed)
        out["graded_passages"] = sum(len(q.labels) for q in self.questions)
        return out

    def states(self) -> list[tuple[object, ...]]:
        return [q.comparable() for q in self.questions]


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name (some containers)
        return "unknown"
