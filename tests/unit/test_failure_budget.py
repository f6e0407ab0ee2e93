"""Every failure a worker sends Temporal is within the failure budget, its kind and flags kept.

Temporal takes an activity's failure whole up to 2 MiB (a 1.5 MB error body was a 1.5 MB
history event), replaces one past it with a non-retryable "Failure exceeds size limit." (a
failure that would have been retried is not, its details lost), and a workflow failing with
one is never failed (its task is retried forever): reactive_temporal/failure_budget.py. Here
the converter every client and worker of the project uses, on the failures they meet: a
megabyte message, huge details, a deep chain of causes, a failure received and sent on, text
that cannot be encoded, and the worst of each part at once, weighed against the budget, plain
and encrypted. tests/workflow/test_failure_budget.py runs them on a real server.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.failure.v1 import Failure
from temporalio.converter import DataConverter, DefaultFailureConverter
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ApplicationErrorCategory,
    RetryState,
)

from activities.llm_errors import unreadable_reply
from reactive_temporal.codec import build_data_converter, generate_key_string
from reactive_temporal.failure_budget import (
    ENCODED_MESSAGE,
    FAILURE_DETAILS_MAX_BYTES,
    FAILURE_MAX_BYTES,
    FAILURE_MAX_LEVELS,
    FAILURE_MESSAGE_MAX_CHARS,
    FAILURE_STACK_MAX_CHARS,
    BoundedFailureConverter,
    levels_of,
)
from reactive_temporal.payloads import ProjectPayloadConverter
from tests.support.worst_parts import heavy

TEMPORAL_BLOB_MAX_BYTES = 2 * 1024 * 1024
SDK_PAYLOAD_WARNING_BYTES = 512 * 1024
"""The SDK warns of a payload past this (TMPRL1103), a failure too."""
PLAIN = build_data_converter(None)
SEALED = build_data_converter(generate_key_string("k20261231"))
PAYLOADS = ProjectPayloadConverter()
EMOJI = "\U0001f600"
"""Four bytes in UTF-8, as a failure's words travel in the clear; one character."""


def sent(err: BaseException, converter: DataConverter = PLAIN) -> Failure:
    """The failure as the worker sends it (its codec applied)."""
    failure = Failure()
    asyncio.run(converter.encode_failure(err, failure))
    return failure


def received(failure: Failure, converter: DataConverter = PLAIN) -> BaseException:
    """What a workflow (or a client) makes of it."""
    copy = Failure()
    copy.CopyFrom(failure)
    return asyncio.run(converter.decode_failure(copy))


def raised(err: BaseException, cause: BaseException | None = None) -> BaseException:
    """`err` as raised (with a traceback), from `cause`."""
    try:
        raise err from cause
    except BaseException as caught:
        return caught


def sdk_failure(err: BaseException) -> Failure:
    failure = Failure()
    DefaultFailureConverter().to_failure(err, PAYLOADS, failure)
    return failure


# -- what is kept: everything that decides what happens next ------------------------------------


def test_a_failure_within_the_budget_is_sent_exactly_as_the_sdk_sends_it():
    """The project's own failures (an LLM endpoint's refusal, a reply that could not be read
    with its bill) are far inside the budget: byte for byte what the SDK's converter made."""
    refusal = raised(
        ApplicationError(
            "LLM endpoint answered HTTP 400: bad request",
            {"usage": {"prompt_tokens": 3}},
            type="LlmRequestRejected",
            non_retryable=True,
            next_retry_delay=timedelta(seconds=7),
            category=ApplicationErrorCategory.BENIGN,
        ),
        raised(ValueError("the client's words")),
    )
    unreadable = raised(unreadable_reply(ValueError("<html>"), None, {"cost": 0.01}))
    for err in (refusal, unreadable, raised(RuntimeError("plain")), raised(KeyError("k"))):
        assert sent(err) == sdk_failure(err)


def test_a_megabyte_message_keeps_its_head_and_tail_and_says_how_much_was_cut():
    body = "<html>" + "e" * 3_000_000 + "</html> the end"
    failure = sent(raised(RuntimeError(body)))
    assert len(failure.message) == FAILURE_MESSAGE_MAX_CHARS
    assert failure.message.startswith("<html>eee") and failure.message.endswith("the end")
    head, cut, tail = re.fullmatch(
        r"(.*)\n… \[([\d,]+) characters cut\] …\n(.*)", failure.message, re.DOTALL
    ).groups()  # type: ignore[union-attr]
    assert len(head) + int(cut.replace(",", "")) + len(tail) == len(body)
    assert failure.application_failure_info.type == "RuntimeError"
    assert not failure.application_failure_info.non_retryable


