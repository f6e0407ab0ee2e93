"""Every Temporal name is written once, in `reactive_temporal/contracts/names.py`.

A workflow type, signal, query, update, activity or patch name typed out anywhere else in
`workflows/`, `activities/` or the client code is a second definition that can drift (and a
renamed string breaks every run in flight). Tests and recorded histories may spell them.

Names like "chat", "progress" or "history" are also ordinary words (a CLI command is called
`history`; "final_answer" is a `terminated_by` value too), so the check does not look for
the words: it looks at the places where Temporal takes a name — the first argument of an
activity, child-workflow, signal, query, update or patch call, the `name=` of a handler or
activity decorator, a `start_signal=`, an inline id format passed as `id=`, and a comparison
with a workflow type or signal — and fails on a string literal there, whatever it says.
Workflow type names, which are no ordinary words, are refused anywhere.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from reactive_temporal.contracts import names

REPO = Path(__file__).resolve().parents[2]
NAMES_MODULE = REPO / "reactive_temporal" / "contracts" / "names.py"
SCANNED = sorted(
    p
    for package in ("reactive_temporal", "workflows", "activities")
    for p in (REPO / package).rglob("*.py")
    if p != NAMES_MODULE
) + [REPO / "worker.py", REPO / "starter.py"]

NAME_VALUES = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
WORKFLOW_TYPES = {names.AGENT_RUN_WORKFLOW, names.AGENT_WORKFLOW, names.DEBRIEF_WORKFLOW}

NAME_TAKING_CALLS = {
    # workflow code
    "execute_activity", "start_activity", "execute_local_activity", "start_local_activity",
    "execute_child_workflow", "start_child_workflow", "patched", "deprecate_patch",
    # workflow and client handles
    "signal", "query", "execute_update", "start_update",
    # the client
    "start_workflow", "execute_workflow", "signal_with_start_workflow",
    "execute_update_with_start_workflow", "start_update_with_start_workflow",
    "WithStartWorkflowOperation", "get_workflow_handle_for",
}  # fmt: skip
NAME_KEYWORDS = {"name", "start_signal", "workflow", "activity", "update", "query", "signal"}
DECORATORS = {"defn", "signal", "query", "update"}
"""`@activity.defn(name=…)`, `@workflow.defn(name=…)`, `@workflow.query(name=…)`, …"""
ID_TAKING_CALLS = NAME_TAKING_CALLS | {"get_workflow_handle", "get_external_workflow_handle"}
ID_FIRST_CALLS = {"get_workflow_handle", "get_external_workflow_handle"}
"""Calls whose first argument is a workflow id: an inline format there is an id builder."""
NAME_HOLDERS = ("signal", "workflow_type", "query", "update", "activity", "patch")
"""Attributes or variables whose value is a Temporal name (`input.signal == "run_started"`)."""


@dataclass(frozen=True)
class Finding:
    line: int
    text: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


def _is_text(node: ast.AST | None) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _called(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _holder_name(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def literal_names(source: str) -> list[Finding]:
    """Where `source` writes a Temporal name as a literal instead of using `names`."""
    found: list[Finding] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and (called := _called(node)) is not None:
            first = node.args[0] if node.args else None
            if first is not None and (
                (called in NAME_TAKING_CALLS and _is_text(first))
                or (called in ID_FIRST_CALLS and isinstance(first, ast.JoinedStr))
            ):
                found.append(Finding(node.lineno, f"{called}({ast.unparse(first)}, …)"))
            for kw in node.keywords:
                is_decorator_name = called in DECORATORS and kw.arg == "name"
                takes_name = called in NAME_TAKING_CALLS and kw.arg in NAME_KEYWORDS
                if (is_decorator_name or takes_name) and _is_text(kw.value):
                    found.append(
                        Finding(node.lineno, f"{called}({kw.arg}={ast.unparse(kw.value)})")
                    )
                if called in ID_TAKING_CALLS and kw.arg == "id" and _is_text(kw.value):
                    found.append(Finding(node.lineno, f"{called}(id={ast.unparse(kw.value)})"))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            holds_name = any(h in _holder_name(s) for s in sides for h in NAME_HOLDERS)
            for side in sides:
                if holds_name and isinstance(side, ast.Constant) and side.value in NAME_VALUES:
                    found.append(Finding(node.lineno, f"compared with {side.value!r}"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in WORKFLOW_TYPES:
                found.append(Finding(node.lineno, f"workflow type {node.value!r}"))
            elif any(f"'{t}'" in node.value for t in WORKFLOW_TYPES):
                found.append(Finding(node.lineno, f"workflow type inside {node.value!r}"))
    return sorted(set(found), key=lambda f: f.line)


def test_no_temporal_name_is_written_outside_the_names_module():
    findings = {
        str(path.relative_to(REPO)): [str(f) for f in literal_names(path.read_text())]
        for path in SCANNED
    }
    assert {path: found for path, found in findings.items() if found} == {}


def test_the_scan_covers_the_code_that_uses_names():
    """Not vacuous: the files that call Temporal by name are scanned, and use `names`."""
    scanned = {str(p.relative_to(REPO)) for p in SCANNED}
    assert {
        "workflows/agent_run.py",
        "workflows/run_llm_step.py",
        "workflows/agent_entity.py",
        "workflows/agent_debrief.py",
        "activities/workflow_calls.py",
        "reactive_temporal/api/entity_handle.py",
        "reactive_temporal/api/agents.py",
        "reactive_temporal/api/runs.py",
        "reactive_temporal/api/debriefs.py",
        "reactive_temporal/api/rerun.py",
    } <= scanned
    uses = sum(p.read_text().count("names.") for p in SCANNED)
    assert uses > 40


# -- the check catches what it should, and only that ----------------------------------------------

PLANTED = {
    "activity by name": 'await workflow.execute_activity("llm_step", x)',
    "a new activity": 'await workflow.execute_activity("brand_new_step", x)',
    "local activity": 'await workflow.execute_local_activity("record_messages", x)',
    "child workflow": 'await workflow.start_child_workflow("DebriefWorkflow", x, id=i)',
    "external signal": 'await workflow.get_external_workflow_handle(i).signal("debrief_ready", x)',
    "client query": 'await handle.query("progress", result_type=RunProgress)',
    "query of a common word": 'await handle.query("history", ref)',
    "client update": 'await client.execute_update_with_start_workflow("chat", r)',
    "start with a signal": 'await client.start_workflow(W.run, x, start_signal="run_started")',
    "activity decorator": '@activity.defn(name="llm_step")\nasync def f(): ...',
    "query decorator": '@workflow.query(name="progress")\ndef p(self): ...',
    "patch": 'if workflow.patched("local-store-steps"): pass',
    "inline run id": 'await client.start_workflow(W.run, x, id=f"run-{agent}-{uuid4().hex[:12]}")',
    "inline debrief id": 'h = client.get_workflow_handle(f"{run_id}-debrief")',
    "workflow type compared": 'if description.workflow_type != "AgentRunWorkflow": pass',
    "signal compared": 'p = a if input.signal == "run_started" else b',
    "workflow type in a query": "q = \"WorkflowType = 'AgentRunWorkflow'\"",
}  # fmt: skip
NOT_NAMES = {
    "a CLI command": '@session_app.command("history")\ndef session_history(): ...',
    "an ending": 'Finish("final_answer", answer)',
    "a terminated_by value": 'if terminated_by in ("final_answer_tool", "final_answer"): pass',
    "a status": 'status = "completed" if done else "running"',
    "prose": 'print("chat with the agent about its progress and history")',
    "a dict key": 'd = {"progress": 1, "chat": 2}',
    "names used": "await workflow.start_child_workflow(W.run, x, id=names.agent_workflow_id(a))",
    "typed reference": "await handle.query(AgentRunWorkflow.progress)",
}  # fmt: skip


@pytest.mark.parametrize("source", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_literal_name_is_caught(source: str):
    assert literal_names(source) != []


@pytest.mark.parametrize("source", NOT_NAMES.values(), ids=NOT_NAMES.keys())
def test_ordinary_strings_are_not_taken_for_names(source: str):
    assert literal_names(source) == []


def test_a_literal_planted_in_the_run_loop_is_caught():
    real = (REPO / "workflows" / "run_llm_step.py").read_text()
    assert literal_names(real) == []
    planted = real.replace(
        "names.LLM_STEP,\n            LlmStepInput(", '"llm_step",\n            LlmStepInput(', 1
    )
    assert planted != real
    assert [f.text for f in literal_names(planted)] == ["start_activity('llm_step', …)"]


def test_the_run_patch_bundle_covers_exactly_the_patches_released_before_it():
    """A run started with RUN_PATCHES_2026_12 takes every patch it covers as on, unasked: a
    patch added to the set later would turn on in runs started before it existed (their
    replay would diverge). New patches stay out of it and are asked on their own."""
    assert set(names.RUN_PATCHES_2026_12_COVERS) == {
        "final-answer-line-anchored", "operator-answer-checked", "tool-call-limits",
        "run-continue-as-new", "search-attributes-on-change", "trivial-debrief-in-run",
        "last-run-in-store", "local-store-steps", "honest-endings", "failed-runs-teach",
        "run-budgets", "run-deadline", "tool-approvals", "approval-events",
        "store-outage-waits", "graceful-cancel",
    }  # fmt: skip
    root = Path(__file__).resolve().parents[2] / "workflows"
    asked: set[str] = set()
    for module in ("agent_run.py", "run_controls.py", "run_llm_step.py"):
        source = (root / module).read_text()
        asked |= set(re.findall(r"self\.patched\(\s*names\.([A-Z0-9_]+)", source))
        rest = re.sub(r"workflow\.patched\(names\.RUN_PATCHES_2026_12(_03)?\)", "", source)
        assert "workflow.patched(names." not in rest, f"{module}: ask run patches with self.patched"
    assert set(names.RUN_PATCHES_2026_12_COVERS) <= {getattr(names, a) for a in asked}
    assert set(names.RUN_PATCHES_2026_12_03_COVERS) <= {getattr(names, a) for a in asked}


def test_the_newer_bundle_covers_the_earlier_one_and_the_first_step_seeds():
    """RUN_PATCHES_2026_12_03 stands for every patch of the bundle before it, and for the one
    patch released since; the starters put it in every run's input."""
    assert names.RUN_PATCHES_2026_12_03_COVERS - names.RUN_PATCHES_2026_12_COVERS == {
        "first-step-seeds"
    }
    assert names.RUN_PATCHES_2026_12_COVERS < names.RUN_PATCHES_2026_12_03_COVERS


