"""The merge and final views: the merged contexts with what each merge step did (history, FAQ,
expansion, overlap joins), and the final contexts the answer was given, with citations."""

from __future__ import annotations

from typing import TypedDict

from rag_lab.lab.frames.common import Viewed, _match_type_name, _snapshot, _typed
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.diagnostics import MergeDiagnostics
from rag_lab.types.search_result import SearchResult


class MergeRow(TypedDict):
    """One chunk that entered the merge (:func:`merge_rows`)."""

    id: str
    origin: str
    input_rank: int | None
    score_in: float | None
    length_in: int | None
    fate: str
    merged_into: str
    merge_action: str
    absorbed: list[str]
    parent: str
    expanded_prev: list[str]
    expanded_next: list[str]
    image_hit: str
    output_rank: int | None
    score_out: float | None
    length_out: int | None
    sub_chunk_ids: list[str]
    text_in: str | None
    text_out: str | None


def merge_rows(obj: Viewed) -> list[MergeRow]:
    """One row per chunk that entered the merge (rerank input, then injected history): its fate
    (kept, merged into another, dropped as overlap / duplicate), what it absorbed, its parent,
    the neighbours it was expanded with, and its text before and after."""
    snap = _snapshot(obj, "merge")
    merge = _typed(snap, MergeDiagnostics)
    log = merge.steps if merge is not None else []
    if not log:
        raise ValueError("no merge decisions in this snapshot (the merge stage did not run or had nothing to merge)")
    before: dict[str, SearchResult] = {}
    if not isinstance(obj, ChatManage):
        try:
            src = _snapshot(obj, "rerank").state
            for prior in src.rerank_result or src.search_result:
                before.setdefault(prior.id, prior)
        except KeyError:
            pass
    rows: dict[str, MergeRow] = {}

    def row(cid: str, origin: str) -> MergeRow:
        if cid not in rows:
            b = before.get(cid)
            rows[cid] = {
                "id": cid,
                "origin": origin,
                "input_rank": None,
                "score_in": b.score if b is not None else None,
                "length_in": len(b.content) if b is not None else None,
                "fate": "kept",
                "merged_into": "",
                "merge_action": "",
                "absorbed": [],
                "parent": "",
                "expanded_prev": [],
                "expanded_next": [],
                "image_hit": "",
                "output_rank": None,
                "score_out": None,
                "length_out": None,
                "sub_chunk_ids": [],
                "text_in": b.content if b is not None else None,
                "text_out": None,
            }
        return rows[cid]

    for st in log:
        step = st.get("step")
        if step == "input":
            origin = "rerank" if st.get("source") == "rerank_result" else "search"
            for n, cid in enumerate(st.get("ids") or [], 1):
                row(cid, origin)["input_rank"] = n
        elif step == "history":
            r = row(st["id"], "history")
            if st.get("action") == "dropped":
                r["fate"] = "dropped (history overlap)"
        elif step == "merge":
            r = row(st["id"], "rerank")
            r["fate"], r["merged_into"], r["merge_action"] = "merged", st["into"], st.get("action", "")
            row(st["into"], "rerank")["absorbed"].append(st["id"])
        elif step == "parent":
            row(st["id"], "rerank")["parent"] = st.get("parent", "")
        elif step == "expand":
            r = row(st["id"], "rerank")
            r["expanded_prev"], r["expanded_next"] = list(st.get("prev") or []), list(st.get("next") or [])
        elif step == "overlap":
            row(st["id"], "rerank")["fate"] = "dropped (overlap)"
        elif step == "image_vector_match":
            row(st["id"], "rerank")["image_hit"] = st.get("image_hit", "")
    out_ids: dict[str, tuple[int, SearchResult]] = {}
    for n, merged in enumerate(snap.state.merge_result, 1):
        out_ids.setdefault(merged.id, (n, merged))
    for cid, r in rows.items():
        got = out_ids.get(cid)
        if got is not None:
            n, res = got
            r.update(
                {
                    "output_rank": n,
                    "score_out": res.score,
                    "length_out": len(res.content),
                    "sub_chunk_ids": list(res.sub_chunk_id),
                    "text_out": res.content,
                }
            )
        elif r["fate"] == "kept":
            r["fate"] = "dropped (duplicate)"
    return list(rows.values())


# -- final ----------------------------------------------------------------------------------
def final_rows(obj: Viewed) -> list[dict[str, object]]:
    """The contexts the answer was built from (after FILTER_TOP_K), with whether the answer cites
    each one and the number of its first citation."""
    from rag_lab.modelcontext import cited_chunk_ids

    snap = _snapshot(obj, "final")
    answer = getattr(obj, "answer", None)
    cited = cited_chunk_ids(answer) if isinstance(answer, str) else []
    order = {cid: n for n, cid in enumerate(cited, 1)}
    rows = []
    for i, r in enumerate(snap.state.merge_result, 1):
        rows.append(
            {
                "rank": i,
                "id": r.id,
                "knowledge_title": r.knowledge_title,
                "knowledge_id": r.knowledge_id,
                "chunk_type": r.chunk_type,
                "match_type": _match_type_name(r.match_type),
                "score": r.score,
                "cited": r.id in order if answer is not None else None,
                "citation": order.get(r.id),
                "sub_chunks": len(r.sub_chunk_id),
                "length": len(r.content),
                "content": r.content,
            }
        )
    return rows
