"""What a run or workflow id given by a person may be, and how to show one in an error.

Every command and API call that takes a run id checks it here before asking the server:
an empty id reached the server as "WorkflowId is not set on request" (exit 1, as if the
server had failed); an id from undecodable argv bytes (lone surrogates) crashed protobuf's
encoder with a traceback or "'utf-8' codec can't encode…"; and an id past Temporal's
length limit was sent anyway, then echoed whole (100,000 characters) in "no run with id".
"""

from __future__ import annotations

import re

from reactive_temporal.contracts.run import AGENT_ID_MAX, AGENT_ID_PATTERN

WORKFLOW_ID_MAX_BYTES = 1000
"""Temporal's default `limit.maxIDLength`: no workflow can have a longer id."""
SHOWN_CHARACTERS = 80
"""How much of a bad value an error quotes."""
_SURROGATES = re.compile("[\ud800-\udfff]")


def shown(value: object) -> str:
    """`value` quoted for an error message, cut to a readable length.

    Its repr: control characters, escape sequences and lone surrogates show as escapes,
    never raw.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= SHOWN_CHARACTERS:
        return repr(text)
    return f"{text[:SHOWN_CHARACTERS]!r}… ({len(text):,} characters)"


def workflow_id_problem(value: object, what: str = "a run id") -> str | None:
    """Why `value` cannot be a workflow id, or None when it can be."""
    if not isinstance(value, str):
        return f"{what} is a string, not {type(value).__name__}"
    if not value.strip():
        return f"{what} is a non-empty string without NUL, not {shown(value)}"
    if "\x00" in value:
        return f"{what} is a non-empty string without NUL, not {shown(value)}"
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        return (
            f"{what} must be valid UTF-8 text; {shown(value)} holds bytes that are not "
            "(or a lone surrogate)"
        )
    if size > WORKFLOW_ID_MAX_BYTES:
        return (
            f"{what} is {size:,} bytes; Temporal's ids are at most {WORKFLOW_ID_MAX_BYTES:,}: "
            f"{shown(value)}"
        )
    return None


def valid_workflow_id(value: object, what: str = "a run id") -> str:
    """`value`, or a ValueError saying why it is not a workflow id."""
    problem = workflow_id_problem(value, what)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, str)
    return value


def agent_name_problem(value: object) -> str | None:
    """Why `value` cannot be an agent's name (`AgentConfig.agent_id`), or None.

    A filter by agent (`runs`, `lessons`, `costs`, `approvals`, `cancel --agent`) takes only a
    name an agent can have: "" was no filter at all (`cancel --agent ""` cancelled every
    running run of every agent), and a name no agent can have listed nothing with exit 0,
    or crashed the database driver (undecodable bytes).
    """
    if not isinstance(value, str):
        return f"an agent name is a string, not {type(value).__name__}"
    if (
        len(value) > AGENT_ID_MAX
        or _SURROGATES.search(value)
        or not re.fullmatch(AGENT_ID_PATTERN, value)
    ):
        return (
            f"invalid agent name {shown(value)}: use letters, digits, '_', '.', ':', '-', "
            f"starting with a letter or digit (at most {AGENT_ID_MAX} characters)"
        )
    return None


def valid_agent_name(value: object) -> str:
    """`value`, or a ValueError saying why it is not an agent's name."""
    problem = agent_name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    assert isinstance(value, str)
    return value
