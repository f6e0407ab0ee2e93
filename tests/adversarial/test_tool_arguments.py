"""Tool arguments a model sends: calculator bombs and http_get aimed at places it must not go.

Rows: `input` is the (tool, arguments) pair the scripted model calls, over real HTTP, in a
real run on a real worker; `expect` is a distinctive part of the observation the tool call
must produce. "{port}" in an argument is the port of a loopback test server that must never
receive a request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from temporalio.client import Client

from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM, call
from reactive_temporal.tools import tool
from tests.adversarial.cases import Hostile, table
from tests.adversarial.conftest import (
    LocalServer,
    StoreSnapshot,
    assert_no_failed_tasks,
    observations,
    owned_by,
    send,
    unique,
)
from tests.workflow.conftest import Harness, running_worker

CALLS_PER_REPLY = 8


def calc(expression: str) -> tuple[str, dict[str, Any]]:
    return "calculator", {"expression": expression}


def get(url: str) -> tuple[str, dict[str, Any]]:
    return "http_get", {"url": url}


HUNG = "would have run for minutes on the worker's event loop, stalling every run on it"
SSRF = "would have reached a service on the worker's own network"

CALCULATOR = table("calculator", [
    Hostile("calc-power-of-power", calc("(9**9999)**3000"), "would have about 9,541 digits", HUNG),
    Hostile("calc-power-tower", calc("9**9**9"), "exponent 387420489 is too large", HUNG),
    Hostile("calc-big-base-power", calc("(10**300)**20"), "a 301-digit number ** 20", HUNG),
    Hostile("calc-product-growth", calc("(2**6000)*(2**6000)*(2**6000)*(2**6000)"),
            "more than 4000 digits", "each product squares the size"),
    Hostile("calc-round-digits", calc("round(5, -10**9)"), "round's digits must be an integer",
            "round(5, -10**9) builds 10**(10**9) internally"),
    Hostile("calc-float-overflow", calc("exp(700)*exp(700)"),
            "too large for a floating-point number", "OverflowError, unexplained"),
    Hostile("calc-complex", calc("(-8) ** 0.5"), "not a real number",
            "a complex number fed to the next function raised TypeError"),
    Hostile("calc-shift", calc("1 << 10**8"), "unsupported element", "a 12 MB integer"),
    Hostile("calc-string-repeat", calc("'x' * 10**9"), "unsupported element", "a 1 GB string"),
    Hostile("calc-deep-parentheses", calc("(" * 249 + "1" + ")" * 249),
            "not an arithmetic expression", "parser recursion"),
    Hostile("calc-lambda", calc("(lambda: 9**9**9)()"), "unsupported element", "code execution"),
])  # fmt: skip

SSRF_URLS = table("http_get-ssrf", [
    Hostile("ssrf-loopback", get("http://127.0.0.1:{port}/"), "a loopback address", SSRF),
    Hostile("ssrf-localhost", get("http://localhost:{port}/admin"), "a loopback address", SSRF),
    Hostile("ssrf-decimal-ip", get("http://2130706433:{port}/"), "(127.0.0.1), a loopback", SSRF),
    Hostile("ssrf-hex-ip", get("http://0x7f.0.0.1:{port}/"), "(127.0.0.1), a loopback", SSRF),
    Hostile("ssrf-short-ip", get("http://127.1:{port}/"), "(127.0.0.1), a loopback", SSRF),
    Hostile("ssrf-ipv6-loopback", get("http://[::1]:{port}/"), "a loopback address", SSRF),
    Hostile("ssrf-ipv4-mapped", get("http://[::ffff:127.0.0.1]:{port}/"),
            "IPv4 127.0.0.1 inside IPv6", SSRF),
    Hostile("ssrf-6to4", get("http://[2002:7f00:1::]:{port}/"), "IPv4 127.0.0.1 inside IPv6",
            SSRF),
    Hostile("ssrf-userinfo", get("http://example.com@127.0.0.1:{port}/"), "a loopback address",
            "the host is what follows the @"),
    Hostile("ssrf-unspecified", get("http://0.0.0.0:{port}/"), "an unspecified address",
            "0.0.0.0 connects to the local host"),
    Hostile("ssrf-metadata", get("http://169.254.169.254/latest/meta-data/"),
            "cloud metadata (link-local) address", "cloud credentials"),
    Hostile("ssrf-metadata-nat64", get("http://[64:ff9b::a9fe:a9fe]/"),
            "cloud metadata (link-local) address (IPv4 169.254.169.254 inside IPv6", SSRF),
    Hostile("ssrf-private-10", get("http://10.0.0.1/"), "a private address", SSRF),
    Hostile("ssrf-private-192", get("http://192.168.0.1:8080/"), "a private address", SSRF),
    Hostile("ssrf-cgnat", get("http://100.64.0.1/"), "a carrier-grade NAT address", SSRF),
    Hostile("ssrf-multicast", get("http://224.0.0.1/"), "a multicast address", SSRF),
    Hostile("ssrf-reserved", get("http://240.0.0.1/"), "a reserved address", SSRF),
    Hostile("ssrf-link-local-v6", get("http://[fe80::1]/"), "a link-local address", SSRF),
    Hostile("ssrf-unique-local-v6", get("http://[fd00::1]/"), "a private address", SSRF),
    Hostile("ssrf-gopher", get("gopher://127.0.0.1:{port}/_SET"), "only http:// and https://",
            "protocol smuggling"),
])  # fmt: skip


def fill(arguments: dict[str, Any], port: int) -> dict[str, Any]:
    return {k: v.replace("{port}", str(port)) if isinstance(v, str) else v
            for k, v in arguments.items()}  # fmt: skip


async def run_table(
    h: Harness,
    llm: ScriptedLLM,
    client: Client,
    database_url: str,
    rows: list[Hostile],
    port: int,
) -> dict[str, str]:
    """All rows' calls in one run (a few per reply), each row's observation by id; asserts
    nothing stored changed but the run's own transcript, and no workflow task failed."""
    calls = [call(row.input[0], **fill(row.input[1], port)) for row in rows]
    replies = [Reply(None, calls[i : i + CALLS_PER_REPLY])
               for i in range(0, len(calls), CALLS_PER_REPLY)]  # fmt: skip
    model = llm.script(unique("tools"), [*replies, Reply("FINAL ANSWER: all refused")])
    agent = h.agent(model, agent_id=unique("tools"), memory=False, max_parallel_tools=8,
                    max_iterations=len(replies) + 2)  # fmt: skip
    before = await StoreSnapshot.take(database_url)
    result = await asyncio.wait_for(agent.run("Try everything you should not"), 120)
    after = await StoreSnapshot.take(database_url)
    assert result.terminated_by == "final_answer" and result.output == "all refused"
    assert after.changes_since(before, own=owned_by(result.run_id)) == []
    await assert_no_failed_tasks(client, result.run_id)
    found = await observations(database_url, result.run_id)
    assert len(found) == len(rows)
    return {row.id: content for row, (_, content) in zip(rows, found, strict=True)}


