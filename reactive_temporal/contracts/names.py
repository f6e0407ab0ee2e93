"""Every name Temporal knows us by, written once, and every id of our workflows.

Workflow types, signals, queries, updates, activities, patches and memo keys.

These strings are recorded in every history. Renaming one breaks the runs in flight and the
histories in `tests/histories/`, so they never change: add new names, never edit old ones.
Workflows declare their handlers with them (`@workflow.query(name=PROGRESS)`); clients call
handlers through typed references (`handle.query(AgentRunWorkflow.progress)`) and use these
strings only where the SDK takes a name (activities, cross-workflow signals, visibility
queries). `tests/unit/test_temporal_names.py` fails on any such string written elsewhere.
"""

from __future__ import annotations

import re
from typing import Final
from uuid import UUID

# -- workflow types ---------------------------------------------------------------------------

AGENT_RUN_WORKFLOW: Final = "AgentRunWorkflow"
"""One durable ReAct run (workflows/agent_run.py)."""
AGENT_WORKFLOW: Final = "AgentWorkflow"
"""The agent entity: chat, sessions, the last run's debrief (workflows/agent_entity.py)."""
DEBRIEF_WORKFLOW: Final = "DebriefWorkflow"
"""The rich debrief of one run, an abandoned child (workflows/agent_debrief.py)."""

# -- AgentRunWorkflow's handlers --------------------------------------------------------------

FINAL_ANSWER_SIGNAL: Final = "final_answer"
"""An operator ends the run with this answer."""
PROGRESS_QUERY: Final = "progress"
"""The run's live state (RunProgress)."""
DECIDE_TOOL_CALLS_UPDATE: Final = "decide_tool_calls"
"""A person approves or denies tool calls waiting for approval (validated)."""

# -- AgentWorkflow's handlers -----------------------------------------------------------------

RUN_STARTED_SIGNAL: Final = "run_started"
RUN_FINISHED_SIGNAL: Final = "run_finished"
DEBRIEF_READY_SIGNAL: Final = "debrief_ready"
LAST_DEBRIEF_QUERY: Final = "last_debrief"
HISTORY_QUERY: Final = "history"
SESSION_BUSY_QUERY: Final = "session_busy"
"""Which tool-path run holds a session and which turns wait behind it (SessionBusy)."""
OPEN_SESSION_UPDATE: Final = "open_session"
END_SESSION_UPDATE: Final = "end_session"
CHAT_UPDATE: Final = "chat"
READ_SESSION_UPDATE: Final = "read_session"
READ_LAST_RUN_UPDATE: Final = "read_last_run"
"""The agent reads what it knows of its last run from Postgres and answers its debrief."""
CONFIGURE_SIGNAL: Final = "configure"

# -- activities -------------------------------------------------------------------------------
# Workflows call activities by name, so `workflows/` never imports the modules that hold
# openai or psycopg.

PREPARE_RUN: Final = "prepare_run"
LLM_STEP: Final = "llm_step"
RUN_TOOL: Final = "run_tool"
RECORD_MESSAGES: Final = "record_messages"
SYNTHESIZE_DEBRIEF: Final = "synthesize_debrief"
PERSIST_DEBRIEF: Final = "persist_debrief"
CHAT_DIRECT: Final = "chat_direct"
LOAD_SESSION: Final = "load_session"
SAVE_SESSION: Final = "save_session"
READ_RUN_PROGRESS: Final = "read_run_progress"
READ_LIVE_RUNS: Final = "read_live_runs"
READ_LAST_RUN: Final = "read_last_run"
NOTIFY_AGENT: Final = "notify_agent"
RECORD_RUN_EVENTS: Final = "record_run_events"
"""The run's own live-output events (approvals asked and decided), a local activity."""

STORE_DATA_ERROR: Final = "StoreDataError"
"""The error type of a store activity that failed for good because Postgres refused its data
(a value out of range, a violated constraint: activities/pg_refusals.py), where retrying
would only be refused again; and of a run, debrief or chat turn that ended on one."""

