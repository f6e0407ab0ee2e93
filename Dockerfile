# The reactive-temporal worker: every workflow and activity, built-in tools included.
#
#   docker build -t reactive-temporal-worker .
#   docker run -e TEMPORAL_ADDRESS=host:7233 -e DATABASE_URL=postgresql://… reactive-temporal-worker
#
# docker-compose.yml builds this image and wires it to Postgres and Temporal.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The locked, hash-checked dependencies first (their own layer: code changes do not reinstall
# them), then the project with no further resolution. requirements.lock includes the `otel`
# extra, so tracing turns on with OTEL_EXPORTER_OTLP_ENDPOINT alone.
COPY requirements.lock ./
RUN pip install --require-hashes -r requirements.lock

# Only what `pip install .` needs (pyproject's packages and py-modules, and the readme it
# declares); .dockerignore keeps caches, virtualenvs and local state out of the context.
COPY pyproject.toml README.md ./
COPY reactive_temporal ./reactive_temporal
COPY workflows ./workflows
COPY activities ./activities
COPY starter.py worker.py ./
RUN pip install --no-deps . \
    && rm -rf build ./*.egg-info
# The worker imports its packages from /app, where PYTHONDONTWRITEBYTECODE leaves no bytecode:
# every start would compile them, and with REACTIVE_TEMPORAL_SANDBOX_WORKFLOWS=true Temporal's
# sandbox compiles each workflow module again for every workflow it starts (~7 ms of worker CPU
# per run, bench/sandbox_bytecode.py). Compiled once, here.
RUN python -m compileall -q reactive_temporal workflows activities

# Unprivileged user. The data directory holds the file tools' workspace (mount a volume on
# /data/workspace to share it between workers, as docker-compose.yml does).
RUN useradd --create-home --uid 10001 --user-group agent \
    && mkdir -p /data/workspace \
    && chown -R agent:agent /data
ENV REACTIVE_TEMPORAL_DATA_DIR=/data \
    REACTIVE_TEMPORAL_WORKSPACE=/data/workspace
USER agent

# Healthy while the worker's /healthz answers 200 (REACTIVE_TEMPORAL_METRICS_PORT set), else
# while worker.py runs and Temporal (TEMPORAL_ADDRESS) accepts connections: see the module.
HEALTHCHECK --interval=30s --timeout=10s --start-period=30s --retries=3 \
    CMD ["python", "-m", "reactive_temporal.telemetry.healthcheck"]

# SIGTERM (docker stop) makes the worker stop polling, finish its in-flight activities (up to
# --graceful-shutdown seconds) and exit 0.
STOPSIGNAL SIGTERM
CMD ["python", "worker.py"]
