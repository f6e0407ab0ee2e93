"""Files only their owner can read: what the stack writes holds addresses, logs and data.

`stack.json` names the database URL, the dev server's log and SQLite file hold every history,
Postgres holds every transcript: none of it is for other users of the machine. Directories are
0700, files 0600, whatever the process umask says.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO, Any

OWNER_ONLY_DIR = 0o700
TRAVERSE_ONLY_DIR = 0o711
"""For a directory another local user must pass through (embedded Postgres run as root)."""
OWNER_ONLY_FILE = 0o600
CHILD_UMASK = 0o077
"""For servers the stack starts (the Temporal dev server's SQLite file and logs)."""


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed, and make it owner-only."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, OWNER_ONLY_DIR)
    return path


def _private_fd(path: Path, flags: int) -> int:
    fd = os.open(path, flags | os.O_CREAT, OWNER_ONLY_FILE)
    # an existing file keeps its mode otherwise; a device or a pipe (`-o /dev/stdout`) is
    # not ours to change: as root, `/dev/null` went owner-only for every other user
    if stat.S_ISREG(os.fstat(fd).st_mode):
        os.fchmod(fd, OWNER_ONLY_FILE)
    return fd


def write_private(path: Path, text: str) -> None:
    """Replace `path`'s content with `text`, the file owner-only from its first byte."""
    with os.fdopen(_private_fd(path, os.O_WRONLY | os.O_TRUNC), "w", encoding="utf-8") as f:
        f.write(text)


def open_private(path: Path, mode: str) -> IO[Any]:
    """`open(path, mode)` for "a", "ab", "w" or "wb", creating the file owner-only."""
    flags = os.O_WRONLY | (os.O_APPEND if mode.startswith("a") else os.O_TRUNC)
    return os.fdopen(_private_fd(path, flags), mode)
