"""Assemble a Temporal worker: every workflow, every activity, built-in and user tools."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import openai
from httpx2 import AsyncByteStream
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import Worker, WorkerDeploymentConfig, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.chat import ChatActivities
from activities.chat_usage import ChatUsageStore
from activities.debrief_store import DebriefStore
from activities.debrief_synthesis import DebriefActivities
from activities.llm_calls import LlmEndpoint
from activities.llm_step import LlmActivities
from activities.run_events import RunEvents
from activities.run_stops import StopListener
from activities.session_store import SessionStore
from activities.step_records import StepRecords
from activities.store import Store
from activities.tool_calls import ToolActivities
from activities.transcript import TranscriptActivities
from activities.workflow_calls import EntityActivities
from reactive_temporal.builtin_tools import builtin_tools
from reactive_temporal.config import Settings
from reactive_temporal.hosting.access_probes import poll_refusal
from reactive_temporal.hosting.activity_logs import one_line_activity_failures
from reactive_temporal.hosting.bytecode import warn_when_compiled_per_workflow
from reactive_temporal.hosting.retry_watch import LocalRetryWatch
from reactive_temporal.hosting.sandbox import OwnWorkflowsUnsandboxed
from reactive_temporal.key_files import KeyFile
from reactive_temporal.search_attributes import ensure_registered
from reactive_temporal.tool_registry import ToolRegistry
from reactive_temporal.tools import Tool
from workflows.agent_debrief import DebriefWorkflow
from workflows.agent_entity import AgentWorkflow
from workflows.agent_run import AgentRunWorkflow

WORKFLOWS = [AgentRunWorkflow, DebriefWorkflow, AgentWorkflow]
OFFLINE_API_KEY = "offline"

VERSIONING_BEHAVIOR = VersioningBehavior.AUTO_UPGRADE
"""How every workflow above moves between builds under Worker Versioning: to the current build,
on its next workflow task. The agent entity lives for months and runs and debriefs outlive a
rolling deploy, so none may be pinned to a build that is about to stop (pinning needs old
builds kept running until their runs drain); every changed decision is guarded with
`workflow.patched` instead, and `starter.py replay --recent` checks it before a deploy.
Declared here, once, as the deployment's default: a behaviour declared on a workflow
definition makes the SDK fail its tasks on a worker without versioning."""


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """Worker Versioning when TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID are set."""
    version = settings.worker_version()
    if version is None:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=version[0], build_id=version[1]),
        use_worker_versioning=True,
        default_versioning_behavior=VERSIONING_BEHAVIOR,
    )


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
    """The default endpoint's client (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, sending
    AGENT_LLM_HEADERS with every request: a gateway's key, say); see `endpoint_client`."""
    key: str | KeyFile = settings.openai_api_key or OFFLINE_API_KEY
    if settings.openai_api_key_file is not None:  # a ValueError naming the file stops the start
        key = KeyFile(settings.openai_api_key_file, "OPENAI_API_KEY_FILE")
    return endpoint_client(
        settings, base_url or settings.openai_base_url, key, settings.llm_headers
    )


def llm_routes(settings: Settings) -> dict[str, openai.AsyncOpenAI]:
    """A client for each endpoint of AGENT_LLM_ENDPOINTS, by its models' pattern; ValueError
    naming a key's variable that is not set."""
    return {pattern: route_client(settings, pattern) for pattern in settings.llm_endpoints}


def route_client(settings: Settings, pattern: str) -> openai.AsyncOpenAI:
    """The client of AGENT_LLM_ENDPOINTS' endpoint for `pattern`, with its key and headers;
    ValueError naming a key's variable or file that is not set or cannot be read."""
    endpoint = settings.llm_endpoints[pattern]
    key = endpoint.api_key(pattern) or OFFLINE_API_KEY
    return endpoint_client(settings, endpoint.base_url, key, endpoint.headers)


