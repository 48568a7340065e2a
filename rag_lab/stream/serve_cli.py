"""`rag-lab serve`: the chat server (ask with SSE, continue-stream, stop) on uvicorn.

``add_serve_command(subparsers)`` adds the subcommand to the ``rag-lab`` parser; ``main`` runs it
standalone (``python -m rag_lab.stream.serve_cli serve --port 8000``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, cast


def add_serve_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``serve --host --port --config --workspace --stream-manager`` to ``subparsers``.

    ``--config`` and ``--workspace`` may also be given before the subcommand (the top-level
    options of ``rag-lab``); given after it, they win.
    """
    p = subparsers.add_parser(
        "serve",
        help="serve the chat API: POST /knowledge-chat/{session} (SSE), continue-stream, stop",
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
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--config", default=argparse.SUPPRESS, help="lab YAML (default: config/lab.yaml)")
    p.add_argument("--workspace", default=argparse.SUPPRESS, help="override the workspace folder")
    p.add_argument(
        "--stream-manager",
        default=None,
        metavar="memory|redis|URL",
        help="event log backend: 'memory', 'redis' (address from REDIS_ADDR etc.) or a redis:// URL; "
        "default: the config's stream_manager key, else STREAM_MANAGER_TYPE, else memory",
    )
    p.add_argument(
        "--keepalive-s",
        type=float,
        default=15.0,
        metavar="S",
        help="send an SSE ': keep-alive' comment after S seconds without a frame (0: never; default 15)",
    )
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=cmd_serve)
    return cast(argparse.ArgumentParser, p)


def build_app(args: argparse.Namespace) -> tuple[Any, Any, Any]:
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
    overrides: dict[str, Any] = {}
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
    from rag_lab.cliutil import command_parser, run_command

    return run_command(command_parser("rag-lab serve", add_serve_command), argv)


if __name__ == "__main__":
    raise SystemExit(main())
