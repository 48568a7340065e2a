"""The labelling panel (ipywidgets): walk a dataset's questions, accept / edit / reject each, grade
the passages the lab retrieves for it, and write the labels back (:mod:`rag_lab.eval.labelling`
does the state and the files; this module only draws and forwards).

Keyboard: ipywidgets buttons take no access keys, so the panel has a **command box** (a text
input): type a command line and press Enter — ``a`` accept, ``r`` reject, ``e NEW TEXT`` edit,
``210`` grade the shown passages by position (2 relevant, 1 partly, 0 not), ``3=2`` one passage,
``3=-`` clear it, ``n`` / ``p`` next / previous; several at once, e.g. ``a 210 n``. The box keeps
the focus after each line, so a whole set can be labelled without the mouse. Buttons and the
per-passage toggles do the same with the mouse. With ``autosave`` (the default) every change is
written to ``queries.jsonl`` at once (atomically).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from rag_lab.eval.datasets import CORPUS_FILE, Dataset
from rag_lab.eval.datasets.loading import _load_corpus
from rag_lab.eval.labelling.model import GRADE_NAMES, GRADES, candidate_passages
from rag_lab.eval.labelling.session import LabelSession, PassageRef, parse_commands, quote_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_lab.eval.labelling.model import QuestionState
    from rag_lab.lab.lab import Lab
    from rag_lab.types.params import PipelineParams

__all__ = ["COMMAND_HELP", "LabelPanel", "Passage", "lab_retriever"]

COMMAND_HELP = (
    "a accept · r reject · e TEXT edit · 210 grades by position (2 relevant, 1 partly, 0 not) · "
    "3=2 one passage · 3=- clear · n / p next / previous — then Enter"
)
MAX_PASSAGE_CHARS = 600


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage shown for grading: chunk id, document id and title, text, where it came from."""

    passage: str
    doc_id: str
    title: str
    text: str
    origin: str  # "retrieved #3", "source chunk", "labelled earlier"

    def ref(self) -> PassageRef:
        return PassageRef(self.passage, self.doc_id)


#: question text -> passages (the ones retrieved, best first)
Retriever = Callable[[str], Sequence[Passage]]


def lab_retriever(
    lab: Lab, kb: str, params: PipelineParams | Mapping[str, object] | None = None, searched: int = 5
) -> Retriever:
    """Passages for a question from ``lab.ask(question, kb=kb)`` (the whole offline pipeline):
    its final contexts best first, then up to ``searched`` more that the search stage found and
    rerank, MMR or merge did not keep (a person judges those too), each chunk once."""

    def retrieve(question: str) -> list[Passage]:
        run = lab.ask(question, kb=kb, params=params) if params is not None else lab.ask(question, kb=kb)
        snap = run.snapshots.get("chunk_search_parallel")
        lists = [(run.references, "retrieved", len(run.references))]
        if snap is not None:
            lists.append((snap.state.search_result, "searched, not kept", searched))
        out: list[Passage] = []
        seen: set[str] = set()
        for results, origin, most in lists:
            n = 0
            for r in results:
                if n >= most:
                    break
                if r.id in seen or not r.knowledge_id:
                    continue
                seen.add(r.id)
                n += 1
                out.append(Passage(r.id, r.knowledge_id, r.knowledge_title, r.content, f"{origin} #{n}"))
        return out

    return retrieve


def _widgets() -> ModuleType:
    try:
        import ipywidgets
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("the labelling panel needs ipywidgets: pip install 'ipywidgets>=8.1'") from exc
    module: ModuleType = ipywidgets  # ipywidgets has no type information
    return module


