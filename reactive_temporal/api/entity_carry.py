"""What a reset agent entity hands to the fresh one: its run's start state, within bounds.

`starter.py agent reset` (api/entity_reset.py) starts the fresh entity with it. A stuck
entity cannot be asked anything (its workflow task fails before a query is answered), so
what it knew is read from its run's history: the state its run was given (as the run before
it continued as new, or its starter, left it) and the configurations builders sent it since.
What Postgres keeps is not carried, it is read again:
- the last run: a chat turn reads it from Postgres (`agent_last_runs`), and takes it when it
  is newer than what the state holds; the state's own is carried when it is within bounds
  (an agent whose last run ended before runs kept themselves there has only that one);
- sessions saved turn by turn (`sessions-in-postgres`): their windows and sizes are NOT
  carried. A session's size tells where its next turn is written, and a run's start state
  is older than the turns taken since: carried, the next turn went over saved messages
  (`save_session` writes a position again). A fresh entity reads each session back when it
  is next used. Sessions held whole (an entity run from before that patch kept them so, and
  carried them on until a run saved them) are carried, and the fresh entity saves them as it
  starts (`adopt_unsaved`); the turns such a run took since it began are only in its history
  (`api/entity_reset.py` refuses to lose them unasked).

What is left out: the runs in progress (found in Temporal's visibility), the replies
remembered for a turn sent twice (two minutes' worth), and whatever is past the bounds
(`workflows/entity_inputs.py`), which is what made most entities stuck.

Pure functions: no I/O, tested in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reactive_temporal.contracts.entity import SESSION_ID_PATTERN, AgentState
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.limits import json_bytes
from workflows.entity_inputs import (
    STATE_MAX_BYTES,
    agent_problem,
    debrief_problem,
    fitted,
    kept_observations,
    run_id_problem,
)
from workflows.entity_sessions import KEEP_ENDED_SESSIONS

SESSION_ID = re.compile(SESSION_ID_PATTERN)


@dataclass(frozen=True)
class Told:
    """A `configure` signal the stuck run was sent, as its history holds it."""

    at: datetime
    config: AgentConfig | None = None
    """None when it could not be read (`problem` says why)."""
    problem: str | None = None


@dataclass
class Carried:
    """The fresh entity's state, what it holds and what it does not (each in words)."""

    state: AgentState
    kept: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    own_config: bool = False
    """`state.agent` is the agent's own (its builder's, or the run's), not the one given."""


def carried_state(start: AgentState | None, told: Sequence[Told], given: AgentConfig) -> Carried:
    """The state a fresh entity of `given`'s agent starts with.

    From the stuck run's `start` state (None: it could not be read) and the configurations it
    was `told` since. `given` is the configuration of whoever resets it, taken when the
    agent's own cannot be. A session saved turn by turn has its size in the state
    (`session_meta`); one without was held whole, and is not in Postgres yet.
    """
    carried = Carried(AgentState(agent=given))
    if start is None:
        carried.kept.append("the configuration given (the run's own state could not be read)")
        return carried
    _configuration(carried, start, told, given)
    _last_run(carried, start)
    state = carried.state
    state.chat_turns = start.chat_turns
    _ended_sessions(carried, start.ended_sessions)
    whole = {
        sid: list(messages)
        for sid, messages in start.sessions.items()
        if messages and sid not in start.session_meta
    }
    if whole:  # held whole, not in Postgres yet: the fresh entity saves them as it starts
        state.sessions = whole
        carried.kept.append(f"{len(whole)} sessions held whole, saved as the fresh entity starts")
    if start.session_meta:
        carried.left.append("the open sessions' windows (each is read back from Postgres)")
    if start.active_runs:
        carried.left.append("the runs in progress (found in Temporal's visibility)")
    if start.answered_turns:
        carried.left.append("the replies remembered for a chat turn sent twice")
    return _within_budget(carried)


def _configuration(
    carried: Carried, start: AgentState, told: Sequence[Told], given: AgentConfig
) -> None:
    """The last configuration within bounds.

    A builder's `configure` since the run began, else the one the run began with, else `given`.
    """
    state = carried.state
    for signal in reversed(told):
        if signal.config is not None and signal.config.agent_id != given.agent_id:
            continue  # sent to the wrong agent: the entity ignored it too
        problem = signal.problem or (agent_problem(signal.config) if signal.config else None)
        when = f"{signal.at:%Y-%m-%d %H:%M:%S} UTC"
        if problem is not None:
            carried.left.append(f"the configuration sent at {when}: {problem}")
            continue
        state.agent, state.agent_set_at = signal.config or given, signal.at
        carried.own_config = signal.config is not None
        carried.kept.append(f"the configuration its builder sent at {when}")
        return
    if (problem := agent_problem(start.agent)) is not None:
        carried.left.append(f"its configuration, for the one given: {problem}")
        carried.kept.append("the configuration given")
        return
    state.agent, state.agent_set_at = start.agent, start.agent_set_at
    carried.own_config = True
    carried.kept.append("its configuration")


def _ended_sessions(carried: Carried, ended: Sequence[str]) -> None:
    """The latest KEEP_ENDED_SESSIONS ids a session can have, as the entity keeps them.

    Only what chat says of a session not open (ended, or unknown) turns on them, and either is
    reopened by id; a run started by hand can hold megabytes of them, which the budget cannot
    shed (`_within_budget`).
    """
    kept = [sid for sid in ended if SESSION_ID.fullmatch(sid)][-KEEP_ENDED_SESSIONS:]
    carried.state.ended_sessions = kept
    if len(kept) < len(ended):
        carried.left.append(
            f"{len(ended) - len(kept):,} of its ended sessions' ids (past the latest "
            f"{KEEP_ENDED_SESSIONS}, or no session's id): a session is reopened from Postgres by id"
        )


def _last_run(carried: Carried, start: AgentState) -> None:
    """The last run the state knew, within bounds (a chat turn reads Postgres's anyway)."""
    if start.last_run_id is None:
        return
    if (problem := run_id_problem(start.last_run_id)) is not None:
        carried.left.append(f"its last run: {problem}")
        return
    state = carried.state
    state.last_run_id = start.last_run_id
    state.last_run_started_at = start.last_run_started_at
    state.last_observations = kept_observations(start.last_observations)
    debrief = start.last_debrief
    if debrief is not None and (problem := debrief_problem(debrief)) is not None:
        carried.left.append(f"its last run's debrief: {problem}")
        debrief = None
    state.last_debrief = debrief
    carried.kept.append(f"its last run, {start.last_run_id[:200]}")


def _within_budget(carried: Carried) -> Carried:
    """The state within STATE_MAX_BYTES, as an entity continuing as new keeps it."""
    state, shed = fitted(carried.state)
    carried.left += [f"{what} (past the state's budget)" for what in shed]
    if state.sessions and json_bytes(state) > STATE_MAX_BYTES:
        carried.left.append(
            f"the sessions held whole ({', '.join(sorted(state.sessions)[:20])}): past the "
            "state's budget"
        )
        state = state.model_copy(update={"sessions": {}})
    carried.state = state
    return carried
