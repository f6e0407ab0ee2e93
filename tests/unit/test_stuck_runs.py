"""What `agent reset` reads of a stuck entity run's history (reactive_temporal/api/entity_reset.py
`stuck_run`), on committed histories of entity runs from this release and before it.

The fresh entity starts from the run's start state and the configurations it was sent since;
whether the run saved its sessions turn by turn (its patch markers, or the bundle in its
input) tells whether the chat turns it took are in Postgres: a run from before
`sessions-in-postgres` held them in its state only, and a reset would lose them.
"""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory

from reactive_temporal.api.entity_carry import carried_state
from reactive_temporal.api.entity_reset import stuck_run
from reactive_temporal.api.replay import load_history_file
from reactive_temporal.codec import project_data_converter
from reactive_temporal.contracts.run import AgentConfig

HISTORIES = Path(__file__).parents[1] / "histories"


def history(name: str) -> WorkflowHistory:
    return load_history_file(HISTORIES / f"{name}.json")


async def test_a_run_from_before_sessions_were_saved_holds_its_turns_alone():
    run = await stuck_run(history("chat_session_continue_as_new").events, project_data_converter)
    assert (run.saved_per_turn, run.chat_turns) == (False, 2)
    assert run.start is not None and run.start_problem is None


async def test_a_run_that_asked_the_patches_saves_its_turns():
    run = await stuck_run(history("chat_routing").events, project_data_converter)
    assert (run.saved_per_turn, run.chat_turns) == (True, 3)


async def test_a_run_started_with_the_bundle_saves_its_turns_without_a_marker():
    events = history("chat_session_continue_as_new_entity_unasked").events
    run = await stuck_run(events, project_data_converter)
    assert run.saved_per_turn and run.start is not None
    assert run.start.patch_bundle == "entity-patches-2026-12"


async def test_the_configurations_sent_are_read_and_held_to_bounds():
    """The recorded run was sent a configuration of 300 tools by hand (past the builders' 256)."""
    run = await stuck_run(history("entity_inputs_bounded").events, project_data_converter)
    assert [len(t.config.tools or []) for t in run.told if t.config] == [300]
    assert run.start is not None
    own = run.start.state.agent
    given = AgentConfig(agent_id=own.agent_id, model="cli-default")
    carried = carried_state(run.start.state, run.told, given)
    assert carried.state.agent == own
    assert carried.left[0].endswith("tools lists 300 names; the limit is 256")


async def test_a_start_state_that_does_not_read_is_said_not_raised():
    recorded = history("chat_routing")
    payload = recorded.events[0].workflow_execution_started_event_attributes.input.payloads[0]
    data = json.loads(payload.data)
    data["state"]["chat_turns"] = "many"
    payload.data = json.dumps(data).encode()
    run = await stuck_run(recorded.events, project_data_converter)
    assert run.start is None
    assert run.start_problem is not None
    assert run.start_problem.startswith("it could not be read (")
    assert "chat_turns" in run.start_problem
