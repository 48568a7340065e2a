"""An embedded knowledge-graph store (SQLite), the lab's stand-in for the seed's Neo4j graph.

The graph is split into **namespaces**, as upstream's ``NameSpace{KnowledgeBase, Knowledge}``:
every node and relation belongs to one knowledge base and, optionally, one document of it
(``knowledge_id``; ``""`` for a KB-wide graph). A lookup by ``NameSpace(kb)`` reads every document
of the KB; ``NameSpace(kb, knowledge)`` reads one document. Deleting a document deletes its
namespace; deleting ``NameSpace(kb)`` deletes the whole KB's graph.

Nodes are ``{name, kind, description, chunk_ids, attributes}`` and relations
``{source, target, relation, strength, chunk_ids}``. Within a namespace a node is keyed by its
normalised name (:func:`normalize_entity_name`), a relation by
``(normalised source, normalised target, relation)``; adding a key again merges: chunk ids are
united (first-seen order), strengths add up (co-occurrence counts accumulate), an empty kind or
description is filled, attributes are completed (lists united, ``mentions`` counts added, other
keys keep their first non-empty value).

**Name matching** (:meth:`GraphStore.search_nodes`), per query name ``q`` and node name ``n``,
both normalised:

* *exact*: ``q == n`` (so case, width, punctuation, a possessive ``'s`` and spacing never
  matter: ``"Mara  Quill's"`` finds ``"mara quill"``), score 1.0;
* *partial*: the shorter of the two occurs in the longer one and is at least
  :data:`PARTIAL_MIN_RUNES_HAN` runes long when it contains a Han character (then any position
  counts, Chinese has no spaces), otherwise at least :data:`PARTIAL_MIN_RUNES` runes long **and**
  made of whole words of the longer one (``"quill"`` matches ``"mara quill"``, ``"art"`` does not
  match ``"martin"``); score ``len(shorter) / len(longer)``.

Results follow the query names' order; for one name, better scores first, then name, then
document. A node matched by several names is returned once (its first match).

The store file sits next to the workspace (``<workspace root>/graph.sqlite``), one connection
per thread (lookups run concurrently in worker threads), writes serialised by a lock.

The data model and merging rules are in :mod:`rag_lab.knowledge.graph_data` (re-exported here);
this module is the store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from rag_lab.knowledge.graph_data import (
    PARTIAL_MIN_RUNES,
    PARTIAL_MIN_RUNES_HAN,
    GraphData,
    GraphError,
    GraphNode,
    GraphRelation,
    NameSpace,
    match_score,
    merge_nodes,
    merge_relations,
    normalize_entity_name,
)
from rag_lab.knowledge.sqlite_conn import ThreadConnections

__all__ = [
    "GraphData",
    "GraphError",
    "GraphNode",
    "GraphRelation",
    "GraphStore",
    "NameSpace",
    "PARTIAL_MIN_RUNES",
    "PARTIAL_MIN_RUNES_HAN",
    "match_score",
    "normalize_entity_name",
    "open_graph_store",
]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS nodes (
        kb_id TEXT NOT NULL, knowledge_id TEXT NOT NULL, name_norm TEXT NOT NULL, name TEXT NOT NULL,
        kind TEXT NOT NULL, description TEXT NOT NULL, chunk_ids TEXT NOT NULL, attributes TEXT NOT NULL,
        PRIMARY KEY (kb_id, knowledge_id, name_norm))""",
    "CREATE INDEX IF NOT EXISTS nodes_name ON nodes(kb_id, name_norm)",
    """CREATE TABLE IF NOT EXISTS relations (
        kb_id TEXT NOT NULL, knowledge_id TEXT NOT NULL, source_norm TEXT NOT NULL, target_norm TEXT NOT NULL,
        relation TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL, strength REAL NOT NULL,
        chunk_ids TEXT NOT NULL, description TEXT NOT NULL,
        PRIMARY KEY (kb_id, knowledge_id, source_norm, target_norm, relation))""",
    "CREATE INDEX IF NOT EXISTS relations_source ON relations(kb_id, source_norm)",
    "CREATE INDEX IF NOT EXISTS relations_target ON relations(kb_id, target_norm)",
)


