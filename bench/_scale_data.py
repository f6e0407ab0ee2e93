"""Six months of a production deployment's rows, made up in Postgres (`bench.data_scale`).

Shaped as the tables fill in use: runs named `run-<agent>-<12 hex>` (as the API names them),
written in time order over `days` days, so a run's rows sit together on disk and the primary
keys' order (agent, then random) is not the heap's; 300 agents, one of which starts 30 % of
the runs and another 10 %; per run about 20 transcript messages, 60 live-output events, 10
context rows, a debrief and two lessons (30-day expiry, so most have expired); chat sessions
of about 10 messages, and one of the busy agent's with a message per four runs (`BIG_SESSION`);
one last run per agent; and one run of the busy agent with as many live-output events as
there are runs (50,000 by default). Everything is made by
`generate_series` in the server (no rows cross the wire), then ANALYZEd.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from psycopg import AsyncConnection

from reactive_temporal.contracts.debrief import AgentDebrief
from reactive_temporal.contracts.entity import RunFinished
from reactive_temporal.contracts.run import AgentConfig

BUSY_AGENT = "agent-busy"
"""Starts 30 % of the runs."""
SECOND_AGENT = "agent-second"
"""Starts 10 %."""
QUIET_AGENTS = 298

WORDS = (
    "billing invoice customer refund payment ledger report summary deploy release rollback "
    "migration schema index query latency timeout retry error exception stack trace log "
    "metric alert dashboard incident outage pager service endpoint request response header "
    "token budget cost model prompt context window transcript tool calculator search fetch "
    "file directory repository branch commit merge review pull test failure flaky coverage "
    "build pipeline artifact docker image container cluster node pod memory cpu disk network "
    "dns certificate tls proxy cache redis postgres table column row vacuum backup restore "
    "snapshot replica primary failover quota limit throttle rate sla ticket customer email "
    "notification webhook schedule cron job queue worker batch stream event kafka topic "
    "partition offset consumer producer json csv parse validate format date timezone currency "
    "translate spanish german french summary paragraph bullet heading table chart trend "
    "forecast anomaly spike drop weekly monthly quarterly revenue churn signup conversion"
).split()
"""The vocabulary of made-up tasks and lessons (English words: stemmed, never stopwords)."""

LONG_RUN = "run-agent-busy-00000000long"
"""A run that went on for hours: its live output thousands of events long."""

BIG_SESSION = "sess_agent_busy_big"
"""A chat session of the busy agent's that went on for months: thousands of messages."""

TASK = "Summarize the weekly billing report and flag any refund spike or failed payment"
"""A task as the busy agent gets them: its words are among the commoner ones."""