@pytest.mark.parametrize("non_retryable", [False, True])
def test_a_clipped_failure_keeps_its_type_flags_delay_category_and_small_details(
    non_retryable: bool,
):
    """Retries and the workflow's reading of the failure (`failure_type`, `failure_billed`,
    `is_store_outage`) see what they saw with a short message."""
    err = raised(
        ApplicationError(
            "x" * 3_000_000,
            {"usage": {"prompt_tokens": 3}},
            type="LlmContextWindowExceeded",
            non_retryable=non_retryable,
            next_retry_delay=timedelta(seconds=7),
            category=ApplicationErrorCategory.BENIGN,
        )
    )
    back = received(sent(err))
    assert isinstance(back, ApplicationError)
    assert (back.type, back.non_retryable, back.next_retry_delay, back.category) == (
        "LlmContextWindowExceeded",
        non_retryable,
        timedelta(seconds=7),
        ApplicationErrorCategory.BENIGN,
    )
    assert back.details == ({"usage": {"prompt_tokens": 3}},)
    assert len(back.message) == FAILURE_MESSAGE_MAX_CHARS


def test_details_past_their_budget_are_dropped_from_the_first_that_does_not_fit_saying_so():
    bill = {"usage": {"prompt_tokens": 3}}
    err = raised(ApplicationError("the step failed", bill, "d" * 3_000_000, type="LlmBadReply"))
    back = received(sent(err))
    assert isinstance(back, ApplicationError) and back.details == (bill,)
    assert back.message.startswith("the step failed\n[1 of its details (3,000,")
    assert back.message.endswith("bytes) dropped: over the failure budget]")
    alone = received(sent(raised(ApplicationError("short", "d" * 3_000_000, type="T"))))
    assert isinstance(alone, ApplicationError) and alone.details == ()
    assert "[its details (3,000," in alone.message


def test_a_deep_chain_of_causes_keeps_the_first_and_the_innermost_saying_how_many_were_cut():
    err: BaseException | None = None
    for n in range(40):
        err = raised(ValueError(f"level {n}: " + "c" * 100_000), err)
    assert err is not None
    top = raised(ApplicationError("the step failed", type="StoreUnavailable"), err)
    levels = levels_of(sent(top))
    assert len(levels) == FAILURE_MAX_LEVELS
    assert levels[0].message == "the step failed"
    assert levels[0].application_failure_info.type == "StoreUnavailable"
    kept = [lv.message.split(":")[0] for lv in levels[1:-1]]
    assert kept == [f"level {n}" for n in range(39, 33, -1)]
    assert levels[-2].message.endswith("[33 causes cut here: the innermost follows]")
    assert levels[-1].message.startswith("level 0: ccc")
    assert all(len(lv.message) <= FAILURE_MESSAGE_MAX_CHARS for lv in levels)


@pytest.mark.parametrize("converter", [PLAIN, SEALED], ids=["plain", "encrypted"])
def test_a_chain_of_causes_thousands_deep_is_cut_before_the_sdk_recurses_into_it(
    converter: DataConverter,
):
    """The SDK converts a chain by recursing into each cause: past a few hundred levels (an
    error wrapped at each level of a recursive parser) it raised RecursionError, and the
    activity's failure was "Failed building exception result", its type and flag lost."""
    err: BaseException | None = None
    for n in range(5_000):
        err = raised(ValueError(f"level {n}"), err)
    top = raised(ApplicationError("the step failed", type="Final", non_retryable=True), err)
    back = received(sent(top, converter), converter)
    chain: list[BaseException] = []
    level: BaseException | None = back
    while level is not None:
        chain.append(level)
        level = level.__cause__
    assert len(chain) == FAILURE_MAX_LEVELS
    assert isinstance(chain[0], ApplicationError)
    assert (chain[0].message, chain[0].type, chain[0].non_retryable) == (
        "the step failed",
        "Final",
        True,
    )
    messages = [lv.message for lv in chain[1:] if isinstance(lv, ApplicationError)]
    assert messages[:-2] == [f"level {n}" for n in range(4_999, 4_994, -1)]
    assert messages[-2] == "level 4994\n[4,993 causes cut here: the innermost follows]"
    assert messages[-1] == "level 0"