def test_the_newest_bundle_covers_every_run_patch_and_is_not_yet_sent():
    """RUN_PATCHES_2026_12_04 stands for every patch of the bundle before it and the six a
    run asks one by one where it meets their case (so their markers no longer land in a task
    that also takes updates). Workers take it in this release; starters send it in the next
    (a rollback to a worker that does not know it must not meet runs carrying it)."""
    assert names.RUN_PATCHES_2026_12_04_COVERS - names.RUN_PATCHES_2026_12_03_COVERS == {
        "answer-ends-approval-wait", "unique-approval-ids", "cut-short-replies-go-on",
        "final-answer-null-fields", "bare-final-answer-marker-nudged",
        "approval-events-as-activity",
    }  # fmt: skip
    root = Path(__file__).resolve().parents[2] / "workflows"
    asked: set[str] = set()
    for module in ("agent_run.py", "run_controls.py", "run_llm_step.py", "run_tools.py"):
        source = (root / module).read_text()
        asked |= set(re.findall(r"self\.patched\(\s*names\.([A-Z0-9_]+)", source))
    # a patch released since is asked on its own: it joins the next bundle, never this one
    released_since = {
        names.PAYLOAD_BUDGET_PATCH,
        names.UNREAD_TEXT_CALLS_PATCH,
        names.REPLY_BEFORE_STOP_PATCH,
    }
    asked_names = {getattr(names, a) for a in asked}
    assert asked_names == names.RUN_PATCHES_2026_12_04_COVERS | released_since
    assert not any(released_since & covers for covers in names.RUN_BUNDLE_COVERS.values())
    assert list(names.RUN_BUNDLE_COVERS) == [
        "run-patches-2026-12-04", "run-patches-2026-12-03", "run-patches-2026-12"
    ]  # fmt: skip
    assert names.RUN_BUNDLE_2026_12_04_IN_STARTS is False
    assert names.RUN_PATCH_BUNDLE == "run-patches-2026-12-03"


