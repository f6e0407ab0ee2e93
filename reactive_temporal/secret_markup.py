"""Credentials in markup, where the quotes and the names are the markup's own: part of the
credential scan (`reactive_temporal/secrets_scan.py`).

- an XML element named for a secret or a key (`<password>x</password>` in Maven's
  `settings.xml`, `<db.password>`, `<apiKey>…</apiKey>`);
- a name and a value as two attributes (.NET's `<add key="DbPassword" value="x" />`,
  Spring's `<property name="password" value="x"/>`);
- a value between HTML-escaped quotes (`&quot;password&quot;: &quot;x&quot;`,
  `password=&quot;x&quot;`, `&#34;`, `&#39;`): JSON or a config shown in a web page;
- a name and a value as two fields (Kubernetes' `- name: DB_PASSWORD` / `value: x`, ECS'
  `{"name": "DB_PASSWORD", "value": "x"}`, CloudFormation's `ParameterKey`/`ParameterValue`);
- a markdown table's row (`| Password | hunter2 |`): the value's shape must say it is one
  when it is not in backticks (`| password | 8 | min length |` is a table of rules).

The value is judged as a quoted one after the same name is (`secret_labels.delimited_value`):
any chosen value for a password's or a secret's name, a key for a key's; `<secret>The secret
of the book</secret>`, `<password>${env.PW}</password>` and `<password>required</password>`
stay.
"""

from __future__ import annotations

import re

from reactive_temporal.secret_labels import NAMES, delimited_value, shaped
from reactive_temporal.secret_rules import Rule, secret_of

_HTML_QUOTE = r"(?:quot|#0*3[49]|apos|#[xX]0*2[27])"
_Q = r"""["']?"""
_FIELD_VALUE = (
    r"""(?:(?P<q>["'])(?P<quoted>[^"'\r\n]{1,200})(?P=q)|(?P<secret>[^\s"',}\]#]{1,200}))"""
)


def _cell(m: re.Match[str]) -> str | None:
    """A table cell's value: in backticks, as a quoted one; bare, only with a secret's shape."""
    if m.group("quoted") is None and not shaped(secret_of(m)):
        return None
    return delimited_value(m)


MARKUP: tuple[Rule, ...] = (
    Rule(
        re.compile(
            rf"(?i)<(?P<tag>[\w.:-]{{0,40}}?(?P<name>{NAMES}))>"
            r"(?P<quoted>[^<>\r\n]{1,200})</(?P=tag)>"
        ),
        delimited_value,
        needles=("</",),
    ),
    Rule(
        re.compile(
            r"""(?i)(?<![\w-])(?:key|name)[ \t]*=[ \t]*(?P<q1>["'])"""
            rf"(?P<tag>[\w.:-]{{0,40}}?(?P<name>{NAMES}))(?P=q1)"
            r"""[ \t]+value=[ \t]*(?P<q>["'])(?P<quoted>[^"'<>\r\n]{1,200})(?P=q)"""
        ),
        delimited_value,
        needles=("value=",),
        folded=True,
    ),
    Rule(
        re.compile(
            rf"(?i)(?=[aciprst])(?P<name>{NAMES})(?![A-Za-z0-9])(?:&{_HTML_QUOTE};)?"
            rf"[ \t]{{0,5}}(?:=>|:=|=|:)[ \t]{{0,5}}&(?P<hq>{_HTML_QUOTE});"
            r"(?P<quoted>[^&<>\r\n]{1,200})&(?P=hq);"
        ),
        delimited_value,
        needles=("&quot;", "&#", "&apos;"),
        folded=True,
    ),
    Rule(
        re.compile(
            rf"(?i)(?<![\w-]){_Q}(?:name|key|parameterkey){_Q}[ \t]*[:=][ \t]*{_Q}"
            rf"(?P<tag>[\w.-]{{0,40}}?(?P<name>{NAMES})){_Q}[ \t]*,?[ \t]*"
            r"(?:\r?\n[ \t]*(?:-[ \t]+)?)?"
            + _Q
            + r"""(?:value|parametervalue)(?:["'][ \t]*)?[:=][ \t]*"""
            + _FIELD_VALUE
        ),
        delimited_value,
        needles=("value:", "value=", 'value"', "value'"),  # what follows `value` in a match
        folded=True,
    ),
    Rule(
        re.compile(
            r"(?i)^[ \t]*\|[ \t]*(?:\*\*|__)?(?P<tag>[\w .-]{0,40}?"
            rf"(?P<name>{NAMES}))(?:\*\*|__)?:?[ \t]*\|[ \t]*"
            r"(?:\x60(?P<quoted>[^\x60|\r\n]{1,200})\x60|(?P<secret>[^\s|\x60]{1,200}))[ \t]*\|",
            re.MULTILINE,
        ),
        _cell,
        needles=("|",),
    ),
)
"""After the labels' rules: what they took is a marker by then."""