@pytest.mark.parametrize("converter", [PLAIN, SEALED], ids=["plain", "encrypted"])
def test_a_chain_of_causes_that_comes_back_on_itself_ends_there_saying_so(
    converter: DataConverter,
):
    """`raise err from err` (a retry helper's `raise last from first` after one try), or a
    cause set by hand to an exception above: the SDK's recursion went round until
    RecursionError, and the failure's type and non-retryable flag were lost."""
    itself = ApplicationError("gave up", type="Final", non_retryable=True)
    itself.__cause__ = itself
    outer = ApplicationError("the tool failed", type="Outer")
    try:
        try:
            raise outer
        except ApplicationError:
            raise ValueError("while handling") from None
    except ValueError as inner:
        outer.__cause__ = inner
        inner.__cause__ = outer  # round through the two
    for err, kinds in ((itself, ["Final"]), (outer, ["Outer", "ValueError"])):
        levels = levels_of(sent(err, converter))
        back = received(sent(err, converter), converter)
        assert [lv.application_failure_info.type for lv in levels] == kinds
        assert isinstance(back, ApplicationError) and back.type == kinds[0]
        last: BaseException = back
        while last.__cause__ is not None:
            last = last.__cause__
        assert isinstance(last, ApplicationError)
        assert last.message.endswith(
            "[its cause is an exception already in this chain: the chain ends here]"
        )
    assert received(sent(itself, converter), converter).non_retryable  # type: ignore[attr-defined]


def test_a_deep_stack_trace_keeps_its_outer_and_innermost_frames():
    def down(n: int) -> None:  # two functions by turns: Python folds a frame repeated
        if n == 0:
            raise RuntimeError("at the bottom")
        across(n - 1)

    def across(n: int) -> None:
        down(n)

    try:
        down(500)
    except RuntimeError as err:
        failure = sent(err)
        whole = sdk_failure(err).stack_trace
    assert len(whole) > 10 * FAILURE_STACK_MAX_CHARS
    assert len(failure.stack_trace) == FAILURE_STACK_MAX_CHARS
    assert failure.stack_trace.startswith(whole[:200])
    assert failure.stack_trace.endswith(whole[-200:])  # the frame that raised
    assert "characters cut]" in failure.stack_trace


def test_a_failure_received_and_sent_on_is_bounded_too():
    """A workflow that fails with an activity's failure as its cause sends that failure as it
    received it (the SDK copies it whole): bounded again, as the workflow's."""
    activity_failure = sdk_failure(raised(RuntimeError("r" * 1_500_000)))  # 1.5 MB: accepted
    cause = received(
        activity_failure, DataConverter(payload_converter_class=ProjectPayloadConverter)
    )
    wrapped = ActivityError(
        "Activity task failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="worker",
        activity_type="run_tool",
        activity_id="7",
        retry_state=RetryState.MAXIMUM_ATTEMPTS_REACHED,
    )
    wrapped.__cause__ = cause
    failure = sent(raised(ApplicationError("the tool-path run failed", type="T"), wrapped))
    [run, activity, tool] = levels_of(failure)
    assert activity.activity_failure_info.activity_type.name == "run_tool"
    assert tool.application_failure_info.type == "RuntimeError"
    assert len(tool.message) == FAILURE_MESSAGE_MAX_CHARS
    assert failure.ByteSize() < 20_000


def test_text_that_cannot_be_encoded_is_sent_with_its_kind_and_flags():
    """A lone surrogate (a JSON `\\ud800` escape in an error body) made the SDK send "Failed
    building exception result", its type and its non-retryable flag lost: a failure meant to
    be final was retried."""
    final = raised(
        ApplicationError("bad \ud800 body", type="LlmRequestRejected", non_retryable=True)
    )
    back = received(sent(final))
    assert isinstance(back, ApplicationError)
    assert (back.message, back.type, back.non_retryable) == (
        "bad \ufffd body",
        "LlmRequestRejected",
        True,
    )
    plain = levels_of(sent(raised(RuntimeError("x"), raised(ValueError("\udfff tail")))))
    assert [(lv.message, lv.application_failure_info.type) for lv in plain] == [
        ("x", "RuntimeError"),
        ("\ufffd tail", "ValueError"),
    ]


@pytest.mark.parametrize("converter", [PLAIN, SEALED], ids=["plain", "encrypted"])
def test_code_under_a_path_that_is_not_utf8_fails_with_its_kind_and_flags(
    converter: DataConverter,
):
    """A worker installed under a directory whose name is not UTF-8 (Python reads it with
    surrogateescape, `caf\\udce9`): each traceback's paths held a lone surrogate, and every
    failure was "Failed building exception result", its type and non-retryable flag lost."""
    code = "def boom(err):\n    raise err\n"
    scope: dict[str, Any] = {}
    exec(compile(code, "/srv/caf\udce9/tools.py", "exec"), scope)  # noqa: S102
    for err in (ApplicationError("final", type="Final", non_retryable=True), KeyError("k")):
        try:
            scope["boom"](err)
        except Exception as caught:
            failure = sent(caught, converter)
        back = received(failure, converter)
        assert isinstance(back, ApplicationError)
        assert (back.type, back.non_retryable) == (
            ("Final", True) if isinstance(err, ApplicationError) else ("KeyError", False)
        )
        assert back.failure is not None
        assert 'File "/srv/caf\ufffd/tools.py", line 2, in boom' in back.failure.stack_trace


