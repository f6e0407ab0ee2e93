"""http_get's guards as pure rules: addresses, allow-list entries, bounded inflating."""

from __future__ import annotations

import asyncio
import gzip
import ipaddress
import socket
import threading
import zlib
from collections.abc import AsyncIterator

import httpcore
import pytest

from reactive_temporal.builtin_tools import page_encoding
from reactive_temporal.config import Settings
from reactive_temporal.http_guard import (
    AllowList,
    BlockedAddressError,
    GuardedBackend,
    address_problem,
    read_bounded,
)


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
        ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"),
        ("fc00::1", "private"), ("fd12:3456::1", "private"),
        ("169.254.169.254", "cloud metadata"), ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"), ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"), ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"), ("240.0.0.1", "reserved"), ("0.0.0.0", "unspecified"),
        ("::", "unspecified"), ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"),
        ("::ffff:169.254.169.254", "cloud metadata"), ("2002:7f00:1::", "loopback"),
        ("2002:a9fe:a9fe::", "cloud metadata"), ("64:ff9b::7f00:1", "loopback"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"),  # Teredo carrying 127.0.0.1
        ("fec0::1", "site-local"), ("192.0.2.1", "private"), ("198.18.0.1", "private"),
    ],
)  # fmt: skip
def test_addresses_that_are_off_limits(address: str, problem: str):
    found = address_problem(ipaddress.ip_address(address))
    assert found is not None and problem in found


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "93.184.216.34"])
def test_public_addresses_are_fine(address: str):
    assert address_problem(ipaddress.ip_address(address)) is None


def test_allow_list_entries():
    allow = AllowList.parse(
        " wiki.internal , 10.1.2.0/24:8080, [fd00::/8]:443, 127.0.0.1:9000, ::1, Intranet.Corp."
    )
    assert allow.allows_host("wiki.internal", 80) and allow.allows_host("WIKI.internal.", 443)
    assert allow.allows_host("intranet.corp", 1)
    assert not allow.allows_host("evil.wiki.internal", 80)
    ip = ipaddress.ip_address
    assert allow.allows_ip(ip("10.1.2.77"), 8080) and not allow.allows_ip(ip("10.1.2.77"), 80)
    assert allow.allows_ip(ip("fd00::5"), 443) and not allow.allows_ip(ip("fd00::5"), 80)
    assert allow.allows_ip(ip("127.0.0.1"), 9000) and not allow.allows_ip(ip("127.0.0.1"), 9001)
    assert allow.allows_ip(ip("::1"), 1234) and not allow.allows_ip(ip("::2"), 1234)
    assert AllowList.parse("") == AllowList() == AllowList.parse(None)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("10.0.0.0/8:99999", "port '99999' is not 1-65535"),
        ("host:http", "port 'http' is not 1-65535"),
        ("[::1", "expected [IPv6] or [IPv6]:port"),
        ("[::1]8080", "expected [IPv6] or [IPv6]:port"),
        ("http://example.com", "is not a hostname, an IP address or a CIDR network"),
        ("exa mple.com", "is not a hostname"),
        ("10.0.0.0/33", "is not a hostname"),
    ],
)
def test_bad_allow_list_entries_are_named(entry: str, message: str):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")) as info:
        AllowList.parse(f"ok.example,{entry}")
    assert repr(entry) in str(info.value)
    with pytest.raises(ValueError, match="REACTIVE_TEMPORAL_HTTP_ALLOW"):
        Settings(http_allow=entry)


class FakeInner(httpcore.AsyncNetworkBackend):
    def __init__(self) -> None:
        self.connected: list[str] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):  # type: ignore[no-untyped-def]  # noqa: ASYNC109
        self.connected.append(host)
        raise httpcore.ConnectError("not really connecting")


def resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    calls: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        calls.append(host)
        return table[host]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


async def test_a_name_resolving_to_any_internal_address_is_refused_after_one_lookup():
    resolve = resolver({"rebind.example": ["93.184.216.34", "127.0.0.1"]})
    inner = FakeInner()
    backend = GuardedBackend(AllowList(), resolve=resolve, inner=inner)
    with pytest.raises(BlockedAddressError, match=r"rebind.example:80 \(127.0.0.1\), a loopback"):
        await backend.connect_tcp("rebind.example", 80)
    assert inner.connected == [] and resolve.calls == ["rebind.example"]  # type: ignore[attr-defined]