def test_the_entity_bundle_covers_exactly_what_it_covered_when_it_shipped():
    """`entity-patches-2026-12` has shipped to workers: what it stands for never changes. The
    entity patch released since, chat-routing-ascii, is asked on its own, once, in every
    entity run's first task (`_ask_patches`; in this release only by a replay), never where a
    handler first needs it."""
    assert names.ENTITY_PATCHES_2026_12_COVERS == {
        "sessions-in-postgres", "entity-continues-after-handlers", "chat-notes-user-role",
        "live-runs-from-visibility", "last-run-from-store",
    }  # fmt: skip
    assert names.ASCII_CHAT_ROUTING_PATCH == "chat-routing-ascii"
    assert names.ASCII_CHAT_ROUTING_PATCH not in names.ENTITY_PATCHES_2026_12_COVERS
    assert names.ASCII_CHAT_ROUTING_ASKED is False  # first of two releases: on replay only
    assert names.ENTITY_PATCH_BUNDLE == names.ENTITY_PATCHES_2026_12
    root = Path(__file__).resolve().parents[2] / "workflows"
    asking = {
        p.name: p.read_text().count("names.ASCII_CHAT_ROUTING_PATCH") for p in root.glob("*.py")
    }
    assert {name: n for name, n in asking.items() if n} == {"entity_patches.py": 1}
    source = (root / "entity_patches.py").read_text()
    first_task = source[source.index("def _ask_patches") : source.index("def _sessions_saved")]
    assert "workflow.patched(names.ASCII_CHAT_ROUTING_PATCH)" in first_task


def test_entity_inputs_bounded_is_asked_on_its_own_in_every_entity_run_s_first_task():
    """Released after the bundle, as chat-routing-ascii was: never in the bundle, asked once,
    in `_ask_patches`, after the routing patch (in this release only by a replay)."""
    assert names.ENTITY_INPUTS_BOUNDED_PATCH == "entity-inputs-bounded"
    assert names.ENTITY_INPUTS_BOUNDED_PATCH not in names.ENTITY_PATCHES_2026_12_COVERS
    assert names.ENTITY_INPUTS_BOUNDED_ASKED is False  # first of two releases: on replay only
    root = Path(__file__).resolve().parents[2] / "workflows"
    asking = {
        p.name: p.read_text().count("names.ENTITY_INPUTS_BOUNDED_PATCH") for p in root.glob("*.py")
    }
    assert {name: n for name, n in asking.items() if n} == {"entity_patches.py": 1}
    source = (root / "entity_patches.py").read_text()
    first_task = source[source.index("def _ask_patches") : source.index("def _sessions_saved")]
    routing = first_task.index("workflow.patched(names.ASCII_CHAT_ROUTING_PATCH)")
    assert first_task.index("workflow.patched(names.ENTITY_INPUTS_BOUNDED_PATCH)") > routing
