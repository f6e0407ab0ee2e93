"""Every failure a worker sends Temporal within a budget: an activity's, a workflow's, an update's.

A failure (its message, stack trace, details and chain of causes) goes to the server whole:
an activity's in RespondActivityTaskFailed, a workflow's or an update's in the workflow
task's completion, a local activity's in the run's history. A tool or a model endpoint whose
error is megabytes (an HTML error page, a stack dump, an echoed request) raises an exception
whose message is that body. Measured on the dev server (Server 1.32.0, SDK 1.35.0):

- an activity failure over 2 MiB (a 3 MB message, 3 MB of details, 40 causes of 100 KB) is
  replaced by the server with a non-retryable `ServerError`, "Failure exceeds size limit.",
  whose cause is the original cut to 512 KiB without its details or stack traces: a failure
  that would have been retried is not, what its details carried (an LLM step's bill) is lost,
  and half a megabyte of an error body lands in the run's history;
- one under 2 MiB is kept whole: a 1.5 MB message was a 1.5 MB history event, and a tool's
  failure the run quoted to its model as a 1.5 MB observation;
- a workflow failing with a 3 MB message never fails: the SDK refuses to send the task's
  completion (TMPRL1103), and the workflow task fails and is tried again every 10 s, forever;
- a message holding a lone surrogate (text from a JSON `\\ud800` escape) cannot be encoded at
  all: the SDK sent "Failed building exception result" instead, its type and its
  non-retryable flag lost, and a failure meant to be final was retried.

`BoundedFailureConverter` is the project's failure converter (`reactive_temporal.codec`: every
client and worker the project makes uses it): the SDK's own conversion, each message made
encodable, then `bound_failure`, which cuts the words and keeps everything that decides what
happens next as it was: each failure's kind, its `type`, `non_retryable`, `next_retry_delay`
and `category`. A failure within the budget is sent exactly as the SDK's converter sends it.
The budget, worst case, is FAILURE_MAX_BYTES: docs/payload-budget.md.
"""

from __future__ import annotations

import traceback
from typing import Any

from temporalio.api.common.v1 import Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverter, PayloadConverter
from temporalio.exceptions import ApplicationError, FailureError

from reactive_temporal.sanitize import clean_text, clip, needs_cleaning

FAILURE_MESSAGE_MAX_CHARS = 4_000
"""One failure's message (each in a chain): its head and tail kept around a marker saying how
much was cut. The project's own messages are far shorter (an endpoint's words are clipped to
500 characters where it raises); what a run quotes of a failure (a tool's observation, the
run's error) is taken from it."""
FAILURE_STACK_MAX_CHARS = 4_000
"""One failure's stack trace: about 25 frames of Python; a deep recursion's is clipped."""
FAILURE_DETAILS_MAX_BYTES = 8_000
"""One failure's details (and a cancellation's, a timeout's last heartbeat), as the payload
converter made them: kept in order while they fit, the rest dropped, saying so in the
message. The project's own details (an LLM step's bill) are a few hundred bytes."""
FAILURE_MAX_LEVELS = 8
"""Failures in one chain (the failure and its causes): past it the first ones and the
innermost are kept (the innermost is where the machine said what went wrong), the ones
between dropped, saying how many."""
FAILURE_MAX_BYTES = 460_000
"""A whole failure at most, every level at the limits above (control characters, six bytes
each in the JSON that carries an encrypted failure's words), measured by
tests/unit/test_failure_budget.py: under the SDK's own warning for a payload (512 KiB), a
quarter of Temporal's 2 MiB, so a workflow that fails with an activity's failure as its cause
is within the wall too (it is bounded again as the workflow's)."""

ENCODED_MESSAGE = "Encoded failure"
"""The message the SDK leaves in the clear when it moves a failure's words into its encoded
attributes (which a codec can encrypt)."""


class _EncodableLevels(DefaultFailureConverter):
    """One exception's conversion (one for each, since it follows the chain it converts): the
    SDK's, each exception whose message cannot be encoded replaced by one that says the same
    with U+FFFD, keeping its kind and flags, and the chain of causes walked so that the SDK's
    recursion stays shallow. The SDK converts a chain by recursing into each cause: a chain
    that comes back on itself (`raise err from err`, a retry helper's `raise last from
    first` after one try) or one a few hundred deep (an error wrapped at each level of a
    recursive parser) raised RecursionError, and the activity's failure became "Failed
    building exception result" (its type and non-retryable flag lost: a final failure
    retried), a workflow's a task failing on every try. Here a cause already in the chain
    ends it, and the levels past FAILURE_MAX_LEVELS are cut before they are converted (the
    first and the innermost kept, as `bound_failure` keeps them), each saying so."""

    def __init__(self) -> None:
        super().__init__()
        self._chain: list[BaseException] = []
        """The exceptions converted (or cut) so far, outermost first."""
        self._failures: list[Failure] = []
        """The levels being written, outermost first: the one above a cause is the last."""

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        if any(seen is exception for seen in self._chain):
            self._note_above(CYCLE_NOTE)  # the cause stays unset: the chain ends above
            return
        if len(self._failures) >= FAILURE_MAX_LEVELS - 1:
            rest = _chain_from(exception, self._chain)
            if len(rest) > 1:
                self._note_above(f"\n[{len(rest) - 1:,} causes cut here: the innermost follows]")
                self._chain += rest[:-1]
                exception = rest[-1]
        self._chain.append(exception)
        self._failures.append(failure)
        stack = _unencodable_stack(exception)
        stand_in = _encodable(exception, without_traceback=stack is not None)
        super().to_failure(stand_in, payload_converter, failure)
        if stack is not None:
            failure.stack_trace = stack
        self._failures.pop()

    def _note_above(self, note: str) -> None:
        """`note` after the message of the level whose cause is being converted (the SDK
        writes a level's message before it converts its cause)."""
        if self._failures:
            self._failures[-1].message += note