@pytest.fixture(scope="module")
async def observed(
    adv: Harness, llm: ScriptedLLM, client: Client, database_url: str
) -> dict[str, Any]:
    hits: list[str] = []
    bait = LocalServer({"/": lambda handler: send(handler, 200, b"secret")})
    try:
        found = await run_table(adv, llm, client, database_url, [*CALCULATOR, *SSRF_URLS],
                                bait.port)  # fmt: skip
        hits = list(bait.requests)
    finally:
        bait.close()
    return {"observations": found, "bait_requests": hits}


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in [*CALCULATOR, *SSRF_URLS]])
def test_hostile_tool_arguments_get_clear_errors(row: Hostile, observed: dict[str, Any]):
    content = observed["observations"][row.id]
    assert content.startswith("[Tool error:") and row.expect in content, content
    assert "secret" not in content


def test_no_request_reached_the_loopback_server(observed: dict[str, Any]):
    assert observed["bait_requests"] == []


# -- the calculator bomb does not stall the worker --------------------------------------------


async def test_bomb_is_refused_while_another_run_on_the_worker_completes(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str
):
    """A run calls the calculator bomb and a CPU-bound plain tool (`spin`, a user's @tool that
    busy-loops until released). While `spin` holds its thread, a second run on the same
    worker completes; only then is `spin` released. Plain tools running on the event loop
    (the old way) would have stalled the second run behind the first."""
    started, release = threading.Event(), threading.Event()

    @tool
    def spin(seconds: float) -> str:
        """Busy CPU work, as a user's synchronous tool might do."""
        started.set()
        deadline = time.monotonic() + seconds
        while not release.is_set() and time.monotonic() < deadline:
            sum(range(10_000))
        return "released" if release.is_set() else "gave up"

    first = llm.script(unique("bomb"), [
        Reply(None, [call("calculator", expression="(9**9999)**3000"), call("spin", seconds=30)]),
        Reply("FINAL ANSWER: refused"),
    ])  # fmt: skip
    second = llm.script(unique("meanwhile"), [
        Reply(None, [call("calculator", expression="17 * 23 + 4")]),
        Reply("FINAL ANSWER: 395"),
    ])  # fmt: skip
    async with running_worker(client, settings, extra_tools=[spin], max_cached_workflows=None) as h:
        bombing = await h.start(first, "Compute (9**9999)**3000", agent_id=unique("bomb"),
                                memory=False, max_parallel_tools=2)  # fmt: skip
        try:
            assert await asyncio.to_thread(started.wait, 60), "spin never started"
            other = await asyncio.wait_for(
                h.run(second, "What is 17 * 23 + 4?", agent_id=unique("meanwhile"), memory=False),
                60,
            )
            spinning = not release.is_set()
        finally:
            release.set()
        result = await asyncio.wait_for(bombing.result(), 60)
    assert other.success and other.output == "395" and spinning
    assert result.output == "refused"
    assert await observations(database_url, result.run_id) == [
        ("calculator", "[Tool error: calculator failed: ValueError: 9 ** 9999 would have about "
                       "9,541 digits; results are limited to 4,000 digits]"),
        ("spin", "released"),
    ]  # fmt: skip
    await assert_no_failed_tasks(client, result.run_id, other.run_id)