class GraphStore:
    """Nodes and relations per namespace in one SQLite file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise GraphError(f"{self.path}: cannot create the graph directory: {exc}") from None
        self._write_lock = threading.RLock()
        self._conns = ThreadConnections(self.path, GraphError, "graph store")
        with self._write_lock:
            conn = self._conn()
            try:
                with conn:
                    for sql in _SCHEMA:
                        conn.execute(sql)
            except sqlite3.DatabaseError as exc:
                raise GraphError(f"{self.path}: not a usable SQLite graph store: {exc}") from None

    def __repr__(self) -> str:
        return f"GraphStore({str(self.path)!r})"

    # -- connections ------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return cast(sqlite3.Connection, self._conns.get())

    def close(self) -> None:
        self._conns.close()

    def __enter__(self) -> GraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writes -----------------------------------------------------------------------------
    def add_graph(self, ns: NameSpace, nodes: Sequence[GraphNode], relations: Sequence[GraphRelation] = ()) -> None:
        """Add nodes and relations to a namespace, merging with what is there (module docstring).
        Relation endpoints become nodes too (with the relation's chunk ids)."""
        with self._write_lock:
            conn = self._conn()
            with conn:
                self._add(conn, ns, nodes, relations)

    def replace_namespace(
        self, ns: NameSpace, nodes: Sequence[GraphNode], relations: Sequence[GraphRelation] = ()
    ) -> None:
        """Drop the namespace (a document's graph, or the whole KB's) and store these instead,
        in one transaction."""
        with self._write_lock:
            conn = self._conn()
            with conn:
                self._delete(conn, ns)
                self._add(conn, ns, nodes, relations)

    def delete_namespace(self, ns: NameSpace) -> int:
        """Delete a document's graph, or with ``knowledge=""`` every graph of the KB; returns the
        number of nodes removed."""
        with self._write_lock:
            conn = self._conn()
            with conn:
                return self._delete(conn, ns)

    @staticmethod
    def _where(ns: NameSpace) -> tuple[str, tuple[str, ...]]:
        if ns.knowledge:
            return "kb_id = ? AND knowledge_id = ?", (ns.knowledge_base, ns.knowledge)
        return "kb_id = ?", (ns.knowledge_base,)

    def _delete(self, conn: sqlite3.Connection, ns: NameSpace) -> int:
        where, args = self._where(ns)
        n = conn.execute(f"DELETE FROM nodes WHERE {where}", args).rowcount
        conn.execute(f"DELETE FROM relations WHERE {where}", args)
        return int(n)

    def _add(
        self, conn: sqlite3.Connection, ns: NameSpace, nodes: Sequence[GraphNode], relations: Sequence[GraphRelation]
    ) -> None:
        kb, kid = ns.knowledge_base, ns.knowledge
        rels = merge_relations(relations)
        endpoints = [GraphNode(name, chunk_ids=list(r.chunk_ids)) for r in rels for name in (r.source, r.target)]
        for n in merge_nodes([*nodes, *endpoints]):
            key = normalize_entity_name(n.name)
            row = conn.execute(
                "SELECT * FROM nodes WHERE kb_id = ? AND knowledge_id = ? AND name_norm = ?", (kb, kid, key)
            ).fetchone()
            if row is not None:
                n = merge_nodes([_node_from_row(row), n])[0]
            conn.execute(
                "INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kb,
                    kid,
                    key,
                    n.name,
                    n.kind,
                    n.description,
                    json.dumps(n.chunk_ids),
                    json.dumps(n.attributes, ensure_ascii=False, sort_keys=True, default=str),
                ),
            )
        for r in rels:
            s, t = normalize_entity_name(r.source), normalize_entity_name(r.target)
            row = conn.execute(
                "SELECT * FROM relations WHERE kb_id = ? AND knowledge_id = ? AND source_norm = ? "
                "AND target_norm = ? AND relation = ?",
                (kb, kid, s, t, r.relation),
            ).fetchone()
            if row is not None:
                r = merge_relations([_relation_from_row(row), r])[0]
            conn.execute(
                "INSERT OR REPLACE INTO relations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    kb,
                    kid,
                    s,
                    t,
                    r.relation,
                    r.source,
                    r.target,
                    float(r.strength),
                    json.dumps(r.chunk_ids),
                    r.description,
                ),
            )

    # -- reads ------------------------------------------------------------------------------
    def get_graph(self, ns: NameSpace) -> GraphData:
        """Every node and relation of a namespace (ordered by document, then name)."""
        where, args = self._where(ns)
        conn = self._conn()
        nodes = [
            _node_from_row(r)
            for r in conn.execute(f"SELECT * FROM nodes WHERE {where} ORDER BY knowledge_id, name_norm", args)
        ]
        rels = [
            _relation_from_row(r)
            for r in conn.execute(
                f"SELECT * FROM relations WHERE {where} ORDER BY knowledge_id, source_norm, target_norm, relation", args
            )
        ]
        return GraphData(nodes, rels)

    def count(self, ns: NameSpace) -> tuple[int, int]:
        """``(nodes, relations)`` in a namespace."""
        where, args = self._where(ns)
        conn = self._conn()
        n = conn.execute(f"SELECT COUNT(*) FROM nodes WHERE {where}", args).fetchone()[0]
        r = conn.execute(f"SELECT COUNT(*) FROM relations WHERE {where}", args).fetchone()[0]
        return int(n), int(r)

    def search_nodes(self, ns: NameSpace, names: Sequence[str], partial: bool = True) -> GraphData:
        """Nodes of a namespace matching any of ``names`` (module docstring), with the relations
        of the namespace that touch a matched node."""
        if isinstance(names, str):
            raise GraphError(f"search_nodes: names must be a list of strings, got the string {names!r}")
        where, args = self._where(ns)
        conn = self._conn()
        found: dict[tuple[str, str], GraphNode] = {}
        order: list[tuple[str, str]] = []
        for name in names:
            q = normalize_entity_name(name)
            if not q:
                continue
            if partial:
                rows = conn.execute(
                    f"SELECT * FROM nodes WHERE {where} AND (instr(name_norm, ?) > 0 OR instr(?, name_norm) > 0)",
                    (*args, q, q),
                ).fetchall()
            else:
                rows = conn.execute(f"SELECT * FROM nodes WHERE {where} AND name_norm = ?", (*args, q)).fetchall()
            scored = []
            for row in rows:
                s = match_score(q, row["name_norm"])
                if s > 0:
                    scored.append((s, row))
            scored.sort(key=lambda t: (-t[0], t[1]["name_norm"], t[1]["knowledge_id"]))
            for s, row in scored:
                key = (row["knowledge_id"], row["name_norm"])
                if key in found:
                    continue
                node = _node_from_row(row)
                node.score = s
                found[key] = node
                order.append(key)
        nodes = [found[k] for k in order]
        relations: list[GraphRelation] = []
        by_doc: dict[str, list[str]] = {}
        for kid, norm in order:
            by_doc.setdefault(kid, []).append(norm)
        for kid, norms in by_doc.items():
            marks = ", ".join("?" * len(norms))
            rows = conn.execute(
                f"SELECT * FROM relations WHERE kb_id = ? AND knowledge_id = ? AND "
                f"(source_norm IN ({marks}) OR target_norm IN ({marks})) "
                "ORDER BY strength DESC, source_norm, target_norm, relation",
                (ns.knowledge_base, kid, *norms, *norms),
            ).fetchall()
            relations.extend(_relation_from_row(r) for r in rows)
        return GraphData(nodes, relations)


