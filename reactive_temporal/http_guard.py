"""Where `http_get` may connect, and how much it may read: SSRF and decompression-bomb guards.

A model chooses the URL, so the URL is hostile until checked. Before each TCP connection
(the first request and every redirect hop) the host is resolved once, every address it
resolves to is checked, and the connection goes to the checked address: there is no second
DNS lookup a rebinding server could answer differently. Refused: loopback, private,
link-local (with the 169.254.169.254 cloud metadata service), carrier-grade NAT, multicast,
reserved and unspecified addresses, in IPv4, IPv6, and IPv6 forms that embed an IPv4 address
(IPv4-mapped, 6to4, Teredo, NAT64).

`REACTIVE_TEMPORAL_HTTP_ALLOW` opens exceptions: comma-separated hostnames, IP addresses or
CIDR networks, each optionally with `:port` (IPv6 in brackets when a port follows):

    REACTIVE_TEMPORAL_HTTP_ALLOW="wiki.internal,10.1.2.0/24:8080,[fd00::/8]:443,127.0.0.1:9000"

The body is read raw and inflated here with a bounded output per step, so a small gzip
response never grows in memory past the caller's byte limit.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import ssl
import zlib
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpcore
import httpx

ALLOW_ENV_VAR = "REACTIVE_TEMPORAL_HTTP_ALLOW"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_METADATA = ipaddress.ip_address("169.254.169.254")
_LABEL = r"[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?$")


class BlockedAddressError(ValueError):
    """The URL's host is (or resolves to) an address http_get must not reach."""


# -- which addresses are off limits --------------------------------------------------------------


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries, if it is a form that routes to one."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def address_problem(ip: IPAddress) -> str | None:
    """Why `ip` is off limits (e.g. "loopback address"), or None for a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            ip = ipaddress.IPv6Address(ip.compressed.split("%", 1)[0])
        embedded = _embedded_ipv4(ip)
        if embedded is not None and (problem := address_problem(embedded)) is not None:
            return f"{problem} (IPv4 {embedded} inside IPv6 {ip})"
    kind = _kind(ip)
    return None if kind is None else f"{kind} address"


def _kind(ip: IPAddress) -> str | None:
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_loopback:
        return "loopback"
    if ip == _METADATA:
        return "cloud metadata (link-local)"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "carrier-grade NAT"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local:
        return "site-local"
    if not ip.is_global:
        return "non-global"
    return None


# -- the allow-list ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AllowRule:
    """One allow-list entry: a hostname or a network, and optionally one port."""

    host: str | None = None
    network: IPNetwork | None = None
    port: int | None = None

    def matches_host(self, host: str, port: int) -> bool:
        return self.host is not None and self.host == _norm_host(host) and self._port_ok(port)

    def matches_ip(self, ip: IPAddress, port: int) -> bool:
        if self.network is None or not self._port_ok(port):
            return False
        if ip.version != self.network.version:
            return False
        return ip in self.network

    def _port_ok(self, port: int) -> bool:
        return self.port is None or self.port == port


def _norm_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


def _parse_port(entry: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{ALLOW_ENV_VAR} entry {entry!r}: port {text!r} is not 1-65535")
    return int(text)


def parse_allow_rule(entry: str) -> AllowRule:
    """`host`, `host:port`, `IP`, `IP:port`, `CIDR`, `CIDR:port`, `[IPv6]:port`, `[CIDR6]:port`."""
    text = entry.strip()
    port: int | None = None
    if "://" in text:
        raise ValueError(
            f"{ALLOW_ENV_VAR} entry {entry!r} is not a hostname, an IP address or a CIDR network "
            "(no scheme or path: e.g. wiki.internal, 10.0.0.0/8:8080)"
        )
    if text.startswith("["):
        inside, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{ALLOW_ENV_VAR} entry {entry!r}: expected [IPv6] or [IPv6]:port")
        text = inside
        if rest:
            port = _parse_port(entry, rest[1:])
    elif text.count(":") == 1:
        text, port_text = text.split(":")
        port = _parse_port(entry, port_text)
    try:
        return AllowRule(network=ipaddress.ip_network(text, strict=False), port=port)
    except ValueError:
        pass
    if ":" in text or "/" in text or not _HOSTNAME.match(text):
        raise ValueError(
            f"{ALLOW_ENV_VAR} entry {entry!r} is not a hostname, an IP address or a CIDR network "
            "(each optionally with :port)"
        )
    return AllowRule(host=_norm_host(text), port=port)


@dataclass(frozen=True)
class AllowList:
    """The operator's exceptions to the address rules (empty: public addresses only)."""

    rules: tuple[AllowRule, ...] = ()

    @classmethod
    def parse(cls, value: str | None) -> AllowList:
        """From the comma-separated variable; ValueError names a bad entry."""
        entries = [e for e in (value or "").split(",") if e.strip()]
        return cls(tuple(parse_allow_rule(e) for e in entries))

    def allows_host(self, host: str, port: int) -> bool:
        return any(r.matches_host(host, port) for r in self.rules)

    def allows_ip(self, ip: IPAddress, port: int) -> bool:
        return any(r.matches_ip(ip, port) for r in self.rules)


# -- connecting only to checked addresses --------------------------------------------------------

Resolver = Callable[[str, int], Awaitable[list[str]]]


RESOLVER_THREADS = 4
"""Lookups of http_get's hosts running at once in a worker process; more wait their turn."""
_resolver = ThreadPoolExecutor(RESOLVER_THREADS, thread_name_prefix="http_get-resolve")