RUN_INPUT_TOO_LARGE_ERROR: Final = "RunInputTooLarge"
"""The error type a run fails with as it starts when its input, made by a client by hand, is
past RUN_INPUT_MAX_BYTES or its agent past AGENT_CONFIG_MAX_BYTES (the project's starters
refuse such an input before starting it): carried into each continue-as-new input and its
agent's news, it would make them too large for Temporal, and the run would stop there for
good."""

UNPRICED_MODEL_ERROR: Final = "UnpricedModel"
"""The error type of an LLM step that would not call a model its worker has no price for,
in a run with a cost budget (the run ends as `error`, saying which model and what to do)."""

# -- patches (`workflow.patched`) --------------------------------------------------------------

RUN_PATCHES_2026_12: Final = "run-patches-2026-12"
"""Every AgentRunWorkflow patch in RUN_PATCHES_2026_12_COVERS is on. A run started since asks
only this one: each `workflow.patched` call records a marker and upserts
TemporalChangeVersion (20 events per run for ten patches). A patch added later is not in the
set, so it is asked on its own, until a later bundle stands for it too."""

LOCAL_STORE_STEPS_PATCH: Final = "local-store-steps"
"""prepare_run and record_messages run as local activities (README, "Changing workflow
code"); runs started before it replay them as the full activities they recorded."""
SEARCH_ATTRIBUTES_ON_CHANGE_PATCH: Final = "search-attributes-on-change"
"""A run upserts its search attributes only when they mean something new: AgentName at the
start (unless its starter set it), the rest once at the end; no upsert per iteration (each
one is an event, a visibility write and, on Temporal Cloud, a billed action)."""
LIVE_RUNS_FROM_VISIBILITY_PATCH: Final = "live-runs-from-visibility"
"""Mid-run chat finds the agent's running runs by asking Temporal's visibility (one activity
per chat turn) instead of a `run_started` signal from every run."""
TRIVIAL_DEBRIEF_IN_RUN_PATCH: Final = "trivial-debrief-in-run"
"""A run with nothing to synthesize persists its deterministic debrief in its own wrap-up
(the notify_agent local activity) instead of starting a DebriefWorkflow child."""
LAST_RUN_IN_STORE_PATCH: Final = "last-run-in-store"
"""A run keeps what chat may quote of it (its debrief, observations, configuration) in
Postgres in its wrap-up, instead of a `run_finished` signal to its agent's AgentWorkflow."""
LAST_RUN_FROM_STORE_PATCH: Final = "last-run-from-store"
"""The agent reads its last run from Postgres with each chat turn (with the runs in progress,
in the one activity it already ran) instead of waiting for runs to signal it."""

FINAL_ANSWER_LINE_PATCH: Final = "final-answer-line-anchored"
"""`FINAL ANSWER:` ends a run only at the start of a line with its colon; runs started
before it keep the loose marker (which ended runs on prose like "the final answer yet")."""
OPERATOR_ANSWER_CHECK_PATCH: Final = "operator-answer-checked"
"""The operator's `final_answer` signal is ignored (with a logged reason) when its output is
empty, too long or in an unknown format, as a `final-answer` call would be refused."""

TOOL_CALL_LIMITS_PATCH: Final = "tool-call-limits"
"""At most MAX_TOOL_CALLS_PER_TURN calls of a turn run, and calls whose arguments are too
large do not run: both are refused as observations (reactive_temporal.limits)."""

