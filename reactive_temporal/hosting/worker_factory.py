"""Assemble a Temporal worker: every workflow, every activity, built-in and user tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import openai
from temporalio.client import Client
from temporalio.worker import Worker

from activities.chat import ChatActivities
from activities.debrief_synthesis import DebriefActivities
from activities.llm_calls import LlmEndpoint
from activities.llm_step import LlmActivities
from activities.store import DebriefStore, SessionStore, Store
from activities.tool_calls import ToolActivities
from activities.transcript import TranscriptActivities
from activities.workflow_calls import EntityActivities
from reactive_temporal.builtin_tools import builtin_tools
from reactive_temporal.config import Settings
from reactive_temporal.search_attributes import ensure_registered
from reactive_temporal.tools import Tool, ToolRegistry
from workflows.agent_debrief import DebriefWorkflow
from workflows.agent_entity import AgentWorkflow
from workflows.agent_run import AgentRunWorkflow

WORKFLOWS = [AgentRunWorkflow, DebriefWorkflow, AgentWorkflow]
OFFLINE_API_KEY = "offline"


def build_registry(
    settings: Settings, tool_modules: Sequence[str] = (), extra_tools: Sequence[Tool] = ()
) -> ToolRegistry:
    registry = ToolRegistry(
        [*builtin_tools(settings.workspace, settings.http_allow_list), *extra_tools]
    )
    for module in tool_modules:
        registry.load_module(module)
    return registry


def llm_client(settings: Settings, base_url: str | None = None) -> openai.AsyncOpenAI:
    """The OpenAI-compatible client; `max_retries=0` because Temporal owns retries."""
    return openai.AsyncOpenAI(
        base_url=base_url or settings.openai_base_url,
        api_key=settings.openai_api_key or OFFLINE_API_KEY,
        max_retries=0,
    )


@dataclass
class AgentWorker:
    """A worker and what it owns; `close()` releases the Postgres pool."""

    worker: Worker
    store: Store
    registry: ToolRegistry
    llm: LlmEndpoint

    async def close(self) -> None:
        await self.llm.close()
        await self.store.close()


async def create_worker(
    client: Client,
    settings: Settings,
    *,
    database_url: str,
    llm_base_url: str | None = None,
    tool_modules: Sequence[str] = (),
    extra_tools: Sequence[Tool] = (),
    task_queue: str | None = None,
    max_cached_workflows: int | None = None,
) -> AgentWorker:
    registry = build_registry(settings, tool_modules, extra_tools)
    await ensure_registered(client, client.namespace)
    store = await Store.open(database_url)
    endpoint = LlmEndpoint(llm_client(settings, llm_base_url), settings.model_prices)
    llm = LlmActivities(store, endpoint, registry)
    tools = ToolActivities(store, registry)
    debriefs = DebriefStore(store)
    entity = EntityActivities(client, debriefs)
    transcript = TranscriptActivities(store, debriefs, registry)
    debrief = DebriefActivities(debriefs, endpoint)
    chat = ChatActivities(SessionStore(store), endpoint)
    extra = {} if max_cached_workflows is None else {"max_cached_workflows": max_cached_workflows}
    worker = Worker(
        client,
        task_queue=task_queue or settings.temporal_task_queue,
        workflows=WORKFLOWS,
        activities=[
            llm.llm_step,
            tools.run_tool,
            transcript.prepare_run,
            transcript.record_messages,
            debrief.synthesize_debrief,
            debrief.persist_debrief,
            entity.notify_agent,
            entity.read_run_progress,
            entity.read_live_runs,
            chat.chat_direct,
            chat.load_session,
            chat.save_session,
        ],
        **extra,  # type: ignore[arg-type]
    )
    return AgentWorker(worker=worker, store=store, registry=registry, llm=endpoint)
