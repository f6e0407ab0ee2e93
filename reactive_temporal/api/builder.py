"""The Python API's builder: describe an agent step by step, then connect it.

    agent = await (ReactiveAgents.create().with_name("my-agent")
                   .with_provider("openai", model="gpt-4o-mini")
                   .with_reasoning(max_iterations=10).with_memory().with_tools().build())

`build()` returns an `Agent` (api/agents.py). With no TEMPORAL_ADDRESS and no `starter.py dev`
running, it starts the embedded stack and a worker inside this process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Self

from pydantic import ValidationError

from reactive_temporal.api.agents import Agent
from reactive_temporal.api.arguments import (
    bool_argument,
    finite_number,
    int_argument,
    names_argument,
    storable_text,
)
from reactive_temporal.api.workflow_ids import shown
from reactive_temporal.config import Settings, load_settings
from reactive_temporal.contracts.run import AgentConfig
from reactive_temporal.errors import describe_validation_error
from reactive_temporal.hosting.runtime import offline_model_notice, open_runtime
from reactive_temporal.limits import agent_config_problem

log = logging.getLogger(__name__)

SUPPORTED_PROVIDERS = ("openai",)
"""Any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio) goes through "openai"."""


class ReactiveAgents:
    """The entry point of the Python API (the reference's name): `ReactiveAgents.create()`."""

    @staticmethod
    def create() -> AgentBuilder:
        """A builder with the defaults: agent "agent", AGENT_MODEL, 10 iterations, memory on."""
        return AgentBuilder()


@dataclass
class AgentBuilder:
    """Describes an agent step by step; `build()` connects it to Temporal.

    Each `with_…` method returns the builder, so calls chain. Settings come from the
    environment unless `with_settings` gives them.
    """

    name: str = "agent"
    model: str | None = None
    system_prompt: str | None = None
    max_iterations: int = 10
    required_tools: list[str] = field(default_factory=list)
    tools: list[str] | None = None
    memory: bool = True
    audit_rationale: bool = False
    debrief_model: str | None = None
    token_budget: int | None = None
    cost_budget: float | None = None
    timeout_seconds: float | None = None
    reasoning_effort: str | None = None
    approve_tools: list[str] = field(default_factory=list)
    approval_timeout_seconds: float | None = None
    tool_modules: list[str] = field(default_factory=list)
    settings: Settings | None = None

    def with_name(self, name: str) -> Self:
        """The agent's name: its runs, its memory and its chat entity (`agent-<name>`).

        Raises:
            TypeError: it is not text (`b"abc"` was taken as "abc").
        """
        self.name = storable_text("name", name)
        return self

    def with_provider(self, provider: str = "openai", *, model: str | None = None) -> Self:
        """The LLM provider ("openai": any OpenAI-compatible endpoint) and model.

        Raises:
            ValueError: for any other provider (set OPENAI_BASE_URL for Ollama, vLLM, …).
        """
        if provider not in SUPPORTED_PROVIDERS:
            raise ValueError(
                f"unknown provider {shown(provider)}: use 'openai' for any OpenAI-compatible "
                "endpoint (set OPENAI_BASE_URL for Ollama, vLLM or LM Studio)"
            )
        if model is not None and not storable_text("model", model).strip():
            # an empty name fell back to AGENT_MODEL without a word
            raise ValueError(f"model must be a model's name, not {shown(model)}")
        self.model = model
        return self

    def with_system_prompt(self, prompt: str) -> Self:
        """The agent's persona, used by its runs and by direct chat."""
        self.system_prompt = storable_text("prompt", prompt)
        return self

    def with_reasoning(
        self,
        *,
        max_iterations: int = 10,
        required_tools: list[str] | None = None,
        audit_rationale: bool = False,
        effort: str | None = None,
    ) -> Self:
        """Loop settings.

        `audit_rationale` asks for a rationale per tool call (costs tokens); `effort` is a
        reasoning model's `reasoning_effort` (minimal, low, medium or high), sent for runs,
        chat and debriefs to models that take it.
        """
        self.max_iterations = int_argument("max_iterations", max_iterations)
        self.required_tools = names_argument("required_tools", required_tools)
        self.audit_rationale = bool_argument("audit_rationale", audit_rationale)
        self.reasoning_effort = None if effort is None else storable_text("effort", effort)
        return self

    def with_debrief_model(self, model: str) -> Self:
        """A (cheaper) model for the rich debrief; default the run's model."""
        self.debrief_model = storable_text("model", model)
        return self

    def with_budget(
        self, *, tokens: int | None = None, cost: float | None = None, timeout: float | None = None
    ) -> Self:
        """Limit each run's tokens, cost and time.

        `tokens` (prompt + completion) and `cost` (USD) are checked after every LLM step and
        end the run as `budget_exceeded`; `timeout` (seconds from the start) ends it as
        `timeout`, cancelling what is in flight. None (the default) is no limit; `inf` is
        refused rather than taken as one (it was no budget for `cost`, and refused for
        `timeout` past a year), as `starter.py run --cost-budget inf` is.

        Raises:
            TypeError: a bool, a string or bytes where a number is meant.
            ValueError: inf or nan (for no limit, pass None).
        """
        self.token_budget = None if tokens is None else int_argument("tokens", tokens)
        self.cost_budget = (
            None if cost is None else finite_number("cost", cost, unlimited="no cost budget")
        )
        self.timeout_seconds = (
            None if timeout is None else finite_number("timeout", timeout, unlimited="no timeout")
        )
        return self

    def with_memory(self) -> Self:
        """Debrief every run, and start runs with the last run's summary and lessons."""
        self.memory = True
        return self

    def without_memory(self) -> Self:
        """No debrief and no memory of earlier runs (faster, nothing stored beyond the run)."""
        self.memory = False
        return self

    def with_tools(
        self,
        names: list[str] | None = None,
        *,
        modules: list[str] | None = None,
        approve: list[str] | None = None,
        approval_timeout: float | None = None,
    ) -> Self:
        """Limit the agent to these tool names (None: every tool the worker has).

        `modules` load user tools into the in-process worker (a separate worker loads them
        with `worker.py --tools`). Calls of the tools in `approve` (`["all"]`: every tool)
        wait for a person's approval (`agent.approve`, `starter.py approve`); one undecided
        for `approval_timeout` seconds (default one day) is denied.
        """
        self.tools = names_argument("names", names) if names is not None else None
        self.tool_modules = names_argument("modules", modules)
        self.approve_tools = names_argument("approve", approve)
        self.approval_timeout_seconds = (
            None
            if approval_timeout is None
            else finite_number(
                "approval_timeout", approval_timeout, unlimited="the default (one day)"
            )
        )
        return self

    def with_settings(self, settings: Settings) -> Self:
        """Use these settings instead of reading the environment.

        Raises:
            TypeError: `settings` is not a Settings (None was taken as "read the
                environment": leave the call out for that).
        """
        if not isinstance(settings, Settings):
            raise TypeError(
                f"settings is a reactive_temporal.config.Settings, not {type(settings).__name__}"
                " (to read the environment, leave with_settings out)"
            )
        self.settings = settings
        return self

    def config(self) -> AgentConfig:
        """The validated agent configuration runs carry.

        Raises:
            ValueError: naming the field that is not valid.
        """
        settings = self.settings or load_settings()
        try:
            config = AgentConfig(
                agent_id=self.name,
                model=self.model or settings.agent_model,
                system_prompt=self.system_prompt,
                max_iterations=self.max_iterations,
                required_tools=self.required_tools,
                tools=self.tools,
                memory=self.memory,
                audit_rationale=self.audit_rationale,
                debrief_model=self.debrief_model,
                token_budget=self.token_budget,
                cost_budget=self.cost_budget,
                timeout_seconds=self.timeout_seconds,
                reasoning_effort=self.reasoning_effort,
                approve_tools=self.approve_tools,
                **(
                    {"approval_timeout_seconds": self.approval_timeout_seconds}
                    if self.approval_timeout_seconds is not None
                    else {}
                ),
            )
        except ValidationError as err:
            raise ValueError(
                f"invalid agent configuration: {describe_validation_error(err)}"
            ) from err
        if (problem := agent_config_problem(config)) is not None:
            raise ValueError(f"invalid agent configuration: {problem}")
        return config

    async def build(self) -> Agent:
        """Connect the agent to Temporal and return it.

        To TEMPORAL_ADDRESS, else to `starter.py dev`'s stack, else to an embedded stack and
        a worker started in this process (released by `dispose()`). The agent's entity learns
        this configuration, so chat from the CLI or any other process uses it too.
        """
        settings = self.settings or load_settings()
        config = self.config()
        runtime = await open_runtime(settings, tool_modules=self.tool_modules)
        if (notice := offline_model_notice(settings, runtime, config.model)) is not None:
            log.warning("%s", notice)  # a program's runs answered by a script, unsaid, was
            # taken for a real model's (and priced as one)
        agent = Agent(config, runtime)
        try:
            await agent.entity.configure()
        except BaseException:
            await runtime.close()
            raise
        return agent