GRACEFUL_CANCEL_PATCH: Final = "graceful-cancel"
"""A cancel request ends the run as `cancelled` with its result and debrief; runs that
recorded a cancel before it replay as cancelled workflows."""
RUN_DEADLINE_PATCH: Final = "run-deadline"
"""A run with `timeout_seconds` starts its deadline timer (only such runs record it)."""
RUN_BUDGETS_PATCH: Final = "run-budgets"
"""A run with a token or cost budget checks it after every LLM step."""
HONEST_ENDINGS_PATCH: Final = "honest-endings"
"""A `FINAL ANSWER:` text or a plain reply before every required tool ran is refused with a
nudge (it ended the run before)."""
FAILED_RUNS_TEACH_PATCH: Final = "failed-runs-teach"
"""Runs that end without success are never trivial (their debrief is synthesized) and their
ending's cause is among the debrief's errors."""

SESSIONS_IN_POSTGRES_PATCH: Final = "sessions-in-postgres"
"""Chat sessions are saved turn by turn, the agent keeps a bounded window of each (older
messages paged to Postgres), idle sessions close, and ending an unopened session succeeds."""
ENTITY_CONTINUES_AFTER_HANDLERS_PATCH: Final = "entity-continues-after-handlers"
"""The agent entity decides to continue as new where a handler ends (and where its idle timer
fires), reading Temporal's figures for the task there, instead of in a wait condition: the
SDK checks conditions once more, before an activity's result is applied, in a live task that
also held a rejected update, which leaves no trace in history; so the entity's replay of such
a task woke later and ordered its commands differently (a nondeterminism error, the entity
stuck). Asked by every new entity run, in its first task."""
ENTITY_BETWEEN_RUNS: Final = "AgentBetweenRuns"
"""The error type of an update the agent entity refuses because it is about to continue as
new (it finishes what it took, then goes on in its next run): callers send it again."""
CHAT_NOTES_PATCH: Final = "chat-notes-user-role"
"""What chat knows of the agent's runs reaches the model as quoted notes in a user-role
message, not in the system prompt."""
ENTITY_PATCHES_2026_12: Final = "entity-patches-2026-12"
"""Every AgentWorkflow patch above is on (sessions-in-postgres, entity-continues-after-
handlers, chat-notes-user-role, live-runs-from-visibility, last-run-from-store). An entity run
started since asks only this one, in its first task, before any handler runs. Asked one by
one, each patch's marker went where the first handler that needed it got to, and on a busy
agent (updates arriving together, some refused) a replay's handlers need not get there in
the same order: one such entity failed to replay (a marker where its replay scheduled a chat
turn's activity) and its chat stood still. It is also 8 events fewer per entity run."""
ENTITY_PATCH_BUNDLE: Final = ENTITY_PATCHES_2026_12
"""The bundle an entity's input may carry (`AgentWorkflowInput.patch_bundle`): an entity run
started with it asks none of the bundle's patches (no marker, no TemporalChangeVersion upsert
for them in its first task; one run asking ENTITY_PATCHES_2026_12 there still failed to replay
once, under 20 updates arriving with its first task, at an upsert). It asks the one entity
patch released since, ASCII_CHAT_ROUTING_PATCH, there."""
ASCII_CHAT_ROUTING_PATCH: Final = "chat-routing-ascii"
"""Chat routing matches its phrases as the released code's JavaScript regexes do
(`/\\b(...)\\b/i`, no `u` flag): an ASCII word boundary, and no non-ASCII letter taken for an
ASCII one (`ſearch for` is no "search for", `日本fetch` is "fetch"). Not covered by
ENTITY_PATCHES_2026_12, which had shipped (its meaning is fixed): every entity run asks it in
its first task, with the bundle in its input or not, before any handler runs. An entity run
from before it keeps Unicode routing until it continues as new."""
ASCII_CHAT_ROUTING_ASKED: Final = False
"""Whether a new entity run asks ASCII_CHAT_ROUTING_PATCH (and records its marker). Not yet:
this is the first of two releases. Workers of this release route as a run recorded
(they ask the patch when replaying); a worker from before it fails every task of an entity
run holding its marker ("patch marker encountered for change chat-routing-ascii, but there
is no corresponding change command"), so a rollback, or such a worker beside a new one in a
deploy, must never meet one. Turned on in the next release: new entity runs then route as
the released code does."""
ENTITY_INPUTS_BOUNDED_PATCH: Final = "entity-inputs-bounded"
"""What the agent entity keeps of its signals (a run's news, a builder's configuration, a
rich debrief: anyone who may signal its workflow can send them by hand) is held to bounds
(workflows/entity_inputs.py): a configuration past the builders' limits, a debrief of
megabytes or holding NaN, a run id no workflow can have are ignored, a run's observations
kept as far as chat reads them, runs in progress capped, and the state fitted under 1.5 MB as
the entity continues as new. Before it, a 2 MB configuration or debrief sent by hand, or
thousands of runs "started", made an activity or continue-as-new input past Temporal's 2 MiB:
the workflow task failed on every retry and the agent never answered chat again; a NaN made a
next run whose input did not read back, which failed (the agent started afresh, its
configuration lost). Not covered by ENTITY_PATCHES_2026_12: every entity run
asks it in its first task, after ASCII_CHAT_ROUTING_PATCH, before any handler runs; an entity
run from before it keeps what it is told whole until it continues as new."""
ENTITY_INPUTS_BOUNDED_ASKED: Final = False
"""Whether a new entity run asks ENTITY_INPUTS_BOUNDED_PATCH (and records its marker). Not
yet: this is the first of two releases, as for ASCII_CHAT_ROUTING_ASKED. Workers of this
release bound what a run recorded the patch for (they ask it when replaying); a worker from
before it fails every task of an entity run holding its marker, so a rollback, or such a
worker beside a new one in a deploy, must never meet one. Turned on in the next release: new
entity runs then bound what they are told."""
ENTITY_PATCHES_2026_12_COVERS: Final = frozenset(
    {
        SESSIONS_IN_POSTGRES_PATCH,
        ENTITY_CONTINUES_AFTER_HANDLERS_PATCH,
        CHAT_NOTES_PATCH,
        LIVE_RUNS_FROM_VISIBILITY_PATCH,
        LAST_RUN_FROM_STORE_PATCH,
    }
)
"""The patches ENTITY_PATCHES_2026_12 stands for. Never added to: an entity run started with
the bundle (or that recorded its marker) before a patch existed must not replay as if it had
it. Later entity patches (ASCII_CHAT_ROUTING_PATCH, ENTITY_INPUTS_BOUNDED_PATCH) are asked on
their own, in every entity run's first task, until a later bundle stands for them."""
ENTITY_BUNDLE_IN_STARTS: Final = False
"""Whether the project's starters put ENTITY_PATCH_BUNDLE in a new entity's input. Not yet:
this is the first of two releases. Workers of this release read the field; a worker from
before it does not, asks the patch, finds no marker and fails the entity's tasks (a rollback
to such a build stopped every entity started since, tried). The release after this one,
which no worker from before this one will poll beside, turns it on."""

