"""What the agent entity keeps of its signals, held to bounds (workflows/entity_inputs.py, the
handlers in workflows/entity_news.py), without Temporal.

Anyone who may signal the agent's workflow can send `run_started`, `run_finished`,
`configure` and `debrief_ready` by hand, and the entity keeps what they carry: in its
continue-as-new input and in every later chat turn's activity input. Past Temporal's 2 MiB, or
holding a value that does not read back (NaN is written `null`), such an input fails the
workflow task on every retry and the agent never answers chat again. An entity run with the
`entity-inputs-bounded` patch keeps them within a budget; one from before keeps them whole.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from temporalio import workflow

from reactive_temporal.contracts.debrief import (
    AgentDebrief,
    DebriefMetrics,
    SynthesisFields,
    SynthesisResult,
    SynthesisTokens,
    ToolUsage,
)
from reactive_temporal.contracts.entity import (
    AgentState,
    AgentWorkflowInput,
    AnsweredTurn,
    ChatMessage,
    ChatReply,
    DebriefReady,
    RunFinished,
    RunStarted,
    SessionMeta,
)
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
from reactive_temporal.limits import (
    ANSWER_MAX_CHARS,
    MAX_TOOL_NAMES,
    SYNTHESIS_TEXT_MAX_CHARS,
    SYSTEM_PROMPT_MAX_CHARS,
    agent_config_problem,
    bound_answer,
    bound_synthesis,
)
from reactive_temporal.session_window import MAX_OPEN_SESSIONS, STATE_WINDOW_BYTES, window_bytes
from tests.support.hostile import (
    HEAVIEST_ANSWER,
    PAYLOAD_MAX_BYTES,
    heaviest_run,
    hostile_floats,
    json_bytes,
    sized,
    storable_text,
)
from workflows import chat_rules, debrief_rules
from workflows.entity_chat import ChatPaths
from workflows.entity_inputs import (
    ACTIVE_RUNS_MAX,
    AGENT_CONFIG_MAX_BYTES,
    DEBRIEF_MAX_BYTES,
    RUN_ID_MAX_BYTES,
    STATE_MAX_BYTES,
    agent_problem,
    debrief_problem,
    fitted,
    kept_observations,
    latest_runs,
    run_id_problem,
    turn_agent_problem,
    with_run,
)
from workflows.entity_news import RunNews
from workflows.entity_sessions import KEEP_ENDED_SESSIONS

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
AGENT = AgentConfig(agent_id="a", model="m")


class Entity(RunNews):
    """The agent entity's signal handlers as AgentWorkflow has them, without Temporal."""

    def __init__(self, state: AgentState, *, bounds: bool) -> None:
        self.state = state
        self._bounds_inputs = bounds


@pytest.fixture(autouse=True)
def outside_temporal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(workflow, "logger", logging.getLogger("entity-inputs-test"))
    monkeypatch.setattr(workflow, "now", lambda: T0)
    yield


def carried(state: AgentState) -> AgentWorkflowInput | None:
    """The next run's input as that run reads it, or None where it cannot (Temporal refuses
    it past 2 MiB, or it does not read back: the next run's first task fails for good)."""
    data = AgentWorkflowInput(state=state).model_dump_json().encode()
    if len(data) > PAYLOAD_MAX_BYTES:
        return None
    try:
        return AgentWorkflowInput.model_validate_json(data)
    except ValidationError:
        return None


# -- each bound ---------------------------------------------------------------------------------


