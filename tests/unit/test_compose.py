"""The container stack's files hang together: docker-compose.yml, the Dockerfile, .dockerignore.

Nothing is built or started here (no Docker engine needed): the files are parsed and their
wiring checked, with `${VAR}` resolved as Compose would with `.env.example` copied to `.env`.
The roles the Postgres init script creates are exercised on a real Postgres in
tests/e2e/test_database_roles.py.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from reactive_temporal.search_attributes import dev_server_flags

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"
INIT_ROLES = ROOT / "deploy" / "postgres" / "init-roles.sh"

SERVICES = {"postgres", "temporal", "temporal-ui", "temporal-setup", "migrate", "worker"}
ONE_SHOT = {"temporal-setup", "migrate"}
METRICS_PORT = 9464


def code_search_attributes() -> dict[str, str]:
    """Name → type of every search attribute the workflows set, from the code itself."""
    flags = dev_server_flags()
    pairs = [flags[i + 1] for i, flag in enumerate(flags) if flag == "--search-attribute"]
    return dict(pair.split("=", 1) for pair in pairs)


SEARCH_ATTRIBUTES = code_search_attributes()


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name.strip()] = value.strip()
    return values


DOTENV = env_example()

_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
)


def resolve(value: Any, env: dict[str, str] | None = None) -> str:
    """A Compose string as Compose sees it with `env` (default: .env.example) as its .env."""
    env = DOTENV if env is None else env

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        value = env.get(name)
        if op in (":-", "-"):
            return value if value or (op == "-" and value is not None) else arg
        if op in (":?", "?"):
            if not value:
                raise AssertionError(f"${{{name}}} is required: {arg}")
            return value
        return value or ""

    return _VARIABLE.sub(substitute, str(value))


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {key: resolve(value) for key, value in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def script(service: dict[str, Any]) -> str:
    parts = [service.get("entrypoint"), service.get("command")]
    text = " ".join(p if isinstance(p, str) else " ".join(p) for p in parts if p)
    return resolve(text)


def container_ports(service: dict[str, Any]) -> set[int]:
    ports = set()
    for port in service.get("ports", []):
        target = port["target"] if isinstance(port, dict) else resolve(port).rsplit(":", 1)[-1]
        ports.add(int(str(target).split("/")[0]))
    return ports


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    return instructions


def exec_or_shell(arguments: str) -> list[str]:
    arguments = arguments.strip()
    if arguments.startswith("["):
        parsed = json.loads(arguments)
        assert isinstance(parsed, list)
        return [str(part) for part in parsed]
    return shlex.split(arguments)


# --- docker-compose.yml ---------------------------------------------------------------------


def test_the_five_services_exist(services):
    assert SERVICES <= set(services)


def test_every_long_running_service_has_a_healthcheck(services):
    dockerfile_has_healthcheck = any(kw == "HEALTHCHECK" for kw, _ in dockerfile_instructions())
    for name, service in services.items():
        if name in ONE_SHOT:
            continue
        check = service.get("healthcheck")
        if check is None:
            # A service built from this repo inherits the Dockerfile's HEALTHCHECK.
            assert service.get("build") in (".", {"context": "."}), f"{name} has no healthcheck"
            assert dockerfile_has_healthcheck, f"{name} relies on the Dockerfile's HEALTHCHECK"
            continue
        assert not check.get("disable"), f"{name}'s healthcheck is disabled"
        test = check["test"]
        if isinstance(test, list):
            assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, f"{name}: {test}"


def test_long_running_services_restart_and_the_one_shot_does_not(services):
    for name, service in services.items():
        restart = str(service.get("restart", "no"))
        if name in ONE_SHOT:
            assert restart in ("no", "False", "false"), f"{name} must run once, not {restart}"
        else:
            assert restart in ("always", "unless-stopped") or restart.startswith("on-failure"), (
                f"{name} has restart: {restart}"
            )


def test_every_depends_on_target_exists(services):
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            assert target in services, f"{name} depends on unknown service {target}"
            assert target != name
            if condition == "service_healthy":
                target_service = services[target]
                assert "healthcheck" in target_service or target_service.get("build"), (
                    f"{name} waits for {target} to be healthy, but it has no healthcheck"
                )
            if condition == "service_completed_successfully":
                assert target in ONE_SHOT, f"{name} waits for long-running {target} to exit"


def test_worker_waits_for_healthy_servers_and_for_the_setup_job(services):
    assert depends_on(services["worker"]) == {
        "postgres": "service_healthy",
        "temporal": "service_healthy",
        "temporal-setup": "service_completed_successfully",
        "migrate": "service_completed_successfully",
    }


def test_worker_is_built_here_and_can_run_several_replicas(services):
    worker = services["worker"]
    assert worker.get("build") in (".", {"context": "."})
    assert "container_name" not in worker, "a fixed container name prevents --scale"
    assert not worker.get("ports"), "published ports prevent --scale"
    replicas = int(resolve((worker.get("deploy") or {}).get("replicas", 1)))
    assert replicas >= 1


def test_worker_environment_points_at_the_compose_services(services):
    env = environment(services["worker"])
    postgres = environment(services["postgres"])

    host, _, port = env["TEMPORAL_ADDRESS"].rpartition(":")
    assert host == "temporal"
    assert int(port) == 7233
    assert int(port) in container_ports(services["temporal"])

    url = urlsplit(env["DATABASE_URL"])
    assert url.scheme in ("postgresql", "postgres")
    assert url.hostname == "postgres"
    assert (url.port or 5432) == 5432
    # The least-privilege role, never the superuser or the schema owner.
    assert url.username == "agents_worker"
    assert url.password == postgres["AGENTS_WORKER_PASSWORD"] == DOTENV["AGENTS_WORKER_PASSWORD"]
    assert url.path.lstrip("/") == "agents"


def test_worker_passes_the_llm_settings_through_from_the_host(services):
    raw = services["worker"]["environment"]
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_MODEL"):
        assert re.fullmatch(rf"\$\{{{name}(:-[^}}]*)?\}}", str(raw[name])), (name, raw[name])
    # Unset on the host: no endpoint and no key (the offline model), but a real model name.
    env = environment(services["worker"])
    assert env["OPENAI_BASE_URL"] == "" and env["OPENAI_API_KEY"] == ""
    assert env["AGENT_MODEL"]


def test_temporal_server_is_backed_by_the_postgres_service(services):
    temporal = services["temporal"]
    env = environment(temporal)
    postgres = environment(services["postgres"])
    assert temporal["image"].startswith("temporalio/auto-setup")
    assert env["DB"] == "postgres12"
    assert env["POSTGRES_SEEDS"] == "postgres"
    assert int(env["DB_PORT"]) == 5432
    # Its own role, not the superuser; its own databases, created by the init script for it.
    assert env["POSTGRES_USER"] == "temporal" != postgres["POSTGRES_USER"]
    assert env["POSTGRES_PWD"] == postgres["TEMPORAL_DB_PASSWORD"]
    assert env["SKIP_DB_CREATE"] == "true"
    init = INIT_ROLES.read_text()
    for database in (env["DBNAME"], env["VISIBILITY_DBNAME"]):
        assert database != "agents"
        assert f"CREATE DATABASE {database} OWNER temporal;" in init
    assert depends_on(temporal) == {"postgres": "service_healthy"}


def test_postgres_keeps_its_data_and_checks_readiness(services):
    postgres = services["postgres"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    assert "pg_isready" in json.dumps(postgres["healthcheck"]["test"])
    # Over TCP: the entrypoint's init-time server (which runs the init script) has none, so
    # healthy means the roles exist.
    assert "-h 127.0.0.1" in json.dumps(postgres["healthcheck"]["test"])


def test_web_ui_talks_to_temporal_and_listens_on_8080(services):
    ui = services["temporal-ui"]
    env = environment(ui)
    assert ui["image"].startswith("temporalio/ui")
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "TEMPORAL_CORS_ORIGINS" in env
    assert 8080 in container_ports(ui)
    assert any(resolve(p).split(":")[-2:] == ["8080", "8080"] for p in ui["ports"])


@pytest.mark.parametrize(("name", "kind"), sorted(SEARCH_ATTRIBUTES.items()))
def test_setup_registers_each_search_attribute_with_its_type(services, name, kind):
    text = script(services["temporal-setup"])
    creates = re.findall(
        r"temporal operator search-attribute create\b[^\n]*?--name\s+(\w+)\s+--type\s+(\w+)", text
    )
    assert (name, kind) in creates
    assert [n for n, _ in creates].count(name) == 1


def test_setup_is_idempotent_and_targets_the_compose_temporal(services):
    setup = services["temporal-setup"]
    text = script(setup)
    assert setup["image"].startswith("temporalio/admin-tools")
    assert "already exists" in text, "re-running must accept attributes that already exist"
    assert text.count("--address temporal:7233") >= len(SEARCH_ATTRIBUTES)
    assert depends_on(setup) == {"temporal": "service_healthy"}


def test_every_image_is_pinned_to_a_release(services):
    for name, service in services.items():
        image = str(service.get("image", ""))
        assert image, f"{name} has no image"
        assert "$" not in image, f"{name}: {image} can be changed from the environment"
        repository, _, tag = image.rpartition(":")
        assert repository and "/" not in tag, f"{name}: {image} has no tag"
        assert re.match(r"\d+\.\d+(\.\d+)?([.-]|$)", tag), f"{name}: {image} is not a release"


def test_the_postgres_init_script_is_mounted_and_gets_every_password(services):
    postgres = services["postgres"]
    assert any(
        str(v).startswith("./deploy/postgres/init-roles.sh:/docker-entrypoint-initdb.d/")
        for v in postgres["volumes"]
    )
    env = environment(postgres)
    for variable in re.findall(r'"\$([A-Z_]+_PASSWORD)"', INIT_ROLES.read_text()):
        assert env.get(variable), f"the init script reads {variable}, postgres does not get it"


def test_init_script_gives_workers_read_write_and_nothing_else():
    sql = " ".join(INIT_ROLES.read_text().split())
    assert "CREATE DATABASE agents OWNER agents_migrator;" in sql
    assert "ALTER SCHEMA public OWNER TO agents_migrator;" in sql
    assert "REVOKE CREATE ON SCHEMA public FROM PUBLIC;" in sql
    assert "REVOKE ALL ON DATABASE agents, temporal, temporal_visibility FROM PUBLIC;" in sql
    grants = re.findall(r"GRANT ([A-Z, ]+) ON (\w+(?: \w+)*?) TO agents_worker", sql)
    assert grants
    for privileges, target in grants:
        assert set(privileges.replace(",", " ").split()) <= {
            "SELECT", "INSERT", "UPDATE", "DELETE", "USAGE", "CONNECT",
        }, (privileges, target)  # fmt: skip
    assert "GRANT CREATE" not in sql and "SUPERUSER" not in sql and "CREATEDB" not in sql


def test_secrets_come_from_the_env_file_and_have_no_defaults():
    raw = COMPOSE.read_text()
    secrets = sorted(set(re.findall(r"\$\{(\w*(?:PASSWORD|API_KEY|KEYS)\w*)", raw)))
    assert "AGENTS_WORKER_PASSWORD" in secrets and "OPENAI_API_KEY" in secrets
    for name in secrets:
        assert name in DOTENV, f".env.example does not list {name}"
        if name.endswith("PASSWORD"):
            assert re.search(rf"\$\{{{name}:\?", raw), f"{name} must be required, with no default"
            assert not re.search(rf"\$\{{{name}:?-", raw), f"{name} has a default"
    for name, value in DOTENV.items():
        if name.endswith("PASSWORD"):
            assert value.startswith("change-me"), f".env.example must not hold a real {name}"
    assert ".env" in (ROOT / ".gitignore").read_text().split()


def test_the_superuser_password_reaches_postgres_only(services):
    for name, service in services.items():
        if name != "postgres":
            assert "POSTGRES_PASSWORD" not in json.dumps(service.get("environment") or {}), name
        assert "env_file" not in service, f"{name} would get every secret in the env file"


def test_migrate_runs_once_as_the_schema_owner_before_workers(services):
    migrate = services["migrate"]
    assert migrate.get("build") in (".", {"context": "."})
    url = urlsplit(environment(migrate)["DATABASE_URL"])
    assert url.username == "agents_migrator" and url.path.lstrip("/") == "agents"
    assert url.password == DOTENV["AGENTS_MIGRATOR_PASSWORD"]
    assert exec_or_shell(" ".join(migrate["command"])) == ["python", "starter.py", "migrate"]
    assert depends_on(migrate) == {"postgres": "service_healthy"}


def test_worker_serves_metrics_and_health_and_drains_within_the_grace_period(services):
    worker = services["worker"]
    env = environment(worker)
    assert int(env["REACTIVE_TEMPORAL_METRICS_PORT"]) == METRICS_PORT
    assert METRICS_PORT in {int(str(p).split("/")[0]) for p in worker["expose"]}
    check = json.dumps(worker["healthcheck"]["test"])
    assert f"http://127.0.0.1:{METRICS_PORT}/healthz" in check
    command = worker["command"]
    drain = int(command[command.index("--graceful-shutdown") + 1])
    grace = int(str(worker["stop_grace_period"]).rstrip("s"))
    assert 0 < drain < grace, "the worker must finish draining before Compose sends SIGKILL"


def test_named_volumes_are_declared(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume["source"] if isinstance(volume, dict) else str(volume).split(":")[0]
            if not source.startswith((".", "/", "~")):
                assert source in declared, f"{name} mounts undeclared volume {source}"


# --- Dockerfile and .dockerignore -----------------------------------------------------------


def test_dockerfile_builds_the_worker_from_pyproject():
    instructions = dockerfile_instructions()
    froms = [args for kw, args in instructions if kw == "FROM"]
    assert froms and froms[0].split()[0] == "python:3.11-slim"
    runs = " ".join(args for kw, args in instructions if kw == "RUN")
    assert re.search(r"pip install (--[\w-]+ )*\.(\s|$)", runs)


def test_dockerfile_runs_worker_py():
    cmds = [exec_or_shell(args) for kw, args in dockerfile_instructions() if kw == "CMD"]
    assert cmds and cmds[-1] == ["python", "worker.py"]


def test_dockerfile_has_a_healthcheck():
    checks = [args for kw, args in dockerfile_instructions() if kw == "HEALTHCHECK"]
    assert len(checks) == 1
    assert checks[0] != "NONE"
    command = exec_or_shell(checks[0].split("CMD", 1)[1])
    assert command == ["python", "-m", "reactive_temporal.telemetry.healthcheck"]
    # The module it runs checks /healthz when the metrics port is set, else TEMPORAL_ADDRESS.
    from reactive_temporal.telemetry import healthcheck

    source = Path(healthcheck.__file__).read_text()
    assert "REACTIVE_TEMPORAL_METRICS_PORT" in source and "TEMPORAL_ADDRESS" in source


def test_dockerfile_compiles_the_packages_the_worker_imports_from_app():
    """With PYTHONDONTWRITEBYTECODE, nothing writes bytecode at run time; every start would
    compile the packages, and a worker that sandboxes the workflows each workflow module for
    every workflow it starts."""
    instructions = dockerfile_instructions()
    copied = {args.split()[-1].strip("./") for kw, args in instructions if kw == "COPY"}
    compiles = [
        args.split() for kw, args in instructions if kw == "RUN" and "compileall" in args.split()
    ]
    assert compiles, "no RUN python -m compileall"
    for package in ("reactive_temporal", "workflows", "activities"):
        assert package in copied and package in compiles[-1], package
    position = {i: (kw, args) for i, (kw, args) in enumerate(instructions)}
    compile_at = max(i for i, (kw, args) in position.items() if "compileall" in args)
    user_at = max(i for i, (kw, _) in position.items() if kw == "USER")
    last_copy = max(i for i, (kw, _) in position.items() if kw == "COPY")
    assert last_copy < compile_at < user_at  # after the code, while /app is still writable


def test_dockerfile_does_not_run_as_root():
    users = [args.split(":")[0] for kw, args in dockerfile_instructions() if kw == "USER"]
    assert users, "no USER instruction: the worker would run as root"
    assert users[-1] not in ("root", "0")


def test_dockerignore_keeps_local_state_out_of_the_build_context():
    patterns = {
        line.strip().rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for required in (".git", ".venv", ".reactive-temporal", ".env", "**/__pycache__"):
        assert required in patterns, required
    assert "README.md" not in patterns and "pyproject.toml" not in patterns
