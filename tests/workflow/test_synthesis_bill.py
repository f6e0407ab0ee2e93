"""A debrief synthesis that was billed but gave no rich debrief still says what it cost.

A model that answers the synthesis in prose, or with replies that cannot be read until its
attempts run out, is billed on every run; the debrief fell back to the deterministic one and
the call's tokens and dollars were recorded nowhere (`metrics.synthesis_tokens` absent, so
`costs` undercounted). Now the fallback, still `synthesized: False`, carries them, in the
`agent_debriefs` row `costs` reads. Real Temporal, real Postgres, scripted models over HTTP,
priced through the worker's settings (`model_prices`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from activities.spend_report import spend_by_agent
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import HttpError, Raw, Reply, ScriptedLLM, Step, call
from reactive_temporal.pricing import ModelPrice
from tests.processes import starter
from tests.workflow.conftest import Harness, running_worker

pytestmark = pytest.mark.workflow

LONG_ANSWER = "The report lists three incidents, each resolved within the hour, as asked. " * 3
"""Long enough that the run is not trivial: its debrief is synthesized."""
PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)
"""The synthesis model's price in the worker's settings."""


def dollars(prompt: int, completion: int) -> float:
    return (prompt * PRICE.input_per_mtok + completion * PRICE.output_per_mtok) / 1e6


def unreadable(prompt: int, completion: int) -> Raw:
    """A 200 chat completion, usage and all (so billed), whose choice is no message at all:
    the synthesis cannot read it (it retried such a reply as an outage, up to 53 times)."""
    body = {
        "id": "r1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [42],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return Raw([json.dumps(body).encode()], content_type="application/json")


@pytest.fixture
async def priced(
    client: Client, settings: Settings, llm: ScriptedLLM
) -> AsyncIterator[tuple[Harness, str]]:
    """A worker whose settings price the synthesis model, and that model's name."""
    synth = f"synth-{uuid.uuid4().hex[:8]}"
    with_prices = settings.model_copy(update={"model_prices": {synth: PRICE}})
    async with running_worker(client, with_prices) as harness:
        yield harness, synth


async def debrief_row(harness: Harness, run_id: str) -> tuple[bool, dict[str, Any]]:
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT synthesized, debrief_json FROM agent_debriefs WHERE run_id = %s", (run_id,)
        )
        [(synthesized, debrief)] = await cur.fetchall()
    return synthesized, debrief


async def run_with_synthesis(
    harness: Harness, llm: ScriptedLLM, synth: str, steps: list[Step], agent_id: str
) -> Any:
    """A non-trivial run whose debrief model answers with `steps`; its rich debrief."""
    model = llm.script(
        f"run-{agent_id}",
        [
            Reply(None, [call("calculator", expression="3*1")], usage=(400, 20)),
            Reply(
                None,
                [call("final-answer", output=LONG_ANSWER, format="text", summary="Listed.")],
                usage=(500, 40),
            ),
        ],
    )
    llm.script(synth, steps, repeat_last=True)
    result = await harness.agent(model, agent_id=agent_id, debrief_model=synth).run("Incidents?")
    assert result.debrief is not None and result.debrief.metrics.synthesis_tokens is None
    rich = await result.debrief_rich()
    assert rich is not None
    return result, rich


