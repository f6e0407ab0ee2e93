"""The Python API's arguments are held to their types, and refused before anything is sent.

pydantic's lax mode had taken `b"abc"` as the name "abc", `max_iterations=True` as 1 and
`"5"` as 5; a chat message with a lone surrogate was sent (as U+FFFD) where a run's task was
refused; a wait of nan returned at once and forgot the debriefs in flight. The agent here
runs on a client that fails any use, so each refusal is shown to come before anything is
sent: a check that came after would fail with that client's AssertionError instead.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.builder import AgentBuilder
from reactive_temporal.api.chat_refusals import ChatError
from reactive_temporal.api.run_inputs import build_run_input
from reactive_temporal.api.sessions import valid_session_id
from reactive_temporal.cli.common import path_given
from reactive_temporal.config import Settings
from reactive_temporal.connection import ConnectionConfigError, load_connection
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.hosting.runtime import Runtime

CONFIG = AgentConfig(agent_id="strict", model="m")


class NothingSent:
    """A Temporal client that fails any use: whatever is refused with it was never sent."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the client was used ({name}) for input that should be refused")


def agent() -> Agent:
    runtime = Runtime(client=NothingSent(), task_queue="q", offline_model=None)  # type: ignore[arg-type]
    return Agent(CONFIG, runtime)


def builder() -> AgentBuilder:
    return AgentBuilder(settings=Settings())


# -- the builder -------------------------------------------------------------------------------

BUILDER_TYPES: list[tuple[str, Callable[[Any], object], str]] = [
    ("name-bytes", lambda b: b.with_name(b"abc"), "name is text (str), not bytes"),
    ("model-bytes", lambda b: b.with_provider(model=b"gpt"), "model is text (str), not bytes"),
    ("prompt-bytes", lambda b: b.with_system_prompt(b"be brief"), "prompt is text (str)"),
    ("iterations-true", lambda b: b.with_reasoning(max_iterations=True),
     "max_iterations is an int, not bool"),
    ("iterations-string", lambda b: b.with_reasoning(max_iterations="5"),
     "max_iterations is an int, not str '5'"),
    ("iterations-float", lambda b: b.with_reasoning(max_iterations=5.0),
     "max_iterations is an int, not float"),
    ("rationale-string", lambda b: b.with_reasoning(audit_rationale="no"),
     "audit_rationale is a bool, not str"),
    ("tokens-true", lambda b: b.with_budget(tokens=True), "tokens is an int, not bool"),
    ("cost-string", lambda b: b.with_budget(cost="1.5"),
     "cost is a number (int or float), not str"),
    ("timeout-true", lambda b: b.with_budget(timeout=True),
     "timeout is a number (int or float), not bool"),
    ("tool-name-bytes", lambda b: b.with_tools([b"calculator"]),
     "names[0] is text (str), not bytes"),
    ("settings-none", lambda b: b.with_settings(None),
     "settings is a reactive_temporal.config.Settings, not NoneType"),
]  # fmt: skip


@pytest.mark.parametrize("case", BUILDER_TYPES, ids=[c[0] for c in BUILDER_TYPES])
def test_the_builder_refuses_a_wrong_type_naming_the_argument(case):
    _, apply, message = case
    with pytest.raises(TypeError, match=re.escape(message)):
        apply(builder())


@pytest.mark.parametrize(
    ("apply", "message"),
    [
        (lambda b: b.with_budget(cost=math.inf), "cost must be a finite number, not inf"),
        (lambda b: b.with_budget(cost=math.nan), "cost must be a finite number, not nan"),
        (lambda b: b.with_budget(timeout=math.inf), "timeout must be a finite number"),
        (lambda b: b.with_tools(approval_timeout=math.inf), "approval_timeout must be a finite"),
        (lambda b: b.with_system_prompt("caf\udcff"), "prompt is not UTF-8 text"),
    ],
)
def test_the_builder_refuses_no_limit_spelt_inf_and_undecodable_text(apply, message):
    """`cost=inf` was no budget (inf is written as JSON null), `timeout=inf` pydantic's
    "less than or equal to 31622400": None is how to ask for no limit, for both."""
    with pytest.raises(ValueError, match=message):
        apply(builder())


def test_the_builder_still_takes_what_its_signatures_name():
    config = (
        builder()
        .with_name("strict")
        .with_reasoning(max_iterations=7, audit_rationale=True)
        .with_budget(tokens=1_000, cost=2, timeout=30.5)
        .with_tools(["calculator"], approval_timeout=60)
        .config()
    )
    assert (config.max_iterations, config.token_budget, config.cost_budget) == (7, 1_000, 2.0)
    assert (config.timeout_seconds, config.approval_timeout_seconds) == (30.5, 60.0)
    assert builder().with_budget().config().cost_budget is None  # None: no budget


# -- a run's input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task", "options", "error", "message"),
    [
        (b"hi", {}, TypeError, "task is text (str), not bytes"),
        ("\udcff", {}, ValueError, "invalid run: task is not UTF-8 text: '\\udcff'"),
        ("hi", {"max_iterations": True}, TypeError, "max_iterations is an int, not bool"),
        ("hi", {"max_iterations": "5"}, TypeError, "max_iterations is an int, not str"),
        ("hi", {"required_tools": "calc"}, TypeError, "required_tools takes a list of names"),
    ],
)
def test_a_run_s_input_is_held_to_its_types(task, options, error, message):
    with pytest.raises(error, match=re.escape(message)):
        build_run_input(CONFIG, task, **options)


