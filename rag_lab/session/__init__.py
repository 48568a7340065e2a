"""Sessions and messages (first cut: in-memory store used by LOAD_HISTORY and the lab)."""
