"""Tracing (OpenTelemetry spans per stage) and the per-run ledger of time, model calls, tokens
and cost."""
