"""What a worker tells operators: Prometheus metrics, a health endpoint, OpenTelemetry traces.

- `metrics`: the agent's own metrics (LLM calls, tokens, cost, tool calls), recorded by the
  activities where the event really happens, so replays never count again;
- `endpoint`: `--metrics-port`'s HTTP server: `/metrics` (the SDK's worker metrics and ours)
  and `/healthz` (200 while polling, 503 while starting or draining);
- `tracing`: OTLP/HTTP tracing when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the `otel` extra),
  with a span per LLM call (GenAI conventions) and per tool call.

The run and debrief counters are counted by the workflows themselves with
`workflow.metric_meter()`, which records nothing while a workflow replays.
"""