@dataclass(frozen=True)
class Scale:
    runs: int = 50_000
    messages_per_run: int = 20
    events_per_run: int = 60
    context_per_run: int = 10
    lessons_per_run: int = 2
    sessions: int = 10_000
    messages_per_session: int = 10
    days: int = 180
    long_run_events: int = 50_000
    """One run of the busy agent (`LONG_RUN`, idle 40 days) has this many events."""
    big_session_messages: int = 12_500
    """One session of the busy agent (`BIG_SESSION`) has this many messages."""

    @classmethod
    def of(cls, runs: int) -> Scale:
        """The default shape for `runs` runs (a session per five runs, the long run as many
        events as there are runs, the big session a message per four runs)."""
        return cls(
            runs=runs,
            sessions=max(runs // 5, 10),
            long_run_events=runs,
            big_session_messages=max(runs // 4, 100),
        )


# `hashint4` gives each row a fixed pseudo-random number: the same data every load.
_RUNS = """
CREATE UNLOGGED TABLE IF NOT EXISTS scale_runs AS
SELECT i,
       'run-' || a.agent || '-' || substr(md5(i::text), 1, 12) AS run_id,
       a.agent AS agent_id,
       now() - make_interval(days => %(days)s)
           + make_interval(secs => i * %(days)s * 86400.0 / %(runs)s) AS started_at
FROM generate_series(0, %(runs)s - 1) AS i,
     LATERAL (SELECT CASE WHEN i %% 10 < 3 THEN %(busy)s
                          WHEN i %% 10 = 3 THEN %(second)s
                          ELSE 'agent-' || lpad(((hashint4(i) & 2147483647) %% %(quiet)s)::text,
                                                3, '0') END AS agent) AS a
"""

_TEXT = """(SELECT string_agg((%(words)s::text[])[1 + floor(power(
            ((hashint4({seed} * 31 + k) & 2147483647) / 2147483647.0), 2) * {nwords})::int],
            ' ') FROM generate_series(1, {length}) AS k)"""
"""`length` words of the vocabulary for row `seed`, the first words the commonest."""


def _text(seed: str, length: int | str) -> str:
    return _TEXT.format(seed=seed, length=length, nwords=len(WORDS))


_MESSAGES = """
INSERT INTO run_messages (run_id, seq, role, content, tool_calls, tool_call_id, name,
                          created_at, step_result, recorded_by)
SELECT r.run_id, s,
       CASE WHEN s = 0 THEN 'system' WHEN s = 1 THEN 'user'
            WHEN s %% 2 = 0 THEN 'assistant' ELSE 'tool' END,
       repeat('lorem ipsum dolor sit amet ', 8 + (hashint4(r.i + s) & 15)),
       CASE WHEN s > 1 AND s %% 2 = 0 THEN jsonb_build_array(jsonb_build_object(
            'id', 'call_' || s, 'name', 'calculator', 'arguments', '{"expression": "6*7"}'))
       END,
       CASE WHEN s > 1 AND s %% 2 = 1 THEN 'call_' || (s - 1) END,
       CASE WHEN s > 1 AND s %% 2 = 1 THEN 'calculator' END,
       r.started_at + make_interval(secs => s * 3),
       CASE WHEN s > 1 THEN '{"content": "42", "success": true}'::jsonb END,
       CASE WHEN s > 1 THEN md5(r.run_id) END
FROM scale_runs AS r,
     generate_series(0, %(messages)s - 8 + (hashint4(r.i) & 15)) AS s
ORDER BY r.i, s
"""

_EVENTS = """
INSERT INTO run_events (run_id, "offset", type, step, position, data, key, created_at)
SELECT r.run_id, o,
       (ARRAY['iteration', 'text', 'text', 'tool_start', 'tool_end', 'text'])[1 + o %% 6],
       o / 3, 0,
       jsonb_build_object('delta', repeat('streamed text ', 4 + (o & 7)), 'attempt', 1),
       CASE WHEN o %% 6 IN (0, 3, 4) THEN o %% 6 || ':' || (o / 3) || ':' || md5(r.run_id) END,
       r.started_at + make_interval(secs => o)
FROM scale_runs AS r, generate_series(0, %(events)s - 1) AS o
ORDER BY r.i, o
"""

_LONG_RUN = """
INSERT INTO run_events (run_id, "offset", type, step, position, data, created_at)
SELECT %(long_run)s, o, 'text', o / 10, 0, '{"delta": "streamed text streamed text"}',
       now() - interval '40 days' + make_interval(secs => o)
FROM generate_series(0, %(long_events)s - 1) AS o
"""

_CONTEXT = """
INSERT INTO run_context (run_id, seq, plan, prompt_tokens, tools_tokens, estimated_tokens,
                         budget_tokens, created_at)
SELECT r.run_id, 2 * c + 2,
       CASE WHEN c = 0 THEN '{"keep_from": 0, "summary": null}'::jsonb END,
       1000 + 300 * c, 200, 1000 + 300 * c, 128000,
       r.started_at + make_interval(secs => 6 * c)
FROM scale_runs AS r, generate_series(0, %(context)s - 1) AS c
ORDER BY r.i, c
"""

_DEBRIEFS = f"""
INSERT INTO agent_debriefs (run_id, agent_id, created_at, updated_at, task_prompt,
    terminated_by, output, output_format, outcome, synthesized, debrief_json,
    debrief_markdown, tokens_used, duration_ms, iterations)
SELECT r.run_id, r.agent_id, r.started_at + interval '5 minutes',
       r.started_at + interval '5 minutes', {_text("r.i", 12)}, 'final_answer',
       repeat('The answer is 42. ', 10), 'text', 'success', true,
       jsonb_build_object('outcome', 'success', 'summary', repeat('did the thing ', 20),
           'key_findings', jsonb_build_array('one', 'two'), 'errors_encountered', '[]'::jsonb,
           'lessons_learned', '[]'::jsonb, 'tools_used', '[]'::jsonb, 'synthesized', true,
           'metrics', jsonb_build_object('tokens', 5000, 'duration_ms', 30000,
                                         'iterations', 6)),
       repeat('## Debrief\n- did the thing\n', 15), 5000, 30000, 6
FROM scale_runs AS r
ORDER BY r.i
"""

_LESSONS = f"""
INSERT INTO agent_lessons (run_id, position, agent_id, lesson, created_at, expires_at)
SELECT r.run_id, p, r.agent_id, {_text("(r.i * 4 + p)", 10)},
       r.started_at + interval '5 minutes', r.started_at + interval '5 minutes 30 days'
FROM scale_runs AS r, generate_series(0, %(lessons)s - 1) AS p
ORDER BY r.i, p
"""

_SESSIONS = """
CREATE UNLOGGED TABLE IF NOT EXISTS scale_sessions AS
SELECT j, r.agent_id, 'sess_' || (1700000000000 + j) || '_' || substr(md5(j::text), 1, 6)
           AS session_id,
       r.started_at AS created_at
FROM generate_series(0, %(sessions)s - 1) AS j
JOIN scale_runs AS r ON r.i = j * %(runs)s / %(sessions)s
"""

_CHAT = """
INSERT INTO chat_sessions (agent_id, session_id, messages, created_at, updated_at)
SELECT agent_id, session_id, '[]', created_at,
       created_at + make_interval(secs => 60 * %(per_session)s)
FROM scale_sessions ORDER BY j;
INSERT INTO chat_messages (agent_id, session_id, position, role, content, sent_at)
SELECT s.agent_id, s.session_id, m, CASE WHEN m %% 2 = 0 THEN 'user' ELSE 'assistant' END,
       repeat('what happened in that run? ', 3 + (m & 7)),
       s.created_at + make_interval(secs => 60 * m)
FROM scale_sessions AS s, generate_series(0, %(per_session)s - 1) AS m
ORDER BY s.j, m;
INSERT INTO chat_sessions (agent_id, session_id, messages, created_at, updated_at)
VALUES (%(busy)s, %(big_session)s, '[]', now() - interval '90 days', now());
INSERT INTO chat_messages (agent_id, session_id, position, role, content, sent_at)
SELECT %(busy)s, %(big_session)s, m, CASE WHEN m %% 2 = 0 THEN 'user' ELSE 'assistant' END,
       repeat('what happened in that run? ', 3 + (m & 7)),
       now() - interval '90 days' + make_interval(secs => 60 * m)
FROM generate_series(0, %(big_messages)s - 1) AS m
"""

_LAST_RUNS = """
INSERT INTO agent_last_runs (agent_id, run_id, started_at, run)
SELECT DISTINCT ON (agent_id) agent_id, run_id, started_at,
       jsonb_set(jsonb_set(jsonb_set(%(last_run)s::jsonb, '{run_id}', to_jsonb(run_id)),
                           '{agent,agent_id}', to_jsonb(agent_id)),
                 '{started_at}', to_jsonb(started_at))
FROM scale_runs ORDER BY agent_id, i DESC
ON CONFLICT (agent_id) DO NOTHING
"""


def _last_run() -> str:
    """A last run as an agent keeps it (`RunFinished`), its ids and time set per agent."""
    run = RunFinished(
        run_id="set-per-agent",
        started_at=datetime.now(UTC),
        agent=AgentConfig(agent_id="set-per-agent", model="gpt-4o-mini"),
        debrief=AgentDebrief(outcome="success", summary="did the thing " * 20),
        observations=["[Tool result]: 42"] * 10,
    )
    return run.model_dump_json()


TABLES = (
    "run_messages", "run_events", "run_context", "agent_debriefs", "agent_lessons",
    "chat_sessions", "chat_messages", "agent_last_runs",
)  # fmt: skip


async def load(conn: AsyncConnection[object], scale: Scale) -> dict[str, float]:
    """Fill the (migrated, empty) tables on `conn` (autocommit) at `scale`; returns the seconds
    each table took. The helper tables `scale_runs` and `scale_sessions` stay (the bench reads
    its parameters from them) until `drop_helpers`."""
    import time

    params = {
        "runs": scale.runs,
        "days": scale.days,
        "busy": BUSY_AGENT,
        "second": SECOND_AGENT,
        "quiet": QUIET_AGENTS,
        "messages": scale.messages_per_run,
        "events": scale.events_per_run,
        "context": scale.context_per_run,
        "lessons": scale.lessons_per_run,
        "sessions": scale.sessions,
        "per_session": scale.messages_per_session,
        "words": WORDS,
        "long_run": LONG_RUN,
        "long_events": scale.long_run_events,
        "big_session": BIG_SESSION,
        "big_messages": scale.big_session_messages,
        "last_run": _last_run(),
    }
    steps = [
        ("runs", _RUNS), ("run_messages", _MESSAGES), ("run_events", _EVENTS),
        ("long run", _LONG_RUN), ("run_context", _CONTEXT), ("agent_debriefs", _DEBRIEFS),
        ("agent_lessons", _LESSONS), ("sessions", _SESSIONS), ("chat", _CHAT),
        ("agent_last_runs", _LAST_RUNS),
    ]  # fmt: skip
    took: dict[str, float] = {}
    for name, statement in steps:
        start = time.perf_counter()
        for part in statement.split(";\n"):
            await conn.execute(part, params)
        took[name] = time.perf_counter() - start
    start = time.perf_counter()
    await conn.execute("ANALYZE scale_runs, scale_sessions")
    for table in TABLES:
        await conn.execute(f"VACUUM ANALYZE {table}")
    took["vacuum analyze"] = time.perf_counter() - start
    return took


async def drop_helpers(conn: AsyncConnection[object]) -> None:
    await conn.execute("DROP TABLE IF EXISTS scale_runs, scale_sessions")
