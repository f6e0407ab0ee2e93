"""Memory an operator controls: lessons chosen by relevance, expiring, shown as quoted notes.

Every test's agent and runs are its own (a unique agent id, run ids named after it), so the
tests pass again on a database that keeps earlier runs' lessons."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from activities.debrief_store import DebriefStore
from activities.lesson_store import LessonStore
from reactive_temporal.contracts.debrief import AgentDebrief, DebriefInput
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from reactive_temporal.memory import LESSON_TTL_DAYS, PRIOR_LESSONS, LessonNote
from tests.workflow.conftest import Harness

pytestmark = pytest.mark.workflow

NOW = datetime.now(UTC)
POETS = ["sonnets", "haiku", "ballads", "odes", "limericks", "villanelles"]


def new_agent(name: str) -> str:
    """A fresh agent id: no lesson of an earlier test run is its."""
    return f"memory-{name}-{uuid.uuid4().hex[:8]}"


def runs(notes: list[LessonNote], agent_id: str) -> list[str]:
    """The notes' run ids as `add_lessons` was given them."""
    return [n.run_id.removesuffix(f"@{agent_id}") for n in notes]


async def add_lessons(harness: Harness, agent_id: str, lessons: list[tuple[str, str, float]]):
    """(run id, lesson, age in days) rows; a negative age is a lesson that has expired. Each
    run id is stored as `<run id>@<agent id>` (`runs` reads it back): the agent's own."""
    async with harness.store.pool.connection() as conn:
        for position, (name, lesson, age) in enumerate(lessons):
            run_id = f"{name}@{agent_id}"
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
    agent_id = new_agent(model_name)
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
    assert runs(chosen, agent_id) == ["run-new", "run-old"]  # equal rank: newest first

    llm.script(model_name, [Reply("FINAL ANSWER: 4.6 EUR")])
    await harness.run(model_name, "Convert 5 USD at today's exchange rate", agent_id=agent_id)
    notes = llm.requests[model_name][0]["messages"][1]["content"]  # after the task
    assert notes.index("Check the exchange rate twice.") < notes.index(
        "Check the exchange rate first."
    )
    assert "Weather" not in notes and "Poems" not in notes and "expired source" not in notes


async def test_the_number_of_lessons_a_run_sees_is_bounded(harness: Harness) -> None:
    agent_id = new_agent("bounded")
    await add_lessons(
        harness, agent_id, [(f"run-{i}", f"Invoices need a tax id ({i}).", i) for i in range(12)]
    )
    chosen = await LessonStore(harness.store).relevant(
        agent_id, "Send the invoices", limit=PRIOR_LESSONS
    )
    assert runs(chosen, agent_id) == [f"run-{i}" for i in range(PRIOR_LESSONS)]


async def test_a_lesson_many_runs_learned_is_one_note_among_others(harness: Harness) -> None:
    """The same text learned by 20 runs (the newest copy ranks first) leaves room for the rest:
    it filled the limit's rows and hid every other lesson, as anyone who got one lesson stored
    20 times could."""
    agent_id = new_agent("copies")
    copies = [(f"run-copy-{i}", "Invoices need a tax id, always.", 0.01 * i) for i in range(20)]
    others = [(f"run-other-{i}", f"Invoices go out on day {i}.", 1 + i) for i in range(3)]
    await add_lessons(harness, agent_id, [*copies, *others])
    chosen = await LessonStore(harness.store).relevant(
        agent_id, "Send the invoices with a tax id", limit=PRIOR_LESSONS
    )
    assert runs(chosen, agent_id) == ["run-copy-0", "run-other-0", "run-other-1", "run-other-2"]


async def test_no_relevant_lesson_means_no_lesson(harness: Harness) -> None:
    agent_id = new_agent("unrelated")
    await add_lessons(harness, agent_id, [("run-1", "Invoices need a tax id.", 1)])
    store = LessonStore(harness.store)
    assert await store.relevant(agent_id, "What is the weather in Oslo?", limit=5) == []
    assert await store.relevant(agent_id, "the and of", limit=5) == []  # stop words only


@pytest.mark.parametrize("ttl_days", [LESSON_TTL_DAYS, 2.5])
async def test_a_saved_lesson_expires_after_the_configured_time(
    harness: Harness, ttl_days: float
) -> None:
    """Saving a debrief stamps each lesson with its expiry: 30 days by default, or what the
    worker is configured with (AGENT_LESSON_TTL_DAYS); an expired lesson is no longer used."""
    agent_id = new_agent("ttl")
    run_id = f"run-{agent_id}"
    debriefs = DebriefStore(harness.store, lesson_ttl_days=ttl_days)
    debrief = AgentDebrief(
        outcome="success", summary="Converted.", lessons_learned=["Check the exchange rate date."]
    )
    ran = DebriefInput(task="Convert", agent_id=agent_id, run_id=run_id, terminated_by="end_turn")
    await debriefs.save(ran, debrief)
    async with harness.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT lesson, expires_at - created_at FROM agent_lessons WHERE run_id = %s",
            (run_id,),
        )
        rows = await cur.fetchall()
    assert [lesson for lesson, _ in rows] == ["Check the exchange rate date."]
    [(_, lifetime)] = rows
    assert abs(lifetime - timedelta(days=ttl_days)) < timedelta(minutes=1), lifetime
    store = LessonStore(harness.store)
    assert [n.run_id for n in await store.relevant(agent_id, "exchange rate", limit=5)] == [run_id]
    async with harness.store.pool.connection() as conn:  # the time passes
        await conn.execute(
            "UPDATE agent_lessons SET created_at = created_at - make_interval(secs => %s),"
            " expires_at = expires_at - make_interval(secs => %s) WHERE run_id = %s",
            (ttl_days * 86_400 + 60, ttl_days * 86_400 + 60, run_id),
        )
    assert await store.relevant(agent_id, "exchange rate", limit=5) == []
