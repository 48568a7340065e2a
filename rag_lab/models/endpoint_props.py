"""What an OpenAI-compatible endpoint says about itself beyond the OpenAI API: llama-server's
``GET /props`` (its context window per slot, its model), read once per base URL.

Only llama-server answers ``/props`` with its settings; any other endpoint (OpenAI, vLLM, a proxy)
gives ``None`` here, and the callers keep their defaults. The probe is short (``timeout`` seconds)
and its answer, or its absence, is cached for the process.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

__all__ = ["context_window", "server_props", "server_root"]

_cache: dict[str, dict[str, object] | None] = {}
_lock = threading.Lock()


def server_root(base_url: str) -> str:
    """``http://host:port`` of an OpenAI base URL (``…/v1`` dropped)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def server_props(base_url: str, timeout: float = 3.0) -> dict[str, object] | None:
    """llama-server's ``/props`` of the endpoint at ``base_url``, or ``None`` when the endpoint has
    none (another server, an error status, no answer within ``timeout`` s, not a JSON object)."""
    with _lock:
        if base_url in _cache:
            return _cache[base_url]
    props: dict[str, object] | None = None
    try:
        with urllib.request.urlopen(server_root(base_url) + "/props", timeout=timeout) as resp:
            data = json.loads(resp.read())
        if isinstance(data, dict) and isinstance(data.get("default_generation_settings"), dict):
            props = data
    except (urllib.error.URLError, OSError, ValueError):
        props = None
    with _lock:
        _cache[base_url] = props
    return props


def context_window(props: dict[str, Any] | None) -> int | None:
    """The context tokens of one slot that ``props`` declares (``n_ctx``), or ``None``."""
    if not props:
        return None
    for holder in (props.get("default_generation_settings") or {}, props):
        n = holder.get("n_ctx")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            return n
    return None