RUN_CONTINUE_AS_NEW_PATCH: Final = "run-continue-as-new"
"""A run continues as new (same workflow id, transcript, counters, one debrief) when
Temporal suggests it or every CONTINUE_AS_NEW_EVERY_ITERATIONS iterations."""

STORE_OUTAGE_WAITS_PATCH: Final = "store-outage-waits"
"""An LLM step that failed for good only because Postgres stayed unreachable is waited out
and taken again, instead of ending the run as `llm_error` (the LLM did not fail)."""
CUT_SHORT_REPLIES_PATCH: Final = "cut-short-replies-go-on"
"""A reply without tool calls that the model did not end itself (finish reason `length` or
`content_filter`) no longer ends the run as `end_turn` or `final_answer`: the model is told
and takes another turn. Asked only by a run that gets such a reply (no marker otherwise)."""
NULL_ANSWER_FIELDS_PATCH: Final = "final-answer-null-fields"
"""A `final-answer` call with `"summary": null` (or `"output": null`) is taken as one without
the field, as the released semantics do (`String(args.summary ?? "")`): it was refused, and the
error did not say which field. Asked only by a run that gets such a call."""
BARE_MARKER_PATCH: Final = "bare-final-answer-marker-nudged"
"""A reply that is `FINAL ANSWER:` with nothing after it is an empty reply (nudged): it ended the
run as a success whose answer was the marker. Asked only by a run that gets such a reply."""
UNREAD_TEXT_CALLS_PATCH: Final = "unread-text-calls-nudged"
"""A reply that ends with tool calls written in its text that could not be read (a
`<tool_call>` block that names no tool: no name, cut off before it; `LlmStepResult.
unread_calls`) is nudged, the model told its call did not read and how to write one: it ended
the run on the words before the block, or was an empty reply. Asked only by a run that gets
such a reply (no marker otherwise); in no bundle."""
FIRST_STEP_SEEDS_PATCH: Final = "first-step-seeds"
"""A run's first LLM step seeds its transcript and resolves its tools (`LlmStepInput.seed`)
where a `prepare_run` local activity did before it: one action, one local-activity task and
one second activation of the first workflow task less per run."""

