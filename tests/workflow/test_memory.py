"""Memory an operator controls: lessons chosen by relevance, expiring, shown as quoted notes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from activities.lesson_store import LessonStore
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.memory import PRIOR_LESSONS
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

NOW = datetime.now(UTC)
POETS = ["sonnets", "haiku", "ballads", "odes", "limericks", "villanelles"]


async def add_lessons(harness: Harness, agent_id: str, lessons: list[tuple[str, str, float]]):
    """(run id, lesson, age in days) rows; a negative age is a lesson that has expired."""
    async with harness.store.pool.connection() as conn:
        for position, (run_id, lesson, age) in enumerate(lessons):
            created = NOW - timedelta(days=abs(age))
            expires = NOW - timedelta(days=1) if age < 0 else created + timedelta(days=30)
            await conn.execute(
                "INSERT INTO agent_lessons (run_id, position, agent_id, lesson, created_at,"
                " expires_at) VALUES (%s, %s, %s, %s, %s, %s)",
                (run_id, position, agent_id, lesson, created, expires),
            )


async def test_lessons_are_chosen_by_relevance_newest_first_among_equals(
    harness: Harness, llm: ScriptedLLM, model_name: str
) -> None:
    agent_id = f"memory-{model_name}"
    await add_lessons(
        harness,
        agent_id,
        [
            ("run-old", "Check the exchange rate first.", 3),
            ("run-new", "Check the exchange rate twice.", 1),
            ("run-weather", "Weather questions need the forecast tool.", 0.5),
            ("run-gone", "Exchange rates from the expired source are wrong.", -40),
            *[(f"run-poem-{i}", f"Poems rhyme better in {w}.", 0.1) for i, w in enumerate(POETS)],
        ],
    )
    store = LessonStore(harness.store)
    chosen = await store.relevant(agent_id, "Convert 5 USD at today's exchange rate", limit=5)
    assert [n.run_id for n in chosen] == ["run-new", "run-old"]  # equal rank: newest first

    llm.script(model_name, [Reply("FINAL ANSWER: 4.6 EUR")])
    await harness.run(model_name, "Convert 5 USD at today's exchange rate", agent_id=agent_id)
    notes = llm.requests[model_name][0]["messages"][2]["content"]
    assert notes.index("Check the exchange rate twice.") < notes.index(
        "Check the exchange rate first."
    )
    assert "Weather" not in notes and "Poems" not in notes and "expired source" not in notes


async def test_the_number_of_lessons_a_run_sees_is_bounded(harness: Harness) -> None:
    agent_id = "memory-bounded"
    await add_lessons(
        harness, agent_id, [(f"run-{i}", f"Invoices need a tax id ({i}).", i) for i in range(12)]
    )
    chosen = await LessonStore(harness.store).relevant(
        agent_id, "Send the invoices", limit=PRIOR_LESSONS
    )
    assert [n.run_id for n in chosen] == [f"run-{i}" for i in range(PRIOR_LESSONS)]


async def test_no_relevant_lesson_means_no_lesson(harness: Harness) -> None:
    agent_id = "memory-unrelated"
    await add_lessons(harness, agent_id, [("run-1", "Invoices need a tax id.", 1)])
    store = LessonStore(harness.store)
    assert await store.relevant(agent_id, "What is the weather in Oslo?", limit=5) == []
    assert await store.relevant(agent_id, "the and of", limit=5) == []  # stop words only
