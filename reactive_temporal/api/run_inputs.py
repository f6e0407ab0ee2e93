"""A run's input, validated before anything starts.

`Agent.start` and `starter.py run` (which refuses bad input before it starts a stack or a
worker) build it here, so that a bad field, or an agent configuration past the limits, is
named the same way whichever starts the run, and never by pydantic's wording.
"""

from __future__ import annotations

from pydantic import ValidationError

from reactive_temporal.api.arguments import (
    int_argument,
    names_argument,
    text_argument,
    unencodable_problem,
)
from reactive_temporal.contracts import names
from reactive_temporal.contracts.run import AgentConfig, AgentRunInput
from reactive_temporal.errors import describe_validation_error
from reactive_temporal.limits import agent_config_problem, run_input_problem


def build_run_input(
    config: AgentConfig,
    task: str,
    *,
    max_iterations: int | None = None,
    required_tools: list[str] | None = None,
) -> AgentRunInput:
    """The validated input of a run; ValueError naming the bad field otherwise.

    TypeError for an argument of the wrong type (`api/arguments.py`): `b"hi"` was the task
    "hi", `max_iterations=True` one iteration and `"5"` five.
    """
    task = text_argument("task", task)
    if (problem := unencodable_problem("task", task)) is not None:
        raise ValueError(f"invalid run: {problem}")
    updates: dict[str, object] = {}
    if max_iterations is not None:
        updates["max_iterations"] = int_argument("max_iterations", max_iterations)
    if required_tools is not None and (tools := names_argument("required_tools", required_tools)):
        updates["required_tools"] = tools  # [] keeps the agent's
    try:
        agent = AgentConfig.model_validate({**config.model_dump(), **updates})
        run_input = AgentRunInput(task=task, agent=agent, patch_bundle=names.RUN_PATCH_BUNDLE)
    except ValidationError as err:
        raise ValueError(f"invalid run: {describe_validation_error(err)}") from err
    if (problem := agent_config_problem(agent)) is not None:
        raise ValueError(f"invalid agent configuration: {problem}")
    if (problem := run_input_problem(run_input)) is not None:
        raise ValueError(f"invalid run: {problem}")
    return run_input