async def test_run_refuses_before_anything_is_sent():
    with pytest.raises(TypeError, match="task is text"):
        await agent().run(b"hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_iterations is an int"):
        await agent().start("hi", max_iterations=True)


# -- chat --------------------------------------------------------------------------------------


async def test_chat_refuses_a_lone_surrogate_as_run_does_before_anything_is_sent():
    """It was sent, and stored as U+FFFD: a message other than the one given."""
    with pytest.raises(ChatError, match="message is not UTF-8 text: 'caf\\\\udcff'"):
        await agent().chat("caf\udcff")
    session = agent().session("s1")  # opened on first use: refused before it is opened
    with pytest.raises(ChatError, match="lone surrogate"):
        await session.chat("\ud800")


@pytest.mark.parametrize(
    ("message", "options", "expected"),
    [
        (b"hi", {}, "message is text (str), not bytes"),
        ("hi", {"max_iterations": True}, "max_iterations is an int, not bool"),
        ("hi", {"max_iterations": "5"}, "max_iterations is an int, not str"),
        ("hi", {"use_tools": "yes"}, "use_tools is a bool, not str"),
    ],
)
async def test_chat_refuses_a_wrong_type_before_anything_is_sent(message, options, expected):
    """A TypeError that is a ChatError too, as chat's refusals of its input have been."""
    with pytest.raises(ChatError, match=re.escape(expected)):
        await agent().chat(message, **options)
    with pytest.raises(TypeError, match=re.escape(expected)):
        await agent().session("s1").chat(message, **options)


def test_a_session_id_that_is_not_text_or_too_long_is_named_cut():
    with pytest.raises(TypeError, match="a session id is text"):
        valid_session_id(b"s1")  # type: ignore[arg-type]
    with pytest.raises(ChatError, match=r"\(2,000 characters\)") as refused:
        valid_session_id("s" * 2_000)
    assert len(str(refused.value)) < 300


# -- waits, resets, decisions ------------------------------------------------------------------


@pytest.mark.parametrize("seconds", [math.nan, -1.0, -math.inf])
async def test_a_wait_for_debriefs_of_nan_or_less_than_0_is_refused_and_forgets_nothing(
    seconds: float,
):
    """nan (and a negative wait) returned [] at once, and the debriefs in flight were
    forgotten: `dispose()` then waited for none of them."""
    waiting = agent()
    waiting._pending_debriefs.add("run-strict-1")
    with pytest.raises(ValueError, match="seconds must be 0 or more"):
        await waiting.wait_for_debriefs(seconds)
    with pytest.raises(ValueError, match="debrief_wait_seconds must be 0 or more"):
        await waiting.dispose(seconds)
    assert waiting._pending_debriefs == {"run-strict-1"}
    assert not waiting.runtime.closed
    with pytest.raises(TypeError, match="seconds is a number"):
        await waiting.wait_for_debriefs(True)
    assert await agent().wait_for_debriefs(math.inf) == []  # for ever; none in flight here


@pytest.mark.parametrize(
    ("reason", "error", "message"),
    [
        (5, TypeError, "an agent reset's reason is a string, not int"),
        ("r" * 100_000, ValueError, "the reason is 100,000 characters; the limit is 500"),
        ("a\x00b", ValueError, "NUL byte"),
        ("\udcff", ValueError, "the reason is not UTF-8 text"),
    ],
)
async def test_a_reset_s_reason_is_held_to_a_cancel_s_rules(reason, error, message):
    """`5` was recorded as "5", 100,000 characters were cut to 1,000 without a word."""
    with pytest.raises(error, match=message):
        await agent().reset_entity(reason=reason)


async def test_a_call_id_no_waiting_call_can_have_is_refused_cut():
    """A 2,000-character id reached the run, which echoed it whole."""
    with pytest.raises(ValueError, match=r"unknown call id 'cccc.*… \(2,000 characters\)") as e:
        await agent().approve("run-strict-1", "c" * 2_000)
    assert len(str(e.value)) < 300
    with pytest.raises(TypeError, match="a call id is a string, not bytes"):
        await agent().deny("run-strict-1", b"call-1", reason="no")  # type: ignore[arg-type]


async def test_a_cancel_s_reason_with_a_lone_surrogate_is_refused():
    with pytest.raises(ValueError, match="the reason is not UTF-8 text"):
        await agent().cancel("run-strict-1", reason="\udcff")


# -- paths -------------------------------------------------------------------------------------


def test_an_empty_path_is_named_as_empty():
    """Typed as a Path, "" was "." (`replay --file ""`: "cannot read history file .")."""
    with pytest.raises(typer.BadParameter, match="the path is empty"):
        path_given("")
    assert path_given("h.json") == "h.json" and path_given(None) is None


def test_a_temporal_config_file_that_is_not_a_file_says_what_it_is(tmp_path: Path):
    """A directory or a FIFO was "does not exist"."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in [
        (tmp_path, "is a directory, not a file"),
        (fifo, "is a FIFO (named pipe), not a file"),
        (tmp_path / "missing.toml", "does not exist"),
    ]:
        with pytest.raises(ConnectionConfigError, match=re.escape(f"={path} {what}")):
            load_connection(environ={"TEMPORAL_CONFIG_FILE": str(path)})
