"""The Prometheus alert rules (deploy/prometheus/alerts.yaml) read as data, for the tests that
keep them true: each rule's expression parsed, the series and labels it selects, and what a
worker's /metrics serves.

A rule that selects a series no worker serves, or matches a label its samples lack, never
fires and says nothing: renaming a series in `reactive_temporal/telemetry/metrics.py`, or an
SDK upgrade renaming one of Temporal's, would silently switch an alert off. So every
selection here is compared with a real worker's scrape (tests/e2e/test_alert_series.py).
The Grafana dashboard's queries are read with the same functions (tests/support/dashboard.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import promql_parser
import yaml

from reactive_temporal.contracts.names import APPROVAL_DECISIONS
from reactive_temporal.contracts.run import TerminatedBy
from reactive_temporal.telemetry.metrics import ADAPTATIONS

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
RULES_FILE = REPO / "deploy" / "prometheus" / "alerts.yaml"
RUNBOOK_FILE = REPO / "docs" / "runbook.md"
RUNBOOK_URL = "docs/runbook.md"
"""What every runbook_url starts with (relative to the repository), before `#anchor`."""

TARGET_LABELS = frozenset({"instance", "job"})
"""Labels Prometheus adds to every series it scrapes: a rule may group by them."""

KNOWN_VALUES: dict[tuple[str, str], frozenset[str]] = {
    ("reactive_temporal_runs_total", "terminated_by"): frozenset(get_args(TerminatedBy)),
    ("reactive_temporal_llm_adaptations_total", "kind"): frozenset(ADAPTATIONS),
    ("reactive_temporal_approvals_decided_total", "decision"): frozenset(APPROVAL_DECISIONS),
}
"""Label values the project enumerates, for values a test run cannot all produce (a run
ending `budget_exceeded`, an endpoint that cuts prompts, an approval timing out): a rule may
match these too."""

PLAIN_ALTERNATION = re.compile(r"^[A-Za-z0-9_:.\-]+(\|[A-Za-z0-9_:.\-]+)*$")
"""A regex matcher the tests can read as a list of values (`a|b|c`)."""

ANY_VALUE = "__any_value__"
"""A matcher value that stands for whatever a dashboard's user picks (a template variable,
`task_queue=~"$task_queue"`): the label is needed on the series, the value is not checked."""


def slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """The runbook's `## ` sections (one per alert): anchor → the section's text."""
    parts = re.split(r"^## (.+)$", RUNBOOK_FILE.read_text(), flags=re.MULTILINE)
    return {slug(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def rules() -> list[dict[str, Any]]:
    """Every rule of every group, as written."""
    document = yaml.safe_load(RULES_FILE.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


@dataclass(frozen=True)
class Selection:
    """One series a rule's expression selects, with the labels it needs on it."""

    rule: str
    """The alert, or the dashboard panel or variable, whose expression selects it."""
    metric: str
    labels: frozenset[str]
    """Label names matched on, grouped by (`by`) or joined on (`on`): each must be on the
    series' samples (or be one Prometheus adds, TARGET_LABELS)."""
    values: tuple[tuple[str, str], ...]
    """(label, value) for each value a matcher names (`=`, `!=`, each of `=~"a|b"`)."""
    chosen: frozenset[str] = frozenset()
    """Labels matched on a value the user picks (ANY_VALUE): in `labels`, not in `values`."""

    def describe(self) -> str:
        return f"{self.rule}: {self.metric}"


def selections(rule: dict[str, Any]) -> list[Selection]:
    """What the rule's expression selects; ValueError for a selector the tests cannot check
    (no literal metric name, a regex that is not a plain list of values)."""
    return expression_selections(rule["alert"], rule["expr"])


def expression_selections(where: str, expr: str) -> list[Selection]:
    """What a PromQL expression selects, each selection named `where` (an alert, a panel);
    ValueError as for `selections`."""
    found: list[Selection] = []
    _visit(promql_parser.parse(expr), frozenset(), where, found)
    return found