PAYLOAD_BUDGET_PATCH: Final = "payload-budget"
"""A run keeps its payloads within PAYLOAD_BUDGET_BYTES where workflow code takes what it
carries (docs/payload-budget.md): an input a client made by hand past RUN_INPUT_MAX_BYTES
(or whose agent is past AGENT_CONFIG_MAX_BYTES) fails the run as it starts; an answer past
ANSWER_MAX_BYTES is refused (a control character is six bytes), and one whose confidence is
past CONFIDENCE_MAX_CHARS (or, from a `final-answer` call, whose summary is past
ANSWER_SUMMARY_MAX_CHARS) is clipped. Asked only by a run that meets one of these cases (no
marker otherwise), so in no bundle."""
REPLY_BEFORE_STOP_PATCH: Final = "reply-before-stop"
"""A model's reply that had come when a stop did (a cancel request or the deadline, in the
same activation: the workflow task that took the reply was refused for the cancel arriving
while its wrap-up ran, and tried again with both) is taken: an answer ends the run as it
would have, and a turn that would go on ends with the stop instead. Before, the stop
interrupted the wait for the reply already in, and the run ended `cancelled` with no output,
its answer lost. Asked only by a run that meets the case (no marker otherwise); in no bundle."""
SYNTHESIS_BILL_KEPT_PATCH: Final = "synthesis-bill-kept"
"""A DebriefWorkflow whose synthesis call was billed but gave no rich debrief (an answer that
is not usable JSON, or an activity that failed for good after billed replies, its
`BilledReplies` in the failure) keeps the call's usage and dollars in the fallback's
`metrics.synthesis_tokens` (still `synthesized: False`), where `costs` counts them; before,
they were recorded nowhere. Asked only by a debrief that meets the case (no marker otherwise)."""

