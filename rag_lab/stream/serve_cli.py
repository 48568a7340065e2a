"""`rag-lab serve`: the chat server (ask with SSE, continue-stream, stop) on uvicorn.

:data:`cmd_serve` is the ``serve`` command of the ``rag-lab`` parser; ``main`` runs it standalone
(``python -m rag_lab.stream.serve_cli serve --port 8000``). ``--config`` and ``--workspace`` may
also be given before the subcommand (the top-level options of ``rag-lab``); given after it, they win.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rag_lab.cliutil import command, command_parser, opt, run_command

if TYPE_CHECKING:
    from fastapi import FastAPI

    from rag_lab.lab.lab import Lab
    from rag_lab.stream.manager import StreamManager


def build_app(args: argparse.Namespace) -> tuple[FastAPI, Lab, StreamManager]:
    """(app, lab, manager) for the parsed ``serve`` arguments; a bad config raises ValueError."""
    from rag_lab.lab.lab import Lab
    from rag_lab.stream.factory import build_stream_manager, resolve_settings
    from rag_lab.stream.server import create_app
    from rag_lab.stream.server_sse import StreamServerSettings

    keepalive = float(getattr(args, "keepalive_s", 15.0))
    if not (keepalive >= 0 and keepalive < float("inf")):
        raise ValueError(f"--keepalive-s: expected a number of seconds >= 0, got {keepalive!r}")
    if args.stream_manager:
        resolve_settings(args.stream_manager)  # a bad value fails before the models load
    overrides: dict[str, object] = {}
    if getattr(args, "workspace", None):
        overrides["workspace"] = args.workspace
    lab = Lab.from_config(getattr(args, "config", None), **overrides)
    from rag_lab.stream.auth import check_bind
    from rag_lab.stream.server_config import ServerConfig

    server = ServerConfig.from_config(lab.config.get("server"))
    check_bind(getattr(args, "host", "127.0.0.1"), server.keys)
    spec = args.stream_manager if args.stream_manager else lab.config.get("stream_manager")
    manager = build_stream_manager(spec, check=True)
    settings = StreamServerSettings.from_params(lab.params)
    settings.keepalive_s = keepalive
    return create_app(lab, manager=manager, server=server, settings=settings), lab, manager


@command(
    "serve",
    "serve the chat API: POST /knowledge-chat/{session} (SSE), continue-stream, stop",
    opt("--host", "interface to bind (default 127.0.0.1)", default="127.0.0.1"),
    opt("--port", "TCP port (default 8000)", type=int, default=8000),
    opt("--config", "lab YAML (default: config/lab.yaml)", default=argparse.SUPPRESS),
    opt("--workspace", "override the workspace folder", default=argparse.SUPPRESS),
    opt(
        "--stream-manager",
        "event log backend: 'memory', 'redis' (address from REDIS_ADDR etc.) or a redis:// URL; "
        "default: the config's stream_manager key, else STREAM_MANAGER_TYPE, else memory",
        metavar="memory|redis|URL",
    ),
    opt(
        "--keepalive-s",
        "send an SSE ': keep-alive' comment after S seconds without a frame (0: never; default 15)",
        type=float,
        default=15.0,
        metavar="S",
    ),
    opt("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]),
    description=(
        "Serve the lab over HTTP. Endpoints: POST /knowledge-chat/{session_id} {query, "
        "knowledge_base_ids?} streams the answer as SSE; GET /sessions/continue-stream/"
        "{session_id}?message_id=... replays and follows it; POST /sessions/{session_id}/stop "
        "{message_id} stops it; POST/GET /sessions, GET/DELETE /sessions/{session_id} manage sessions. "
        "With API keys (server.api_keys in the config, or RAG_LAB_API_KEYS) every call needs "
        "'Authorization: Bearer <key>'; without keys the server is single-user and binds to "
        "loopback only (see docs/security.md)."
    ),
)
def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    if not 0 < args.port < 65536:
        raise ValueError(f"--port: expected 1-65535, got {args.port}")
    app, lab, manager = build_app(args)
    kbs = ", ".join(kb.name for kb in lab.workspace.list_kbs()) or "none (run `rag-lab ingest` first)"
    backend = "memory" if type(manager).__name__ == "MemoryStreamManager" else repr(manager)
    keys = app.state.service.config.keys
    auth = f"{len(keys)} API key(s)" if keys else "keyless (one local user, loopback only)"
    print(
        f"rag-lab serve: http://{args.host}:{args.port}  auth: {auth}  stream manager: {backend}  "
        f"store: {lab.store_config.describe()}  knowledge bases: {kbs}",
        file=sys.stderr,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m rag_lab.stream.serve_cli serve …`` is ``rag-lab serve …``."""
    return run_command(command_parser("rag-lab serve", cmd_serve), argv)


if __name__ == "__main__":
    raise SystemExit(main())