def endpoint_client(
    settings: Settings, base_url: str | None, api_key: str | KeyFile, headers: dict[str, str]
) -> openai.AsyncOpenAI:
    """An OpenAI-compatible client; `max_retries=0` because Temporal owns retries; a
    connection for every activity slot (`llm_connection_limits`). HTTP goes through aiohttp
    (openai's own `DefaultAioHttpClient`, the `openai[aiohttp]` extra), not httpx2: reading a
    streamed reply costs the worker's loop 0.75–0.77× the CPU, 0.67× when it comes at a
    model's pace, 0.56× with 200 streaming at once (`bench.llm_transport`, bench/README.md)."""
    return openai.AsyncOpenAI(
        base_url=base_url,
        api_key=api_key,
        default_headers=headers or None,
        max_retries=0,
        http_client=openai.DefaultAioHttpClient(
            limits=llm_connection_limits(settings.max_concurrent_activities),
            headers={"Accept-Encoding": "identity"},
            event_hooks={"response": [refuse_compressed, bound_reply_size]},
        ),
    )


async def refuse_compressed(response: Any) -> None:
    """Refuse a reply the endpoint compressed although asked not to (`Accept-Encoding:
    identity`), before its body is read: the client inflates a body whole, and 1 MB of gzip
    took a worker from 39 MB to 2.1 GB and its event loop for 14 s."""
    encoding = response.headers.get("content-encoding")
    if encoding and encoding.strip().lower() != "identity":
        raise ValueError(
            f"the endpoint sent a {encoding[:40]}-encoded reply where none was asked for; "
            "refused unread (a compressed body can inflate without bound)"
        )


LLM_REPLY_MAX_BYTES = 64 * 1024 * 1024
"""A model's reply at most, as sent: streamed, 128,000 output tokens are about 30 MB of
chunks. Past it the endpoint is broken or hostile, and its reply was read whole into the
worker's memory (every run on the worker lost with it), for as long as the call's deadline."""


class ReplyTooLarge(ValueError):
    """The endpoint's reply passed LLM_REPLY_MAX_BYTES; the rest is not read."""


async def bound_reply_size(response: Any) -> None:
    """Refuse a reply that says it is larger than LLM_REPLY_MAX_BYTES before reading it, and
    stop reading one that grows past it (streamed, or without a Content-Length)."""
    limit = LLM_REPLY_MAX_BYTES
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ReplyTooLarge(
            f"the endpoint's reply is {int(declared):,} bytes; the limit is {limit:,}: refused "
            "unread"
        )
    response.stream = _Bounded(response.stream, limit)