RUN_PATCHES_2026_12_03: Final = "run-patches-2026-12-03"
"""Every AgentRunWorkflow patch in RUN_PATCHES_2026_12_03_COVERS is on: RUN_PATCHES_2026_12's
and FIRST_STEP_SEEDS_PATCH. A run started with it in its input asks no patch at all; a run
started without a bundle asks this one. A run with it in its input that a worker knowing
only RUN_PATCHES_2026_12 began (one deploy behind its starter) asked that bundle's patch,
and replays with that bundle's patches."""
RUN_PATCHES_2026_12_04: Final = "run-patches-2026-12-04"
"""Every AgentRunWorkflow patch in RUN_PATCHES_2026_12_04_COVERS is on: RUN_PATCHES_2026_12_03's
and the six a run asks one by one where it meets their case: an approval wait (its answer
and, released with this bundle, its events written by an activity), colliding call ids, a
cut-off reply, a `final-answer` call with null fields, a bare marker. A run started with this
bundle asks no patch at all: fewer events, and no marker for a replay to miss (a query's
replay of a parked run missed answer-ends-approval-wait's, the SDK core's bug about the local
activity before it: workflows/run_controls.py)."""
RUN_BUNDLE_2026_12_04_IN_STARTS: Final = False
"""Whether the project's starters put RUN_PATCHES_2026_12_04 in a new run's input (and a run
started without a bundle asks it). Not yet: this is the first of two releases (README,
"Changing workflow code"). Workers of this release take the bundle; a worker from before it
does not know it, asks RUN_PATCHES_2026_12_03, finds no marker on replay and takes every
patch as off: a rollback to such a build would fail every run started with it. The release
after this one, which no worker from before this one polls beside, turns it on."""
RUN_PATCH_BUNDLE: Final = (
    RUN_PATCHES_2026_12_04 if RUN_BUNDLE_2026_12_04_IN_STARTS else RUN_PATCHES_2026_12_03
)
"""The bundle the project's starters put in a run's input (`AgentRunInput.patch_bundle`), and
the one a run started without a bundle asks."""

# -- metrics the workflows record ---------------------------------------------------------------
# With `workflow.metric_meter()`, which records nothing while a workflow replays: a run is
# counted once however often workers replay it; a workflow task tried again after it failed
# counts nothing again on the same worker (workflows/run_metrics.py). Served at a worker's
# /metrics.

RUNS_METRIC: Final = "reactive_temporal_runs_total"
"""Runs finished, labelled agent and terminated_by."""
DEBRIEFS_METRIC: Final = "reactive_temporal_debriefs_total"
"""Debriefs persisted, labelled synthesized (true: written by the LLM; false: deterministic)."""
RUNS_STARTED_METRIC: Final = "reactive_temporal_runs_started_total"
"""Runs started, labelled agent: once per run, by the LLM step that seeds it (its first;
activities/run_started.py), not by the workflow, whose first task can be tried again and
count twice; not again when it continues as new."""
APPROVALS_ASKED_METRIC: Final = "reactive_temporal_approvals_asked_total"
"""Tool calls parked for a person's approval, labelled agent and tool."""
APPROVALS_DECIDED_METRIC: Final = "reactive_temporal_approvals_decided_total"
"""Parked tool calls decided, labelled agent, tool and decision (APPROVAL_DECISIONS)."""
APPROVAL_DECISIONS: Final = ("approved", "denied", "timed_out", "abandoned")
"""How a parked call's wait ends: a person approved or denied it, the approval timeout
denied it, or the run stopped waiting without a decision (an operator's answer, a cancel,
the run's deadline)."""

TOOL_APPROVALS_PATCH: Final = "tool-approvals"
"""A run whose agent names tools needing approval parks their calls until decided."""
APPROVAL_EVENTS_PATCH: Final = "approval-events"
"""A parked run writes its approvals (asked, decided) to its live output."""
ANSWER_ENDS_APPROVAL_WAIT_PATCH: Final = "answer-ends-approval-wait"
"""An operator's `final_answer` signal ends a wait for approval (the calls waiting never
run); it waited for the decisions or the approval timeout (24 h by default), and ran what was
approved after the run had its answer."""
APPROVAL_EVENTS_ACTIVITY_PATCH: Final = "approval-events-as-activity"
"""A parked run writes its approvals to its live output with a regular activity, not a local
one (workflows/run_controls.py says why: a bug of the SDK's core). Asked at the first write."""
UNIQUE_APPROVAL_IDS_PATCH: Final = "unique-approval-ids"
"""A waiting call whose id another call has (a model's id that is another call's
`call-<position>`) gets `-2`, `-3`…; asked only when ids collide."""

# -- memo keys --------------------------------------------------------------------------------

TASK_MEMO: Final = "task"
"""A run's task (clipped), shown by `starter.py runs`."""

# -- workflow ids -----------------------------------------------------------------------------

