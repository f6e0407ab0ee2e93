"""A key a hard wrap broke over lines (reactive_temporal/secret_wrap.py): joined where the
line is full at the wrap's width and head and rest are one whole key only together; lines
that merely end at the width, words after a key and lists of keys left as they were."""

from __future__ import annotations

import random
import string
import textwrap

import pytest

from reactive_temporal.secrets_scan import (
    AWS_KEY_ID,
    GITHUB,
    JWT,
    NPM,
    OPENAI,
    redact,
    scan,
)

RNG = random.Random(20260724)
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


KEYS = [
    ("ghp_" + rand(ALNUM, 36), GITHUB),
    ("npm_" + rand(ALNUM, 36), NPM),
    ("AKIA" + rand(string.ascii_uppercase + "234567", 16), AWS_KEY_ID),
    ("sk-proj-" + rand(URLSAFE, 74) + "T3BlbkFJ" + rand(URLSAFE, 74), OPENAI),
    (
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9."
        + rand(URLSAFE, 43),
        JWT,
    ),
]


def hard_wrap(text: str, width: int) -> str:
    """`text` as a terminal or `fold -w` shows it: every line cut at `width`."""
    return "\n".join(
        "\n".join(line[at : at + width] for at in range(0, max(len(line), 1), width))
        for line in text.split("\n")
    )


@pytest.mark.parametrize(("key", "kind"), KEYS, ids=[k for _, k in KEYS])
@pytest.mark.parametrize("width", [64, 80, 120])
@pytest.mark.parametrize("cut", [1, 3, 9, 17])
def test_a_key_a_hard_wrap_broke_is_redacted_whole(key: str, kind: str, width: int, cut: int):
    before = "$ cat .env\nLOG_LEVEL=debug\nKEY=" + "x" * (width - 5 - cut) + " "
    # the key's first `cut` characters end the line: its head is too short for its format
    text = hard_wrap(f"{before}{key} and the text goes on after it", width)
    found = scan(text)
    assert dict(found.found) == {kind: 1}, found.text
    for at in range(0, len(key) - 5):
        assert key[at : at + 6] not in found.text, found.text
    assert found.text.startswith("$ cat .env\nLOG_LEVEL=debug\nKEY=")
    assert found.text.replace("\n", "").endswith("] and the text goes on after it")


@pytest.mark.parametrize(("key", "kind"), KEYS, ids=[k for _, k in KEYS])
def test_a_key_textwrap_broke_is_redacted_whole(key: str, kind: str):
    text = textwrap.fill(f"the run read the key {key} from the file and went on", 70)
    found = scan(text)
    assert dict(found.found) == {kind: 1}, found.text
    assert all(key[at : at + 6] not in found.text for at in range(0, len(key) - 5))


@pytest.mark.parametrize(
    "text",
    [
        # a key that ends its line, and a word after it (a word-wrap's next line)
        "x" * 40 + " sk-" + rand(ALNUM, 36) + "\nJavaScript is next",
        "x" * 37 + " ghp_" + rand(ALNUM, 36) + "\nThen the run stopped",
        # a line that is not full: the next line's characters are its own
        "x" * 70 + " ghp_" + rand(ALNUM, 20) + "\n" + rand(ALNUM, 16) + "\n" + "y" * 120,
        # a list of keys, one a line, each whole
        "\n".join("ghp_" + rand(ALNUM, 76) for _ in range(3)),
    ],
)
def test_what_no_wrap_broke_is_joined_to_nothing(text: str):
    found = scan(text)
    lines = text.split("\n")
    kept = found.text.split("\n")
    assert len(kept) == len(lines)
    for line, after in zip(lines, kept, strict=True):
        # each line is redacted as it would be alone
        assert after == redact(line), (line, after)


@pytest.mark.parametrize(
    "text",
    [
        "x" * 75 + " ghp_a\nbc is short\n",  # too short joined, too
        "y" * 70 + " AKIA\nABCDEFGHIJKLMNOPQRSTUVWX and more",  # too long joined
        "z" * 79 + "\n" + rand(ALNUM, 40),  # no prefix
        ("a" * 80 + "\n") * 20,
        "short lines\nonly here\nghp_\n" + rand(ALNUM, 36),  # narrower than any wrap
    ],
)
def test_no_key_joined_is_no_key(text: str):
    assert redact(text) == text
