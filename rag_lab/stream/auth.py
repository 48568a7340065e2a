"""Who is calling the chat server: API keys → (user, tenant), and when keyless serving is allowed.

Keys come from the lab config and/or the environment:

* ``server.api_keys`` in the lab YAML: a mapping from key to ``{user: NAME, tenant: N}``. A key
  may be written as ``sha256:<64 hex digits>`` (the SHA-256 of the key) so that the config file
  never holds the secret itself;
* ``RAG_LAB_API_KEYS``: ``KEY=USER:TENANT`` entries separated by commas, semicolons or new lines
  (or the same JSON object as the config). Entries from both places are merged; one key given
  twice with different identities is an error.

A caller sends ``Authorization: Bearer <key>``. The presented key is hashed and compared with
every configured digest with :func:`hmac.compare_digest`, without stopping at the first match,
so the time taken does not depend on which key (or how much of one) matched. Keys are never
logged: only digests are kept in memory and ``repr`` shows the number of keys.

User names are global: one user belongs to exactly one tenant (a config that puts a name in two
tenants is refused), so everything keyed by user (sessions, memories, citations) is also
separated by tenant.

Without any key the server is **keyless**: every caller is the single local user
(:data:`LOCAL_PRINCIPAL`, the identity the notebook lab uses, tenant 0 = every KB of the
workspace). That is only allowed on a loopback address; :func:`check_bind` refuses the rest, and
the server also answers 401 to a keyless request whose peer is not a loopback address.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: environment variable holding extra API keys
API_KEYS_ENV = "RAG_LAB_API_KEYS"
#: shortest accepted key (a shorter one could be guessed)
MIN_KEY_CHARS = 16
_USER = re.compile(r"^[A-Za-z0-9_.@\-]{1,128}$")
_SHA = re.compile(r"^sha256:([0-9a-fA-F]{64})$")


class AuthConfigError(ValueError):
    """A bad key table or an unsafe bind; the message names the field (never the key)."""


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller."""

    user_id: str
    #: the caller's tenant; 0 only for the keyless local user (no tenant check)
    tenant_id: int
    keyless: bool = False


#: the one user of a keyless server: the same identity as ``Lab.ask`` in a notebook
LOCAL_PRINCIPAL = Principal("lab", 0, keyless=True)


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8")).digest()


def _masked(key: str) -> str:
    """How a key is named in an error message: its digest prefix, never its text."""
    m = _SHA.match(key)
    return f"sha256:{(m.group(1) if m else key_digest(key).hex())[:8]}…"


def _principal(value: object, where: str) -> Principal:
    if isinstance(value, str):  # "user:tenant"
        user, sep, tenant = value.rpartition(":")
        value = {"user": user, "tenant": tenant} if sep else {"user": value}
    if not isinstance(value, Mapping):
        raise AuthConfigError(f"{where}: expected {{user: NAME, tenant: N}}, got {type(value).__name__}")
    unknown = sorted(set(value) - {"user", "tenant"})
    if unknown:
        raise AuthConfigError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: user, tenant")
    user = str(value.get("user") or "").strip()
    if not _USER.match(user):
        raise AuthConfigError(f"{where}.user: expected 1-128 characters from A-Z a-z 0-9 _ . @ -, got {user!r}")
    if user == LOCAL_PRINCIPAL.user_id:
        raise AuthConfigError(f"{where}.user: {user!r} is reserved for the keyless local user")
    tenant = value.get("tenant")
    try:
        t = int(str(tenant).strip())
    except (TypeError, ValueError):
        raise AuthConfigError(f"{where}.tenant: expected an integer >= 1, got {tenant!r}") from None
    if t < 1 or isinstance(tenant, bool):
        raise AuthConfigError(f"{where}.tenant: expected an integer >= 1, got {tenant!r}")
    return Principal(user, t)


