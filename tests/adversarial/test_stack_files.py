"""Files the embedded stack writes are its owner's alone, whatever the umask.

stack.json names the database URL; the dev server's SQLite file and log hold every history.
With a permissive umask (0o000, the worst a user might have), every one of them must still be
readable by its owner only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from reactive_temporal.config import Settings
from reactive_temporal.embedded.stack import EmbeddedStack
from reactive_temporal.private_files import open_private, write_private


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(paths: list[Path]) -> dict[str, int]:
    """Each file's mode, leaving out files gone since they were listed (SQLite's journal
    comes and goes with each of the dev server's transactions)."""
    found = {}
    for path in paths:
        try:
            found[path.name] = mode(path)
        except FileNotFoundError:
            continue
    return found


async def test_the_stack_writes_owner_only_files(
    tmp_path: Path, database_url: str, permissive_umask: None
):
    data_dir = tmp_path / "stack-data"
    settings = Settings(
        database_url=database_url, openai_api_key="test", data_dir=data_dir
    )  # the embedded Temporal dev server, with its SQLite file and log in data_dir
    stack = await EmbeddedStack(settings).start()
    try:
        stack.publish()
        written = sorted(p for p in data_dir.rglob("*"))
        assert {p.name for p in written} >= {"stack.json", "stack.lock", "temporal.log",
                                             "temporal.sqlite"}  # fmt: skip
        assert mode(data_dir) == 0o700
        readable = [f"{name}: {oct(m)}" for name, m in modes(written).items() if m & 0o077]
        assert readable == []
    finally:
        await stack.stop()


def test_private_writes_tighten_existing_files(tmp_path: Path, permissive_umask: None):
    exported = tmp_path / "history.json"
    exported.write_text("old")
    os.chmod(exported, 0o666)
    write_private(exported, "every prompt and answer")
    assert mode(exported) == 0o600 and exported.read_text() == "every prompt and answer"
    log = tmp_path / "server.log"
    with open_private(log, "ab") as f:
        f.write(b"line\n")
    assert mode(log) == 0o600


def test_private_writes_leave_what_is_not_a_regular_file_alone(tmp_path: Path):
    """`export -o PATH` to a pipe or a device writes to it and leaves its mode: run as root,
    `export RUN -o /dev/null` made `/dev/null` owner-only for every other user."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    os.chmod(pipe, 0o666)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # the writer's open needs a reader
    try:
        write_private(pipe, "history")
        assert os.read(reader, 100) == b"history"
    finally:
        os.close(reader)
    assert mode(pipe) == 0o666


async def test_with_embedded_postgres_others_may_pass_through_but_not_look(
    tmp_path: Path, permissive_umask: None
):
    """As root, embedded Postgres runs as its own user and needs to reach its data below the
    stack's directory: the directory becomes traverse-only (0711), never listable, and what
    the stack writes in it stays owner-only."""
    data_dir = tmp_path / "stack-data"
    stack = await EmbeddedStack(
        Settings(temporal_address=None, openai_api_key="test", data_dir=data_dir)
    ).start()
    try:
        stack.publish()
        pgdata = data_dir / "postgres"
        expected = 0o700 if pgdata.stat().st_uid == os.getuid() else 0o711
        assert mode(data_dir) == expected
        assert mode(pgdata) == 0o700
        ours = [p for p in data_dir.iterdir() if p != pgdata]
        assert [f"{p.name}: {oct(mode(p))}" for p in ours if mode(p) & 0o077] == []
    finally:
        await stack.stop()
