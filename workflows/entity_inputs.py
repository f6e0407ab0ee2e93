"""What the agent entity keeps of what it is told, held to bounds: no signal can wedge it.

Its signals (a run's news, `run_started` and `run_finished`; a builder's `configure`; a rich
`debrief_ready`) can be sent by hand by anyone who may signal its workflow (`temporal
workflow signal --input …`), and the entity keeps what they carry in its state. That state
goes whole into its continue-as-new input and feeds every later chat turn's activity input,
and Temporal refuses a payload over 2 MiB: an oversized activity or continue-as-new input
fails the workflow task, on every retry, and the agent never answers chat again. A value
that cannot make the trip breaks it one run later: a NaN success rate is written `null`, the
next run's input does not read back (no number), and that run fails (ValidationError is one
of its failure types): the agent's next request starts a new entity, its configuration, its
last run and its remembered replies lost.

So an entity run with the `entity-inputs-bounded` patch keeps (workflows/entity_news.py):
- a run's news only for a run id a workflow can have (RUN_ID_MAX_BYTES);
- a configuration only within the builders' limits (`limits.agent_config_problem`, which
  holds it to `limits.AGENT_CONFIG_MAX_BYTES` as JSON), and one that survives the trip:
  else it is ignored (a run's news then leaves the agent's configuration as it was);
- a debrief only within DEBRIEF_MAX_BYTES (more than a run makes), and one that survives
  the trip: else a rich one is ignored (the instant one stands) and a run's news keeps none;
- a run's observations as far as chat reads them (`chat_rules.cap_observations`, the last
  run's latest KEEP_OBSERVATIONS): clipped, what the model is told does not change;
- runs in progress: the ACTIVE_RUNS_MAX told last;
- and, as it continues as new, a state within STATE_MAX_BYTES: `fitted` sheds what the
  entity reads again (its last run, from Postgres with the next chat turn) or keeps for
  moments (replies of the last two minutes), in that order.

The budget, by construction: the continue-as-new input is `fitted` into STATE_MAX_BYTES
(1.5 MB, a quarter under Temporal's 2 MiB); what it cannot shed, the agent's configuration
(400 KB at most) and the session windows (`session_window`: 192 KB of windows, and the ids
and sizes of at most 200 open and 200 ended sessions), comes to about 0.8 MB. A chat turn's
activity input holds the configuration (400 KB at most, its system prompt moved into the
context), the last run's context (`limits.CHAT_CONTEXT_MAX_CHARS`, 96 KB as JSON at worst),
the session's window (8,000 characters) and the message (20,000 characters): under 0.8 MB,
and a tool-path run's input as much (the chat validator holds a turn's own configuration to
the same bounds), with what up to five runs in progress say of themselves besides (their
last observation, bounded by the run's own limits). Sizes are JSON bytes, as payloads weigh
them (a control character is six).

Pure functions, tested in milliseconds; none raises, whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import AgentState
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.limits import AGENT_CONFIG_MAX_BYTES, agent_config_problem, json_bytes
from workflows.chat_rules import KEEP_OBSERVATIONS, cap_observations

RUN_ID_MAX_BYTES = 1_000
"""A run id as UTF-8: Temporal's longest workflow id (`limit.maxIDLength`). A longer one names
no run; its news is ignored."""
ACTIVE_RUNS_MAX = 32
"""Runs in progress the entity keeps, the latest told. Only entity runs from before
live-runs-from-visibility read them (a chat turn reads each one's progress, one activity
apiece, and forgets those no longer running); every run since finds its runs in Temporal's
visibility, the five started last, and carries these unread."""
DEBRIEF_MAX_BYTES = 1_200_000
"""The last run's debrief as JSON. A run's own is smaller: its synthesized texts
(`limits.SYNTHESIS_TOTAL_MAX_CHARS`), its records of each kind (`limits.RECORDS_MAX_BYTES`) and
its answer's summary and confidence at their limits, each twice (the fields and the markdown),
came to 0.82 MB, of control characters and emoji. The state's budget does not rest on it:
`fitted` sheds the debrief when the state is past its own."""
STATE_MAX_BYTES = 1_500_000
"""The entity's state as JSON, as it continues as new (its input is the state and three small
fields)."""


def run_id_problem(run_id: str) -> str | None:
    """Why a run id names no run (it is too long for Temporal), or None."""
    size = len(run_id.encode("utf-8", "surrogatepass"))
    if size <= RUN_ID_MAX_BYTES:
        return None
    return f"run id is {size:,} bytes; a workflow id is at most {RUN_ID_MAX_BYTES:,}"


def agent_problem(config: AgentConfig) -> str | None:
    """Why the entity does not keep this configuration, or None: past the builders' limits
    (AGENT_CONFIG_MAX_BYTES among them), or not surviving the trip."""
    return agent_config_problem(config) or carried_problem(config, AGENT_CONFIG_MAX_BYTES)


def turn_agent_problem(agent: AgentConfig | None) -> str | None:
    """Why a chat turn's own configuration is refused past the builders' limits (the chat
    validator checks those first), or None: it travels in the turn's activity input as the
    agent's own does, so it is held to the same bounds."""
    if agent is None or (problem := carried_problem(agent, AGENT_CONFIG_MAX_BYTES)) is None:
        return None
    return f"invalid agent configuration: {problem}"


