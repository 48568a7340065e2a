"""Long-term memory per user, in SQLite with embeddings (spec §4.2, §4.3.6, §4.6.5, §9.1).

Three kinds of data, all keyed by user:

* **memories**: short notes ("prefers answers in French", "works on the Brightwater project"),
  each stored with its embedding. :meth:`MemoryStore.recall` ranks the user's notes by cosine
  similarity to the question and wraps the best ones in the ``<user_memory>`` envelope that
  MEMORY_RECALL appends to the system prompt.
* **citations**: which documents each answer cited. :meth:`MemoryStore.document_affinity` counts
  the answers that cited each document, for the MemoryAffinity boost.
* **topics**: the topic words of the user's questions; words seen in several questions are the
  user's long-term interests, shown with their most cited documents in the asker background
  of the query-understanding prompt.

No model is called except the embedder. Vectors from another embedding space (another
``model_key``) are never compared: :meth:`reembed` moves old notes to the current space.

:class:`MemoryStore` is assembled from one part per kind of data over one connection, its lock and
the embedder: the file and settings (:mod:`rag_lab.memory.memory_db`), notes
(:mod:`rag_lab.memory.notes`), citations (:mod:`rag_lab.memory.citations`) and topics
(:mod:`rag_lab.memory.topics`); it adds the asker background that reads all three. Their names
are importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_lab.memory.citations import DocumentCitations
from rag_lab.memory.memory_db import _SCHEMA as _SCHEMA
from rag_lab.memory.memory_db import SCHEMA_VERSION as SCHEMA_VERSION
from rag_lab.memory.notes import _TEXT_ESCAPE as _TEXT_ESCAPE
from rag_lab.memory.notes import MEMORY_PREAMBLE as MEMORY_PREAMBLE
from rag_lab.memory.notes import MemoryItem as MemoryItem
from rag_lab.memory.notes import MemoryNotes
from rag_lab.memory.notes import Recall as Recall
from rag_lab.memory.notes import _norm as _norm
from rag_lab.memory.notes import memory_prompt as memory_prompt
from rag_lab.memory.topics import TopicInterests


@dataclass(slots=True)
class AskerBackground:
    """The memory-conditioned context of the query-understanding prompt (spec §4.3.6)."""

    background: str = ""
    interests: list[str] = field(default_factory=list)
    documents: list[str] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.background or self.interests or self.documents)


class MemoryStore(MemoryNotes, DocumentCitations, TopicInterests):
    """See the module docstring. ``embedder`` follows :class:`rag_lab.models.base.Embedder`."""

    def asker_background(self, user_id: str, query: str) -> AskerBackground:
        """Who is asking: the notes closest to the question, long-term interests, and the
        documents the user keeps consulting (spec §4.3.6)."""
        notes = self.search(user_id, query, top_k=self.background_top_k)
        return AskerBackground(
            background="; ".join(" ".join(n.content.split()) for n in notes),
            interests=self.interests(user_id),
            documents=self.frequent_documents(user_id),
        )