class LabelPanel:
    """Label a dataset folder's questions in a notebook.

    ``dataset``: the folder (or a loaded :class:`Dataset` of one); ``kb``: the knowledge base
    to retrieve from (default: the KB the questions were generated from, ``source_kb`` in their
    metadata, else the dataset's corpus ingested into its evaluation KB); ``retriever``: replaces
    the lab's pipeline; ``who``: the labeller's name. ``panel.session`` is the model (the same
    edits from code); displaying the panel displays its widget."""

    def __init__(
        self,
        lab: Lab,
        dataset: str | Path | Dataset,
        kb: str | None = None,
        *,
        who: str | None = None,
        retriever: Retriever | None = None,
        autosave: bool = True,
        clock: Callable[[], str] | None = None,
    ) -> None:
        folder = Path(dataset.path) if isinstance(dataset, Dataset) else Path(dataset)
        self.session = LabelSession(folder, who=who, clock=clock)
        self.corpus = {d.id: d for d in _load_corpus(folder / CORPUS_FILE, [])}
        self.lab = lab
        self.autosave = autosave
        self.kb = kb if kb is not None or retriever is not None else self._default_kb()
        self.retriever = retriever or lab_retriever(lab, str(self.kb))
        self.index = 0
        self._cache: dict[str, list[Passage]] = {}
        self._drawing = False
        self._build()
        self.show(0)

    # ------------------------------------------------------------------ data

    def _default_kb(self) -> str:
        from rag_lab.eval.ingest import eval_kb_name, ingest_dataset
        from rag_lab.knowledge.workspace import KnowledgeBaseNotFound

        names = {str(q.item.metadata.get("source_kb") or "") for q in self.session.questions} - {""}
        if len(names) == 1:
            name = names.pop()
            try:
                self.lab.kb(name, create=False)
                return name
            except KnowledgeBaseNotFound:  # not in this workspace: ingest the corpus instead
                pass
        ds = self.session.dataset()
        name = eval_kb_name(ds.name, ds)
        ingest_dataset(self.lab, ds, name)
        return name

    @property
    def current(self) -> QuestionState:
        return self.session.questions[self.index]

    def passages(self, index: int | None = None) -> list[Passage]:
        """The passages shown for question ``index`` (default the current one): the retrieved
        ones, then its source chunk when retrieval missed it, then the other passages the
        generator found holding its answer (``candidate_passages``, to grade as gold candidates),
        then passages labelled earlier that are no longer retrieved. Fixed once computed, so positions stay what the user saw."""
        q = self.session.questions[self.index if index is None else index]
        if q.id not in self._cache:
            shown = list(self.retriever(q.text))
            ids = {p.passage for p in shown}
            extra = []
            src = q.item.metadata.get("source_chunk_id")
            if isinstance(src, str) and src and src not in ids and q.item.gold_ids:
                extra.append((src, q.item.gold_ids[0], "source chunk"))
            extra += [(pid, doc, "also holds the answer") for pid, doc in candidate_passages(q.item.metadata)]
            extra += [(lab.passage, lab.doc_id, "labelled earlier") for lab in q.labels.values()]
            for pid, doc_id, origin in extra:
                if pid not in ids:
                    ids.add(pid)
                    shown.append(self._stored_passage(pid, doc_id, origin))
            self._cache[q.id] = shown
        return self._cache[q.id]

    def _stored_passage(self, pid: str, doc_id: str, origin: str) -> Passage:
        text = ""
        store = getattr(getattr(self.lab, "workspace", None), "store", None)
        if store is not None:
            chunk = store.get_chunks([pid]).get(pid)
            text = chunk.content if chunk is not None else ""
        doc = self.corpus.get(doc_id)
        if not text:
            text = doc.text if doc is not None else "(passage not found in the knowledge base)"
        return Passage(pid, doc_id, doc.title if doc is not None else "", text, origin)

    # ------------------------------------------------------------------ actions

    def command(self, line: str) -> str:
        """Run one command line on the current question (what Enter in the command box does);
        returns the status message shown."""
        q = self.current
        text_before = q.text
        try:
            cmds = parse_commands(line)
            move = self.session.apply(q.id, cmds, [p.ref() for p in self.passages()])
        except (ValueError, KeyError) as exc:
            return self._status(f"⚠ {exc}", error=True)
        if q.text != text_before:  # retrieve for the new text; grades stay with their passages' ids
            self._cache.pop(q.id, None)
        saved = self._autosave()
        if any(c.kind == "edit_box" for c in cmds):
            self.text.value = q.text
            self._draw()
            return self._status(f"{q.id}: edit the question in the text box, then press edit")
        if move:
            self.show(self.index + move)
        else:
            self._draw()
        return self._status(f"{q.id}: {line.strip()}{saved}")

    def show(self, index: int) -> None:
        """Move to question ``index`` (clamped to the set)."""
        self.index = max(0, min(index, len(self.session.questions) - 1))
        self._draw()

    def save(self) -> Path:
        return self.session.save()

    def _autosave(self) -> str:
        if not self.autosave:
            return " (not saved: call save())"
        return f" · saved {self.session.save().name}"

    # ------------------------------------------------------------------ widgets

    def _build(self) -> None:
        W = _widgets()
        self.header = W.HTML()
        self.text = W.Textarea(layout=W.Layout(width="100%", height="3.2em"))
        self.buttons = {
            name: W.Button(description=label, tooltip=tip, layout=W.Layout(width="auto"))
            for name, label, tip in (
                ("accept", "Accept", "accept the question as shown (command: a)"),
                ("edit", "Save edit", "keep the text in the box as the question (command: e TEXT)"),
                ("reject", "Reject", "reject the question (command: r)"),
                ("prev", "◀ Previous", "command: p"),
                ("next", "Next ▶", "command: n"),
            )
        }
        self.buttons["accept"].on_click(lambda _: self.command("a"))
        self.buttons["reject"].on_click(lambda _: self.command("r"))
        self.buttons["edit"].on_click(lambda _: self._edit_from_box())
        self.buttons["prev"].on_click(lambda _: self.command("p"))
        self.buttons["next"].on_click(lambda _: self.command("n"))
        self.passage_box = W.VBox()
        self.cmd = W.Text(
            placeholder="command, then Enter: a · r · e TEXT · 210 · 3=2 · n · p",
            continuous_update=False,
            layout=W.Layout(width="100%"),
        )
        self.cmd.add_class("rag-lab-label-command")
        self.cmd.observe(self._on_command, names="value")
        self.status = W.HTML()
        self.status.add_class("rag-lab-label-status")
        helptext = W.HTML(f"<span style='color:#666;font-size:smaller'>{html.escape(COMMAND_HELP)}</span>")
        self.widget = W.VBox(
            [
                self.header,
                self.text,
                W.HBox(list(self.buttons.values())),
                self.passage_box,
                self.cmd,
                helptext,
                self.status,
            ]
        )
        self.widget.add_class("rag-lab-label-panel")

    def _edit_from_box(self) -> None:
        text = self.text.value.strip()
        if text == self.current.text:
            self._status("the text is unchanged: edit it in the box first (or accept it)", error=True)
            return
        self.command(f"e {quote_text(text)}")

    def _on_command(self, change: Mapping[str, object]) -> None:
        line = str(change["new"])
        if not line.strip():
            return
        self.command(line)
        self.cmd.value = ""

    def _on_toggle(self, position: int, change: Mapping[str, object]) -> None:
        if self._drawing:
            return
        grade = change["new"]
        self.command(f"{position}={'-' if grade is None else grade}")

    def _status(self, msg: str, error: bool = False) -> str:
        color = "#b00020" if error else "#1b5e20"
        self.status.value = f"<span style='color:{color}'>{html.escape(msg)}</span>"
        return msg

    def _draw(self) -> None:
        W = _widgets()
        q, n = self.current, len(self.session.questions)
        c = self.session.counts()
        tags = " · ".join(filter(None, ["synthetic" if q.synthetic else "", q.status]))
        by = f" by {html.escape(q.by)} at {html.escape(q.at)}" if q.reviewed else ""
        orig = (
            f"<div style='color:#666'>generated: {html.escape(q.original_question)}</div>"
            if q.text != q.original_question
            else ""
        )
        self.header.value = (
            f"<b>Question {self.index + 1} of {n}</b> · <code>{html.escape(q.id)}</code> · {tags}{by}"
            f"<div style='color:#666'>{c['unreviewed']} unreviewed, {c['accepted']} accepted, "
            f"{c['edited']} edited, {c['rejected']} rejected; gold: {html.escape(', '.join(q.gold_ids()) or '—')}"
            f"</div>{orig}"
        )
        self._drawing = True
        try:
            self.text.value = q.text
            rows = []
            for i, p in enumerate(self.passages(), 1):
                lab = q.labels.get(p.passage)
                toggle = W.ToggleButtons(
                    options=[(f"{GRADE_NAMES[g]} ({g})", g) for g in GRADES],
                    value=lab.grade if lab is not None else None,
                    style={"button_width": "9.5em"},
                )
                toggle.observe(lambda ch, i=i: self._on_toggle(i, ch), names="value")
                text = p.text if len(p.text) <= MAX_PASSAGE_CHARS else p.text[:MAX_PASSAGE_CHARS] + " …"
                rows.append(
                    W.VBox(
                        [
                            W.HTML(
                                f"<b>{i}.</b> <code>{html.escape(p.doc_id)}</code> {html.escape(p.title)} "
                                f"<span style='color:#666'>({html.escape(p.origin)})</span>"
                                f"<div style='white-space:pre-wrap'>{html.escape(text)}</div>"
                            ),
                            toggle,
                        ]
                    )
                )
            self.passage_box.children = rows
        finally:
            self._drawing = False

    def _repr_mimebundle_(self, **kwargs: object) -> object:
        return self.widget._repr_mimebundle_(**kwargs)