def debrief_problem(debrief: AgentDebrief) -> str | None:
    """Why the entity does not keep this debrief, or None."""
    return carried_problem(debrief, DEBRIEF_MAX_BYTES)


def carried_problem(value: BaseModel, max_bytes: int) -> str | None:
    """Why `value` cannot travel in the entity's payloads, or None: over `max_bytes` as JSON,
    or not read back as it is written (`NaN` is written `null`, which no number field takes:
    the run that reads it fails its first task)."""
    try:
        data = to_json(value)
    except (PydanticSerializationError, ValueError) as err:
        return f"it cannot be written as JSON ({str(err)[:200]})"
    if len(data) > max_bytes:
        return f"it is {len(data):,} bytes as JSON; the limit is {max_bytes:,}"
    try:
        type(value).model_validate_json(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "it"
        return f"{where} would not be read back as it is written: {first['msg']}"
    return None


def kept_observations(observations: Sequence[str]) -> list[str]:
    """What chat reads of a run's observations (`build_context_summary` reads no more): the
    whole ones that fit its budget and the start of the next, the latest KEEP_OBSERVATIONS
    at most, as a run keeps them."""
    return cap_observations(list(observations[-KEEP_OBSERVATIONS:]))


def with_run(
    active: Mapping[str, datetime], run_id: str, started_at: datetime
) -> dict[str, datetime]:
    """`active` with this run told last, the runs told first dropped past ACTIVE_RUNS_MAX (in
    the order the entity was told, so no start time sent by hand keeps a run for good)."""
    runs = {r: at for r, at in active.items() if r != run_id}
    runs[run_id] = started_at
    return latest_runs(runs)


def latest_runs(active: Mapping[str, datetime]) -> dict[str, datetime]:
    """The ACTIVE_RUNS_MAX runs told last whose ids name a run."""
    named = [(r, at) for r, at in active.items() if run_id_problem(r) is None]
    return dict(named[-ACTIVE_RUNS_MAX:])


def fitted(state: AgentState, max_bytes: int = STATE_MAX_BYTES) -> tuple[AgentState, list[str]]:
    """`state` within `max_bytes` as JSON, and what was shed for it, in this order: the runs in
    progress (no entity run since live-runs-from-visibility reads them), the last run's
    observations and debrief (a chat turn reads the last run from Postgres again), and the
    replies remembered, oldest first (a turn sent again answered twice). What remains (the
    configuration and the session windows, bounded by their own rules) is far under it."""
    if json_bytes(state) <= max_bytes:
        return state, []
    shed: list[str] = []
    for what, update in (
        ("the runs in progress", {"active_runs": {}}),
        ("the last run's observations", {"last_observations": []}),
        ("the last run's debrief", {"last_debrief": None}),
    ):
        state = state.model_copy(update=update)
        shed.append(what)
        if json_bytes(state) <= max_bytes:
            return state, shed
    turns = list(state.answered_turns)
    dropped = 0
    while turns and json_bytes(state) > max_bytes:
        turns = turns[1:]
        dropped += 1
        state = state.model_copy(update={"answered_turns": turns})
    if dropped:
        shed.append(f"{dropped} of the replies remembered")
    return state, shed