def test_an_exception_whose_str_raises_is_sent_with_its_type_saying_so():
    """An exception class with a broken `__str__`: the SDK's conversion raised with it (and
    the SDK's handler of that quotes the exception again)."""

    class Garbled(Exception):
        def __str__(self) -> str:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    [level] = levels_of(sent(raised(Garbled())))
    assert level.application_failure_info.type == "Garbled"
    assert level.message == "<unprintable Garbled: its __str__ raised>"


def test_an_encrypted_failure_has_every_levels_words_bounded_and_encrypted():
    err = raised(
        ApplicationError("s" * 3_000_000, type="Secret"),
        raised(ValueError("quoted prompt " + "p" * 3_000_000)),
    )
    failure = sent(err, SEALED)
    for level in levels_of(failure):
        assert level.message == ENCODED_MESSAGE and level.stack_trace == ""
        assert b"quoted prompt" not in level.encoded_attributes.data  # encrypted
    back = received(failure, SEALED)
    assert isinstance(back, ApplicationError) and back.type == "Secret"
    assert len(back.message) == FAILURE_MESSAGE_MAX_CHARS
    assert isinstance(back.__cause__, ApplicationError)
    assert back.__cause__.message.startswith("quoted prompt ppp")
    assert failure.ByteSize() < 30_000


def test_a_received_encrypted_failure_sent_on_keeps_its_causes_words_encrypted():
    """Its words are taken out of its encoded attributes to be cut, and go back in."""
    inner = sent(raised(RuntimeError("a prompt quoted in an error")), SEALED)
    cause = received(inner, SEALED)
    failure = sent(raised(ApplicationError("outer", type="T"), cause), SEALED)
    assert all(lv.message == ENCODED_MESSAGE for lv in levels_of(failure))
    assert b"a prompt quoted" not in failure.SerializeToString()
    back = received(failure, SEALED).__cause__
    assert isinstance(back, ApplicationError)
    assert back.message == "a prompt quoted in an error"


# -- the worst a failure can be ------------------------------------------------------------------


def worst_failure(char: str, over: int = 2) -> BaseException:
    """A received failure (any text is possible in one) with more levels than kept, every
    message and stack trace `over` times its limit in `char`, details of 1,000-byte payloads
    `over` times theirs, as a workflow would send it on."""
    payload = PAYLOADS.to_payloads(["x" * 971])[0]
    assert payload.ByteSize() == 1_000
    levels = [
        Failure(
            message=char * over * FAILURE_MESSAGE_MAX_CHARS,
            stack_trace=char * over * FAILURE_STACK_MAX_CHARS,
        )
        for _ in range(FAILURE_MAX_LEVELS + 3)
    ]
    for level in levels:
        level.application_failure_info.type = "t" * 128
        level.application_failure_info.details.payloads.extend(
            [payload] * (over * FAILURE_DETAILS_MAX_BYTES // 1_000)
        )
    for outer, inner in zip(reversed(levels[:-1]), reversed(levels[1:]), strict=True):
        outer.cause.CopyFrom(inner)
    return received(levels[0], DataConverter(payload_converter_class=ProjectPayloadConverter))


def test_the_worst_failure_is_within_the_failure_budget():
    """In the clear a failure's words are UTF-8 (an emoji, four bytes, the heaviest);
    encrypted they are JSON inside its encoded attributes (a control character, six)."""
    plain = sent(worst_failure(EMOJI), PLAIN)
    sealed = sent(worst_failure(heavy(1)), SEALED)
    assert len(levels_of(plain)) == len(levels_of(sealed)) == FAILURE_MAX_LEVELS
    worst = max(plain.ByteSize(), sealed.ByteSize())
    assert worst <= FAILURE_MAX_BYTES
    assert worst > 0.95 * FAILURE_MAX_BYTES  # built at the limits, not found by chance
    assert FAILURE_MAX_BYTES < SDK_PAYLOAD_WARNING_BYTES < TEMPORAL_BLOB_MAX_BYTES


def test_without_the_budget_such_a_failure_is_past_temporals_wall():
    unbounded = sdk_failure(worst_failure(EMOJI, over=10))
    assert unbounded.ByteSize() > TEMPORAL_BLOB_MAX_BYTES
    assert sent(worst_failure(EMOJI, over=10)).ByteSize() <= FAILURE_MAX_BYTES


def test_every_converter_the_project_builds_bounds_its_failures():
    assert isinstance(PLAIN.failure_converter, BoundedFailureConverter)
    assert isinstance(SEALED.failure_converter, BoundedFailureConverter)