def _node_from_row(row: sqlite3.Row) -> GraphNode:
    return GraphNode(
        name=row["name"],
        kind=row["kind"],
        description=row["description"],
        chunk_ids=list(json.loads(row["chunk_ids"])),
        attributes=dict(json.loads(row["attributes"])),
        knowledge_base_id=row["kb_id"],
        knowledge_id=row["knowledge_id"],
    )


def _relation_from_row(row: sqlite3.Row) -> GraphRelation:
    return GraphRelation(
        source=row["source"],
        target=row["target"],
        relation=row["relation"],
        strength=float(row["strength"]),
        chunk_ids=list(json.loads(row["chunk_ids"])),
        description=row["description"],
        knowledge_base_id=row["kb_id"],
        knowledge_id=row["knowledge_id"],
    )


def open_graph_store(workspace: object) -> GraphStore:
    """The workspace's graph store: ``workspace.graph`` when it has one, otherwise a store opened
    at ``<workspace root>/graph.sqlite`` (the caller closes it)."""
    existing = getattr(workspace, "graph", None)
    if isinstance(existing, GraphStore):
        return existing
    root = getattr(workspace, "root", None)
    if root is None:
        raise GraphError(f"{workspace!r} has neither a 'graph' store nor a 'root' folder")
    return GraphStore(Path(root) / "graph.sqlite")
