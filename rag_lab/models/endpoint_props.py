"""What an OpenAI-compatible endpoint says about itself beyond the OpenAI API: llama-server's
``GET /props`` (its context window per slot, its model), read once per base URL.

Only llama-server answers ``/props`` with its settings; any other endpoint (OpenAI, vLLM, a proxy)
gives ``None`` here, and the callers keep their defaults. An answer, or a refusal (an error status,
no such route, a closed port), is cached for the process. A probe that gets no answer within
``timeout`` seconds (30 by default, as long as a model call may wait for its first token, so a
slow machine does not decide it) is a network fault: logged, answered ``None`` this once, and not
cached, so the next call asks again.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from typing import Any

__all__ = ["context_window", "server_props", "server_root"]

log = logging.getLogger(__name__)

#: seconds a ``/props`` probe waits for its answer
PROBE_TIMEOUT_S = 30.0

_cache: dict[str, dict[str, object] | None] = {}
_lock = threading.Lock()


def server_root(base_url: str) -> str:
    """``http://host:port`` of an OpenAI base URL (``…/v1`` dropped)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def server_props(base_url: str, timeout: float = PROBE_TIMEOUT_S) -> dict[str, object] | None:
    """llama-server's ``/props`` of the endpoint at ``base_url``, or ``None`` when the endpoint has
    none (another server, an error status, not a JSON object) or gave no answer within ``timeout``
    seconds (then not cached: see the module docstring)."""
    with _lock:
        if base_url in _cache:
            return _cache[base_url]
    url = server_root(base_url) + "/props"
    props: dict[str, object] | None = None
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data = json.loads(resp.read())
        if isinstance(data, dict) and isinstance(data.get("default_generation_settings"), dict):
            props = data
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            log.warning("%s: no answer within %g s; schema bounds are not used this time", url, timeout)
            return None
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
