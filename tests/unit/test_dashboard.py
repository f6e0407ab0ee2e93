"""deploy/grafana/reactive-temporal.json hangs together: a dashboard a current Grafana imports
with its own panels only, on a Prometheus data source picked in its `datasource` variable;
every query parses as PromQL and selects only series and labels the code exports
(tests/support/exported.py), its variables standing for any value; every panel follows the
task queue, worker, agent, model and tool chosen; and the README and every alert's runbook
section point at panels that exist.

That a real worker serves what the panels select is tests/e2e/test_dashboard_series.py's.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from reactive_temporal.contracts.run import SUCCESSFUL_ENDINGS
from tests.support.alert_rules import README, RUNBOOK_FILE, rules, runbook_sections, slug
from tests.support.dashboard import (
    DASHBOARD_FILE,
    DASHBOARD_PATH,
    INTERVALS,
    Query,
    dashboard,
    panels,
    queries,
    rows,
    selections,
    substituted,
    used_variables,
    variables,
)
from tests.support.exported import exported, unexported

DOC = dashboard()
PANELS = panels(DOC)
QUERIES = queries(DOC)
PANEL_QUERIES = [q for q in QUERIES if not q.where.startswith("variable ")]
VARIABLES = variables(DOC)
DEFINED = set(VARIABLES)
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

SCHEMA_VERSION = 41
"""Grafana 12's dashboard schema; later releases migrate it forward (their steps change
nothing this dashboard uses: hidden-field overrides, formatTime transformations)."""
BUILT_IN_PANELS = {"row", "timeseries", "stat", "bargauge", "gauge", "table", "text"}
"""Panel types every Grafana has: no plugin to install."""
CHOICES = ["task_queue", "instance", "agent", "model", "tool"]
"""The variables, in order after `datasource`; each is also the label it chooses by."""


def test_the_file_is_a_dashboard_a_current_grafana_imports_as_it_is_written():
    assert DOC["schemaVersion"] == SCHEMA_VERSION
    assert DOC["uid"] == "reactive-temporal" and DOC["title"]
    assert "id" not in DOC, "an id ties the file to one Grafana's database"
    # formatted as json.dumps writes it: hand edits stay in this form and diffs stay small
    assert DASHBOARD_FILE.read_text() == json.dumps(DOC, indent=2, ensure_ascii=False) + "\n"


def test_every_query_reads_the_prometheus_chosen_in_the_datasource_variable():
    first = DOC["templating"]["list"][0]
    assert first["name"] == first["type"] == "datasource"
    assert first["query"] == "prometheus"
    for where, panel in PANELS:
        assert panel.get("datasource") == DATASOURCE, where
        for target in panel["targets"]:
            assert target.get("datasource") == DATASOURCE, f"{where} {target['refId']}"
    for name in CHOICES:
        assert VARIABLES[name]["datasource"] == DATASOURCE, name


def test_the_variables_choose_task_queue_worker_agent_model_and_tool():
    assert list(VARIABLES) == ["datasource", *CHOICES]
    for name in CHOICES:
        variable = VARIABLES[name]
        assert variable["type"] == "query", name
        # All = every series, also one without the label: not Grafana's list of the values
        assert (variable["includeAll"], variable["multi"], variable["allValue"]) == (
            True, True, ".*"
        ), name  # fmt: skip
        assert variable["refresh"] == 2, f"{name}: refreshed with the time range"


def test_the_panels_are_built_in_ones_in_rows_laid_out_without_overlap():
    assert DOC["panels"][0]["type"] == "row", "a panel before the first row"
    ids = [p["id"] for p in DOC["panels"]] + [p["id"] for r, _ in rows(DOC) for p in r["panels"]]
    assert len(ids) == len(set(ids)), "two panels share an id"
    titles = [where for where, _ in PANELS]
    assert len(titles) == len(set(titles)), "two panels share a row and title"
    taken: list[tuple[int, int, int, int, str]] = []
    for row, under in rows(DOC):
        assert row["title"] and not row["collapsed"], row["title"]
        for panel in [row, *under]:
            where = f"{row['title']} › {panel['title']}"
            assert panel["type"] in BUILT_IN_PANELS, f"{where}: {panel['type']} is a plugin"
            assert "libraryPanel" not in panel, where
            box = panel["gridPos"]
            x, y, w, h = box["x"], box["y"], box["w"], box["h"]
            assert 0 <= x and w > 0 and x + w <= 24 and h > 0, f"{where}: {box}"
            for ox, oy, ow, oh, other in taken:
                overlap = x < ox + ow and ox < x + w and y < oy + oh and oy < y + h
                assert not overlap, f"{where} overlaps {other}"
            taken.append((x, y, w, h, where))
            if panel is not row:
                assert y > row["gridPos"]["y"], f"{where} is above its row"
                assert panel["description"].strip(), f"{where}: no description"
                ref_ids = [t["refId"] for t in panel["targets"]]
                assert ref_ids and len(ref_ids) == len(set(ref_ids)), where


def test_the_panels_are_written_in_the_order_they_are_shown():
    """Top to bottom, left to right: a panel added by hand goes where a reader of the file
    looks for it, under its row."""
    shown = [(p["gridPos"]["y"], p["gridPos"]["x"]) for p in DOC["panels"]]
    assert shown == sorted(shown)


@pytest.mark.parametrize("query", QUERIES, ids=[q.where for q in QUERIES])
def test_every_query_selects_only_series_and_labels_the_code_exports(query: Query):
    found = selections(query, DEFINED)  # raises on PromQL it cannot parse or check
    assert found, f"{query.where} selects no series"
    known = exported()
    problems = [p for selection in found for p in unexported(selection, known)]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize("query", PANEL_QUERIES, ids=[q.where for q in PANEL_QUERIES])
def test_every_panel_follows_what_the_variables_choose(query: Query):
    """A panel that ignores `$task_queue` draws the whole fleet while the engineer looks at
    one queue. Every series is chosen by worker (`instance`, which Prometheus adds), and by
    each other variable's label it has."""
    known = exported()
    for selection in selections(query, DEFINED):
        if selection.metric not in known:
            continue  # the test above names it
        has = known[selection.metric].labels | {"instance"}
        expected = {label for label in CHOICES if label in has}
        assert selection.chosen == expected, (
            f"{selection.describe()}: matched on variables {sorted(selection.chosen)}, "
            f"its labels take {sorted(expected)}"
        )


