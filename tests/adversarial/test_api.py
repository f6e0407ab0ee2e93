"""The Python API: configuration no run could carry is refused before anything starts.

Rows: `input` builds and starts something with the API (given the module's worker and a
scripted model); `expect` is a distinctive part of the ValueError it must raise. Nothing is
started, so nothing is stored and no workflow exists.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from reactive_temporal.api.builder import AgentBuilder
from reactive_temporal.config import Settings
from reactive_temporal.embedded.scripted_llm import Reply, ScriptedLLM
from tests.adversarial.cases import Hostile, params, table
from tests.adversarial.conftest import StoreSnapshot, owned_by, unique
from tests.workflow.conftest import Harness

HUGE = "p" * 3_000_000

Attempt = Callable[[Harness, str, Settings], Awaitable[Any]]


async def build_huge_prompt(h: Harness, model: str, settings: Settings) -> Any:
    return (
        AgentBuilder(settings=settings).with_name(unique("api")).with_system_prompt(HUGE).config()
    )


async def start_huge_prompt(h: Harness, model: str, settings: Settings) -> Any:
    return await h.agent(model, agent_id=unique("api"), system_prompt=HUGE).start("hi")


async def start_huge_task(h: Harness, model: str, settings: Settings) -> Any:
    return await h.agent(model, agent_id=unique("api")).start("t" * 2_000_000)


async def start_too_many_iterations(h: Harness, model: str, settings: Settings) -> Any:
    return await h.agent(model, agent_id=unique("api")).start("hi", max_iterations=10_001)


API = table("python-api", [
    Hostile("api-builder-3mb-system-prompt", build_huge_prompt,
            "system_prompt is 3,000,000 characters; the limit is 100,000",
            "accepted; the run's start then failed on the 2 MB payload limit"),
    Hostile("api-start-3mb-system-prompt", start_huge_prompt, "the limit is 100,000",
            "the same through an AgentConfig made by hand"),
    Hostile("api-start-2mb-task", start_huge_task, "String should have at most 100000",
            "a 2 MB workflow input"),
    Hostile("api-start-10001-iterations", start_too_many_iterations,
            "less than or equal to 10000", "past what a run can carry even continuing as new"),
])  # fmt: skip


@pytest.mark.parametrize("row", params(API))
async def test_the_api_refuses_what_no_run_could_carry(
    row: Hostile, adv: Harness, llm: ScriptedLLM, settings: Settings, database_url: str
):
    model = llm.script(unique("api"), [Reply("FINAL ANSWER: never")], repeat_last=True)
    before = await StoreSnapshot.take(database_url)
    with pytest.raises(ValueError, match=row.expect):
        await row.input(adv, model, settings)
    assert (await StoreSnapshot.take(database_url)).changes_since(
        before, own=owned_by("none")
    ) == []
    assert llm.requests.get(model, []) == []
