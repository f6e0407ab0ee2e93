"""Committed histories still replay against the current workflow code.

A change that alters a decision old runs already made fails here: guard it with
`workflow.patched()` (README, "Changing workflow code").

They replay in Temporal's sandbox, as the `replay` command does: the worker runs the project's
workflows outside it (`reactive_temporal/hosting/sandbox.py`), so this is where a call the
sandbox restricts, made by the workflow code on a path some history took, still fails.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from reactive_temporal.api.replay import (
    HISTORY_EVENTS_MAX,
    HISTORY_FILE_MAX_VALUES,
    load_history_file,
    replay,
)
from reactive_temporal.api.rerun import reset_point
from reactive_temporal.contracts import names
from reactive_temporal.contracts.entity import AgentWorkflowInput
from reactive_temporal.contracts.result import AgentResult
from reactive_temporal.contracts.run import AgentRunInput
from reactive_temporal.hosting.worker_factory import WORKFLOWS
from tests.processes import clean_env, starter
from tests.support.histories import with_bundle_in_input

HISTORIES = sorted((Path(__file__).parents[1] / "histories").glob("*.json"))


def replayer(workflows=WORKFLOWS) -> Replayer:
    return Replayer(
        workflows=workflows,
        data_converter=pydantic_data_converter,
        workflow_runner=SandboxedWorkflowRunner(),
    )


def test_the_required_histories_are_committed():
    names = {p.stem for p in HISTORIES}
    assert {
        "tool_call_run",
        "final_answer_run",
        "max_iterations_run",
        "llm_error_run",
        "debrief_child",
        "chat_session_continue_as_new",
        "cancelled_run",
        "budget_exceeded_run",
        "timeout_run",
        "approval_run",
        "live_output_run",
        "last_run_read",
        "chat_turn_sent_again",
        "cut_short_run",
        "cut_short_run_go_on",
        "chat_routing",
        "chat_routing_ascii",
        "debrief_prose",
        "debrief_prose_bill_kept",
        "debrief_unreadable_bill_kept",
        "payload_budget_input_refused",
        "payload_budget_answer_clipped",
        "payload_budget_operator_answer",
        "unread_calls_nudged",
        "entity_inputs_bounded",
    } <= names


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_committed_history_replays(path: Path):
    report = await replay(load_history_file(path), replayer())
    assert report.ok, report.error


BUNDLE_HISTORIES = [p for p in HISTORIES if p.stem.endswith("_bundle")]


@pytest.mark.parametrize("bundle", [names.RUN_PATCHES_2026_12, names.RUN_PATCHES_2026_12_03])
@pytest.mark.parametrize("path", BUNDLE_HISTORIES, ids=lambda p: p.stem)
async def test_a_run_a_worker_one_deploy_behind_began_replays(path: Path, bundle: str):
    """Starters and workers deploy apart: a run started with a bundle in its input but
    begun by a worker one deploy behind carries the earlier bundle's patch marker and ran
    with that bundle's patches (a `prepare_run` first), and the current code, which asks no
    patch for such a run, must still meet it on replay."""
    history = load_history_file(path)
    assert b"patch_bundle" not in history.events[0].SerializeToString()  # nor its marker's
    report = await replay(with_bundle_in_input(history, bundle), replayer())
    assert report.ok, report.error


def test_every_kind_of_run_has_a_bundle_history():
    assert len(BUNDLE_HISTORIES) >= 16


NEXT_HISTORIES = [p for p in HISTORIES if p.stem.endswith("_next")]


@pytest.mark.parametrize("path", NEXT_HISTORIES, ids=lambda p: p.stem)
def test_the_newest_bundle_s_histories_carry_it_and_ask_no_patch(path: Path):
    """`_next` histories are runs started with RUN_PATCHES_2026_12_04 (as the next release's
    starters will send it): they replay (above) and record no patch marker at all, not even
    the approval, cut-off reply and answer-field patches asked case by case before it."""
    history = load_history_file(path)
    started = history.events[0].workflow_execution_started_event_attributes
    body = json.loads(started.input.payloads[0].data)
    assert body["patch_bundle"] == names.RUN_PATCHES_2026_12_04
    markers = [e.marker_recorded_event_attributes.marker_name for e in history.events]
    assert "core_patch" not in markers


def test_every_kind_of_run_and_every_late_patch_s_case_has_a_next_history():
    stems = {p.stem.removesuffix("_next") for p in NEXT_HISTORIES}
    assert {
        p.stem.removesuffix("_seeded") for p in HISTORIES if p.stem.endswith("_seeded")
    } <= stems
    assert {"approval_ids_unique", "approval_answered", "cut_short_run"} <= stems


def _history(stem: str):
    return load_history_file(HISTORIES[[p.stem for p in HISTORIES].index(stem)])


def _patch_markers(history) -> list[str]:
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]


def _tool_path_messages(history) -> list[str]:
    """The chat message each tool-path run an entity started was for (its task's end)."""
    return [
        json.loads(
            e.start_child_workflow_execution_initiated_event_attributes.input.payloads[0].data
        )["task"].rsplit("\n", 1)[-1]
        for e in history.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]


@pytest.mark.parametrize(
    ("stem", "markers", "to_tools"),
    [
        ("chat_routing", [names.ENTITY_PATCHES_2026_12], "\u017fearch for the weather"),
        (
            "chat_routing_ascii",
            [names.ENTITY_PATCHES_2026_12, names.ASCII_CHAT_ROUTING_PATCH],
            "\u65e5\u672cfetch the page",
        ),
    ],
)
def test_the_routing_histories_took_the_paths_their_code_chose(
    stem: str, markers: list[str], to_tools: str
):
    """Both replay (above), so both paths are covered: an entity run from before the
    chat-routing-ascii patch (no marker) keeps routing with Unicode words, `ſearch for` to
    tools and `日本fetch` direct; one since routes as the released code, the other way round."""
    history = _history(stem)
    assert _patch_markers(history) == markers
    assert _tool_path_messages(history) == [to_tools]


def _persisted_debrief(history) -> dict:
    """The debrief a DebriefWorkflow's history handed `persist_debrief` (its row's)."""
    [data] = [
        e.activity_task_scheduled_event_attributes.input.payloads[0].data
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == names.PERSIST_DEBRIEF
    ]
    debrief: dict = json.loads(data)["debrief"]
    return debrief


@pytest.mark.parametrize(
    ("stem", "markers", "bill"),
    [
        ("debrief_prose", [], None),
        (
            "debrief_prose_bill_kept",
            [names.SYNTHESIS_BILL_KEPT_PATCH],
            {"input": 1200, "output": 300, "total": 1500, "cost": 0.00036},
        ),
        (
            "debrief_unreadable_bill_kept",
            [names.SYNTHESIS_BILL_KEPT_PATCH],
            {"input": 2700, "output": 180, "total": 2880, "cost": 0.000513},
        ),
    ],
)
def test_the_synthesis_bill_histories_kept_what_their_code_kept(
    stem: str, markers: list[str], bill: dict | None
):
    """Both replay (above), so both paths are covered: a debrief from before the
    synthesis-bill-kept patch (no marker) persisted its fallback without the prose answer's
    bill, and replays keeping it so; one since persisted the fallback with the bill (three
    unreadable replies' in the second), still not synthesized."""
    history = _history(stem)
    assert _patch_markers(history) == markers
    debrief = _persisted_debrief(history)
    assert not debrief.get("synthesized", False)
    assert debrief["metrics"].get("synthesis_tokens") == bill


def test_the_bounded_entity_history_continued_with_what_its_bounds_kept():
    """It replays (above); recorded as the release that asks entity-inputs-bounded does, sent
    by hand what the patch bounds: the configuration of 300 tool names, the run id of 1,001
    bytes and the rich debrief holding NaN were ignored, 40 runs started kept as the 32 told
    last, 25 observations kept as far as chat reads them."""
    history = _history("entity_inputs_bounded")
    # the bundle in its input, chat-routing-ascii not asked (this release): this one only
    assert _patch_markers(history) == [names.ENTITY_INPUTS_BOUNDED_PATCH]
    [carried] = [
        e.workflow_execution_continued_as_new_event_attributes.input.payloads[0].data
        for e in history.events
        if e.HasField("workflow_execution_continued_as_new_event_attributes")
    ]
    state = AgentWorkflowInput.model_validate_json(carried).state
    assert state.agent.tools is None
    assert state.last_run_id is not None and state.last_run_id.endswith("-39")
    assert state.last_debrief is not None and state.last_debrief.summary == "Done."
    # the 32 told last (sent together: in the order they came), less the one whose news came
    assert 31 <= len(state.active_runs) <= 32
    assert all(len(r) < 1_000 for r in state.active_runs)
    assert 1 <= len(state.last_observations) < 25
    assert sum(len(o) for o in state.last_observations) <= 3_001


@workflow.defn(name="AgentRunWorkflow", sandboxed=False)
class ChangedAgentRunWorkflow:
    """A 'new version' that calls an activity the old runs never called first."""

    @workflow.run
    async def run(self, input: AgentRunInput) -> AgentResult:
        await workflow.execute_activity(
            "some_new_first_step", input.task, start_to_close_timeout=timedelta(seconds=5)
        )
        raise AssertionError("never reached in replay")


async def test_a_changed_workflow_fails_replay_naming_the_event():
    history = load_history_file(HISTORIES[[p.stem for p in HISTORIES].index("tool_call_run")])
    report = await replay(history, replayer([ChangedAgentRunWorkflow]))
    assert not report.ok
    assert report.error is not None and "Nondeterminism" in report.error
    assert report.event_id is not None and report.event_id > 0


def test_reset_point_is_the_task_that_scheduled_the_failed_llm_step():
    history = load_history_file(HISTORIES[[p.stem for p in HISTORIES].index("llm_error_run")])
    events = list(history.events)
    point = reset_point(events)
    failed = next(e for e in events if e.HasField("activity_task_failed_event_attributes"))
    scheduled = failed.activity_task_failed_event_attributes.scheduled_event_id
    completed = [
        e.event_id for e in events if e.HasField("workflow_task_completed_event_attributes")
    ]
    assert point == max(c for c in completed if c < scheduled)


def test_reset_point_refuses_a_run_that_did_not_fail():
    history = load_history_file(HISTORIES[[p.stem for p in HISTORIES].index("tool_call_run")])
    with pytest.raises(ValueError, match="no failed step"):
        reset_point(list(history.events))


def test_bad_history_files_are_named(tmp_path: Path):
    with pytest.raises(ValueError, match="cannot read history file"):
        load_history_file(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="is not a Temporal history JSON"):
        load_history_file(bad)
    bad.write_text('{"nothing": 1}')
    with pytest.raises(ValueError, match="no 'events'"):
        load_history_file(bad)
    bad.write_text(
        json.dumps({"workflowId": {"a": 1}, "events": json.loads(_text("approval_run"))["events"]})
    )
    with pytest.raises(ValueError, match="its workflowId is a dict, not text"):
        load_history_file(bad)  # replayed, it was a TypeError and a traceback


def _text(stem: str) -> str:
    return HISTORIES[[p.stem for p in HISTORIES].index(stem)].read_text()


async def test_a_history_of_another_workflow_type_is_not_taken_for_a_change_to_patch(
    tmp_path: Path,
):
    """A history of another application's workflow (a namespace shared, a file mixed up) failed
    replay as a change to the code does, and `replay` said to guard it with workflow.patched()
    and exited 1, 'no longer replays'. Now it names the type and exits 2, a wrong request."""
    data = json.loads(_text("approval_run"))
    data["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] = "Billing"
    other = tmp_path / "other.json"
    other.write_text(json.dumps(data))
    report = await replay(load_history_file(other), replayer())
    assert (report.ok, report.foreign) == (False, True)
    assert report.error == (
        "its workflow type 'Billing' is none of this code's (AgentRunWorkflow, AgentWorkflow, "
        "DebriefWorkflow): a history of another application, not a change to patch"
    )
    env = clean_env()
    told = starter("replay", "--file", str(other), env=env, cwd=tmp_path)
    assert told.returncode == 2, told.stdout + told.stderr
    assert "is none of this code's" in told.stdout and "workflow.patched" not in told.stderr


def test_a_history_file_of_more_values_or_events_than_any_run_holds_is_refused_unparsed(
    tmp_path: Path,
):
    """A file of `[],[],…` or `{},{},…` within HISTORY_FILE_MAX_BYTES: parsed, each two bytes
    became 50-60 of Python (1.8 GB per 20 MB), then hours of replay of empty events."""
    started = json.loads(_text("approval_run"))["events"][0]
    lists = tmp_path / "lists.json"
    lists.write_text(
        json.dumps({"events": [started]})[:-1]
        + ', "x": ['
        + "[]," * HISTORY_FILE_MAX_VALUES
        + "[]]}"
    )
    with pytest.raises(ValueError, match=r"holds 4,000,0\d\d JSON objects and lists, more than"):
        load_history_file(lists)
    events = tmp_path / "events.json"
    events.write_text(json.dumps({"events": [started] + [{}] * HISTORY_EVENTS_MAX}))
    with pytest.raises(ValueError, match=r"it holds 204,801 events, more than the 204,800"):
        load_history_file(events)