async def test_tools_past_their_own_timeout_are_cut_once_and_the_run_goes_on(
    client: Client, settings: Settings, llm: ScriptedLLM, database_url: str
):
    """A user's tools that never return, one blocking a thread and one awaiting forever, each
    with a one-second timeout: each call ends as a timeout observation after its own timeout
    (not the activity's), runs once (no retried attempt runs it again), and the run finishes.
    A TimeoutError a tool raises itself is its own failure, reported with its message."""
    release = threading.Event()
    calls: list[str] = []

    @tool(timeout_seconds=1)
    def stuck_in_thread(query: str) -> str:
        """Blocks, as a user's synchronous client waiting on a dead server might."""
        calls.append(f"thread {query}")
        release.wait(120)
        return "finally"

    @tool(timeout_seconds=1)
    async def stuck_on_loop(query: str) -> str:
        """Awaits an answer that never comes."""
        calls.append(f"loop {query}")
        await asyncio.Event().wait()
        return "never"

    @tool(timeout_seconds=60)
    async def gives_up(query: str) -> str:
        """Raises its own client's TimeoutError at once: not the tool's timeout."""
        calls.append(f"gives up {query}")
        raise TimeoutError("the billing API did not answer within 2s")

    model = llm.script(unique("stuck"), [
        Reply(None, [call("stuck_in_thread", query="a"), call("stuck_on_loop", query="b"),
                     call("gives_up", query="c")]),
        Reply("FINAL ANSWER: both timed out"),
    ])  # fmt: skip
    tools = [stuck_in_thread, stuck_on_loop, gives_up]
    try:
        async with running_worker(client, settings, extra_tools=tools) as h:
            started = time.monotonic()
            result = await asyncio.wait_for(
                h.run(model, "Ask them", agent_id=unique("stuck"), memory=False,
                      max_parallel_tools=3),
                90,
            )  # fmt: skip
            took = time.monotonic() - started
    finally:
        release.set()
    assert result.output == "both timed out"
    assert await observations(database_url, result.run_id) == [
        ("stuck_in_thread", "[Tool error: stuck_in_thread timed out after 1s]"),
        ("stuck_on_loop", "[Tool error: stuck_on_loop timed out after 1s]"),
        ("gives_up", "[Tool error: gives_up failed: TimeoutError: the billing API did not "
                     "answer within 2s]"),
    ]  # fmt: skip
    assert sorted(calls) == ["gives up c", "loop b", "thread a"]  # once each
    assert took < 30, f"{took:.1f}s: the tools' own timeouts did not bound their calls"
    await assert_no_failed_tasks(client, result.run_id)
