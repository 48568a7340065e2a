"""The lab config's ``server`` section: API keys and request limits of the chat server.

.. code-block:: yaml

    server:
      api_keys:                        # key → user and tenant (see rag_lab.stream.auth)
        "sha256:9f86d08…": {user: alice, tenant: 1}
      max_body_bytes: 1048576          # larger request bodies get 413
      max_query_chars: 8000            # longer queries get 400
      max_json_depth: 32               # deeper JSON bodies get 400
      auto_create_sessions: false      # POST /knowledge-chat to an unknown session id creates it

``auto_create_sessions`` defaults to true for a keyless (single-user) server and false with keys,
where sessions are created with ``POST /sessions`` (a server-chosen, unguessable id) so that
nobody can claim a session id before its owner uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rag_lab.stream.auth import ApiKeys, AuthConfigError

_KEYS = {"api_keys", "max_body_bytes", "max_query_chars", "max_json_depth", "auto_create_sessions"}


def _positive(cfg: Mapping[str, object], name: str, default: int, maximum: int) -> int:
    value = cfg.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise AuthConfigError(f"server.{name}: expected an integer in [1, {maximum}], got {value!r}")
    return value


@dataclass
class ServerConfig:
    keys: ApiKeys = field(default_factory=ApiKeys)
    max_body_bytes: int = 1 << 20
    max_query_chars: int = 8000
    max_json_depth: int = 32
    auto_create_sessions: bool | None = None

    @property
    def keyless(self) -> bool:
        return not self.keys

    @property
    def creates_sessions(self) -> bool:
        """Whether an ask to an unknown session id creates it (see the module docstring)."""
        return self.keyless if self.auto_create_sessions is None else self.auto_create_sessions

    @classmethod
    def from_config(cls, cfg: Mapping[str, object] | None, env: Mapping[str, str] | None = None) -> ServerConfig:
        cfg = dict(cfg or {})
        unknown = sorted(set(cfg) - _KEYS)
        if unknown:
            raise AuthConfigError(f"server: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_KEYS))}")
        auto = cfg.get("auto_create_sessions")
        if auto is not None and not isinstance(auto, bool):
            raise AuthConfigError(f"server.auto_create_sessions: expected true or false, got {auto!r}")
        return cls(
            keys=ApiKeys.from_config(cfg, env),
            max_body_bytes=_positive(cfg, "max_body_bytes", cls.max_body_bytes, 1 << 30),
            max_query_chars=_positive(cfg, "max_query_chars", cls.max_query_chars, 1 << 24),
            max_json_depth=_positive(cfg, "max_json_depth", cls.max_json_depth, 1000),
            auto_create_sessions=auto,
        )
