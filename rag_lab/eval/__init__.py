"""Evaluation and tuning: datasets, retrieval metrics, ragas metrics, the stage cache, sweeps,
reports and the regression gate (see docs/evaluation.md). Submodules are imported on use."""