async def system_resolve(host: str, port: int) -> list[str]:
    """Every address the system resolver gives for `host` (one lookup).

    In threads of its own, not the event loop's default pool (`loop.getaddrinfo`): a lookup
    runs on in its thread past the caller's timeout until the resolver gives up, and a model
    can name hosts whose DNS never answers. In the default pool (six threads on two cores)
    those lookups held every thread, and the worker's own lookups waited behind them: psycopg
    resolves the database's host there when the pool reconnects. A lookup still waiting for a
    thread when its caller gives up is dropped, never run."""
    infos = await asyncio.get_running_loop().run_in_executor(
        _resolver, partial(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    )
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore network backend that resolves, checks, then connects to the checked IP.

    httpcore still derives the Host header and the TLS server name (SNI, certificate check)
    from the URL, so only where the socket goes changes.
    """

    def __init__(
        self,
        allow: AllowList,
        *,
        resolve: Resolver = system_resolve,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow = allow
        self.resolve = resolve
        self.inner = inner or httpcore.AnyIOBackend()
        self.connected: list[tuple[str, str, int]] = []
        """(host, address, port) of each connection made, for tests and logs."""

    async def checked_address(self, host: str, port: int, seconds: float | None = None) -> str:
        """The address to connect to for host:port, or BlockedAddressError saying why not."""
        name = _norm_host(host)
        try:
            async with asyncio.timeout(seconds):
                found = await self.resolve(name, port)
        except TimeoutError as err:  # before OSError, whose subclass it is
            raise httpcore.ConnectTimeout(f"resolving {name!r} timed out") from err
        except (OSError, UnicodeError) as err:
            raise httpcore.ConnectError(f"cannot resolve {name!r}: {err}") from err
        if not found:
            raise httpcore.ConnectError(f"{name!r} resolves to no address")
        if self.allow.allows_host(name, port):
            return found[0]
        for text in found:
            try:
                ip = ipaddress.ip_address(text)
            except ValueError as err:
                raise BlockedAddressError(f"{name!r} resolved to {text!r}, not an IP") from err
            if self.allow.allows_ip(ip, port):
                continue
            problem = address_problem(ip)
            if problem is not None:
                shown = f"{name}:{port}" + ("" if name == str(ip) else f" ({ip})")
                article = "an" if problem[0] in "aeiou" else "a"
                raise BlockedAddressError(
                    f"refused to connect to {shown}, {article} {problem}: http_get reaches "
                    f"public addresses only, unless an operator allows one in {ALLOW_ENV_VAR}"
                )
        return found[0]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 — httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await self.checked_address(host, port, timeout)
        self.connected.append((_norm_host(host), address, port))
        return await self.inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )  # fmt: skip

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 — httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise BlockedAddressError("http_get does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport on a GuardedBackend: no proxies from the environment (a proxy would
    resolve the host itself), TLS verified against the URL's host name."""

    def __init__(self, backend: GuardedBackend, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(trust_env=False)
        # The pool httpx built is never opened; this one differs only in its network backend.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            network_backend=backend,
        )


# -- reading a bounded body ----------------------------------------------------------------------

ACCEPT_ENCODING = "gzip, deflate"


class _Inflater:
    """zlib with a cap on each step's output, so a bomb inflates only as far as asked."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
        self._d = zlib.decompressobj(wbits)
        self._started = False

    def feed(self, data: bytes, limit: int) -> bytes:
        """At most `limit` (>= 1) bytes of output; the rest of the input waits in the tail."""
        if not self._started and self.encoding == "deflate":
            self._started = True
            try:  # "deflate" is zlib-wrapped by the RFC and raw by some servers
                probe = zlib.decompressobj(zlib.MAX_WBITS)
                out = probe.decompress(data, limit)
                self._d = probe
                return self._drain(out, limit)
            except zlib.error:
                self._d = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._drain(self._d.decompress(data, limit), limit)

    @property
    def finished(self) -> bool:
        return self._d.eof

    def _drain(self, out: bytes, limit: int) -> bytes:
        while self._d.unconsumed_tail and len(out) < limit:
            out += self._d.decompress(self._d.unconsumed_tail, limit - len(out))
        return out


async def read_bounded(
    raw: AsyncIterable[bytes], content_encoding: str | None, max_bytes: int, max_wire_bytes: int
) -> tuple[bytes, bool]:
    """The body (at most `max_bytes` after decoding) and whether it was cut short.

    Reading stops as soon as the decoded body passes `max_bytes` or the bytes on the wire
    pass `max_wire_bytes`, whichever comes first. Encodings other than gzip and deflate
    (which http_get does not ask for) are refused with ValueError.
    """
    encoding = (content_encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        inflater = None
    elif encoding in ("gzip", "x-gzip", "deflate"):
        inflater = _Inflater(encoding)
    else:
        raise ValueError(f"the response uses Content-Encoding {encoding!r}; http_get reads "
                         f"only {ACCEPT_ENCODING} or uncompressed bodies")  # fmt: skip
    body = bytearray()
    wire = 0
    async for chunk in raw:
        wire += len(chunk)
        if inflater is None:
            body += chunk[: max_bytes + 1 - len(body)]
        else:
            try:
                body += inflater.feed(chunk, max_bytes + 1 - len(body))
            except zlib.error as err:
                raise ValueError(f"the {encoding} body is corrupt: {err}") from err
        if len(body) > max_bytes or wire > max_wire_bytes:
            return bytes(body[:max_bytes]), True
    if inflater is not None and wire and not inflater.finished:
        raise ValueError(f"the {encoding} body is corrupt: it ends before its compressed data does")
    return bytes(body), False
