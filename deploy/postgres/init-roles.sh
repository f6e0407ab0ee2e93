#!/bin/sh
# Runs once, when the Postgres volume is first initialised (docker-entrypoint-initdb.d), as the
# superuser. Three roles, least privilege each:
#
#   temporal         owns the databases `temporal` and `temporal_visibility` (Temporal's own
#                    schema tool creates and upgrades their tables); nothing else.
#   agents_migrator  owns the database `agents` and its schema: the only role that may create
#                    or alter tables (`python starter.py migrate`, compose's `migrate` service).
#   agents_worker    what workers connect as: reads and writes the tables agents_migrator
#                    creates, and nothing more (no CREATE, no DROP, no other database).
#
# Passwords come from the environment (compose passes them from .env), via psql variables, so
# no quoting in a password can change the SQL.
set -eu

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v temporal_password="$TEMPORAL_DB_PASSWORD" \
    -v migrator_password="$AGENTS_MIGRATOR_PASSWORD" \
    -v worker_password="$AGENTS_WORKER_PASSWORD" <<'SQL'
CREATE ROLE temporal LOGIN PASSWORD :'temporal_password';
CREATE DATABASE temporal OWNER temporal;
CREATE DATABASE temporal_visibility OWNER temporal;

CREATE ROLE agents_migrator LOGIN PASSWORD :'migrator_password';
CREATE ROLE agents_worker LOGIN PASSWORD :'worker_password';
CREATE DATABASE agents OWNER agents_migrator;

-- Nobody else connects to the agents' or Temporal's databases.
REVOKE ALL ON DATABASE agents, temporal, temporal_visibility FROM PUBLIC;
GRANT CONNECT ON DATABASE agents TO agents_migrator, agents_worker;
SQL

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname agents <<'SQL'
-- Only the migrator creates objects; workers may use the schema, not add to it.
ALTER SCHEMA public OWNER TO agents_migrator;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO agents_worker;
-- Every table and sequence the migrator creates, now or in a later migration, is readable and
-- writable by workers (no DDL, no TRUNCATE, no REFERENCES, no TRIGGER).
ALTER DEFAULT PRIVILEGES FOR ROLE agents_migrator IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO agents_worker;
ALTER DEFAULT PRIVILEGES FOR ROLE agents_migrator IN SCHEMA public
    GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO agents_worker;
SQL