CYCLE_NOTE = "\n[its cause is an exception already in this chain: the chain ends here]"


def _chain_from(exception: BaseException, seen: list[BaseException]) -> list[BaseException]:
    """`exception` and the causes the SDK would convert after it, up to one already `seen` (or
    among them): a received failure's own causes are in its proto, not followed here."""
    chain = [exception]
    known = {id(each) for each in (*seen, exception)}  # all alive: their ids are theirs
    while (cause := _cause_converted(chain[-1])) is not None and id(cause) not in known:
        known.add(id(cause))
        chain.append(cause)
    return chain


def _cause_converted(exception: BaseException) -> BaseException | None:
    """The cause the SDK converts after `exception`: a failure error's `__cause__`, else the
    exception it was raised while handling (unless suppressed); any other exception's
    `__cause__` only; none for a failure received (its causes are in its proto)."""
    if not isinstance(exception, FailureError):
        return exception.__cause__
    if exception.failure is not None:
        return None
    if exception.__cause__ is not None:
        return exception.__cause__
    return None if exception.__suppress_context__ else exception.__context__


def _unencodable_stack(exception: BaseException) -> str | None:
    """The exception's stack trace as the SDK writes it, with U+FFFD for each lone surrogate,
    when it has one; else None. A file's path holds one when its bytes are not UTF-8 (Python
    reads them with surrogateescape): a worker installed under such a directory sent no
    failure at all ("Failed building exception result", its type and flags lost)."""
    frames = exception.__traceback__
    while frames is not None:
        if needs_cleaning(frames.tb_frame.f_code.co_filename):
            return clean_text("\n".join(traceback.format_tb(exception.__traceback__)))
        frames = frames.tb_next
    return None


def _encodable(exception: BaseException, *, without_traceback: bool = False) -> BaseException:
    """`exception`, or a stand-in the SDK can convert: the same kind, flags and causes, its
    words with U+FFFD for each lone surrogate (or, when its `__str__` raises, saying so), and
    no traceback when `without_traceback` (the caller writes the stack trace, cleaned)."""
    if isinstance(exception, FailureError):
        if exception.failure is not None:
            return exception  # received from the server: its words are encodable
        if not isinstance(exception, ApplicationError):
            return exception  # the SDK's other kinds are the SDK's own words
        if not needs_cleaning(exception.message) and not without_traceback:
            return exception
        stand_in = ApplicationError(
            clean_text(exception.message),
            *exception.details,
            type=exception.type,
            non_retryable=exception.non_retryable,
            next_retry_delay=exception.next_retry_delay,
            category=exception.category,
        )
        stand_in.__cause__ = exception.__cause__  # (which sets __suppress_context__: then this)
        stand_in.__context__ = exception.__context__  # a failure error's context is its cause
        stand_in.__suppress_context__ = exception.__suppress_context__
    else:
        try:
            text = str(exception)
        except Exception:
            text = f"<unprintable {type(exception).__name__}: its __str__ raised>"
        else:
            if not needs_cleaning(text) and not without_traceback:
                return exception
        # what the SDK makes of any other exception, with its words cleaned
        stand_in = ApplicationError(clean_text(text), type=type(exception).__name__)
        stand_in.__cause__ = exception.__cause__  # its `__cause__` alone, as the SDK's
    stand_in.__traceback__ = None if without_traceback else exception.__traceback__
    return stand_in


class BoundedFailureConverter(DefaultFailureConverter):
    """The SDK's failure converter, every failure it makes within the failure budget."""

    def __init__(self, *, encode_common_attributes: bool = False) -> None:
        super().__init__(encode_common_attributes=encode_common_attributes)
        self._encoded = encode_common_attributes

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        _EncodableLevels().to_failure(exception, payload_converter, failure)
        bound_failure(failure, payload_converter)
        if self._encoded:
            for level in levels_of(failure):
                encode_words(level, payload_converter)


