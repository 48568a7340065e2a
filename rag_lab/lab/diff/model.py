"""What a diff reports: :class:`ChunkChange` (one chunk of one result list), :class:`FieldChange`
(one request / state field) and :class:`SnapshotDiff` with its text, pandas and HTML views."""

from __future__ import annotations

import difflib
import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


RESULT_LISTS = ("search_result", "rerank_result", "merge_result")
#: state fields compared chunk by chunk, not as values
_SKIP_STATE = set(RESULT_LISTS)
#: scores closer than this count as equal (formatting noise)
SCORE_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class ChunkChange:
    """One chunk of one result list, compared between the two snapshots."""

    list: str  # the list's name in a ("search_result" …); "a→b" names when two lists are compared
    id: str
    occurrence: int  # 0 for the first time the id appears in its list
    status: str  # added | dropped | moved | same
    rank_a: int | None  # 1-based
    rank_b: int | None
    score_a: float | None
    score_b: float | None
    content_changed: bool = False
    title: str = ""

    @property
    def rank_delta(self) -> int | None:
        """Places gained (positive: moved up) between a and b."""
        if self.rank_a is None or self.rank_b is None:
            return None
        return self.rank_a - self.rank_b

    @property
    def score_delta(self) -> float | None:
        if self.score_a is None or self.score_b is None:
            return None
        return self.score_b - self.score_a


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A request/state field whose value differs (``before`` / ``after`` as JSON values)."""

    path: str
    before: object
    after: object


@dataclass
class SnapshotDiff:
    """The result of :func:`diff`."""

    chunks: list[ChunkChange] = field(default_factory=list)
    fields: list[FieldChange] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)
    label_a: str = "a"
    label_b: str = "b"

    # -- queries ----------------------------------------------------------------------------
    def _ids(self, status: str, list_name: str | None) -> list[str]:
        return [c.id for c in self.chunks if c.status == status and (list_name is None or c.list == list_name)]

    def added(self, list_name: str | None = None) -> list[str]:
        return self._ids("added", list_name)

    def dropped(self, list_name: str | None = None) -> list[str]:
        return self._ids("dropped", list_name)

    def moved(self, list_name: str | None = None) -> list[str]:
        return self._ids("moved", list_name)

    def field_change(self, path: str) -> FieldChange | None:
        return next((f for f in self.fields if f.path == path), None)

    @property
    def changed_fields(self) -> list[str]:
        return [f.path for f in self.fields]

    @property
    def is_empty(self) -> bool:
        """No chunk added, dropped, moved or rescored, no text or field changed."""
        return not self.fields and all(
            c.status == "same" and not c.content_changed and (c.score_delta is None or abs(c.score_delta) <= SCORE_EPS)
            for c in self.chunks
        )

    def summary(self) -> dict[str, dict[str, int]]:
        """Per list: how many chunks were added, dropped, moved, kept in place, rescored."""
        out: dict[str, dict[str, int]] = {}
        for name in self.lists:
            cs = [c for c in self.chunks if c.list == name]
            out[name] = {
                "added": sum(c.status == "added" for c in cs),
                "dropped": sum(c.status == "dropped" for c in cs),
                "moved": sum(c.status == "moved" for c in cs),
                "same": sum(c.status == "same" for c in cs),
                "rescored": sum(c.score_delta is not None and abs(c.score_delta) > SCORE_EPS for c in cs),
                "text_changed": sum(c.content_changed for c in cs),
            }
        return out

    # -- views ------------------------------------------------------------------------------
    def frame(self) -> pd.DataFrame:
        """One row per chunk: list, id, status, ranks, rank delta, scores, score delta, text changed."""
        import pandas as pd

        cols = [
            "list",
            "id",
            "status",
            "rank_a",
            "rank_b",
            "rank_delta",
            "score_a",
            "score_b",
            "score_delta",
            "content_changed",
            "title",
        ]
        rows = [
            {
                "list": c.list,
                "id": c.id,
                "status": c.status,
                "rank_a": c.rank_a,
                "rank_b": c.rank_b,
                "rank_delta": c.rank_delta,
                "score_a": c.score_a,
                "score_b": c.score_b,
                "score_delta": c.score_delta,
                "content_changed": c.content_changed,
                "title": c.title,
            }
            for c in self.chunks
        ]
        return pd.DataFrame(rows, columns=cols)

    def fields_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            [{"field": f.path, "before": _short(f.before), "after": _short(f.after)} for f in self.fields],
            columns=["field", "before", "after"],
        )

    def changes(self, max_leaves: int = 8) -> pd.DataFrame:
        """What changed, one row each: the chunks added, dropped, moved, rescored or rewritten
        (rank and score before / after), then each changed field down to the values that differ
        (a nested dict or an equally long list is followed key by key; at most ``max_leaves`` rows
        per field, the rest counted in one row) — short values, never a whole JSON document."""
        import pandas as pd

        rows: list[dict[str, object]] = []
        for c in self.chunks:
            if c.status == "same" and not _rescored(c) and not c.content_changed:
                continue
            change = c.status if c.status != "same" else ("rescored" if _rescored(c) else "text")
            if c.content_changed and change != "text":
                change += ", text"
            rows.append(
                {
                    "change": change,
                    "what": f"{c.list}: {c.id.rsplit(':', 1)[-1]}",
                    "before": _rank_score(c.rank_a, c.score_a),
                    "after": _rank_score(c.rank_b, c.score_b),
                }
            )
        for f in self.fields:
            leaves = leaf_changes(f.path, f.before, f.after)
            for path, before, after in leaves[:max_leaves]:
                rows.append({"change": "field", "what": path, "before": _brief(before), "after": _brief(after)})
            if len(leaves) > max_leaves:
                rows.append(
                    {
                        "change": "field",
                        "what": f"{f.path} …",
                        "before": "",
                        "after": f"{len(leaves) - max_leaves} more",
                    }
                )
        return pd.DataFrame(rows, columns=["change", "what", "before", "after"])

    def __str__(self) -> str:
        lines = [f"diff {self.label_a} → {self.label_b}"]
        for name, s in self.summary().items():
            lines.append(
                f"  {name}: +{s['added']} -{s['dropped']} moved {s['moved']} same {s['same']} rescored {s['rescored']}"
            )
            for c in self.chunks:
                if c.list != name or (c.status == "same" and not _rescored(c) and not c.content_changed):
                    continue
                text = " text changed" if c.content_changed else ""
                lines.append(f"    {_SIGN[c.status]} {c.id} {_rank_text(c)} {_score_text(c)}{text}".rstrip())
        for f in self.fields:
            lines.append(f"  ~ {f.path}: {_short(f.before, 60)!s} → {_short(f.after, 60)!s}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        s = self.summary()
        parts = ", ".join(f"{k}: +{v['added']}/-{v['dropped']}/~{v['moved']}" for k, v in s.items())
        return f"<SnapshotDiff {self.label_a}→{self.label_b} {parts}; {len(self.fields)} field(s) changed>"

    def to_html(self, max_text: int = 2000) -> str:
        """A readable HTML report: per list a table of chunks (colour by status), then the changed
        fields with a line diff for long text."""
        esc = html.escape
        out = [
            "<div class='rag-lab-diff' style='font-family:sans-serif;font-size:13px'>",
            f"<h4 style='margin:4px 0'>Snapshot diff: {esc(self.label_a)} → {esc(self.label_b)}</h4>",
        ]
        for name, s in self.summary().items():
            out.append(
                f"<h5 style='margin:8px 0 2px'>{esc(name)}: <span style='color:#1a7f37'>+{s['added']}</span> "
                f"<span style='color:#cf222e'>−{s['dropped']}</span> moved {s['moved']} · same {s['same']} · "
                f"rescored {s['rescored']}</h5>"
            )
            out.append(
                "<table style='border-collapse:collapse'><thead><tr>"
                + "".join(
                    f"<th style='text-align:left;padding:2px 8px;border-bottom:1px solid #999'>{h}</th>"
                    for h in ("", "chunk", "rank", "score", "Δ score", "text")
                )
                + "</tr></thead><tbody>"
            )
            for c in self.chunks:
                if c.list != name:
                    continue
                bg = _BG[c.status]
                delta = c.score_delta
                d_txt = "" if delta is None or abs(delta) <= SCORE_EPS else f"{delta:+.4f}"
                out.append(
                    f"<tr style='background:{bg}'><td style='padding:2px 8px'>{esc(_SIGN[c.status])}</td>"
                    f"<td style='padding:2px 8px' title='{esc(c.title)}'>{esc(c.id)}</td>"
                    f"<td style='padding:2px 8px'>{esc(_rank_text(c))}</td>"
                    f"<td style='padding:2px 8px'>{esc(_score_pair(c))}</td>"
                    f"<td style='padding:2px 8px'>{esc(d_txt)}</td>"
                    f"<td style='padding:2px 8px'>{'changed' if c.content_changed else ''}</td></tr>"
                )
            out.append("</tbody></table>")
        if self.fields:
            out.append("<h5 style='margin:8px 0 2px'>Changed fields</h5><table style='border-collapse:collapse'>")
            for f in self.fields:
                if isinstance(f.before, str) and isinstance(f.after, str):
                    leaves = [(f.path, f.before, f.after)]
                else:  # nested values: only the leaves that differ, never the whole JSON
                    leaves = leaf_changes(f.path, f.before, f.after)
                for path, before, after in leaves[:_MAX_HTML_LEAVES]:
                    out.append(
                        f"<tr><td style='padding:2px 8px;vertical-align:top'><code>{esc(path)}</code></td>"
                        f"<td style='padding:2px 8px'>{_value_html(before, after, max_text)}</td></tr>"
                    )
                if len(leaves) > _MAX_HTML_LEAVES:
                    out.append(
                        f"<tr><td style='padding:2px 8px'><code>{esc(f.path)} …</code></td>"
                        f"<td style='padding:2px 8px'>{len(leaves) - _MAX_HTML_LEAVES} more values changed</td></tr>"
                    )
            out.append("</table>")
        elif not self.chunks:
            out.append("<p>No differences.</p>")
        out.append("</div>")
        return "".join(out)

    def _repr_html_(self) -> str:
        return self.to_html()


_SIGN = {"added": "+", "dropped": "−", "moved": "↕", "same": "="}
_BG = {"added": "#e6ffec", "dropped": "#ffebe9", "moved": "#fff8c5", "same": "transparent"}


def _rescored(c: ChunkChange) -> bool:
    return c.score_delta is not None and abs(c.score_delta) > SCORE_EPS


def _rank_text(c: ChunkChange) -> str:
    if c.rank_a is None:
        return f"→ #{c.rank_b}"
    if c.rank_b is None:
        return f"#{c.rank_a} →"
    return f"#{c.rank_a}" if c.rank_a == c.rank_b else f"#{c.rank_a} → #{c.rank_b}"


def _score_pair(c: ChunkChange) -> str:
    fa = "" if c.score_a is None else f"{c.score_a:.4f}"
    fb = "" if c.score_b is None else f"{c.score_b:.4f}"
    if c.score_a is None or c.score_b is None:
        return fa or fb
    return fa if not _rescored(c) else f"{fa} → {fb}"


def _score_text(c: ChunkChange) -> str:
    return f"score {_score_pair(c)}" if (c.score_a is not None or c.score_b is not None) else ""


_MAX_HTML_LEAVES = 8
_MISSING = "—"  # a key on one side only


def leaf_changes(path: str, before: object, after: object) -> list[tuple[str, object, object]]:
    """``(path, before, after)`` for every value that differs between ``before`` and ``after``:
    dicts are followed key by key (a key on one side only, or a dict on one side only, shows ``—``
    on the other), lists of equal length index by index; anything else (and lists of different lengths) is one leaf."""
    if before == after:
        return []
    if isinstance(after, dict) and before in (None, _MISSING):  # a dict that appears: its keys
        before = {}
    if isinstance(before, dict) and after in (None, _MISSING):
        after = {}
    if isinstance(before, dict) and isinstance(after, dict):
        out: list[tuple[str, object, object]] = []
        for k in sorted(set(before) | set(after), key=str):
            out.extend(leaf_changes(f"{path}.{k}", before.get(k, _MISSING), after.get(k, _MISSING)))
        return out
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        out = []
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            out.extend(leaf_changes(f"{path}[{i}]", b, a))
        return out
    return [(path, before, after)]


def _brief(value: object, n: int = 80) -> object:
    """A short cell value: floats to 4 places, a list or dict by its size and start."""
    if value is None:
        return _MISSING
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return f"{len(value)} items: {_short(value, n)}" if value else "[]"
    if isinstance(value, dict):
        return _short(value, n)
    return _short(value, n)


def _rank_score(rank: int | None, score: float | None) -> str:
    if rank is None:
        return ""
    return f"#{rank}" + ("" if score is None else f" ({score:.4f})")


def _short(value: object, n: int = 200) -> object:
    if isinstance(value, (dict, list)):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if isinstance(value, str) and len(value) > n:
        return value[: n - 1] + "…"
    return value


def _value_html(before: object, after: object, max_text: int) -> str:
    esc = html.escape
    if (
        isinstance(before, str)
        and isinstance(after, str)
        and ("\n" in before or "\n" in after or len(before) + len(after) > 160)
    ):
        lines = difflib.unified_diff(before.splitlines(), after.splitlines(), "a", "b", lineterm="", n=1)
        body = []
        for ln in list(lines)[2:]:
            color = "#1a7f37" if ln.startswith("+") else "#cf222e" if ln.startswith("-") else "#57606a"
            body.append(f"<span style='color:{color}'>{esc(ln[:max_text])}</span>")
        return "<pre style='margin:0;white-space:pre-wrap'>" + "\n".join(body) + "</pre>"
    return (
        f"<span style='color:#cf222e'>{esc(str(_short(before, max_text)))}</span> → "
        f"<span style='color:#1a7f37'>{esc(str(_short(after, max_text)))}</span>"
    )
