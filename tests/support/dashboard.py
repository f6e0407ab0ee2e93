"""The Grafana dashboard (deploy/grafana/reactive-temporal.json) read as data, for the tests
that keep it true: its rows and panels, every query's PromQL with the dashboard's variables
filled in, and what each query selects (the alert rules' reader, tests/support/alert_rules.py).

A panel that selects a series no worker serves shows "No data", which on a quiet fleet looks
like all is well: a renamed metric, a label the SDK dropped, a typo in a variable. So each
selection is compared with what the code exports (tests/support/exported.py) and with a real
worker's scrape (tests/e2e/test_dashboard_series.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from tests.support.alert_rules import ANY_VALUE, REPO, Selection, expression_selections

DASHBOARD_FILE = REPO / "deploy" / "grafana" / "reactive-temporal.json"
DASHBOARD_PATH = "deploy/grafana/reactive-temporal.json"
"""How the README and the runbook name it (relative to the repository)."""

INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "6h"}
"""Grafana's own variables a query may use, and a value of their kind for the parser."""

VARIABLE = re.compile(
    r"\$\{(?P<braced>\w+)(?::[^}]*)?\}|\$(?P<bare>\w+)|\[\[(?P<old>\w+)(?::[^\]]*)?\]\]"
)
"""`${name}`, `${name:format}`, `$name` and the old `[[name]]` (Grafana's forms)."""

LABEL_VALUES = re.compile(r"^\s*label_values\((?P<selector>.+),\s*(?P<label>\w+)\s*\)\s*$", re.S)


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard, and where it is."""

    where: str
    """`Row › Panel` (or `variable NAME`): how the runbook and test failures name it."""
    expr: str


def dashboard() -> dict[str, Any]:
    return dict(json.loads(DASHBOARD_FILE.read_text()))


def rows(document: dict[str, Any]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each row panel with the panels under it: those after it in `panels` up to the next row
    (an open row), or its own `panels` (a collapsed one). Panels before any row have none."""
    found: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for panel in document.get("panels", []):
        if panel.get("type") == "row":
            found.append((panel, list(panel.get("panels", []))))
        elif found:
            found[-1][1].append(panel)
        else:
            found.append(({"type": "row", "title": ""}, [panel]))
    return found


def panels(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every panel that is not a row, named `Row › Panel`."""
    return [
        (f"{row.get('title', '')} › {panel.get('title', '')}", panel)
        for row, under in rows(document)
        for panel in under
    ]


def variables(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The dashboard's template variables by name."""
    return {v["name"]: v for v in document.get("templating", {}).get("list", [])}


def variable_query(variable: dict[str, Any]) -> str:
    """A query variable's query text (a string, or the editor's `{"query": …}` object)."""
    query = variable.get("query", "")
    return str(query.get("query", "") if isinstance(query, dict) else query)


def queries(document: dict[str, Any]) -> list[Query]:
    """Every PromQL expression: each panel target's `expr`, each query variable's query."""
    found = [
        Query(where, target["expr"])
        for where, panel in panels(document)
        for target in panel.get("targets", [])
        if "expr" in target
    ]
    found += [
        Query(f"variable {name}", variable_query(variable))
        for name, variable in variables(document).items()
        if variable.get("type") == "query"
    ]
    return found


def used_variables(expr: str) -> set[str]:
    """The names of the variables an expression uses (Grafana's own, `__…`, included)."""
    return {next(g for g in m.groups() if g) for m in VARIABLE.finditer(expr)}


def substituted(expr: str, defined: set[str]) -> str:
    """`expr` as PromQL the parser reads: a variable of the dashboard becomes ANY_VALUE (the
    series must carry the label it matches; any value may be picked), one of Grafana's
    intervals a duration. ValueError naming a variable neither defines."""

    def value(match: re.Match[str]) -> str:
        name = next(g for g in match.groups() if g)
        if name in INTERVALS:
            return INTERVALS[name]
        if name in defined:
            return ANY_VALUE
        raise ValueError(f"${name} is not a variable of the dashboard (it has {sorted(defined)})")

    return VARIABLE.sub(value, expr)


def selections(query: Query, defined: set[str]) -> list[Selection]:
    """What `query` selects, its variables filled in. A variable's `label_values(SELECTOR,
    LABEL)` selects SELECTOR's series and needs LABEL on them; ValueError for a query variable
    of another form (`label_values(LABEL)` reads every series of the data source)."""
    expr = substituted(query.expr, defined)
    if not query.where.startswith("variable "):
        return expression_selections(query.where, expr)
    match = LABEL_VALUES.match(expr)
    if match is None:
        raise ValueError(f"{query.where}: not `label_values(<selector>, <label>)`: {query.expr}")
    return [
        replace(found, labels=found.labels | {match["label"]})
        for found in expression_selections(query.where, match["selector"])
    ]


def dashboard_selections(document: dict[str, Any]) -> list[Selection]:
    """Everything the dashboard's panels and variables select."""
    defined = set(variables(document))
    return [s for query in queries(document) for s in selections(query, defined)]
