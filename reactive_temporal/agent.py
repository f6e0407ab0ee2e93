"""The Python API: build an agent, run tasks on it durably.

    agent = await (ReactiveAgents.create().with_name("my-agent")
                   .with_provider("openai", model="gpt-4o-mini")
                   .with_reasoning(max_iterations=10).with_memory().with_tools().build())
    result = await agent.run("What is (17 * 23) + 4?")
    await agent.dispose()

Each `run` is an AgentRunWorkflow on Temporal. With no TEMPORAL_ADDRESS and no `starter.py
dev` running, `build()` starts the embedded stack and a worker inside this process.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Self

from pydantic import ValidationError
from temporalio.client import WorkflowFailureError, WorkflowHandle

from reactive_temporal.config import Settings, load_settings
from reactive_temporal.contracts import AgentConfig, AgentResult, AgentRunInput
from reactive_temporal.runtime import Runtime, open_runtime

WORKFLOW_NAME = "AgentRunWorkflow"
SUPPORTED_PROVIDERS = ("openai",)
"""Any OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio) goes through "openai"."""


class AgentRunError(RuntimeError):
    """A run could not produce a result (as opposed to a result with success=False)."""


def describe_validation_error(err: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in err.errors()
    )


def root_cause(err: BaseException) -> str:
    cause: BaseException = err
    while cause.__cause__ is not None:
        cause = cause.__cause__
    return str(cause) or type(cause).__name__


def build_run_input(
    config: AgentConfig,
    task: str,
    *,
    max_iterations: int | None = None,
    required_tools: list[str] | None = None,
) -> AgentRunInput:
    """The validated input of a run; ValueError naming the bad field otherwise."""
    updates: dict[str, object] = {}
    if max_iterations is not None:
        updates["max_iterations"] = max_iterations
    if required_tools:
        updates["required_tools"] = required_tools
    try:
        agent = AgentConfig.model_validate({**config.model_dump(), **updates})
        return AgentRunInput(task=task, agent=agent)
    except ValidationError as err:
        raise ValueError(f"invalid run: {describe_validation_error(err)}") from err


class ReactiveAgents:
    @staticmethod
    def create() -> AgentBuilder:
        return AgentBuilder()


@dataclass
class AgentBuilder:
    name: str = "agent"
    model: str | None = None
    system_prompt: str | None = None
    max_iterations: int = 10
    required_tools: list[str] = field(default_factory=list)
    tools: list[str] | None = None
    memory: bool = True
    tool_modules: list[str] = field(default_factory=list)
    settings: Settings | None = None

    def with_name(self, name: str) -> Self:
        self.name = name
        return self

    def with_provider(self, provider: str = "openai", *, model: str | None = None) -> Self:
        if provider not in SUPPORTED_PROVIDERS:
            raise ValueError(
                f"unknown provider {provider!r}: use 'openai' for any OpenAI-compatible endpoint "
                "(set OPENAI_BASE_URL for Ollama, vLLM or LM Studio)"
            )
        self.model = model
        return self

    def with_system_prompt(self, prompt: str) -> Self:
        self.system_prompt = prompt
        return self

    def with_reasoning(
        self, *, max_iterations: int = 10, required_tools: list[str] | None = None
    ) -> Self:
        self.max_iterations = max_iterations
        self.required_tools = list(required_tools or [])
        return self

    def with_memory(self) -> Self:
        self.memory = True
        return self

    def without_memory(self) -> Self:
        self.memory = False
        return self

    def with_tools(
        self, names: list[str] | None = None, *, modules: list[str] | None = None
    ) -> Self:
        """Limit the agent to these tool names (None: every tool the worker has).

        `modules` load user tools into the in-process worker (a separate worker loads them
        with `worker.py --tools`).
        """
        self.tools = list(names) if names is not None else None
        self.tool_modules = list(modules or [])
        return self

    def with_settings(self, settings: Settings) -> Self:
        self.settings = settings
        return self

    def config(self) -> AgentConfig:
        settings = self.settings or load_settings()
        try:
            return AgentConfig(
                agent_id=self.name,
                model=self.model or settings.agent_model,
                system_prompt=self.system_prompt,
                max_iterations=self.max_iterations,
                required_tools=self.required_tools,
                tools=self.tools,
                memory=self.memory,
            )
        except ValidationError as err:
            raise ValueError(
                f"invalid agent configuration: {describe_validation_error(err)}"
            ) from err

    async def build(self) -> Agent:
        settings = self.settings or load_settings()
        config = self.config()
        runtime = await open_runtime(settings, tool_modules=self.tool_modules)
        return Agent(config, runtime)


class Agent:
    def __init__(self, config: AgentConfig, runtime: Runtime) -> None:
        self.config = config
        self.runtime = runtime

    @property
    def name(self) -> str:
        return self.config.agent_id

    async def start(
        self,
        task: str,
        *,
        max_iterations: int | None = None,
        required_tools: list[str] | None = None,
    ) -> WorkflowHandle[object, AgentResult]:
        """Start a run and return its handle (poll `progress`, await `result()`)."""
        run_input = build_run_input(
            self.config, task, max_iterations=max_iterations, required_tools=required_tools
        )
        return await self.runtime.client.start_workflow(
            WORKFLOW_NAME,
            run_input,
            id=f"run-{self.name}-{uuid.uuid4().hex[:12]}",
            task_queue=self.runtime.task_queue,
            result_type=AgentResult,
            static_summary=task[:400],
            static_details=f"agent `{self.name}` · model `{run_input.agent.model}` · "
            f"max {run_input.agent.max_iterations} iterations",
        )

    async def run(
        self,
        task: str,
        *,
        max_iterations: int | None = None,
        required_tools: list[str] | None = None,
    ) -> AgentResult:
        handle = await self.start(
            task, max_iterations=max_iterations, required_tools=required_tools
        )
        return await self.result(handle)

    @staticmethod
    async def result(handle: WorkflowHandle[object, AgentResult]) -> AgentResult:
        try:
            return await handle.result()
        except WorkflowFailureError as err:
            raise AgentRunError(f"run {handle.id} failed: {root_cause(err)}") from err

    async def dispose(self) -> None:
        await self.runtime.close()
