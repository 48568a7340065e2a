"""rag_lab: a workbench around a faithful event-driven RAG chat pipeline."""
__version__ = "0.1.0"
