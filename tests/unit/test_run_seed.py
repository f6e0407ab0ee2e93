"""How a run begins (activities/run_seed.py): the pure parts, no Postgres."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from activities.run_seed import resolve_tools, seed_length, seed_messages
from reactive_temporal.contracts.run import AgentConfig, Message, RunSeed, SeqMessage
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import tool


@tool(timeout_seconds=5)
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool(approve=True)
def pay(amount: int) -> str:
    """Pay (a person approves each call)."""
    return str(amount)


REGISTRY = ToolRegistry([lookup, pay])


def test_a_seed_takes_each_of_its_fields_from_the_agent():
    """RunSeed.of copies the agent's fields by name: one renamed on either side would leave
    the seed its default silently."""
    assert set(RunSeed.model_fields) - {"task"} <= set(AgentConfig.model_fields)
    agent = AgentConfig(
        agent_id="a", model="m", system_prompt="be brief", tools=["lookup"],
        required_tools=["lookup"], approve_tools=["all"], audit_rationale=True, memory=False,
    )  # fmt: skip
    seed = RunSeed.of("the task", agent)
    assert seed.task == "the task"
    for name in set(RunSeed.model_fields) - {"task"}:
        assert getattr(seed, name) == getattr(agent, name), name


def test_the_tools_are_the_agents_then_its_required_ones_once_each():
    seed = RunSeed(task="t", agent_id="a", tools=["lookup"], required_tools=["pay", "lookup"])
    prepared = resolve_tools(seed, REGISTRY)
    assert prepared.tool_names == ["lookup", "pay"]
    assert prepared.tool_timeouts == {"lookup": 5, "pay": 60}
    assert prepared.approval_tools == ["pay"]  # marked @tool(approve=True)
    every = resolve_tools(RunSeed(task="t", agent_id="a", approve_tools=["all"]), REGISTRY)
    assert every.tool_names == ["lookup", "pay"]  # tools=None: every tool of the worker


@pytest.mark.parametrize(
    "config",
    [{"tools": ["lookup", "teleport"]}, {"required_tools": ["teleport"]},
     {"approve_tools": ["teleport"]}],
)  # fmt: skip
def test_a_tool_the_worker_lacks_refuses_the_run(config: dict[str, list[str]]):
    with pytest.raises(ApplicationError, match="does not have: teleport") as refused:
        resolve_tools(RunSeed(task="t", agent_id="a", **config), REGISTRY)
    assert refused.value.type == "UnknownToolError" and refused.value.non_retryable


def test_the_seed_and_where_the_reply_goes():
    seed = RunSeed(task="the task", agent_id="a")
    plain = seed_messages(seed, None)
    assert [(e.seq, e.message.role) for e in plain] == [(0, "system"), (1, "user")]
    with_notes = seed_messages(seed, "Notes from earlier runs.")
    assert [e.message.content for e in with_notes][1:] == ["the task", "Notes from earlier runs."]
    assert seed_length(plain) == 2 and seed_length(with_notes) == 3 and seed_length([]) == 0
    reply = SeqMessage(seq=3, message=Message(role="assistant", content="on it"))
    later = SeqMessage(seq=4, message=Message(role="user", content="a nudge"))
    assert seed_length([*with_notes, reply, later]) == 3
