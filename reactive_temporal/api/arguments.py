"""What the Python API's arguments may be: their types, and text a payload can carry.

The contracts are pydantic models in lax mode, so that values read back from Temporal's
history keep validating; but lax mode took a caller's mistakes as values: `b"hi"` became the
text "hi", `max_iterations=True` became 1 and `"5"` became 5. The API's entry points (the
builder, `Agent.run`/`start`/`chat`, sessions, waits) hold their arguments to the types their
signatures name here, with a TypeError naming the argument; the CLI and the environment parse
their own text into those types first (typer, pydantic-settings), so they are not affected.

Text with a lone surrogate (Python's stand-in for bytes that were not UTF-8) is refused as
input: the payload converter would carry it as U+FFFD (`payloads.py`), a message or reason
other than the one given, where a run's task was refused by pydantic's "unable to parse raw
data as a unicode string" and a chat message was accepted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from numbers import Integral, Real

from reactive_temporal.api.workflow_ids import shown

_SURROGATE = re.compile("[\ud800-\udfff]")


def _kind(value: object) -> str:
    return type(value).__name__


def text_argument(name: str, value: object) -> str:
    """`value`, or a TypeError when it is not text (`bytes` say to decode them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        raise TypeError(f"{name} is text (str), not {_kind(value)}: decode it first")
    raise TypeError(f"{name} is text (str), not {_kind(value)}")


def unencodable_problem(name: str, value: str) -> str | None:
    """Why `value` is not text a payload carries as given (a lone surrogate), or None."""
    if _SURROGATE.search(value) is None:
        return None
    return (
        f"{name} is not UTF-8 text: {shown(value)} holds a lone surrogate (bytes that were "
        "not UTF-8?), which no payload can carry as given"
    )


def storable_text(name: str, value: object) -> str:
    """`value` as text a payload carries as given: TypeError, or ValueError naming it."""
    text = text_argument(name, value)
    if (problem := unencodable_problem(name, text)) is not None:
        raise ValueError(problem)
    return text


def bool_argument(name: str, value: object) -> bool:
    """`value`, or a TypeError when it is not a bool ("no" was taken as False, "yes" as True)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} is a bool, not {_kind(value)} {shown(value)}")
    return value


def optional_bool(name: str, value: object) -> bool | None:
    """`bool_argument`, None passed through."""
    return None if value is None else bool_argument(name, value)


def names_argument(name: str, values: Iterable[str] | None) -> list[str]:
    """A list of names (None: empty).

    A lone string is a TypeError (it was split into its letters), and so is a name that is
    not text.
    """
    if isinstance(values, str | bytes):
        what = "string" if isinstance(values, str) else _kind(values)
        raise TypeError(f"{name} takes a list of names, not the {what} {shown(values)}")
    return [storable_text(f"{name}[{i}]", v) for i, v in enumerate(values or [])]


def int_argument(name: str, value: object) -> int:
    """`value` as an int; TypeError for a bool, a float or a numeric string."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} is an int, not {_kind(value)} {shown(value)}")
    return int(value)


def optional_int(name: str, value: object) -> int | None:
    """`int_argument`, None passed through."""
    return None if value is None else int_argument(name, value)


def number_argument(name: str, value: object) -> float:
    """`value` (an int or a float) as a number; TypeError for a bool or a numeric string."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} is a number (int or float), not {_kind(value)} {shown(value)}")
    return float(value)


def finite_number(name: str, value: object, *, unlimited: str) -> float:
    """`value` as a finite number.

    inf and nan are ValueErrors saying how to ask for `unlimited` (leaving the argument out:
    None).
    """
    number = number_argument(name, value)
    if not math.isfinite(number):
        raise ValueError(
            f"{name} must be a finite number, not {number}; for {unlimited}, pass None"
        )
    return number


def waiting_seconds(name: str, value: object) -> float:
    """How long to wait: a number at least 0, `math.inf` for ever.

    TypeError for what is not a number, ValueError for a negative one or nan (which
    `asyncio.wait` took as no wait).
    """
    seconds = number_argument(name, value)
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"{name} must be 0 or more (math.inf: until done), not {seconds}")
    return seconds
