"""What a reset agent entity hands to the fresh one (reactive_temporal/api/entity_carry.py), and
what chat says of a stuck one (reactive_temporal/api/entity_wedge.py), without Temporal.

The fresh entity starts from the stuck run's start state, held to the bounds it must keep:
the last configuration within them (not the one that broke it), its last run, its ended
sessions; never the sizes of sessions saved turn by turn (the next turn would be written over
saved messages), never what made it stuck.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reactive_temporal.api.entity_carry import Told, carried_state
from reactive_temporal.api.entity_wedge import EntityWedged, wedge_message, wedged
from reactive_temporal.contracts.debrief import AgentDebrief, ToolUsage
from reactive_temporal.contracts.entity import (
    AgentState,
    AnsweredTurn,
    ChatMessage,
    ChatReply,
    SessionMeta,
)
from reactive_temporal.contracts.retrying import WORKFLOW_TASK, RetryingStep
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.limits import MAX_TOOL_NAMES, json_bytes
from workflows.entity_inputs import STATE_MAX_BYTES
from workflows.entity_sessions import KEEP_ENDED_SESSIONS

T0 = datetime(2026, 12, 1, tzinfo=UTC)
GIVEN = AgentConfig(agent_id="pirate", model="cli-default")
OWN = AgentConfig(agent_id="pirate", model="gpt-x", system_prompt="You are a pirate.")
POISON = AgentConfig(agent_id="pirate", model="gpt-x", tools=["t"] * (MAX_TOOL_NAMES + 1))


def message(role: str, text: str) -> ChatMessage:
    return ChatMessage(role=role, content=text, timestamp=T0)  # type: ignore[arg-type]


def test_the_last_configuration_within_bounds_is_carried_with_when_it_was_set():
    later = OWN.model_copy(update={"system_prompt": "You are a parrot."})
    told = [Told(T0, later), Told(T0 + timedelta(minutes=1), POISON)]
    carried = carried_state(AgentState(agent=OWN), told, GIVEN)
    assert carried.state.agent == later
    assert carried.state.agent_set_at == T0  # a run that started after it brings its own
    assert carried.kept == ["the configuration its builder sent at 2026-12-01 00:00:00 UTC"]
    assert carried.left == [
        f"the configuration sent at 2026-12-01 00:01:00 UTC: tools lists {MAX_TOOL_NAMES + 1} "
        f"names; the limit is {MAX_TOOL_NAMES}"
    ]


def test_with_no_configuration_sent_the_run_s_own_is_carried():
    state = AgentState(agent=OWN, agent_set_at=T0)
    told = [Told(T0, None, "it could not be read (bad JSON)")]
    carried = carried_state(state, told, GIVEN)
    assert (carried.state.agent, carried.state.agent_set_at) == (OWN, T0)
    assert carried.left == [
        "the configuration sent at 2026-12-01 00:00:00 UTC: it could not be read (bad JSON)"
    ]


def test_a_configuration_for_another_agent_is_not_taken():
    other = OWN.model_copy(update={"agent_id": "parrot"})
    carried = carried_state(AgentState(agent=OWN), [Told(T0, other)], GIVEN)
    assert carried.state.agent == OWN


def test_a_configuration_carried_in_past_its_bounds_gives_way_to_the_one_given():
    """An entity that continued as new holding it: every run of it is stuck."""
    carried = carried_state(AgentState(agent=POISON), [], GIVEN)
    assert carried.state.agent == GIVEN and carried.state.agent_set_at is None
    assert carried.kept == ["the configuration given"]
    assert carried.left[0].startswith("its configuration, for the one given: tools lists")


def test_a_state_that_could_not_be_read_starts_from_the_configuration_given():
    carried = carried_state(None, [Told(T0, OWN)], GIVEN)
    assert carried.state == AgentState(agent=GIVEN)


def test_the_last_run_is_carried_within_bounds():
    nan = AgentDebrief(
        outcome="success",
        summary="Four.",
        tools_used=[ToolUsage(name="calculator", calls=1, success_rate=float("nan"))],
    )
    state = AgentState(
        agent=OWN,
        last_run_id="run-pirate-1",
        last_run_started_at=T0,
        last_debrief=nan,
        last_observations=[f"[Tool result]: {n}" for n in range(40)],
    )
    carried = carried_state(state, [], GIVEN)
    assert (carried.state.last_run_id, carried.state.last_run_started_at) == ("run-pirate-1", T0)
    assert carried.state.last_debrief is None  # NaN does not read back: the run would fail
    assert len(carried.state.last_observations) < 40
    assert "its last run, run-pirate-1" in carried.kept
    assert carried.left[0].startswith("its last run's debrief: tools_used.0.success_rate")


def test_a_last_run_id_no_workflow_can_have_is_not_carried():
    state = AgentState(agent=OWN, last_run_id="\x01" * 2_000, last_run_started_at=T0)
    carried = carried_state(state, [], GIVEN)
    assert carried.state.last_run_id is None
    assert carried.left == ["its last run: run id is 2,000 bytes; a workflow id is at most 1,000"]


def test_sessions_saved_turn_by_turn_are_read_back_not_carried():
    """Their sizes say where the next turn is written; the run's start state is older than the
    turns it took: carried, the next turn would be written over saved messages."""
    state = AgentState(
        agent=OWN,
        sessions={"default": [message("user", "hi")], "s1": [message("user", "hello")]},
        session_meta={"default": SessionMeta(total=1), "s1": SessionMeta(total=1)},
        ended_sessions=["s0"],
        chat_turns=7,
    )
    carried = carried_state(state, [], GIVEN)
    assert carried.state.sessions == {} and carried.state.session_meta == {}
    assert (carried.state.ended_sessions, carried.state.chat_turns) == (["s0"], 7)
    assert "the open sessions' windows (each is read back from Postgres)" in carried.left


def test_sessions_held_whole_before_they_were_saved_turn_by_turn_are_carried():
    """Not in Postgres yet: the fresh entity saves them as it starts (`adopt_unsaved`)."""
    whole = [message("user", "hello"), message("assistant", "ahoy")]
    state = AgentState(
        agent=OWN,
        sessions={"s1": whole, "s2": [message("user", "hi")], "default": []},
        session_meta={"s2": SessionMeta(total=1)},
    )
    carried = carried_state(state, [], GIVEN)
    assert carried.state.sessions == {"s1": whole} and carried.state.session_meta == {}
    assert "1 sessions held whole, saved as the fresh entity starts" in carried.kept


def test_what_is_read_again_or_lasts_moments_is_left():
    reply = ChatReply(message="ahoy", routed_via="direct-llm")
    state = AgentState(
        agent=OWN,
        active_runs={"run-pirate-2": T0},
        answered_turns=[AnsweredTurn(update_id="u1", at=T0, reply=reply)],
    )
    carried = carried_state(state, [], GIVEN)
    assert (carried.state.active_runs, carried.state.answered_turns) == ({}, [])
    assert carried.left == [
        "the runs in progress (found in Temporal's visibility)",
        "the replies remembered for a chat turn sent twice",
    ]


def test_the_carried_state_is_within_the_state_s_budget():
    huge = [message("user", "\x01" * 20_000) for _ in range(30)]  # 3.6 MB as JSON
    state = AgentState(agent=OWN, sessions={"s1": huge})
    carried = carried_state(state, [], GIVEN)
    assert json_bytes(carried.state) <= STATE_MAX_BYTES
    assert carried.left[-1].startswith("the sessions held whole (s1)")


def test_ended_sessions_are_carried_as_the_entity_keeps_them():
    """The latest KEEP_ENDED_SESSIONS ids a session can have. A run started by hand with
    megabytes of them (`temporal workflow start --input`, which nothing checks) was carried
    whole: the fresh entity's input was past the payload budget, and the reset, the one way
    out, refused ('Nothing was done')."""
    many = [f"sess_{n:012d}_{n % 999_999:06x}" for n in range(70_000)]  # 1.9 MB as JSON
    hostile = ["x" * 10_000, "a\x00b", "../x", ""]
    state = AgentState(agent=OWN, ended_sessions=[*hostile, *many, *hostile])
    carried = carried_state(state, [], GIVEN)
    assert carried.state.ended_sessions == many[-KEEP_ENDED_SESSIONS:]
    assert json_bytes(carried.state) <= STATE_MAX_BYTES
    assert carried.left == [
        f"{70_000 - KEEP_ENDED_SESSIONS + 8:,} of its ended sessions' ids (past the latest "
        f"{KEEP_ENDED_SESSIONS}, or no session's id): a session is reopened from Postgres by id"
    ]


# -- what chat says of a stuck entity -----------------------------------------------------------

FAILING = RetryingStep(
    step=WORKFLOW_TASK,
    attempt=4,
    since=T0,
    last_failure="payloads too large: PayloadsTooLarge: [TMPRL1103] Attempted to upload.",
    cause="payloads_too_large",
)


def test_a_stuck_entity_is_named_with_what_fails_and_the_way_out():
    said = wedge_message("pirate", "agent-pirate", FAILING, sent=False)
    assert said.startswith(
        "agent pirate's chat workflow (agent-pirate) is stuck: its workflow task keeps failing "
        "(attempt 4, failing since 2026-12-01 00:00:00 UTC): payloads too large: "
        "PayloadsTooLarge: [TMPRL1103] Attempted to upload. It takes no chat turn until it is "
        "reset: `python starter.py agent reset pirate` ends it"
    )
    assert said.endswith("The request was not sent")
    assert wedge_message("pirate", "agent-pirate", FAILING, sent=True).endswith(
        "The request was sent and is dropped when the agent is reset: send it again then"
    )


def test_nondeterminism_names_the_roll_back_first():
    failing = FAILING.model_copy(update={"cause": "non_deterministic_error"})
    said = wedge_message("a b", "agent-a b", failing, sent=False)
    assert "if a deploy changed the workflow's code, roll it back" in said
    assert "otherwise `python starter.py agent reset 'a b'`" in said


@pytest.mark.parametrize(
    ("retrying", "stuck"),
    [
        (None, False),
        (FAILING, True),
        (FAILING.model_copy(update={"cause": "timed_out"}), False),  # a busy worker's
        (FAILING.model_copy(update={"step": "llm_step"}), False),
    ],
)
def test_only_a_failing_workflow_task_is_stuck(retrying: RetryingStep | None, stuck: bool):
    assert wedged(retrying) is stuck


def test_a_stuck_entity_is_a_chat_error_carrying_what_fails():
    err = EntityWedged("pirate", "agent-pirate", FAILING, sent=True)
    assert isinstance(err, ValueError) and (err.agent_id, err.retrying) == ("pirate", FAILING)