def test_a_run_id_longer_than_any_workflow_id_names_no_run():
    assert run_id_problem("r" * RUN_ID_MAX_BYTES) is None
    assert run_id_problem("é" * (RUN_ID_MAX_BYTES // 2)) is None  # two bytes each
    assert run_id_problem("é" * (RUN_ID_MAX_BYTES // 2 + 1)) == (
        "run id is 1,002 bytes; a workflow id is at most 1,000"
    )
    assert run_id_problem("\ud800" * 600) is not None  # never raises, whatever it holds


@pytest.mark.parametrize(
    ("update", "problem"),
    [
        ({"tools": ["t"] * 300}, "tools lists 300 names; the limit is 256"),
        ({"debrief_model": "m" * 201}, "debrief_model is over 200 characters"),
        (
            {"system_prompt": "p" * (SYSTEM_PROMPT_MAX_CHARS + 1)},
            "system_prompt is 100,001 characters; the limit is 100,000",
        ),
        (  # within the builders' characters, not their bytes: 600 KB of control characters
            {"system_prompt": "\x01" * SYSTEM_PROMPT_MAX_CHARS},
            "the configuration is 600,438 bytes as JSON; the limit is 400,000 (its system "
            "prompt weighs most; a control character takes six bytes)",
        ),
        (
            {"cost_budget": math.inf},  # written null, read back as no budget: it travels
            None,
        ),
    ],
)
def test_a_configuration_is_kept_within_the_builders_limits_and_its_bytes(
    update: dict[str, object], problem: str | None
):
    assert agent_problem(AGENT.model_copy(update=update)) == problem


def test_a_configuration_the_builders_take_at_their_limits_is_kept():
    """Every list at its limit of 64-character tool names and a prompt of emoji (four bytes
    each) up to AGENT_CONFIG_MAX_BYTES: what a builder accepts, the entity keeps."""
    names = [f"{'t' * 60}{n:04d}" for n in range(MAX_TOOL_NAMES)]
    lists = AGENT.model_copy(
        update={"tools": names, "required_tools": names, "approve_tools": names}
    )
    prompt = "😀" * ((AGENT_CONFIG_MAX_BYTES - json_bytes(lists)) // 4)
    config = lists.model_copy(update={"system_prompt": prompt})
    assert agent_config_problem(config) is None
    assert agent_problem(config) is None
    assert json_bytes(config) <= AGENT_CONFIG_MAX_BYTES


def nan_rate() -> AgentDebrief:
    return AgentDebrief(
        outcome="success", summary="s", tools_used=[ToolUsage(name="t", calls=1, success_rate=1)]
    ).model_copy(
        update={"tools_used": [ToolUsage.model_construct(name="t", calls=1, success_rate=math.nan)]}
    )


@pytest.mark.parametrize(
    ("debrief", "problem"),
    [
        (
            nan_rate(),
            "tools_used.0.success_rate would not be read back as it is written: "
            "Input should be a valid number",
        ),
        (
            AgentDebrief(outcome="success", summary="s", metrics=DebriefMetrics(cost=math.inf)),
            "metrics.cost would not be read back as it is written: Input should be a valid number",
        ),
        (
            AgentDebrief(
                outcome="success",
                summary="s",
                metrics=DebriefMetrics(synthesis_tokens=SynthesisTokens(cost=-math.inf)),
            ),
            "metrics.synthesis_tokens.cost would not be read back as it is written: "
            "Input should be a valid number",
        ),
        (
            AgentDebrief(outcome="failed", summary="\x01" * 200_001),
            "it is 1,200,308 bytes as JSON; the limit is 1,200,000",
        ),
        (AgentDebrief(outcome="success", summary="\x00 fine", metrics=DebriefMetrics()), None),
    ],
    ids=["nan-rate", "infinite-cost", "infinite-synthesis-cost", "megabytes", "nul"],
)
def test_a_debrief_is_kept_only_when_it_makes_the_trip(debrief: AgentDebrief, problem: str | None):
    assert debrief_problem(debrief) == problem


def test_a_run_s_heaviest_debriefs_are_kept():
    """A run at every limit at once (tests/support/hostile.py), ended by an operator's answer
    at its limits, in control characters: its instant debrief, and a rich one whose synthesis
    used every character it may (in emoji: the controls are taken out)."""
    state = heaviest_run()
    state.operator_answer = bound_answer(HEAVIEST_ANSWER)
    state.end_if_operator_answered()
    result = state.result("run-a", AGENT, duration_ms=1)
    debrief_input = debrief_rules.collect_debrief_input(
        result, "task", state.tool_calls, state.rationale, state.approvals
    )
    instant = debrief_rules.build_fallback(debrief_input)
    text = "😀" * SYNTHESIS_TEXT_MAX_CHARS
    fields = bound_synthesis(
        SynthesisFields(
            summary=text,
            caveats=text,
            key_findings=[text] * 20,
            errors_encountered=[text] * 20,
            lessons_learned=[text] * 20,
        )
    )
    rich = debrief_rules.merge_synthesis(debrief_input, instant, SynthesisResult(parsed=fields))
    for debrief in (instant, rich):
        assert debrief_problem(debrief) is None
        assert json_bytes(debrief) < DEBRIEF_MAX_BYTES * 0.7


observation_lists = st.lists(
    storable_text(max_repeat=5_000) | sized(ANSWER_MAX_CHARS), max_size=30
) | st.lists(st.just(""), max_size=2_000)


@given(st.none() | st.just(nan_rate()), observation_lists)
@example(None, ["a" * 2_999, "b" * 200])  # the start of the one that does not fit
@example(None, [""] * 1_000)
@example(None, ["\x01" * ANSWER_MAX_CHARS] * 20)
def test_observations_are_kept_as_far_as_chat_reads_them(
    debrief: AgentDebrief | None, observations: list[str]
):
    """Clipped, not ignored: the context a chat turn makes of them is the same (the last
    run's latest 20 were all a run ever sent), and small whatever was sent."""
    kept = kept_observations(observations)
    recent = observations[-chat_rules.KEEP_OBSERVATIONS :]
    assert chat_rules.build_context_summary(debrief, kept) == chat_rules.build_context_summary(
        debrief, recent
    )
    assert len(kept) <= chat_rules.KEEP_OBSERVATIONS
    assert sum(len(o) for o in kept) <= chat_rules.OBSERVATIONS_MAX_CHARS + 1
    assert kept_observations(kept) == kept


def test_runs_in_progress_keep_the_latest_told():
    active: dict[str, datetime] = {}
    for n in range(ACTIVE_RUNS_MAX + 10):
        # a start time far ahead, sent by hand, keeps no run for good
        active = with_run(active, f"run-{n}", T0 + timedelta(days=1_000 if n == 0 else n))
    assert list(active) == [f"run-{n}" for n in range(10, ACTIVE_RUNS_MAX + 10)]
    active = with_run(active, "run-10", T0)  # told again: now the latest
    assert list(active)[-1] == "run-10" and len(active) == ACTIVE_RUNS_MAX
    assert latest_runs({"r" * (RUN_ID_MAX_BYTES + 1): T0, "run-1": T0}) == {"run-1": T0}


def test_a_chat_turn_s_own_configuration_is_held_to_the_same_bounds():
    assert turn_agent_problem(None) is None
    assert turn_agent_problem(AGENT) is None
    heavy = AGENT.model_copy(update={"system_prompt": "\x01" * SYSTEM_PROMPT_MAX_CHARS})
    assert turn_agent_problem(heavy) == (
        "invalid agent configuration: it is 600,438 bytes as JSON; the limit is 400,000"
    )


# -- the state as the next run takes it ---------------------------------------------------------


def heaviest_core() -> AgentState:
    """What `fitted` never sheds, each part at its bound at once, in control characters: the
    configuration at AGENT_CONFIG_MAX_BYTES, every open session's window (the most windows
    the session window's budget lets the state hold, ids at their longest) and every ended
    session's id."""
    prompt = "\x01" * ((AGENT_CONFIG_MAX_BYTES - json_bytes(AGENT) - 30) // 6)
    agent = AGENT.model_copy(update={"system_prompt": prompt})
    assert json_bytes(agent) <= AGENT_CONFIG_MAX_BYTES
    message = ChatMessage(role="assistant", content="\x01" * 149, timestamp=T0)
    per_session = STATE_WINDOW_BYTES // MAX_OPEN_SESSIONS // window_bytes([message])
    sids = [f"s{n:03d}".ljust(128, "x") for n in range(MAX_OPEN_SESSIONS)]
    state = AgentState(
        agent=agent,
        sessions={sid: [message] * max(per_session, 1) for sid in sids},
        session_meta={sid: SessionMeta(total=10**9, last_active=T0) for sid in sids},
        ended_sessions=[f"e{n:03d}".ljust(128, "x") for n in range(KEEP_ENDED_SESSIONS)],
        agent_set_at=T0,
        last_run_id="r" * RUN_ID_MAX_BYTES,
        last_run_started_at=T0,
    )
    assert sum(window_bytes(w) for w in state.sessions.values()) <= STATE_WINDOW_BYTES
    return state


def test_what_the_state_cannot_shed_is_far_under_its_budget():
    assert json_bytes(heaviest_core()) < STATE_MAX_BYTES * 0.6


def test_a_state_within_its_budget_goes_on_as_it_is():
    state = AgentState(agent=AGENT, last_observations=["x"], active_runs={"run-1": T0})
    assert fitted(state) == (state, [])
    assert fitted(state)[0] is state


def test_a_state_past_its_budget_sheds_what_is_read_again_first():
    """Every part at once at its bound: the runs in progress go first, then the last run
    (read again from Postgres with the next chat turn), then the oldest remembered replies,
    until the state fits; the session windows and the configuration stay."""
    reply = ChatReply(message="\x01" * ANSWER_MAX_CHARS, routed_via="react-loop")
    state = heaviest_core().model_copy(
        update={
            "active_runs": {f"{n:02d}".ljust(RUN_ID_MAX_BYTES, "\x01"): T0 for n in range(32)},
            "last_observations": kept_observations(["\x01" * 4_000] * 20),
            "last_debrief": AgentDebrief(outcome="success", summary="\x01" * 190_000),
            "answered_turns": [
                AnsweredTurn(update_id=f"u{n}", at=T0, reply=reply) for n in range(3)
            ],
        }
    )
    assert debrief_problem(state.last_debrief) is None  # type: ignore[arg-type]
    assert json_bytes(state) > PAYLOAD_MAX_BYTES
    kept, shed = fitted(state)
    assert shed == [
        "the runs in progress",
        "the last run's observations",
        "the last run's debrief",
        "2 of the replies remembered",
    ]
    assert json_bytes(kept) <= STATE_MAX_BYTES
    assert [t.update_id for t in kept.answered_turns] == ["u2"]
    assert (kept.agent, kept.sessions) == (state.agent, state.sessions)
    assert carried(kept) is not None


# -- the handlers: hostile signals sent by hand -------------------------------------------------

Send = Callable[[Entity], None]


def configure_of_megabytes(entity: Entity) -> None:
    entity.configure(AGENT.model_copy(update={"model": "other", "tools": ["\x01" * 1_000] * 340}))


def run_finished_of_megabytes(entity: Entity) -> None:
    entity.run_finished(
        RunFinished(
            run_id="run-a-1",
            started_at=T0,
            agent=AGENT,
            debrief=AgentDebrief(outcome="success", summary="\x01" * 180_000),
            observations=["\x01" * 170_000],
        )
    )


def thousands_of_runs_started(entity: Entity) -> None:
    for n in range(2_000):
        entity.run_started(RunStarted(run_id=f"run-{n:04d}-" + "\x01" * 990, started_at=T0))


def runs_started_with_long_ids(entity: Entity) -> None:
    for n in range(25):
        entity.run_started(RunStarted(run_id=f"{n}" + "\x01" * 100_000, started_at=T0))


def debrief_ready_of_megabytes(entity: Entity) -> None:
    run_finished_of_megabytes(entity)
    debrief = AgentDebrief(outcome="success", summary="\x01" * 340_000)
    entity.debrief_ready(DebriefReady(run_id="run-a-1", debrief=debrief))


def debrief_ready_with_nan(entity: Entity) -> None:
    entity.run_finished(RunFinished(run_id="run-a-1", started_at=T0, agent=AGENT))
    entity.debrief_ready(DebriefReady(run_id="run-a-1", debrief=nan_rate()))


def news_of_a_run_with_a_long_id(entity: Entity) -> None:
    run_id = "\x01" * 150_000  # 900 KB as JSON: no workflow has it
    entity.run_finished(
        RunFinished(run_id=run_id, started_at=T0, agent=AGENT, observations=["\x01" * 50_000])
    )
    debrief = AgentDebrief(outcome="success", summary="\x01" * 180_000)
    entity.debrief_ready(DebriefReady(run_id=run_id, debrief=debrief))


HOSTILE: dict[str, Send] = {
    "configure-of-megabytes": configure_of_megabytes,
    "run-finished-of-megabytes": run_finished_of_megabytes,
    "thousands-of-runs-started": thousands_of_runs_started,
    "runs-started-with-long-ids": runs_started_with_long_ids,
    "debrief-ready-of-megabytes": debrief_ready_of_megabytes,
    "debrief-ready-with-nan": debrief_ready_with_nan,
    "news-of-a-run-with-a-long-id": news_of_a_run_with_a_long_id,
}


def chat_inputs(entity: Entity) -> list[int]:
    """What a chat turn of 20,000 heavy characters sends, as JSON bytes: the direct path's
    activity input, and the tool path's child run's input (workflows/entity_chat.py)."""
    state = entity.state
    message = "\x01" * 20_000
    context = chat_rules.build_context_summary(state.last_debrief, state.last_observations)
    history = [ChatMessage(role="user", content="\x01" * 8_000, timestamp=T0)]
    paths = ChatPaths()
    paths._notes_as_data = True
    direct = paths._direct_input(state.agent, message, context, history)
    task = chat_rules.tool_path_task(message, context, history, quoted=True)
    return [json_bytes(direct), json_bytes(AgentRunInput(task=task, agent=state.agent))]


@pytest.mark.parametrize("send", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_signals_leave_a_state_the_next_run_and_chat_can_take(send: Send):
    bounded = Entity(AgentState(agent=AGENT), bounds=True)
    send(bounded)
    after = carried(bounded._state_for_next_run())
    assert after is not None
    assert json_bytes(after) <= STATE_MAX_BYTES + 200  # the input's three small fields
    assert after.state.agent.model == "m"  # nothing sent by hand replaced the agent's
    assert all(size <= STATE_MAX_BYTES for size in chat_inputs(bounded))


@pytest.mark.parametrize("send", HOSTILE.values(), ids=HOSTILE.keys())
def test_an_entity_run_from_before_the_patch_keeps_them_whole(send: Send):
    """As its history was made: the same signals left it with a next run that could not
    start, or a chat turn whose input Temporal refuses (the agent answered no chat again)."""
    whole = Entity(AgentState(agent=AGENT), bounds=False)
    send(whole)
    next_run = carried(whole._state_for_next_run())
    assert next_run is None or max(chat_inputs(whole)) > PAYLOAD_MAX_BYTES


def test_the_entity_keeps_the_news_it_takes_as_before():
    """Within the bounds, nothing changes: the run's news, configuration and debrief kept."""
    entity = Entity(AgentState(agent=AGENT), bounds=True)
    entity.run_started(RunStarted(run_id="run-a-1", started_at=T0))
    assert entity.state.active_runs == {"run-a-1": T0}
    debrief = AgentDebrief(outcome="success", summary="Four.")
    other = AGENT.model_copy(update={"model": "other"})
    entity.run_finished(
        RunFinished(
            run_id="run-a-1", started_at=T0, agent=other, debrief=debrief, observations=["[x]"]
        )
    )
    assert entity.state.active_runs == {}
    assert (entity.state.agent, entity.state.last_run_id) == (other, "run-a-1")
    assert (entity.state.last_debrief, entity.state.last_observations) == (debrief, ["[x]"])
    rich = debrief.model_copy(update={"summary": "Four, richly.", "synthesized": True})
    entity.debrief_ready(DebriefReady(run_id="run-a-1", debrief=rich))
    assert entity.state.last_debrief == rich
    entity.debrief_ready(DebriefReady(run_id="run-a-1", debrief=nan_rate()))
    assert entity.state.last_debrief == rich  # the debrief it had stands
    entity.configure(AGENT)
    assert (entity.state.agent, entity.state.agent_set_at) == (AGENT, T0)


def test_a_run_s_news_with_a_configuration_past_its_bounds_keeps_the_rest():
    entity = Entity(AgentState(agent=AGENT), bounds=True)
    heavy = AGENT.model_copy(update={"tools": ["t"] * 300})
    debrief = AgentDebrief(outcome="success", summary="Four.")
    entity.run_finished(RunFinished(run_id="run-a-1", started_at=T0, agent=heavy, debrief=debrief))
    assert entity.state.agent == AGENT
    assert (entity.state.last_run_id, entity.state.last_debrief) == ("run-a-1", debrief)
    entity.run_finished(
        RunFinished(run_id="run-a-2", started_at=T0, agent=AGENT, debrief=nan_rate())
    )
    assert (entity.state.last_run_id, entity.state.last_debrief) == ("run-a-2", None)


def test_a_state_carried_from_a_run_before_the_patch_is_bounded_as_the_run_starts():
    state = AgentState(
        agent=AGENT,
        last_run_id="\x01" * 2_000,
        last_debrief=AgentDebrief(outcome="success", summary="\x01" * 200_001),
        last_observations=["o" * 5_000] * 30,
        active_runs={f"run-{n}": T0 for n in range(100)},
    )
    entity = Entity(state, bounds=True)
    entity._bound_state()
    assert entity.state is state  # the session keeper holds it
    assert (state.last_run_id, state.last_debrief) == (None, None)
    assert state.last_observations == kept_observations(["o" * 5_000] * 30)
    assert list(state.active_runs) == [f"run-{n}" for n in range(68, 100)]
    unbounded = AgentState(agent=AGENT, active_runs={f"run-{n}": T0 for n in range(100)})
    Entity(unbounded, bounds=False)._bound_state()
    assert len(unbounded.active_runs) == 100


# -- any signals at all -------------------------------------------------------------------------

configs = st.builds(
    lambda model, prompt, tools, debrief_model: AgentConfig.model_construct(
        **{
            **AGENT.model_dump(),
            "model": model,
            "system_prompt": prompt,
            "tools": tools,
            "debrief_model": debrief_model,
        }
    ),
    st.sampled_from(["m", "other"]),
    st.none() | sized(120_000),
    st.none() | st.lists(sized(2_000), max_size=400),
    st.none() | sized(300),
)
debriefs = st.builds(
    AgentDebrief,
    outcome=st.just("success"),
    summary=sized(360_000),
    key_findings=st.lists(sized(50_000), max_size=5),
    tools_used=st.lists(
        st.builds(ToolUsage, name=sized(2_000), calls=st.just(1), success_rate=hostile_floats),
        max_size=3,
    ),
)
run_ids = st.sampled_from(["run-a-1", "run-a-2"]) | sized(120_000)
signals = st.lists(
    st.one_of(
        st.builds(RunStarted, run_id=run_ids, started_at=st.just(T0)).map(
            lambda e: ("run_started", e)
        ),
        st.builds(
            RunFinished,
            run_id=run_ids,
            started_at=st.sampled_from([T0, T0 + timedelta(hours=1)]),
            agent=configs.map(lambda c: c.model_copy(update={"agent_id": "a"})),
            debrief=st.none() | debriefs,
            observations=st.lists(sized(200_000), max_size=25),
        ).map(lambda e: ("run_finished", e)),
        configs.map(lambda c: ("configure", c)),
        st.builds(DebriefReady, run_id=run_ids, debrief=debriefs).map(
            lambda e: ("debrief_ready", e)
        ),
    ),
    max_size=8,
)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=60)
@given(signals)
def test_whatever_is_sent_the_next_run_and_every_chat_turn_can_take_the_state(
    sent: list[tuple[str, object]],
):
    entity = Entity(AgentState(agent=AGENT), bounds=True)
    for name, payload in sent:
        if json_bytes(payload) > PAYLOAD_MAX_BYTES:
            continue  # the server refuses the signal itself
        getattr(entity, name)(payload)
    after = carried(entity._state_for_next_run())
    assert after is not None and json_bytes(after) <= STATE_MAX_BYTES + 200
    assert all(size <= STATE_MAX_BYTES for size in chat_inputs(entity))