class BoundedFailureConverterWithEncodedAttributes(BoundedFailureConverter):
    """The same, each failure's message and stack trace moved into its encoded attributes,
    which the encryption codec encrypts (the SDK's `DefaultFailureConverterWithEncodedAttributes`,
    bounded)."""

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)


def levels_of(failure: Failure) -> list[Failure]:
    """`failure` and its causes, outermost first (the messages themselves, to change in place)."""
    levels = [failure]
    while levels[-1].HasField("cause"):
        levels.append(levels[-1].cause)
    return levels


def bound_failure(failure: Failure, payload_converter: PayloadConverter) -> None:
    """`failure` within the budget, in place: at most FAILURE_MAX_LEVELS in its chain, each
    one's details, stack trace and message within their limits. Its words as its encoded
    attributes held them (a failure received and sent on) come back into its message and
    stack trace to be cut; the caller encodes them again when it encodes."""
    levels = levels_of(failure)
    notes = [""] * min(len(levels), FAILURE_MAX_LEVELS)
    if len(levels) > FAILURE_MAX_LEVELS:
        innermost = Failure()
        innermost.CopyFrom(levels[-1])
        cut = len(levels) - FAILURE_MAX_LEVELS
        levels[FAILURE_MAX_LEVELS - 2].cause.CopyFrom(innermost)
        notes[FAILURE_MAX_LEVELS - 2] = f"\n[{cut:,} causes cut here: the innermost follows]"
        levels = levels_of(failure)
    for level, note in zip(levels, notes, strict=True):
        unfold_words(level, payload_converter)
        note += _bound_details(level)
        if note or len(level.message) > FAILURE_MESSAGE_MAX_CHARS:
            level.message = clip(level.message + note, FAILURE_MESSAGE_MAX_CHARS)
        if len(level.stack_trace) > FAILURE_STACK_MAX_CHARS:
            level.stack_trace = clip(level.stack_trace, FAILURE_STACK_MAX_CHARS)


def _bound_details(level: Failure) -> str:
    """The level's details kept in order while they fit FAILURE_DETAILS_MAX_BYTES, the rest
    dropped; a note saying what was dropped, or ""."""
    info = level.WhichOneof("failure_info")
    details = {
        "application_failure_info": lambda: level.application_failure_info.details,
        "canceled_failure_info": lambda: level.canceled_failure_info.details,
        "timeout_failure_info": lambda: level.timeout_failure_info.last_heartbeat_details,
        "reset_workflow_failure_info": (
            lambda: level.reset_workflow_failure_info.last_heartbeat_details
        ),
    }.get(info or "")
    if details is None:
        return ""
    payloads: Payloads = details()
    if payloads.ByteSize() <= FAILURE_DETAILS_MAX_BYTES:
        return ""
    kept, total = 0, 0
    for payload in payloads.payloads:
        total += payload.ByteSize()
        if total > FAILURE_DETAILS_MAX_BYTES:
            break
        kept += 1
    dropped = payloads.payloads[kept:]
    size = sum(p.ByteSize() for p in dropped)
    del payloads.payloads[kept:]
    which = "its details" if kept == 0 else f"{len(dropped)} of its details"
    return f"\n[{which} ({size:,} bytes) dropped: over the failure budget]"


def unfold_words(level: Failure, payload_converter: PayloadConverter) -> None:
    """The level's message and stack trace out of its encoded attributes, where a failure
    received and sent on holds them; attributes that do not read as words are dropped when
    they are over the budget, kept as they are when not."""
    if not level.HasField("encoded_attributes"):
        return
    words: Any = None
    try:
        [words] = payload_converter.from_payloads([level.encoded_attributes])
    except Exception:
        words = None
    if isinstance(words, dict):
        message, stack_trace = words.get("message"), words.get("stack_trace")
        if isinstance(message, str):
            level.message = clean_text(message)
        if isinstance(stack_trace, str):
            level.stack_trace = clean_text(stack_trace)
        level.ClearField("encoded_attributes")
        return
    size = level.encoded_attributes.ByteSize()
    if size > FAILURE_MESSAGE_MAX_CHARS + FAILURE_STACK_MAX_CHARS:
        level.ClearField("encoded_attributes")
        level.message += f"\n[encoded attributes that could not be read ({size:,} bytes) dropped]"


def encode_words(level: Failure, payload_converter: PayloadConverter) -> None:
    """The level's message and stack trace moved into its encoded attributes, as the SDK's
    converter does with `encode_common_attributes`."""
    if level.HasField("encoded_attributes") and level.message == ENCODED_MESSAGE:
        return  # attributes that could not be read, kept as they came
    words = {"message": level.message, "stack_trace": level.stack_trace}
    level.encoded_attributes.CopyFrom(payload_converter.to_payloads([words])[0])
    level.message = ENCODED_MESSAGE
    level.stack_trace = ""
