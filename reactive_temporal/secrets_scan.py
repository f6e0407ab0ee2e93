"""Credentials found in text by their documented formats, each replaced by a marker naming its
kind (`[redacted: OpenAI API key]`, `Password: [redacted: password]`); every other character is
kept as it was.

What a run's tools read (an `.env`, an API's echoed token, a page with a leaked key, an error
body "invalid key sk-…") is the run's own data. Its debrief and lessons are not: they go into
every later run's prompt, every chat's context and every operator's `lessons` listing, for
weeks. The activities that write and read that memory pass its text through here
(`activities/memory_redaction.py`), as a repository's push protection keeps keys out of its
history.

What is found, after gitleaks' rules (github.com/gitleaks/gitleaks `config/gitleaks.toml`, rule
ids as of its commit b58d3f10), in this order:
- private keys, `-----BEGIN … PRIVATE KEY-----` blocks, whole or cut (`secret_pem.py`);
- a key of a format below that a hard wrap broke over two lines or more (`secret_wrap.py`):
  where its line is full at the wrap's width and the pieces are a whole key only joined;
- keys a provider's format gives away, wherever they stand (`secret_formats.py`): OpenAI
  (`sk-`, `sk-proj-`…; any `sk-` + 32 key characters, as DeepSeek's), Anthropic (`sk-ant-`),
  AWS key IDs (`AKIA…`), GitHub (`ghp_`, `github_pat_`…), GitLab (`glpat-`…), Slack tokens and
  webhooks, Stripe (`sk_live_`…), Google (`AIza…`), Hugging Face (`hf_`), npm (`npm_`), PyPI
  (`pypi-AgEIcHlwaS5vcmc…`), SendGrid (`SG.…`), Twilio (`SK` + 32 hex), Telegram bots
  (`123456:AA…`), DigitalOcean, Shopify, Vault, Databricks, Grafana, Sentry, Postman, Pulumi,
  Linear, Doppler, PlanetScale, and JWTs; a key glued to the word before it only where its
  structure cannot be chance (`mykeysk-proj-…T3BlbkFJ…`, `tokenghp_…`), not where a slug
  could be (`task-<hex>`); and such a key cut where the text was clipped before the scan
  (`ghp_…` with part of its body, then `…`), and its tail after the clip where the head
  was just before it or the tail holds its format's mark (`…T3BlbkFJ…`);
- values known by what stands before them (`secret_labels.py`): an AWS secret access key by
  its name, a URL's `user:password@`, `Authorization:` and `Bearer` credentials, a password's
  or a secret's value (`Password: hunter2`, `"password": "x"`, `DB_PASSWORD=x`,
  `client_secret: x`), a key's value after its name (`api_key=…`, `X-Api-Key: …`,
  `AccountKey=…`; letters and digits), `--password x`;
- in markup (`secret_markup.py`): `<password>x</password>`, `<add key="DbPassword"
  value="x"/>`, `&quot;password&quot;: &quot;x&quot;`;
- in a request's encodings (`secret_web.py`): `password%3Dhunter2`, and a session's cookie
  (`Cookie: sessionid=…`; not `csrftoken`);
- a password told in a sentence (`secret_prose.py`): `the password is hunter2`, `pw is
  hunter2`, where the value's shape says it is no word (`the password is wrong` stays);
- passwords given to commands (`secret_commands.py`): `curl -u user:password`,
  `mysql -pPASSWORD`, `sshpass -p`, `redis-cli -a`, `openssl -passin pass:`, `docker login
  -p`, `echo x | docker login --password-stdin`, `npm config set …:_authToken x`, a
  Dockerfile's `ENV DB_PASSWORD x`.

No entropy guessing: a git SHA, a UUID, a content hash or a base64 image a lesson may hold on
purpose is none of these formats and stays; a `page_token`, `NextToken` or `csrf_token` is a
cursor or a nonce by its name, and stays too.

Linear time on any input: each pattern starts at a fixed prefix or name and its variable part
is one greedy run of a class the element after it cannot match, or is bounded; what a match
must also be is judged on the match, so a rejected match has consumed its run instead of
sending the engine back into it.

Pure and total: `scan` takes any string and never raises (text it could not scan, which no
input has been seen to make, is replaced whole); a marker matches no pattern, so redacting
twice is redacting once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from reactive_temporal.secret_commands import commands
from reactive_temporal.secret_formats import CUT, CUT_FORMATS, CUT_TAILS, FORMATS
from reactive_temporal.secret_labels import LABELS
from reactive_temporal.secret_markup import MARKUP
from reactive_temporal.secret_pem import private_keys
from reactive_temporal.secret_prose import PROSE
from reactive_temporal.secret_rules import (  # noqa: F401 (the kinds, as callers name them)
    ANTHROPIC,
    AUTHORIZATION,
    AWS_KEY_ID,
    AWS_SECRET,
    BEARER,
    CREDENTIAL,
    DATABRICKS,
    DIGITALOCEAN,
    DOPPLER,
    GITHUB,
    GITLAB,
    GOOGLE,
    GRAFANA,
    HUGGING_FACE,
    JWT,
    KINDS,
    LINEAR,
    NPM,
    OPENAI,
    PASSWORD,
    PLANETSCALE,
    POSTMAN,
    PRIVATE_KEY,
    PULUMI,
    PYPI,
    SENDGRID,
    SENTRY,
    SHOPIFY,
    SLACK,
    SLACK_WEBHOOK,
    STRIPE,
    TELEGRAM,
    TWILIO,
    UNSCANNED,
    URL_PASSWORD,
    VAULT,
    apply,
    marker,
)
from reactive_temporal.secret_web import ENCODED, URL_TOKENS, cookies
from reactive_temporal.secret_wrap import wrapped

T = TypeVar("T")
_CUTS = CUT_FORMATS + CUT_TAILS
"""A cut key's head, then its tail: the tail is known by the head's marker."""
_NAMED = LABELS + URL_TOKENS + ENCODED + MARKUP + PROSE
"""Values known by their names, in markup, told in prose: one `apply`, so the text is folded
for their case-ignoring needles once, not once a module."""


@dataclass(frozen=True)
class Redacted:
    """Text with its credentials replaced, and how many of each kind were."""

    text: str
    found: Counter[str]


# -- the whole ---------------------------------------------------------------------------------


def scan(text: str) -> Redacted:
    """`text` with every credential found replaced by its marker, and what was found."""
    found: Counter[str] = Counter()
    if not isinstance(text, str) or not text:
        return Redacted(text, found)
    try:
        result = private_keys(text, found)
        result = wrapped(result, found)
        result = apply(FORMATS, result, found)
        if CUT in result:  # every cut key ends at one
            result = apply(_CUTS, result, found)
        result = apply(_NAMED, result, found)
        result = cookies(result, found)
        result = commands(result, found)
    except Exception:  # not seen: the patterns are fixed. Memory must not fail on a scan,
        # nor keep what it could not read
        return Redacted(marker(UNSCANNED), Counter({UNSCANNED: 1}))
    return Redacted(result, found)


def redact(text: str) -> str:
    """`text` with every credential found replaced by a marker naming its kind."""
    return scan(text).text


def redact_value(value: T) -> tuple[T, Counter[str]]:
    """`value` with every string in it redacted (through lists, tuples, dicts' values and
    pydantic models' fields), and what was found; the same object when nothing was."""
    found: Counter[str] = Counter()
    return _redact(value, found), found


def _redact(value: Any, found: Counter[str]) -> Any:
    if isinstance(value, str):
        result = scan(value)
        found.update(result.found)
        return result.text if result.found else value
    if isinstance(value, BaseModel):
        changed = {
            name: redacted
            for name in type(value).model_fields
            if (redacted := _redact(getattr(value, name), found)) is not getattr(value, name)
        }
        return value.model_copy(update=changed) if changed else value
    if isinstance(value, dict):
        items = {key: _redact(item, found) for key, item in value.items()}
        same = all(items[key] is item for key, item in value.items())
        return value if same else type(value)(items)
    if isinstance(value, list | tuple):
        redacted_items = [_redact(item, found) for item in value]
        if all(r is v for r, v in zip(redacted_items, value, strict=True)):
            return value
        return tuple(redacted_items) if isinstance(value, tuple) else redacted_items
    return value