def test_every_variable_is_used_and_every_one_used_is_defined():
    used = {name for q in QUERIES for name in used_variables(q.expr)} - set(INTERVALS)
    assert used == set(CHOICES)


def test_the_runs_that_succeeded_are_the_endings_a_result_calls_success():
    text = DASHBOARD_FILE.read_text()
    chosen = re.findall(r'terminated_by[=!]~\\"([^"\\]+)\\"', text)
    assert chosen, "no panel splits runs by how they ended"
    for values in chosen:
        assert set(values.split("|")) == SUCCESSFUL_ENDINGS, values


def check(expr: str, *defined: str) -> list[str]:
    query = Query("Row › Panel", expr)
    return [p for s in selections(query, set(defined)) for p in unexported(s, exported())]


def test_a_series_label_or_value_no_worker_exports_is_named():
    calls = 'sum by (outcome) (rate(reactive_temporal_tool_calls_total{tool=~"$t"}[5m]))'
    assert check(calls, "t") == []
    (name,) = check("rate(reactive_temporal_tool_call_total[5m])")
    assert "reactive_temporal_tool_call_total is not a series a worker exports" in name
    (label,) = check("sum by (result) (rate(reactive_temporal_tool_calls_total[5m]))")
    assert "has no label 'result'" in label
    (value,) = check('temporal_worker_task_slots_available{worker_type="Activity"}')
    assert "worker_type='Activity' is none of" in value
    # the agent's series have no task_queue (the SDK's and the workflows' have)
    assert check('reactive_temporal_llm_cost_usd_total{task_queue=~"$q"}', "q") != []
    assert check('reactive_temporal_runs_total{task_queue=~"$q"}', "q") == []


def test_variables_stand_for_any_value_of_a_label_the_series_must_have():
    expr = (
        'sum(rate(reactive_temporal_runs_total{agent=~"${agent:regex}", task_queue=~"[[q]]", '
        'terminated_by="timeout"}[$__rate_interval]))'
    )
    (found,) = selections(Query("Row › Panel", expr), {"agent", "q"})
    assert found.labels == {"agent", "task_queue", "terminated_by"}
    assert found.values == (("terminated_by", "timeout"),)
    assert found.chosen == {"agent", "task_queue"}
    with pytest.raises(ValueError, match=r"\$task_queu is not a variable of the dashboard"):
        substituted('x{task_queue=~"$task_queu"}', {"task_queue"})


def test_a_variable_query_selects_its_series_and_needs_its_label():
    query = Query("variable x", 'label_values(temporal_num_pollers{task_queue=~"$q"}, poller_type)')
    (found,) = selections(query, {"q"})
    assert (found.metric, found.labels) == ("temporal_num_pollers", {"task_queue", "poller_type"})
    with pytest.raises(ValueError, match="not `label_values"):
        selections(Query("variable x", "label_values(agent)"), set())


def test_the_exported_set_is_read_from_the_code():
    known = exported()
    assert known["reactive_temporal_llm_request_seconds_bucket"].labels == {
        "model", "outcome", "le"
    }  # fmt: skip
    assert "reactive_temporal_tool_calls_total" in known
    assert "reactive_temporal_tool_calls" not in known  # a counter is served as …_total
    assert {"agent", "terminated_by", "task_queue"} <= known["reactive_temporal_runs_total"].labels


def test_the_readme_and_the_runbook_link_the_dashboard():
    readme = README.read_text()
    metrics = readme[readme.index("### Metrics, health and traces") :]
    metrics = metrics[: metrics.index("\n### ", 1)]
    assert f"({DASHBOARD_PATH})" in metrics
    assert f"(../{DASHBOARD_PATH})" in RUNBOOK_FILE.read_text()


def dashboard_paragraph(section: str) -> str:
    start = section.index("**Dashboard.**")
    end = section.find("\n\n", start)
    return section[start : end if end >= 0 else None]


@pytest.mark.parametrize("rule", rules(), ids=[r["alert"] for r in rules()])
def test_every_alert_s_runbook_section_names_panels_that_exist(rule: dict[str, Any]):
    section = runbook_sections()[slug(rule["alert"])]
    assert "**Dashboard.**" in section, f"{rule['alert']}: its section names no panel"
    named = [
        " ".join(found.split())  # a reference the paragraph wraps
        for found in re.findall(r"\*([^*]+? › [^*]+?)\*", dashboard_paragraph(section))
    ]
    assert named, f"{rule['alert']}: its **Dashboard.** paragraph names no `*Row › Panel*`"
    titles = {where for where, _ in PANELS}
    assert set(named) <= titles, f"no such panel: {sorted(set(named) - titles)}"
