"""Where the page fetcher may go (SSRF policy): URLs found in data are untrusted.

A URL from a search result or a page's front matter may point anywhere: the cloud metadata
service (169.254.169.254), a database admin page on 10.0.0.5, the server's own loopback API, a
file on disk. :class:`FetchPolicy` decides, and :class:`GuardedBackend` enforces it where it
cannot be fooled:

* **schemes**: ``http`` and ``https`` only (``file`` is handled apart, below);
* **addresses**: the host is resolved and *every* address it resolves to must be public. Refused:
  loopback, private (RFC 1918, ULA), link-local, multicast, reserved, unspecified, shared /
  carrier-grade NAT and any other non-global range; IPv4 addresses embedded in IPv6
  (IPv4-mapped ``::ffff:a.b.c.d``, 6to4, Teredo, NAT64 ``64:ff9b::/96``) are judged as the IPv4
  address. Numeric spellings (``2130706433``, ``0x7f000001``, ``0177.0.0.1``, ``127.1``) go
  through the same resolver the connection uses, so they are judged as what they mean;
* **the connected address**: the check runs again inside the HTTP client's connect, on the
  addresses resolved for that very connection, and the socket is opened to the checked address
  (a DNS answer that changes between the check and the connect, "DNS rebinding", cannot slip
  through). Redirects are followed one hop at a time and each new URL is checked the same way;
* **no proxies**: connections are direct (a proxy would resolve names where they cannot be
  checked), whatever ``HTTP_PROXY`` says;
* ``file://`` only for paths that, with symlinks resolved, lie under ``file_root``.

``allow_addresses`` (CIDR networks) lets named non-public networks through: an intranet the
operator chose to search, or a test's loopback server. It is never implied.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpcore
    import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_SCHEMES = ("http", "https")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class PolicyError(ValueError):
    """A URL, address or path the policy refuses; the message says which rule."""


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address inside an IPv4-mapped, IPv4-compatible, 6to4, Teredo or NAT64 IPv6."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if int(ip) >> 32 == 0 and int(ip) > 1:  # ::a.b.c.d (deprecated IPv4-compatible)
        return ipaddress.IPv4Address(int(ip))
    return None


def address_class(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public destination ("loopback", "private", ...), or None if it is."""
    inner = embedded_ipv4(ip)
    if inner is not None:
        why = address_class(inner)
        return f"{why} (IPv4 {inner} inside {ip})" if why else None
    for name in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
        if getattr(ip, f"is_{name}"):
            return name.replace("_", "-")
    if not ip.is_global:
        return "not globally routable"
    return None


def parse_networks(values: Iterable[str] | None, where: str = "allow_addresses") -> tuple[IPNetwork, ...]:
    out = []
    for v in values or ():
        try:
            out.append(ipaddress.ip_network(str(v).strip(), strict=False))
        except ValueError:
            raise PolicyError(f"{where}: {v!r} is not an IP network (e.g. 127.0.0.1/32 or 10.0.0.0/8)") from None
    return tuple(out)


@dataclass(frozen=True)
class FetchPolicy:
    """See the module docstring."""

    allow_addresses: tuple[IPNetwork, ...] = ()
    file_root: Path | None = None
    schemes: tuple[str, ...] = field(default=ALLOWED_SCHEMES)

    @classmethod
    def build(cls, allow_addresses: Iterable[str] | None = None, file_root: str | Path | None = None) -> FetchPolicy:
        root = Path(file_root).expanduser().resolve() if file_root else None
        if root is not None and not root.is_dir():
            raise PolicyError(f"file_root={str(file_root)!r} is not a folder")
        return cls(parse_networks(allow_addresses), root)

    def check_address(self, ip: IPAddress, host: str = "") -> None:
        why = address_class(ip)
        if why is None or any(ip in net for net in self.allow_addresses):
            return
        inner = embedded_ipv4(ip)
        if inner is not None and any(inner in net for net in self.allow_addresses):
            return
        shown = f"{host} → {ip}" if host and host != str(ip) else str(ip)
        raise PolicyError(f"destination {shown} is {why}; only public addresses are fetched")

    async def resolve(self, host: str, port: int) -> list[IPAddress]:
        """Every address ``host`` resolves to, each checked; the first refused one raises."""
        ips = await resolve_host(host, port)
        if not ips:
            raise PolicyError(f"host {host!r} did not resolve to any address")
        for ip in ips:
            self.check_address(ip, host)
        return ips

    def check_scheme(self, scheme: str) -> None:
        if scheme not in self.schemes:
            raise PolicyError(f"scheme {scheme or '(none)'!r} is not allowed (allowed: {', '.join(self.schemes)})")

    def check_file(self, path: Path) -> Path:
        """The resolved path when it lies under ``file_root``."""
        if self.file_root is None:
            raise PolicyError("file:// URLs are not allowed (set web.fetch.file_root to a folder to allow one)")
        real = path.resolve()
        if not real.is_relative_to(self.file_root):
            raise PolicyError(f"{path} is outside the allowed folder {self.file_root}")
        return real


async def resolve_host(host: str, port: int) -> list[IPAddress]:
    """The addresses the system resolver gives for ``host`` (numeric spellings included)."""
    h = host.strip("[]")
    try:
        return [ipaddress.ip_address(h.split("%", 1)[0])]
    except ValueError:
        pass
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(h, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise PolicyError(f"host {host!r} does not resolve: {exc}") from None
    out: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if ip not in out:
            out.append(ip)
    return out


class GuardedBackend:
    """An httpcore network backend that resolves, checks and connects to the checked address."""

    def __init__(self, policy: FetchPolicy, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        import httpcore

        self.policy = policy
        self.inner = inner or httpcore.AnyIOBackend()
        #: (host, address) of every connection opened, for tests and logs
        self.connected: list[tuple[str, str]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        import httpcore

        try:
            ips = await self.policy.resolve(host, port)
        except PolicyError as exc:
            raise httpcore.ConnectError(str(exc)) from None
        self.connected.append((host, str(ips[0])))
        return await self.inner.connect_tcp(
            str(ips[0]), port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None
    ) -> httpcore.AsyncNetworkStream:
        import httpcore

        raise httpcore.ConnectError("unix sockets are not fetched")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


def guarded_transport(policy: FetchPolicy, backend: GuardedBackend | None = None) -> httpx.AsyncHTTPTransport:
    """An ``httpx.AsyncHTTPTransport`` whose every connection goes through :class:`GuardedBackend`
    (direct, no proxy)."""
    import httpcore
    import httpx

    transport = httpx.AsyncHTTPTransport(trust_env=False)
    old = transport._pool
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=old._ssl_context,
        network_backend=backend or GuardedBackend(policy),  # type: ignore[arg-type]  # duck-typed AsyncNetworkBackend
    )
    return transport
