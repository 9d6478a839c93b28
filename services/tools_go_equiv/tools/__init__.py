"""Importing this package declares every tools_go_equiv tool on the registry."""

from services.tools_go_equiv.tools import documents, embeddings, history, kb, memory, report

__all__ = ["documents", "embeddings", "history", "kb", "memory", "report"]