def _visit(node: Any, needed: frozenset[str], rule: str, found: list[Selection]) -> None:
    if isinstance(node, promql_parser.VectorSelector):
        found.append(_selection(node, needed, rule))
    elif isinstance(node, promql_parser.MatrixSelector):
        _visit(node.vector_selector, needed, rule, found)
    elif isinstance(node, promql_parser.AggregateExpr):
        modifier = node.modifier
        if modifier is not None and modifier.type == promql_parser.AggModifierType.By:
            needed = needed | frozenset(modifier.labels)
        _visit(node.expr, needed, rule, found)
        if node.param is not None:
            _visit(node.param, frozenset(), rule, found)
    elif isinstance(node, promql_parser.BinaryExpr):
        matching = node.modifier.matching if node.modifier is not None else None
        if matching is not None and matching.type == promql_parser.LabelModifierType.Include:
            needed = needed | frozenset(matching.labels)  # `on (…)`: both sides need them
        _visit(node.lhs, needed, rule, found)
        _visit(node.rhs, needed, rule, found)
    elif isinstance(node, promql_parser.Call):
        for arg in node.args:
            _visit(arg, needed, rule, found)
    elif isinstance(
        node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
    ):
        _visit(node.expr, needed, rule, found)


def _selection(node: Any, needed: frozenset[str], rule: str) -> Selection:
    if not node.name:
        raise ValueError(f"{rule}: a selector without a metric name: {node}")
    if node.matchers.or_matchers:
        raise ValueError(f"{rule}: a selector with `or` matchers: {node}")
    labels = set(needed)
    values: list[tuple[str, str]] = []
    chosen: set[str] = set()
    for matcher in node.matchers.matchers:
        if matcher.name == "__name__":
            raise ValueError(f"{rule}: select {node.name} by its name only: {node}")
        labels.add(matcher.name)
        if matcher.value == ANY_VALUE:
            chosen.add(matcher.name)
            continue
        regex = matcher.op in (promql_parser.MatchOp.Re, promql_parser.MatchOp.NotRe)
        if regex and not PLAIN_ALTERNATION.match(matcher.value):
            raise ValueError(
                f"{rule}: {node.name}'s matcher {matcher.name}=~{matcher.value!r} is not a "
                "plain list of values (a|b|c) the tests can check"
            )
        for value in matcher.value.split("|") if regex else [matcher.value]:
            values.append((matcher.name, value))
    return Selection(rule, node.name, frozenset(labels), tuple(values), frozenset(chosen))


Served = dict[str, dict[str, set[str]]]
"""Sample name → label name → the values seen (a counter's `_total`, a histogram's
`_bucket`, `_count` and `_sum` are sample names of their own)."""


SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+\S+(?:\s+\S+)?$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def served(text: str) -> Served:
    """What a scrape in Prometheus text serves: sample lines, not bare HELP/TYPE lines (a
    labelled metric with no child yet has those alone, and selects nothing). Read by hand:
    prometheus_client's parser names every counter's samples `…_total`, and the SDK's
    counters have no such suffix (`temporal_request`), so it would hide a wrong name."""
    names: Served = {}
    for line in text.splitlines():
        match = SAMPLE.match(line.strip())
        if line.startswith("#") or match is None:
            continue
        labels = names.setdefault(match.group(1), {})
        for label, value in LABEL.findall(match.group(2) or ""):
            labels.setdefault(label, set()).add(_unescape(value))
    return names


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def unserved(wanted: list[Selection], text: str) -> list[str]:
    """What of `wanted` the scrape `text` does not serve, each problem once."""
    found = served(text)
    return list(dict.fromkeys(p for selection in wanted for p in missing(selection, found)))


def missing(selection: Selection, scrape: Served) -> list[str]:
    """What of `selection` the scrape does not serve, in words (empty when all is there)."""
    if selection.metric not in scrape:
        return [f"{selection.describe()} is not served"]
    labels = scrape[selection.metric]
    problems = [
        f"{selection.describe()} has no label {label!r} (it has {sorted(labels)})"
        for label in sorted(selection.labels - TARGET_LABELS)
        if label not in labels
    ]
    for label, value in selection.values:
        known = labels.get(label, set()) | KNOWN_VALUES.get((selection.metric, label), set())
        if label in labels and value not in known:
            problems.append(
                f"{selection.describe()}: no {label}={value!r} served or known "
                f"(served: {sorted(labels[label])})"
            )
    return problems