def costs_json(database_url: str, agent_id: str, tmp_path: Path) -> dict[str, Any]:
    env = {**os.environ, "DATABASE_URL": database_url, "REACTIVE_TEMPORAL_DATA_DIR": str(tmp_path)}
    report = starter("costs", "--agent", agent_id, "--json", env=env, cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    said: dict[str, Any] = json.loads(report.stdout)
    return said


async def test_a_synthesis_answered_in_prose_is_counted_in_the_debrief_and_costs(
    priced: tuple[Harness, str], llm: ScriptedLLM, database_url: str, tmp_path: Path
):
    harness, synth = priced
    agent_id = f"prose-{uuid.uuid4().hex[:6]}"
    prose = Reply("The agent did well and listed the incidents, I think.", usage=(1200, 300))
    result, rich = await run_with_synthesis(harness, llm, synth, [prose], agent_id)

    assert len(llm.requests[synth]) == 1  # one call, not retried: prose is an answer
    assert not rich.synthesized and rich.summary == "Listed."  # the fallback's own words
    bill = {"input": 1200, "output": 300, "total": 1500, "cost": pytest.approx(dollars(1200, 300))}
    assert rich.metrics.synthesis_tokens is not None
    assert rich.metrics.synthesis_tokens.model_dump() == bill
    assert rich.metrics.tokens == result.metadata.tokens_used == 960  # the run's alone
    synthesized, stored = await debrief_row(harness, result.run_id)
    assert synthesized is False
    assert stored["synthesized"] is False and stored["metrics"]["synthesis_tokens"] == bill

    [spent] = await spend_by_agent(harness.store, days=1, agent_id=agent_id)
    assert (spent.runs, spent.syntheses, spent.synthesis_tokens) == (1, 1, 1500)
    assert spent.synthesis_cost_usd == pytest.approx(0.0048)  # $0.0024 in, $0.0024 out
    assert spent.total_tokens == 960 + 1500
    said = costs_json(database_url, agent_id, tmp_path)
    [line] = said["agents"]
    assert (line["syntheses"], line["synthesis_tokens"]) == (1, 1500)
    assert line["synthesis_cost_usd"] == pytest.approx(0.0048)
    assert said["total"]["synthesis_cost_usd"] == 0.0048
    assert said["total"]["total_cost_usd"] == round(result.metadata.cost + 0.0048, 6)


@pytest.mark.parametrize(
    ("steps", "billed_calls"),
    [
        pytest.param([unreadable(900, 60)], 3, id="every-attempt-unreadable"),
        pytest.param(
            [unreadable(900, 60), HttpError(500, "down")], 1, id="then-the-endpoint-fails"
        ),
    ],
)
async def test_a_synthesis_that_failed_for_good_counts_what_its_attempts_were_billed(
    priced: tuple[Harness, str],
    llm: ScriptedLLM,
    database_url: str,
    tmp_path: Path,
    steps: list[Step],
    billed_calls: int,
):
    """Its replies could not be read (or the endpoint then failed): three attempts, the
    synthesis's cap (it was retried as an outage, 53 billed calls), and what was billed in the
    failure's details, carried from attempt to attempt, in the fallback debrief and `costs`."""
    harness, synth = priced
    agent_id = f"unread-{uuid.uuid4().hex[:6]}"
    result, rich = await run_with_synthesis(harness, llm, synth, steps, agent_id)

    assert len(llm.requests[synth]) == 3  # the synthesis's attempts, then the fallback
    assert not rich.synthesized and rich.summary == "Listed."
    tokens = billed_calls * 960
    cost = billed_calls * dollars(900, 60)
    bill = {
        "input": billed_calls * 900,
        "output": billed_calls * 60,
        "total": tokens,
        "cost": pytest.approx(cost),
    }
    assert rich.metrics.synthesis_tokens is not None
    assert rich.metrics.synthesis_tokens.model_dump() == bill
    synthesized, stored = await debrief_row(harness, result.run_id)
    assert synthesized is False and stored["metrics"]["synthesis_tokens"] == bill

    [spent] = await spend_by_agent(harness.store, days=1, agent_id=agent_id)
    assert (spent.syntheses, spent.synthesis_tokens) == (1, tokens)
    assert spent.synthesis_cost_usd == pytest.approx(cost)
    said = costs_json(database_url, agent_id, tmp_path)
    assert said["total"]["synthesis_tokens"] == tokens
    assert said["total"]["synthesis_cost_usd"] == round(cost, 6)


async def test_a_rich_synthesis_after_an_unreadable_reply_counts_both_calls(
    priced: tuple[Harness, str], llm: ScriptedLLM
):
    harness, synth = priced
    agent_id = f"second-{uuid.uuid4().hex[:6]}"
    answer = json.dumps({"summary": "Three incidents, all resolved.", "lessons_learned": []})
    steps: list[Step] = [unreadable(900, 60), Reply(answer, usage=(1000, 50))]
    _, rich = await run_with_synthesis(harness, llm, synth, steps, agent_id)

    assert len(llm.requests[synth]) == 2
    assert rich.synthesized and rich.summary == "Three incidents, all resolved."
    assert rich.metrics.synthesis_tokens is not None
    assert rich.metrics.synthesis_tokens.model_dump() == {
        "input": 1900,
        "output": 110,
        "total": 2010,
        "cost": pytest.approx(dollars(900, 60) + dollars(1000, 50)),
    }