RUN_ID_HEX_CHARS: Final = 12


def run_workflow_id(agent_id: str, unique: UUID) -> str:
    """A run started by a client: `run-<agent>-<12 hex>`."""
    return f"run-{agent_id}-{unique.hex[:RUN_ID_HEX_CHARS]}"


def chat_run_workflow_id(agent_id: str, unique: UUID) -> str:
    """A run started by a chat turn on the tool path: `run-<agent>-chat-<12 hex>`."""
    return f"run-{agent_id}-chat-{unique.hex[:RUN_ID_HEX_CHARS]}"


_CHAT_RUN_ID = re.compile(r"run-[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}-chat-[0-9a-f]{12}")


def is_chat_run_workflow_id(value: str, agent_id: str | None = None) -> bool:
    """Whether `value` is a `chat_run_workflow_id` (of `agent_id`'s chat, when given)."""
    if _CHAT_RUN_ID.fullmatch(value) is None:
        return False
    return agent_id is None or value[:-RUN_ID_HEX_CHARS] == f"run-{agent_id}-chat-"


def debrief_workflow_id(run_id: str) -> str:
    """The DebriefWorkflow of a run: derived, so a replayed or reset run finds the same one."""
    return f"{run_id}-debrief"


def agent_workflow_id(agent_id: str) -> str:
    """One AgentWorkflow per agent name: `agent-<name>`."""
    return f"agent-{agent_id}"


RUN_PATCHES_2026_12_COVERS: Final = frozenset(
    {
        FINAL_ANSWER_LINE_PATCH,
        OPERATOR_ANSWER_CHECK_PATCH,
        TOOL_CALL_LIMITS_PATCH,
        RUN_CONTINUE_AS_NEW_PATCH,
        SEARCH_ATTRIBUTES_ON_CHANGE_PATCH,
        TRIVIAL_DEBRIEF_IN_RUN_PATCH,
        LAST_RUN_IN_STORE_PATCH,
        LOCAL_STORE_STEPS_PATCH,
        HONEST_ENDINGS_PATCH,
        FAILED_RUNS_TEACH_PATCH,
        RUN_BUDGETS_PATCH,
        RUN_DEADLINE_PATCH,
        TOOL_APPROVALS_PATCH,
        APPROVAL_EVENTS_PATCH,
        STORE_OUTAGE_WAITS_PATCH,
        GRACEFUL_CANCEL_PATCH,
    }
)
"""The patches RUN_PATCHES_2026_12 stands for: every AgentRunWorkflow patch released before it.
Never add to it (a run started with the bundle before a patch existed must not replay as if
it had it); a later bundle gets a set of its own."""

RUN_PATCHES_2026_12_03_COVERS: Final = RUN_PATCHES_2026_12_COVERS | {FIRST_STEP_SEEDS_PATCH}
"""The patches RUN_PATCHES_2026_12_03 stands for; never added to, as its predecessor's."""

RUN_PATCHES_2026_12_04_COVERS: Final = RUN_PATCHES_2026_12_03_COVERS | {
    APPROVAL_EVENTS_ACTIVITY_PATCH,
    ANSWER_ENDS_APPROVAL_WAIT_PATCH,
    UNIQUE_APPROVAL_IDS_PATCH,
    CUT_SHORT_REPLIES_PATCH,
    NULL_ANSWER_FIELDS_PATCH,
    BARE_MARKER_PATCH,
}
"""The patches RUN_PATCHES_2026_12_04 stands for; never added to, as its predecessors'."""

RUN_BUNDLE_COVERS: Final = {
    RUN_PATCHES_2026_12_04: RUN_PATCHES_2026_12_04_COVERS,
    RUN_PATCHES_2026_12_03: RUN_PATCHES_2026_12_03_COVERS,
    RUN_PATCHES_2026_12: RUN_PATCHES_2026_12_COVERS,
}
"""Every run patch bundle and the patches it stands for, newest first."""