def _entries_from_env(text: str) -> dict[str, object]:
    text = text.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AuthConfigError(f"{API_KEYS_ENV}: not valid JSON ({exc.msg} at {exc.pos})") from None
        if not isinstance(data, dict):
            raise AuthConfigError(f"{API_KEYS_ENV}: expected a JSON object of key → {{user, tenant}}")
        return data
    out: dict[str, object] = {}
    for i, part in enumerate(p.strip() for p in re.split(r"[,;\n]", text)):
        if not part:
            continue
        key, sep, who = part.partition("=")
        if not sep or not key.strip() or not who.strip():
            raise AuthConfigError(f"{API_KEYS_ENV}: entry {i + 1}: expected KEY=USER:TENANT")
        out[key.strip()] = who.strip()
    return out


class ApiKeys:
    """Digest → principal; see the module docstring."""

    def __init__(self, entries: Mapping[str, object] | None = None, *, source: str = "server.api_keys") -> None:
        self._table: list[tuple[bytes, Principal]] = []
        self.add(entries or {}, source=source)

    def add(self, entries: Mapping[str, object], *, source: str) -> None:
        if not isinstance(entries, Mapping):
            raise AuthConfigError(
                f"{source}: expected a mapping of key → {{user, tenant}}, got {type(entries).__name__}"
            )
        tenants = {p.user_id: p.tenant_id for _, p in self._table}
        for raw_key, who in entries.items():
            key = str(raw_key)
            m = _SHA.match(key)
            if m:
                digest = bytes.fromhex(m.group(1))
            elif len(key) < MIN_KEY_CHARS or key != key.strip():
                raise AuthConfigError(
                    f"{source}: key {_masked(key)} is shorter than {MIN_KEY_CHARS} characters or has surrounding "
                    "spaces; use a long random key (python -c 'import secrets; print(secrets.token_urlsafe(32))')"
                )
            else:
                digest = key_digest(key)
            principal = _principal(who, f"{source}[{_masked(key)}]")
            if tenants.get(principal.user_id, principal.tenant_id) != principal.tenant_id:
                raise AuthConfigError(
                    f"{source}[{_masked(key)}]: user {principal.user_id!r} is already in tenant "
                    f"{tenants[principal.user_id]}; a user belongs to one tenant (give this one another name)"
                )
            tenants[principal.user_id] = principal.tenant_id
            for d, p in self._table:
                if hmac.compare_digest(d, digest):
                    if p != principal:
                        raise AuthConfigError(f"{source}: key {_masked(key)} is given twice with different users")
                    break
            else:
                self._table.append((digest, principal))

    @classmethod
    def from_config(cls, server_cfg: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> ApiKeys:
        """Keys from ``server.api_keys`` plus :data:`API_KEYS_ENV`."""
        env = os.environ if env is None else env
        keys = cls((server_cfg or {}).get("api_keys") or {})
        keys.add(_entries_from_env(env.get(API_KEYS_ENV, "")), source=API_KEYS_ENV)
        return keys

    def __len__(self) -> int:
        return len(self._table)

    def __bool__(self) -> bool:
        return bool(self._table)

    def __repr__(self) -> str:
        return f"ApiKeys({len(self._table)} key{'s' if len(self._table) != 1 else ''})"

    def authenticate(self, key: str) -> Principal | None:
        """The principal of ``key``, or None. Every digest is compared (constant time)."""
        if not key:
            return None
        presented = key_digest(key)
        found: Principal | None = None
        for digest, principal in self._table:
            if hmac.compare_digest(digest, presented) and found is None:
                found = principal
        return found


def bearer_token(authorization: str | None) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header; None when absent or another scheme."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 (also IPv4-mapped) and ``localhost``."""
    if not host:
        return False
    h = host.strip().strip("[]")
    if h.lower() == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def check_bind(host: str, keys: ApiKeys) -> None:
    """Refuse to serve without keys anywhere but loopback."""
    if not keys and not is_loopback(host):
        raise AuthConfigError(
            f"--host {host}: refusing to serve without API keys on a non-loopback address; set server.api_keys "
            f"in the lab config or {API_KEYS_ENV} (see docs/security.md), or bind to 127.0.0.1"
        )
