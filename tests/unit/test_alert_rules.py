"""deploy/prometheus/alerts.yaml hangs together, and its runbook with it: every rule has what
Prometheus and an on-call engineer need, every expression parses as PromQL and selects what
the tests can check, every runbook_url lands on its own section of docs/runbook.md, and every
command the runbook tells the engineer to type exists with the options it uses.

That a real worker serves what the rules select is tests/e2e/test_alert_series.py's.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import promql_parser
import pytest
import typer

from reactive_temporal.cli.app import app
from reactive_temporal.embedded.dev_server import temporal_binary
from tests.support.alert_rules import (
    README,
    RULES_FILE,
    RUNBOOK_FILE,
    RUNBOOK_URL,
    Selection,
    missing,
    rules,
    runbook_sections,
    selections,
    served,
    slug,
)
from tests.support.exported import exported, unexported

RULES = rules()
NAMES = [rule["alert"] for rule in RULES]
SEVERITIES = {"critical", "warning", "info"}
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def test_the_rules_are_prometheus_alerting_rules_with_all_an_engineer_needs():
    assert RULES, f"no rules in {RULES_FILE}"
    assert len(set(NAMES)) == len(NAMES), "two alerts share a name"
    for rule in RULES:
        name = rule.get("alert")
        assert isinstance(name, str) and re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), rule
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, name
        assert isinstance(rule.get("expr"), str) and rule["expr"].strip(), name
        assert DURATION.match(str(rule.get("for", ""))), f"{name}: `for` {rule.get('for')!r}"
        assert rule.get("labels", {}).get("severity") in SEVERITIES, name
        annotations = rule.get("annotations", {})
        for key in ("summary", "description", "runbook_url"):
            assert isinstance(annotations.get(key), str) and annotations[key].strip(), (
                f"{name}: annotation {key} missing"
            )


@pytest.mark.parametrize("rule", RULES, ids=NAMES)
def test_every_expression_parses_as_promql_and_selects_named_series(rule: dict[str, Any]):
    promql_parser.parse(rule["expr"])  # raises on a syntax error
    found = selections(rule)  # raises on a selector the series checks cannot read
    assert found, f"{rule['alert']} selects no series"


@pytest.mark.parametrize("rule", RULES, ids=NAMES)
def test_every_rule_selects_series_and_labels_the_code_exports(rule: dict[str, Any]):
    known = exported()
    problems = [p for found in selections(rule) for p in unexported(found, known)]
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "expr",
    [
        'rate(reactive_temporal_tool_calls_total{outcome="error"[5m])',
        "sum by (tool) (rate(reactive_temporal_tool_calls_total[5m])) >",
    ],
)
def test_a_broken_expression_does_not_parse(expr: str):
    with pytest.raises(ValueError):
        promql_parser.parse(expr)


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ('{__name__="reactive_temporal_runs_total"}', "without a metric name"),
        ('reactive_temporal_runs_total{terminated_by=~"llm_.*"}', "plain list of values"),
    ],
)
def test_a_selector_the_series_checks_cannot_read_is_refused(expr: str, why: str):
    with pytest.raises(ValueError, match=why):
        selections({"alert": "Example", "expr": expr})


def test_the_selections_name_each_series_with_the_labels_it_needs():
    (ratio,) = [r for r in RULES if r["alert"] == "ReactiveTemporalRunsEndingBadly"]
    found = {(s.metric, s.labels, s.values) for s in selections(ratio)}
    assert found == {
        (
            "reactive_temporal_runs_total",
            frozenset({"agent", "terminated_by"}),
            (
                ("terminated_by", "llm_error"),
                ("terminated_by", "timeout"),
                ("terminated_by", "budget_exceeded"),
            ),
        ),
        ("reactive_temporal_runs_total", frozenset({"agent"}), ()),
    }
    (latency,) = [r for r in RULES if r["alert"] == "ReactiveTemporalLLMLatencyHigh"]
    (bucket,) = selections(latency)
    assert bucket.metric == "reactive_temporal_llm_request_seconds_bucket"
    assert bucket.labels == {"model", "le", "outcome"}


SCRAPE = """\
# HELP temporal_request Count of client request successes by rpc name
# TYPE temporal_request counter
temporal_request{operation="PollWorkflowTaskQueue",service_name="temporal-core-sdk"} 5
# HELP reactive_temporal_tool_calls_total Tool calls executed, by outcome (ok, error, cancelled).
# TYPE reactive_temporal_tool_calls_total counter
reactive_temporal_tool_calls_total{outcome="error",tool="say \\"hi\\"\\n"} 1.0
# HELP reactive_temporal_llm_cost_usd_total Estimated cost of LLM calls in US dollars.
# TYPE reactive_temporal_llm_cost_usd_total counter
reactive_temporal_runs_total{agent="a",terminated_by="final_answer_tool"} 3 1700000000000
"""


def test_a_scrape_serves_its_sample_lines_by_their_own_names():
    found = served(SCRAPE)
    assert set(found) == {
        "temporal_request",  # an SDK counter has no _total: not renamed as a parser would
        "reactive_temporal_tool_calls_total",
        "reactive_temporal_runs_total",
    }  # a metric with HELP and TYPE lines and no sample serves nothing
    assert found["reactive_temporal_tool_calls_total"]["tool"] == {'say "hi"\n'}
    assert found["reactive_temporal_runs_total"]["terminated_by"] == {"final_answer_tool"}


def test_a_selection_a_scrape_does_not_serve_is_named():
    found = served(SCRAPE)

    def check(metric: str, labels: set[str], *values: tuple[str, str]) -> list[str]:
        return missing(Selection("Example", metric, frozenset(labels), values), found)

    assert check("reactive_temporal_tool_calls_total", {"tool", "outcome", "instance"}) == []
    assert check("reactive_temporal_tool_call_total", set()) == [
        "Example: reactive_temporal_tool_call_total is not served"
    ]
    (no_label,) = check("reactive_temporal_tool_calls_total", {"result"})
    assert "has no label 'result'" in no_label
    (no_value,) = check("reactive_temporal_tool_calls_total", {"outcome"}, ("outcome", "failed"))
    assert "no outcome='failed' served or known" in no_value
    # a value the project enumerates passes unseen; one it does not, fails
    runs = "reactive_temporal_runs_total"
    assert check(runs, {"terminated_by"}, ("terminated_by", "budget_exceeded")) == []
    assert check(runs, {"terminated_by"}, ("terminated_by", "over_budget")) != []


def test_every_runbook_url_is_the_alert_s_own_section_of_the_runbook():
    sections = runbook_sections()
    for rule in RULES:
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page == RUNBOOK_URL, f"{rule['alert']}: runbook_url {url!r}"
        assert anchor == slug(rule["alert"]), f"{rule['alert']}: anchor {anchor!r}"
        assert anchor in sections, f"{rule['alert']}: no section #{anchor} in {RUNBOOK_FILE}"
        for part in ("**Means.**", "**Confirm"):
            assert part in sections[anchor], f"{rule['alert']}: its section has no {part}"
    stale = set(sections) - {slug(name) for name in NAMES}
    assert stale == set(), f"runbook sections for no alert: {sorted(stale)}"


def test_the_readme_links_the_runbook_and_the_rules():
    text = README.read_text()
    assert "(docs/runbook.md)" in text
    assert "deploy/prometheus/alerts.yaml" in text


def runbook_commands(program: str) -> list[list[str]]:
    """The `program …` commands the runbook shows: lines of its code blocks, and inline code
    (which may wrap), each as its words up to a comment."""
    text = RUNBOOK_FILE.read_text()
    found = [
        " ".join(span.split()) for span in re.findall(rf"`({program} [^`]+)`", text, flags=re.S)
    ]
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        found += [line for line in block.splitlines() if line.startswith(f"{program} ")]
    return [shlex.split(line.split(" #", 1)[0])[len(program.split()) :] for line in found]


def click_options(command: Any) -> set[str]:
    """A (Typer's vendored click) command's option names."""
    return {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}


def resolved(root: Any, words: list[str]) -> list[tuple[Any, str]]:
    """Each `--option` of a `starter.py` command line with the (sub)command it belongs to."""
    command = root
    options = []
    position = 0
    while position < len(words):
        word = words[position]
        position += 1
        if word.startswith("-"):
            options.append((command, word.split("=")[0]))
            if command is root:
                position += 1  # the root's one option, --profile, takes a value
        elif word in getattr(command, "commands", {}):
            command = command.commands[word]
        elif command is root:
            raise AssertionError(f"`starter.py {' '.join(words)}`: no command {word!r}")
    assert command is not root, f"`starter.py {' '.join(words)}`: no command"
    return options


def test_every_starter_command_in_the_runbook_exists_with_its_options():
    commands = runbook_commands("python starter.py")
    assert len(commands) > 20, commands
    root = typer.main.get_command(app)
    for words in commands:
        for command, option in resolved(root, words):
            assert option in click_options(command), (
                f"`starter.py {' '.join(words)}`: {command.name} has no option {option}"
            )


def test_the_command_check_sees_a_command_or_option_that_does_not_exist():
    root = typer.main.get_command(app)
    with pytest.raises(AssertionError, match="no command 'stalls'"):
        resolved(root, ["stalls", "--agent", "x"])
    ((command, option),) = resolved(root, ["runs", "--stalled"])
    assert option not in click_options(command)
    ((command, option),) = resolved(root, ["lessons", "delete", "--all"])
    assert (command.name, option in click_options(command)) == ("delete", True)


def temporal_help(path: list[str]) -> str:
    shown = subprocess.run(
        [temporal_binary(), *path, "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    return shown.stdout


def test_every_temporal_cli_command_in_the_runbook_exists_with_its_options():
    commands = runbook_commands("temporal")
    assert len(commands) >= 4, commands
    for words in commands:
        path = [w for w in words[:2] if not w.startswith("-")]
        shown = temporal_help(path)
        assert f"Usage:\n  temporal {' '.join(path)} [flags]" in shown, (
            f"`temporal {' '.join(words)}`: no such command"
        )
        for flag in (w.split("=")[0] for w in words if w.startswith("--")):
            assert re.search(rf"\s{re.escape(flag)}[\s,]", shown), (
                f"`temporal {' '.join(words)}`: no flag {flag}"
            )
    assert "Usage:\n  temporal workflow nosuch" not in temporal_help(["workflow", "nosuch"])
