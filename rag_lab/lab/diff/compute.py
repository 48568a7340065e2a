"""Computing a diff: chunks matched by id (n-th occurrence with n-th), moves measured among the
chunks both lists share (a longest increasing subsequence keeps the rest in place), and every
other field of the request and state compared by its JSON value."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from rag_lab.lab.diff.model import _SKIP_STATE, RESULT_LISTS, ChunkChange, FieldChange, SnapshotDiff
from rag_lab.types.chat_manage import ChatManage
from rag_lab.types.search_result import SearchResult

if TYPE_CHECKING:  # pragma: no cover
    pass


def _keyed(results: Sequence[SearchResult]) -> list[tuple[tuple[str, int], SearchResult]]:
    seen: dict[str, int] = {}
    out = []
    for r in results:
        n = seen.get(r.id, 0)
        seen[r.id] = n + 1
        out.append(((r.id, n), r))
    return out


def _lis_keep(seq: list[int]) -> set[int]:
    """Positions of one longest increasing subsequence of ``seq`` (distinct values)."""
    import bisect

    tails: list[int] = []  # values
    tail_pos: list[int] = []
    prev = [-1] * len(seq)
    for i, v in enumerate(seq):
        j = bisect.bisect_left(tails, v)
        if j == len(tails):
            tails.append(v)
            tail_pos.append(i)
        else:
            tails[j] = v
            tail_pos[j] = i
        prev[i] = tail_pos[j - 1] if j > 0 else -1
    keep: set[int] = set()
    i = tail_pos[-1] if tail_pos else -1
    while i >= 0:
        keep.add(i)
        i = prev[i]
    return keep


def diff_lists(a: Sequence[SearchResult], b: Sequence[SearchResult], name: str = "results") -> list[ChunkChange]:
    """Chunk changes between two result lists, in b's order then the dropped ones in a's order.

    A shared chunk is ``moved`` when it is not on one longest common subsequence of the shared
    chunks' order (the fewest chunks that explain the reordering); otherwise ``same``.
    """
    ka, kb = _keyed(a), _keyed(b)
    pos_a = {k: i for i, (k, _) in enumerate(ka)}
    pos_b = {k: i for i, (k, _) in enumerate(kb)}
    shared_in_b = [k for k, _ in kb if k in pos_a]
    keep = _lis_keep([pos_a[k] for k in shared_in_b])
    stays = {k for i, k in enumerate(shared_in_b) if i in keep}
    ra = dict(ka)
    out: list[ChunkChange] = []
    for k, rb in kb:
        if k in pos_a:
            r0 = ra[k]
            out.append(
                ChunkChange(
                    name,
                    k[0],
                    k[1],
                    "same" if k in stays else "moved",
                    pos_a[k] + 1,
                    pos_b[k] + 1,
                    r0.score,
                    rb.score,
                    r0.content != rb.content,
                    rb.knowledge_title,
                )
            )
        else:
            out.append(
                ChunkChange(name, k[0], k[1], "added", None, pos_b[k] + 1, None, rb.score, False, rb.knowledge_title)
            )
    for k, r0 in ka:
        if k not in pos_b:
            out.append(
                ChunkChange(name, k[0], k[1], "dropped", pos_a[k] + 1, None, r0.score, None, False, r0.knowledge_title)
            )
    return out


def _compare(va: object, vb: object, path: str, depth: int, out: list[FieldChange]) -> None:
    """Record differing values; dicts present on both sides are descended ``depth`` levels, so a
    sub-tree present on one side only is one change."""
    if isinstance(va, dict) and isinstance(vb, dict) and depth > 0:
        for k in dict.fromkeys(list(va) + list(vb)):
            _compare(va.get(k), vb.get(k), f"{path}.{k}", depth - 1, out)
    elif va != vb:
        out.append(FieldChange(path, va, vb))


def _as_chat(x: object) -> ChatManage:
    if isinstance(x, ChatManage):
        return x
    if isinstance(x, dict) and "state" in x:
        from rag_lab.lab.capture import chat_manage_from_dict

        return chat_manage_from_dict(x)
    raise TypeError(f"diff: expected a ChatManage snapshot (run.state(stage)), got {type(x).__name__}")


def diff(
    a: ChatManage | dict[str, object],
    b: ChatManage | dict[str, object],
    lists: Iterable[str | tuple[str, str]] | None = None,
    fields: bool = True,
    labels: tuple[str, str] = ("a", "b"),
) -> SnapshotDiff:
    """Compare two snapshots (ChatManage, or its ``to_dict()`` view).

    ``lists`` names the result lists to compare (default: search, rerank and merge results); a
    pair ``("search_result", "rerank_result")`` compares a's search list with b's rerank list.
    ``fields=False`` skips the request/state field comparison.
    """
    ca, cb = _as_chat(a), _as_chat(b)
    out = SnapshotDiff(label_a=labels[0], label_b=labels[1])
    for item in lists if lists is not None else RESULT_LISTS:
        la, lb = (item, item) if isinstance(item, str) else item
        for nm in (la, lb):
            if nm not in RESULT_LISTS:
                raise ValueError(f"diff: unknown result list {nm!r}; choose from {', '.join(RESULT_LISTS)}")
        name = la if la == lb else f"{la}→{lb}"
        out.lists.append(name)
        out.chunks.extend(diff_lists(getattr(ca.state, la), getattr(cb.state, lb), name))
    if fields:
        da, db = ca.to_dict(), cb.to_dict()
        for part in ("request", "state"):
            pa, pb = da[part], db[part]
            for k in dict.fromkeys(list(pa) + list(pb)):
                if part == "state" and k in _SKIP_STATE:
                    continue
                depth = 2 if k in ("params", "diagnostics", "summary_config") else 0
                _compare(pa.get(k), pb.get(k), f"{part}.{k}", depth, out.fields)
    return out