async def test_the_connection_goes_to_the_checked_address():
    resolve = resolver({"example.com": ["93.184.216.34"], "wiki.internal": ["10.0.0.5"]})
    inner = FakeInner()
    backend = GuardedBackend(AllowList.parse("wiki.internal"), resolve=resolve, inner=inner)
    for host in ("example.com", "wiki.internal"):
        with pytest.raises(httpcore.ConnectError):
            await backend.connect_tcp(host, 443)
    assert inner.connected == ["93.184.216.34", "10.0.0.5"]  # the IPs, not the names
    assert resolve.calls == ["example.com", "wiki.internal"]  # type: ignore[attr-defined]


async def test_unix_sockets_are_refused():
    with pytest.raises(BlockedAddressError):
        await GuardedBackend(AllowList()).connect_unix_socket("/var/run/docker.sock")


async def chunks(data: bytes, size: int = 65536) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


@pytest.mark.parametrize(
    ("encoding", "compress"),
    [
        ("gzip", lambda b: gzip.compress(b)),
        ("deflate", lambda b: zlib.compress(b)),
        ("deflate", lambda b: (c := zlib.compressobj(9, 8, -15)).compress(b) + c.flush()),
        ("identity", lambda b: b),
    ],
)  # fmt: skip
async def test_bodies_are_bounded_after_decoding(encoding, compress):  # type: ignore[no-untyped-def]
    small = b"hello world " * 10
    assert await read_bounded(chunks(compress(small)), encoding, 1000, 10_000_000) == (small, False)
    big = b"\0" * 20_000_000
    body, cut = await read_bounded(chunks(compress(big)), encoding, 1000, 100_000_000)
    assert (len(body), cut) == (1000, True)


async def test_wire_bytes_are_bounded_too():
    body, cut = await read_bounded(chunks(b"x" * 1_000_000), None, 5_000_000, 100_000)
    assert cut and len(body) <= 100_000 + 65536


async def test_unknown_encodings_and_corrupt_bodies_are_errors():
    with pytest.raises(ValueError, match="Content-Encoding 'br'"):
        await read_bounded(chunks(b"x"), "br", 10, 10)
    with pytest.raises(ValueError, match="gzip body is corrupt"):
        await read_bounded(chunks(b"\x1f\x8b\x08\x00nonsense"), "gzip", 10, 100)


@pytest.mark.parametrize(
    ("charset", "used"),
    [
        ("punycode", "utf-8"),  # quadratic: 200 KB held the event loop for 1.4 s
        ("idna", "utf-8"),  # refuses errors="replace": the whole call failed
        ("unicode_escape", "utf-8"),
        ("undefined", "utf-8"),
        ("no-such-charset", "utf-8"),
        ("latin-1", "iso8859-1"),
        ("Shift_JIS", "shift_jis"),
        (None, "utf-8"),
    ],
)
def test_a_page_is_decoded_only_in_a_real_character_set(charset: str | None, used: str):
    assert page_encoding(charset) == used


async def test_lookups_that_never_answer_leave_the_loops_own_lookups_alone(monkeypatch):
    """A model can name hosts whose DNS never answers; each lookup runs on in its thread
    after http_get gave up on it. In the loop's default pool (six threads on two cores) ten
    of them held every thread, and the worker's own lookups (psycopg resolving the database's
    host as its pool reconnects) waited behind them."""
    released = threading.Event()
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if host.endswith(".never-answers.example"):
            released.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    backend = GuardedBackend(AllowList())
    try:
        for n in range(10):
            with pytest.raises(httpcore.ConnectTimeout, match="timed out"):
                await backend.checked_address(f"h{n}.never-answers.example", 80, seconds=0.05)
        loop = asyncio.get_running_loop()
        found = await asyncio.wait_for(loop.getaddrinfo("127.0.0.1", 5432), timeout=5)
        assert found
    finally:
        released.set()