class _Bounded(AsyncByteStream):
    """A reply's body that raises ReplyTooLarge once more than `limit` bytes came."""

    def __init__(self, stream: AsyncByteStream, limit: int) -> None:
        self._stream, self._limit, self._read = stream, limit, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            self._read += len(chunk)
            if self._read > self._limit:
                raise ReplyTooLarge(
                    f"the endpoint's reply passed {self._limit:,} bytes: the rest was not read"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def llm_connection_limits(activity_slots: int) -> Any:
    """The client's pool: at least one connection per activity slot, so no model call waits
    for a connection (the client's default allows 1,000); idle connections kept alive as the
    client keeps them (100; aiohttp's connector keeps every idle one until `keepalive_expiry`
    instead, at no cost per request). With httpx2's pool, keeping one per slot was measured
    slower: it walks, and probes, every idle connection each time a request comes or goes —
    500 concurrent 0.5 s calls in waves cost 8.1–8.9 ms of CPU per call with 500 kept alive,
    3.2–3.9 ms with 100, 2.7 ms with none (bench/README.md, issue 14 after)."""
    default = openai.DEFAULT_CONNECTION_LIMITS  # httpx's or httpx2's Limits, by version
    return type(default)(
        max_connections=max(default.max_connections or 0, activity_slots),
        max_keepalive_connections=default.max_keepalive_connections,
        keepalive_expiry=default.keepalive_expiry,
    )


def workflow_runner(settings: Settings) -> WorkflowRunner:
    """The project's workflows outside Temporal's sandbox unless `sandbox_workflows` is set;
    any other workflow on the worker inside it (`reactive_temporal/hosting/sandbox.py`)."""
    if settings.sandbox_workflows:
        return SandboxedWorkflowRunner()
    return OwnWorkflowsUnsandboxed(WORKFLOWS)


@dataclass
class AgentWorker:
    """A worker and what it owns; `close()` releases the Postgres pool."""

    worker: Worker
    store: Store
    registry: ToolRegistry
    llm: LlmEndpoint
    stops: StopListener
    """Stops this worker's calls of runs that ended on another worker (`activities.run_stops`)."""
    activities: list[Callable[..., Any]]
    """The activities the worker runs (a worker of some of them: tests)."""
    entity: EntityActivities
    """The activities that call Temporal themselves, with the worker's client."""

    @property
    def client(self) -> Client:
        return self.worker.client

    def replace_client(self, client: Client) -> None:
        """Use `client` from the next call on (one connected with renewed credentials): the
        worker's polls and completions, and its activities' own calls."""
        self.worker.client = client
        self.entity.client = client

    async def close(self) -> None:
        await self.stops.close()
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
    graceful_shutdown: timedelta | None = None,
) -> AgentWorker:
    """A worker for every workflow and activity; its concurrency limits and Worker Versioning
    come from `settings`; `graceful_shutdown` is how long in-flight activities may finish
    after `shutdown()` (None: cancelled at once, the SDK's default)."""
    one_line_activity_failures()
    registry = build_registry(settings, tool_modules, extra_tools)
    if settings.sandbox_workflows:
        warn_when_compiled_per_workflow(WORKFLOWS)
    await ensure_registered(client, client.namespace)
    task_queue = task_queue or settings.temporal_task_queue
    if (refusal := await poll_refusal(client, task_queue)) is not None:
        raise refusal  # else its polls are refused silently for a minute, then it stops
    conninfo = settings.database_conninfo(database_url)  # DATABASE_URL_FILE: read at each connect
    store = await Store.open(conninfo, max_size=settings.store_pool_size())
    endpoint = LlmEndpoint(
        llm_client(settings, llm_base_url),
        settings.model_prices,
        capabilities=settings.model_capabilities,
        context_tokens=settings.context_tokens,
        routes=llm_routes(settings),
    )
    records = StepRecords(store)  # the LLM and tool steps' records written together
    debriefs = DebriefStore(store, lesson_ttl_days=settings.lesson_ttl_days)
    transcript = TranscriptActivities(store, debriefs, registry)
    llm = LlmActivities(store, endpoint, registry, records, transcript.seeding)
    tools = ToolActivities(store, registry, records)
    entity = EntityActivities(client, debriefs)
    debrief = DebriefActivities(debriefs, endpoint)
    events = RunEvents(store)
    chat = ChatActivities(SessionStore(store), endpoint, events, ChatUsageStore(store))
    extra: dict[str, Any] = {
        "max_concurrent_activities": settings.max_concurrent_activities,
        "workflow_runner": workflow_runner(settings),
        "max_concurrent_workflow_tasks": settings.max_concurrent_workflow_tasks,
        "sticky_queue_schedule_to_start_timeout": timedelta(
            seconds=settings.sticky_queue_timeout_seconds
        ),
    }
    if max_cached_workflows is not None:
        extra["max_cached_workflows"] = max_cached_workflows
    if graceful_shutdown is not None:
        extra["graceful_shutdown_timeout"] = graceful_shutdown
    versioning = deployment_config(settings)
    if versioning is not None:
        extra["deployment_config"] = versioning
    activities: list[Callable[..., Any]] = [
        llm.llm_step,
        tools.run_tool,
        transcript.prepare_run,
        transcript.record_messages,
        debrief.synthesize_debrief,
        debrief.persist_debrief,
        entity.notify_agent,
        entity.read_run_progress,
        entity.read_live_runs,
        entity.read_last_run,
        chat.chat_direct,
        chat.load_session,
        chat.save_session,
        events.record_run_events,
    ]
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=WORKFLOWS,
        activities=activities,
        interceptors=[LocalRetryWatch()],  # a run's `progress` names its failing local step
        **extra,
    )
    stops = StopListener(conninfo).start()
    return AgentWorker(
        worker=worker,
        store=store,
        registry=registry,
        llm=endpoint,
        stops=stops,
        activities=activities,
        entity=entity,
    )
