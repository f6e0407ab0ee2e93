"""OpenTelemetry tracing: on when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set.

Spans go out over OTLP/HTTP (the standard OTEL_* variables configure the exporter). Workflows
and activities are traced by Temporal's OpenTelemetry plugin with a replay-safe tracer
provider: span ids inside a workflow come from the workflow's deterministic random, so a run
replayed on another worker continues the same trace, and spans are only ended (exported) when
the code really runs, never while a workflow replays. One trace per run: the run's workflow
span is the root, its LLM and tool activities and its debrief child workflow sit under it.

Inside activities, `llm_span` and `tool_span` add a span per LLM call (GenAI semantic
conventions: `chat {model}`, `gen_ai.*` attributes) and per tool call (`execute_tool {tool}`).
Without the `otel` extra, or with tracing off, they are no-ops.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

TRACER_NAME = "reactive_temporal"
DEFAULT_SERVICE_NAME = "reactive-temporal-worker"


def tracing_configured(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(
        env.get(name, "").strip()
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


SPAN_ATTRIBUTE_MAX_CHARS = 4_096
"""A span attribute's characters at most, unless OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT says."""
MODEL_MAX_CHARS = 200
"""A model's name as a span names it (what the endpoint says it answered with, unchecked)."""


@dataclass
class Tracing:
    """The worker's tracing: the plugins to give its Worker, and a flush on shutdown."""

    plugins: list[Any] = field(default_factory=list)
    provider: Any = None

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def shutdown(self) -> None:
        if self.provider is not None:
            self.provider.shutdown()  # flushes the batch processor
            self.provider = None


_ACTIVE: Tracing | None = None


def setup_tracing(service_name: str = DEFAULT_SERVICE_NAME) -> Tracing:
    """Tracing for this process when configured (once per process); else a disabled one.

    Raises ValueError naming the extra to install when the variables are set but the
    OpenTelemetry SDK is not installed.
    """
    global _ACTIVE
    if not tracing_configured():
        return Tracing()
    if _ACTIVE is not None and _ACTIVE.enabled:
        return _ACTIVE
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from temporalio.contrib.opentelemetry import OpenTelemetryPlugin, create_tracer_provider
    except ImportError as err:
        raise ValueError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK is not installed: "
            "pip install 'reactive-temporal[otel]'"
        ) from err
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name}
    )
    from opentelemetry.sdk.trace import SpanLimits

    # every attribute clipped: a span holds what a model or a tool sent, and while the
    # collector is down the queue holds 2,048 spans (a 4 MB model name each: 230 MB in 40 calls)
    limit = os.environ.get("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    provider = create_tracer_provider(
        resource=resource,
        span_limits=SpanLimits(
            max_attribute_length=int(limit) if limit else SPAN_ATTRIBUTE_MAX_CHARS
        ),
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    _ACTIVE = Tracing(plugins=[OpenTelemetryPlugin(add_temporal_spans=True)], provider=provider)
    return _ACTIVE


class LlmSpan:
    """Sets the GenAI response attributes on an LLM call's span once the reply is in."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def record_usage(
        self, *, input_tokens: int, output_tokens: int, response_model: str | None = None
    ) -> None:
        self.span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        self.span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        if response_model:
            self.span.set_attribute("gen_ai.response.model", response_model[:MODEL_MAX_CHARS])


@contextlib.contextmanager
def llm_span(model: str, *, provider: str = "openai", **attributes: Any) -> Iterator[LlmSpan]:
    """A span for one request to the model: `chat {model}`, GenAI attributes."""
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(
        f"chat {model}",
        kind=trace.SpanKind.CLIENT,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,
            "gen_ai.request.model": model,
            **{k: v for k, v in attributes.items() if v is not None},
        },
    ) as span:
        yield LlmSpan(span)


@contextlib.contextmanager
def tool_span(tool: str, *, call_id: str | None = None) -> Iterator[trace.Span]:
    """A span for one tool call: `execute_tool {tool}`."""
    tracer = trace.get_tracer(TRACER_NAME)
    attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    with tracer.start_as_current_span(
        f"execute_tool {tool}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    ) as span:
        yield span
