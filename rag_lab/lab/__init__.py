"""The workbench layer: Lab, Run (snapshots, timings, stream events)."""

from rag_lab.lab.lab import Lab, LabConfigError, Run

__all__ = ["Lab", "LabConfigError", "Run"]
