"""`costs`' arithmetic: each agent's runs, their debriefs' synthesis and its chat turns as one
line, the totals over all three, the report's JSON and its table at 80 columns."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from rich.console import Console

from activities.spend_report import ChatSpend, RunSpend, merge_spend, spend_total
from reactive_temporal.cli.cost_commands import _report, _table

AT = datetime(2025, 12, 4, 9, 30, tzinfo=UTC)


def runs(agent_id: str, cost: float, tokens: int = 1000, **more: object) -> RunSpend:
    fields: dict[str, object] = {
        "agent_id": agent_id, "runs": 3, "succeeded": 2, "partial": 0, "failed": 1,
        "tokens": tokens, "cost_usd": cost, "syntheses": 0, "synthesis_tokens": 0,
        "synthesis_cost_usd": 0.0, "last_run_at": AT,
    }  # fmt: skip
    return RunSpend.model_validate(fields | more)


def chat(agent_id: str, cost: float, tokens: int = 500, turns: int = 2) -> ChatSpend:
    return ChatSpend(
        agent_id=agent_id, chat_turns=turns, chat_tokens=tokens, chat_cost_usd=cost,
        last_chat_at=AT,
    )  # fmt: skip


def test_an_agent_s_total_is_its_runs_their_synthesis_and_its_chat():
    [spent] = merge_spend(
        [runs("a", 0.5, 1000, syntheses=2, synthesis_tokens=300, synthesis_cost_usd=0.01)],
        [chat("a", 0.25, 4700)],
    )
    assert (spent.runs, spent.tokens, spent.cost_usd) == (3, 1000, 0.5)  # the runs' alone
    assert (spent.chat_turns, spent.chat_tokens, spent.chat_cost_usd) == (2, 4700, 0.25)
    assert spent.total_tokens == 1000 + 300 + 4700
    assert spent.total_cost_usd == pytest.approx(0.76)


def test_an_agent_that_only_chatted_or_only_ran_has_a_line_of_its_own():
    spent = merge_spend([runs("runner", 0.1)], [chat("chatter", 0.2)])
    by_agent = {s.agent_id: s for s in spent}
    assert by_agent["chatter"].runs == 0 and by_agent["chatter"].last_run_at is None
    assert by_agent["chatter"].total_cost_usd == 0.2
    assert by_agent["runner"].chat_turns == 0 and by_agent["runner"].last_chat_at is None
    assert by_agent["runner"].total_cost_usd == 0.1


def test_the_costliest_in_all_comes_first_chat_included():
    """An agent whose runs cost less but whose chat costs more ranks above: ranked by runs
    alone, a chat-heavy agent looked cheap."""
    spent = merge_spend(
        [runs("runs-heavy", 1.0), runs("chat-heavy", 0.5), runs("tie-b", 0.0, 10)],
        [chat("chat-heavy", 0.75), chat("tie-a", 0.0, 10, turns=1)],
    )
    assert [s.agent_id for s in spent] == ["chat-heavy", "runs-heavy", "tie-a", "tie-b"]


def test_an_agent_twice_in_one_source_is_refused_by_name():
    with pytest.raises(ValueError, match="agent 'twice' comes twice"):
        merge_spend([runs("twice", 1.0), runs("twice", 2.0)], [])
    with pytest.raises(ValueError, match="agent 'twice' comes twice"):
        merge_spend([], [chat("twice", 1.0), chat("twice", 2.0)])


def test_the_total_adds_up_every_agent_and_every_kind():
    spent = merge_spend(
        [runs("a", 0.1, 100, syntheses=1, synthesis_tokens=30, synthesis_cost_usd=0.02),
         runs("b", 0.2, 200)],
        [chat("a", 0.1, 50), chat("c", 0.0000004, 7, turns=1)],
    )  # fmt: skip
    total = spend_total(spent)
    assert (total.runs, total.tokens, total.cost_usd) == (6, 300, 0.3)  # 0.30000000000000004
    assert (total.syntheses, total.synthesis_tokens, total.synthesis_cost_usd) == (1, 30, 0.02)
    assert (total.chat_turns, total.chat_tokens, total.chat_cost_usd) == (3, 57, 0.1)
    assert total.total_tokens == 387
    assert total.total_cost_usd == 0.42  # to a millionth of a dollar
    assert spend_total([]).total_cost_usd == 0


def test_the_json_keeps_its_fields_first_and_adds_chat_and_totals():
    """Scripts read the report's first fields: they keep their names, order and meaning."""
    said = json.loads(json.dumps(_report(merge_spend([runs("a", 0.5)], [chat("a", 0.25)]), 7)))
    [line] = said["agents"]
    assert list(line)[:9] == [
        "agent_id", "runs", "succeeded", "partial", "failed", "tokens", "cost_usd",
        "synthesis_tokens", "last_run_at",
    ]  # fmt: skip
    assert line["cost_usd"] == 0.5 and line["chat_cost_usd"] == 0.25
    assert line["total_cost_usd"] == 0.75 and line["last_chat_at"] == "2025-12-04T09:30:00Z"
    total = said["total"]
    assert list(total)[:3] == ["runs", "tokens", "cost_usd"]
    assert total["cost_usd"] == 0.5 and total["total_cost_usd"] == 0.75


def test_the_table_fits_80_columns_with_every_kind_of_spend():
    spent = merge_spend(
        [runs("billing-assistant", 123.4567, 12_345_678, succeeded=1200, partial=20,
              failed=14, runs=1234, syntheses=1100, synthesis_tokens=1_234_567,
              synthesis_cost_usd=1.2345),
         runs("other", 0.0012, 4567)],
        [chat("billing-assistant", 45.6789, 9_876_543, turns=5432), chat("chatty", 0.00102)],
    )  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(_table(spent, 7))
    shown = console.export_text()
    assert max(map(len, shown.splitlines())) <= 80
    assert "…" not in shown  # nothing cut short
    lines = [line.split() for line in shown.splitlines()]
    assert ["billing-assistant", "23,456,788", "$170.3701", "2025-12-04", "09:30"] in lines
    runs_line = ["runs", "1,234", "1,200/20/14", "12,345,678", "$123.4567", "2025-12-04", "09:30"]
    assert runs_line in lines
    assert ["synthesis", "1,100", "1,234,567", "$1.2345"] in lines
    assert ["chat", "5,432", "9,876,543", "$45.6789", "2025-12-04", "09:30"] in lines
    assert ["chatty", "500", "$0.0010", "2025-12-04", "09:30"] in lines
    assert ["all", "agents", "23,461,855", "$170.3723"] in lines


def test_a_long_agent_name_wraps_and_the_numbers_stay_whole():
    name = "an-agent-whose-name-is-forty-characters"
    spent = merge_spend([runs(name, 123.4567, 12_345_678)], [])
    console = Console(width=80, record=True, color_system=None)
    console.print(_table(spent, 7))
    shown = console.export_text()
    assert max(map(len, shown.splitlines())) <= 80 and "…" not in shown
    assert "12,345,678" in shown and "$123.4567" in shown and "2025-12-04 09:30" in shown
    assert "".join(line.split()[0] for line in shown.splitlines()[3:6]) == name
