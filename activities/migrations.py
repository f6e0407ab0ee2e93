"""The agents database's schema: numbered migrations, each applied once, in order.

`Store.migrate` applies the ones a database lacks (at worker start, or with `starter.py
migrate` as a role that may create tables). A migration is never edited once released: a
change to the schema is a new number.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE IF NOT EXISTS run_messages (
            run_id       TEXT        NOT NULL,
            seq          INTEGER     NOT NULL,
            role         TEXT        NOT NULL,
            content      TEXT,
            tool_calls   JSONB,
            tool_call_id TEXT,
            name         TEXT,
            created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, seq)
        )
        """,
    ),
    (
        2,
        """
        CREATE TABLE IF NOT EXISTS agent_debriefs (
            run_id           TEXT        PRIMARY KEY,
            agent_id         TEXT        NOT NULL,
            created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
            task_prompt      TEXT        NOT NULL,
            terminated_by    TEXT        NOT NULL,
            output           TEXT        NOT NULL,
            output_format    TEXT        NOT NULL,
            outcome          TEXT        NOT NULL,
            synthesized      BOOLEAN     NOT NULL,
            debrief_json     JSONB       NOT NULL,
            debrief_markdown TEXT        NOT NULL,
            tokens_used      INTEGER,
            duration_ms      INTEGER,
            iterations       INTEGER
        );
        CREATE INDEX IF NOT EXISTS idx_debriefs_agent_created
            ON agent_debriefs (agent_id, created_at DESC);
        CREATE TABLE IF NOT EXISTS agent_lessons (
            run_id     TEXT        NOT NULL,
            position   INTEGER     NOT NULL,
            agent_id   TEXT        NOT NULL,
            lesson     TEXT        NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, position)
        );
        CREATE INDEX IF NOT EXISTS idx_lessons_agent_created
            ON agent_lessons (agent_id, created_at DESC);
        """,
    ),
    (
        3,
        """
        CREATE TABLE IF NOT EXISTS chat_sessions (
            agent_id   TEXT        NOT NULL,
            session_id TEXT        NOT NULL,
            messages   JSONB       NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (agent_id, session_id)
        );
        CREATE INDEX IF NOT EXISTS idx_sessions_agent_updated
            ON chat_sessions (agent_id, updated_at DESC);
        """,
    ),
    (
        4,
        """
        CREATE TABLE IF NOT EXISTS run_context (
            run_id           TEXT        NOT NULL,
            seq              INTEGER     NOT NULL,
            plan             JSONB,
            prompt_tokens    INTEGER,
            tools_tokens     INTEGER,
            estimated_tokens INTEGER,
            budget_tokens    INTEGER,
            created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, seq)
        );
        """,
    ),
    (
        5,
        """
        ALTER TABLE agent_lessons ADD COLUMN IF NOT EXISTS id BIGSERIAL;
        ALTER TABLE agent_lessons ADD COLUMN IF NOT EXISTS expires_at TIMESTAMPTZ;
        UPDATE agent_lessons SET expires_at = created_at + interval '30 days'
            WHERE expires_at IS NULL;
        ALTER TABLE agent_lessons ADD COLUMN IF NOT EXISTS search TSVECTOR
            GENERATED ALWAYS AS (to_tsvector('english', lesson)) STORED;
        CREATE UNIQUE INDEX IF NOT EXISTS idx_lessons_id ON agent_lessons (id);
        CREATE INDEX IF NOT EXISTS idx_lessons_search ON agent_lessons USING GIN (search);
        """,
    ),
    (
        6,
        """
        CREATE TABLE IF NOT EXISTS chat_messages (
            agent_id   TEXT        NOT NULL,
            session_id TEXT        NOT NULL,
            position   INTEGER     NOT NULL,
            role       TEXT        NOT NULL,
            content    TEXT        NOT NULL,
            sent_at    TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (agent_id, session_id, position)
        );
        INSERT INTO chat_messages (agent_id, session_id, position, role, content, sent_at)
            SELECT s.agent_id, s.session_id, (m.ordinality - 1)::int, m.value->>'role',
                   m.value->>'content', (m.value->>'timestamp')::timestamptz
            FROM chat_sessions s, jsonb_array_elements(s.messages) WITH ORDINALITY AS m
            ON CONFLICT DO NOTHING;
        UPDATE chat_sessions SET messages = '[]'::jsonb;
        """,
    ),
    (
        7,
        """
        ALTER TABLE run_messages ADD COLUMN IF NOT EXISTS step_result JSONB;
        """,
    ),
    (
        8,
        """
        CREATE TABLE IF NOT EXISTS run_events (
            run_id     TEXT        NOT NULL,
            "offset"   BIGINT      NOT NULL,
            type       TEXT        NOT NULL,
            step       INTEGER     NOT NULL,
            position   INTEGER     NOT NULL DEFAULT 0,
            data       JSONB       NOT NULL,
            key        TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (run_id, "offset")
        );
        CREATE UNIQUE INDEX IF NOT EXISTS idx_run_events_key
            ON run_events (run_id, key) WHERE key IS NOT NULL;
        """,
    ),
    (
        9,
        """
        CREATE TABLE IF NOT EXISTS agent_last_runs (
            agent_id   TEXT        PRIMARY KEY,
            run_id     TEXT        NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            run        JSONB       NOT NULL,
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        10,
        # One call appends a run's events, given as a JSON array of {type, step, position,
        # data, key} (activities/run_events.py): its statements' plans are kept for the
        # session, where an INSERT per event sent as text was planned anew every time, a
        # third of what an LLM step's record and events cost Postgres (bench/README.md). The
        # lock is the one every writer of a run takes, this release's and those before it.
        """
        CREATE OR REPLACE FUNCTION append_run_events(
            p_run_id  TEXT,
            p_channel TEXT,
            p_events  JSONB
        ) RETURNS INTEGER LANGUAGE plpgsql AS $$
        DECLARE
            next_offset BIGINT;
            written     INTEGER := 0;
            e           JSONB;
        BEGIN
            PERFORM pg_advisory_xact_lock(hashtext(p_run_id));
            SELECT coalesce(max("offset"), -1) + 1 INTO next_offset
                FROM run_events WHERE run_id = p_run_id;
            FOR e IN SELECT value FROM jsonb_array_elements(p_events) WITH ORDINALITY
                     ORDER BY ordinality LOOP
                INSERT INTO run_events (run_id, "offset", type, step, position, data, key)
                VALUES (p_run_id, next_offset, e->>'type', (e->>'step')::INTEGER,
                        (e->>'position')::INTEGER, e->'data', e->>'key')
                ON CONFLICT (run_id, key) WHERE key IS NOT NULL DO NOTHING;
                IF FOUND THEN
                    next_offset := next_offset + 1;
                    written := written + 1;
                END IF;
            END LOOP;
            IF written > 0 THEN
                PERFORM pg_notify(p_channel, '');
            END IF;
            RETURN written;
        END
        $$;
        """,
    ),
    (
        11,
        # The Temporal run whose step recorded a row's step result: a retried attempt returns
        # a record only of its own run, never one a reset run's earlier timeline left at the
        # same position (activities/step_records.py).
        """
        ALTER TABLE run_messages ADD COLUMN IF NOT EXISTS recorded_by TEXT;
        """,
    ),
    (
        12,
        # A run's tokens and duration past 2**31 - 1: a run waiting 25 days for approval, or
        # an endpoint reporting billions of tokens, failed its debrief's write for good
        # ("integer out of range": no debrief, no lessons; a trivial run never ended). The
        # table is rewritten once.
        """
        ALTER TABLE agent_debriefs
            ALTER COLUMN tokens_used TYPE BIGINT,
            ALTER COLUMN duration_ms TYPE BIGINT;
        """,
    ),
    (
        13,
        # An agent's live lessons, which a run with memory ranks as it starts
        # (`LessonStore.relevant`): through (agent_id, created_at) it read every lesson the
        # agent was ever taught, live or expired, in every page of the table (nothing purges
        # them unless an operator lists lessons or prunes): at six months, the busy agent's
        # 30,000 lessons for its 5,000 live ones, 4,100 pages for 690. A lesson row is
        # written twice a run, at its debrief: the index costs no step anything. Built
        # plainly, in the migrations' transaction (CONCURRENTLY cannot run in one): debriefs'
        # writes wait for the build: 0.07 s at 100,000 lessons (bench/data_scale.py).
        """
        CREATE INDEX IF NOT EXISTS idx_lessons_agent_expires
            ON agent_lessons (agent_id, expires_at);
        """,
    ),
    (
        14,
        # Expired lessons of every agent, the first expired first (`LessonStore.purge_expired`,
        # at each `lessons` listing and in `prune`): (agent_id, expires_at) serves one agent's,
        # and the purge, which is every agent's, read the whole table in one statement to
        # delete them all in one transaction (83,000 of 100,000 rows at six months). Now it
        # deletes a batch a statement, found here. Written once a lesson, at its debrief. An
        # expression only the purge has: on expires_at itself, the index drew a run's lessons
        # query to walk every agent's live lessons by expiry, for one agent's.
        """
        CREATE INDEX IF NOT EXISTS idx_lessons_expires
            ON agent_lessons ((coalesce(expires_at, 'infinity')));
        """,
    ),
    (
        15,
        # No statement reads chat sessions by recency: a session is read by its key (agent,
        # session), and no command lists an agent's sessions. The index cost every chat turn,
        # which sets its session's updated_at: an indexed column changed, so each turn's
        # update wrote a new entry in both indexes (no HOT update). Made with the table in
        # migration 3 for a listing that was never written.
        """
        DROP INDEX IF EXISTS idx_sessions_agent_updated;
        """,
    ),
    (
        16,
        # What each direct chat turn's LLM call used and cost (activities/chat_usage.py), for
        # `costs`: chat was billed and counted nowhere. A table of its own, not columns of
        # chat_messages: the usage is known in the chat activity, before the turn has a
        # position in its session, and a session rewritten whole (`save`) or deleted must
        # not take what it cost with it. One row a turn, keyed by the Temporal activity that
        # made the call, so a retried attempt writes the same row. A new table only: nothing
        # stored before is touched.
        """
        CREATE TABLE IF NOT EXISTS chat_usage (
            workflow_id      TEXT             NOT NULL,
            run_id           TEXT             NOT NULL,
            activity_id      TEXT             NOT NULL,
            agent_id         TEXT             NOT NULL,
            session_id       TEXT,
            model            TEXT             NOT NULL,
            input_tokens     BIGINT           NOT NULL,
            output_tokens    BIGINT           NOT NULL,
            cached_tokens    BIGINT           NOT NULL DEFAULT 0,
            reasoning_tokens BIGINT           NOT NULL DEFAULT 0,
            estimated        BOOLEAN          NOT NULL DEFAULT false,
            cost_usd         DOUBLE PRECISION NOT NULL,
            created_at       TIMESTAMPTZ      NOT NULL DEFAULT now(),
            updated_at       TIMESTAMPTZ      NOT NULL DEFAULT now(),
            PRIMARY KEY (workflow_id, run_id, activity_id)
        );
        CREATE INDEX IF NOT EXISTS idx_chat_usage_agent_created
            ON chat_usage (agent_id, created_at);
        """,
    ),
]
