"""The credential scan that keeps keys out of agents' memory (reactive_temporal/secrets_scan.py):
each documented format found and named, everything around it kept, look-alikes left alone,
idempotent, linear on a megabyte of hostile text, total on any text."""

from __future__ import annotations

import random
import string
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reactive_temporal import secret_rules
from reactive_temporal.contracts.debrief import AgentDebrief, ToolUsage
from reactive_temporal.sanitize import clip
from reactive_temporal.secret_rules import has_digit
from reactive_temporal.secrets_scan import (
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
    URL_PASSWORD,
    VAULT,
    Redacted,
    marker,
    redact,
    redact_value,
    scan,
)
from tests.support.hostile import hostile_text

RNG = random.Random(20260722)
ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
LETTERS = string.ascii_letters


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def pem(kind: str = "RSA PRIVATE KEY", lines: int = 6, last: str = "Zw==", sep: str = "\n") -> str:
    body = sep.join([rand(B64, 64) for _ in range(lines)] + [last])
    return f"-----BEGIN {kind}-----{sep}{body}{sep}-----END {kind}-----"


OPENAI_PROJECT_KEY = "sk-proj-" + rand(URLSAFE, 74) + "T3BlbkFJ" + rand(URLSAFE, 74)
DEEPSEEK_KEY = "sk-" + rand(HEX, 32)
ANTHROPIC_KEY = "sk-ant-api03-" + rand(URLSAFE, 93) + "AA"
AWS_KEY = "AKIA" + rand(string.ascii_uppercase + "234567", 16)
GITHUB_PAT = "ghp_" + rand(ALNUM, 36)
FINE_GRAINED_PAT = "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)
GITLAB_PAT = "glpat-" + rand(URLSAFE, 20)
SLACK_BOT = "xoxb-1234567890-1234567890123-" + rand(ALNUM, 24)
STRIPE_KEY = "sk_live_" + rand(ALNUM, 24)
GOOGLE_KEY = "AIza" + rand(URLSAFE, 35)
HF_TOKEN = "hf_" + rand(LETTERS, 34)
NPM_TOKEN = "npm_" + rand(ALNUM, 36)
PYPI_TOKEN = "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 70)
SENDGRID_KEY = "SG." + rand(URLSAFE, 22) + "." + rand(URLSAFE, 43)
TWILIO_KEY = "SK" + rand(HEX, 32)
TELEGRAM_TOKEN = "110201543:AA" + rand(URLSAFE, 33)
SHOPIFY_TOKEN = "shpat_" + rand(HEX, 32)
JWT_TOKEN = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFkYSJ9."
    + rand(URLSAFE, 43)
)

# (what is found, its kind, the text before it and after it that is kept as it is)
WHOLE = [
    (OPENAI_PROJECT_KEY, OPENAI),
    ("sk-" + rand(ALNUM, 20) + "T3BlbkFJ" + rand(ALNUM, 20), OPENAI),  # a legacy user key
    ("sk-svcacct-" + rand(URLSAFE, 58) + "T3BlbkFJ" + rand(URLSAFE, 58), OPENAI),
    (DEEPSEEK_KEY, OPENAI),  # DeepSeek's sk- + 32 hex
    (ANTHROPIC_KEY, ANTHROPIC),
    ("sk-ant-admin01-" + rand(URLSAFE, 93) + "AA", ANTHROPIC),
    (AWS_KEY, AWS_KEY_ID),
    ("ASIA" + rand(string.ascii_uppercase + "234567", 16), AWS_KEY_ID),
    (GITHUB_PAT, GITHUB),
    *[(f"{p}_" + rand(ALNUM, 36), GITHUB) for p in ("gho", "ghu", "ghs", "ghr")],
    (FINE_GRAINED_PAT, GITHUB),
    (GITLAB_PAT, GITLAB),
    ("glpat-" + rand(URLSAFE, 27) + ".01" + rand("abcdef0123456789", 7), GITLAB),
    (SLACK_BOT, SLACK),
    ("xoxp-1234567890-1234567890-1234567890-" + rand("abcdef0123456789", 32), SLACK),
    ("xoxa-2-" + rand(ALNUM, 40), SLACK),
    ("xapp-1-A0123BCDE45-1234567890123-" + rand("abcdef0123456789", 64), SLACK),
    ("https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/" + rand(ALNUM, 24), SLACK_WEBHOOK),
    (STRIPE_KEY, STRIPE),
    ("rk_live_" + rand(ALNUM, 99), STRIPE),
    ("sk_test_" + rand(ALNUM, 24), STRIPE),
    (GOOGLE_KEY, GOOGLE),
    (JWT_TOKEN, JWT),
    (HF_TOKEN, HUGGING_FACE),
    ("api_org_" + rand(LETTERS, 34), HUGGING_FACE),
    (NPM_TOKEN, NPM),
    (PYPI_TOKEN, PYPI),
    (SENDGRID_KEY, SENDGRID),
    (TWILIO_KEY, TWILIO),
    (TELEGRAM_TOKEN, TELEGRAM),
    ("dop_v1_" + rand(HEX, 64), DIGITALOCEAN),
    ("doo_v1_" + rand(HEX, 64), DIGITALOCEAN),
    (SHOPIFY_TOKEN, SHOPIFY),
    ("shpss_" + rand(HEX, 32), SHOPIFY),
    ("hvs." + rand(URLSAFE, 95), VAULT),
    ("dapi" + rand(HEX, 32), DATABRICKS),
    ("glsa_" + rand(ALNUM, 32) + "_" + rand(HEX, 8), GRAFANA),
    ("glc_" + rand(B64, 80) + "==", GRAFANA),
    ("sntryu_" + rand(HEX, 64), SENTRY),
    ("PMAK-" + rand(HEX, 24) + "-" + rand(HEX, 34), POSTMAN),
    ("pul-" + rand(HEX, 40), PULUMI),
    ("lin_api_" + rand(ALNUM, 40), LINEAR),
    ("dp.pt." + rand(ALNUM, 43), DOPPLER),
    ("pscale_tkn_" + rand(URLSAFE, 43), PLANETSCALE),
    (pem(), PRIVATE_KEY),
    (pem("PRIVATE KEY", last="AB12"), PRIVATE_KEY),  # a last line without padding
    (pem("OPENSSH PRIVATE KEY"), PRIVATE_KEY),
    (pem("EC PRIVATE KEY", lines=2), PRIVATE_KEY),
    (pem("PGP PRIVATE KEY BLOCK", lines=3), PRIVATE_KEY),
    (pem("ENCRYPTED PRIVATE KEY", sep="\\n"), PRIVATE_KEY),  # as in a JSON string
    (pem("PRIVATE KEY", sep=" "), PRIVATE_KEY),  # an env var's one line
    (pem("RSA PRIVATE KEY", sep="\r\n"), PRIVATE_KEY),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,"
        + rand("ABCDEF0123456789", 32)
        + "\n\n"
        + "\n".join(rand(B64, 64) for _ in range(4))
        + "\n-----END RSA PRIVATE KEY-----",
        PRIVATE_KEY,
    ),
]
"""Credentials replaced whole."""

NAMED = [
    # (before, the secret, after): only the secret is replaced, its name stays
    ("aws_secret_access_key = ", rand(B64, 40), "", AWS_SECRET),
    ('{"AccessKeyId": "ASIA…", "SecretAccessKey": "', rand(B64, 40), '"}', AWS_SECRET),
    ("AWS_SECRET_ACCESS_KEY=", rand(B64, 40), "\n", AWS_SECRET),
    ("postgresql://billing:", "s3cr3t-Pa55", "@db.internal:5432/ledger", URL_PASSWORD),
    ("redis://:", "hunter22", "@cache:6379/0", URL_PASSWORD),
    ("https://deploy:", "p@ss:w0rd", "@git.example.com/repo.git", URL_PASSWORD),
    ("Authorization: Bearer ", rand(URLSAFE, 40), "\r\n", AUTHORIZATION),
    ('"authorization": "Basic ', "YWxhZGRpbjpvcGVuc2VzYW1l", '"', AUTHORIZATION),
    ("Proxy-Authorization: ", "Tok3n" + rand(ALNUM, 20), "", AUTHORIZATION),
    ("401: invalid credentials for Bearer ", rand(ALNUM, 32), " (expired)", BEARER),
    ("api_key=", "q1w2e3r4t5y6u7i8", "&page=2", CREDENTIAL),
    ('{"token": "', rand(ALNUM, 30), '", "ttl": 3600}', CREDENTIAL),
    ("X-Api-Key: ", rand(ALNUM, 32), "\n", CREDENTIAL),
    ("DB_PASSWORD=", "Sup3rS3cret!", "\nDB_HOST=db", PASSWORD),
    ("client_secret: ", rand(URLSAFE, 40), "\n", CREDENTIAL),
    ("export SESSION_TOKEN='", rand(B64, 60), "'", CREDENTIAL),
    ("curl -u admin:", "Adm1nPassw0rd", " https://x", PASSWORD),
    ('{\\"token\\": \\"', rand(ALNUM, 30), '\\", \\"ttl\\": 3600}', CREDENTIAL),  # JSON in JSON
    ("https://api.telegram.org/bot", TELEGRAM_TOKEN, "/getMe", TELEGRAM),  # glued to `bot`
]

NEAR_MISSES = [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",  # a git SHA
    "request 123e4567-e89b-12d3-a456-426614174000 failed",  # a UUID
    "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "data:image/png;base64," + rand(B64, 2_000) + "==",  # an inline image
    "OpenAI keys begin with sk- and Anthropic's with sk-ant-; GitHub's with ghp_.",
    "the skeleton of a task-list; see sk-learn and ask-me-anything-about-the-release-notes",
    "sk-this-is-a-long-hyphenated-slug-and-not-a-key-at-all",
    "AKIA is the prefix of an access key id; AKIAshort is not one",
    "a payload eyJ1c2VyIjoiYWRhIn0 is base64 JSON, not a token",
    "Bearer tokens go in the Authorization header: Authorization: Bearer <token>",
    "password: required; max_tokens: 800; token_count=123456789; tokens: 4096",
    "password_hash = 5f4dcc3b5aa765d61d8327deb882cf99",
    "api_key=your_api_key_here and token: ${GITHUB_TOKEN} and secret={{ vault.secret }}",
    "secret: https://vault.example.com/v1/kv2/billing",
    "see http://example.com:8080/path and postgres://app:@localhost/db (no password)",
    "postgres://app:***@db/x and postgres://app:${PGPASSWORD}@db/x",
    "-----BEGIN PRIVATE KEY----- is the first line of the file; it ends with "
    "-----END PRIVATE KEY----- after the body",
    "AIza" + rand(URLSAFE, 20) + " is too short to be a Google key",
    "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
    "[redacted: OpenAI API key] was here; api_key=[redacted: credential]",
    # a prefix glued to a word where it is a word's end, not a key's start
    "task-" + rand(HEX, 32) + " is queued; ask-" + rand(HEX, 32) + " too",
    "risk_live_Dashboard2024 and disk_test_Partition01",
    "xoxo-see-you-at-the-2024-party",  # a letter's end, not a Slack token (no digit group)
    "IDAKIA" + "ABCDEFGHIJKLMNOP" + " is a window of an upper-case run",
    "hf_hub_download and hf_" + "a" * 34 + " (one case: an identifier)",
    "npm_config_cache=/tmp/npm and npm_package_version=1.2.3",
    "TASK" + rand(HEX, 32) + " is an id, and so is xSK" + rand(HEX, 32),
    "error 12345:" + "A" * 35 + " is not a bot's token",
]


@pytest.mark.parametrize(
    ("secret", "kind"), WHOLE, ids=[f"{k}-{i}" for i, (_, k) in enumerate(WHOLE)]
)
def test_each_format_is_found_and_named_and_everything_around_it_kept(secret: str, kind: str):
    before, after = "Tool said: «", "» — note it.\n"
    found = scan(before + secret + after)
    assert found.text == before + marker(kind) + after
    assert dict(found.found) == {kind: 1}
    assert redact(secret) == marker(kind)  # at the start and the end of a text too


@pytest.mark.parametrize(("before", "secret", "after", "kind"), NAMED, ids=range(len(NAMED)))
def test_a_secret_next_to_its_name_is_replaced_and_the_name_kept(before, secret, after, kind):
    text = f"line one\n{before}{secret}{after}\nline two"
    expected = text if kind is None else f"line one\n{before}{marker(kind)}{after}\nline two"
    assert redact(text) == expected


@pytest.mark.parametrize("text", NEAR_MISSES, ids=range(len(NEAR_MISSES)))
def test_look_alikes_are_left_as_they_are(text: str):
    found = scan(text)
    assert found.text == text and not found.found, found.found


SEPARATED = ["=", ":", '"', "'", "(", " ", "\\n", "/"]
"""What may stand before any key: it begins a run of key characters."""
GLUED = ["mykey", "x_", "ID", "7"]
"""A word a key may be glued to: lower case, an underscore, upper case, a digit."""
EVERYWHERE = set(GLUED)
GLUED_KEYS = [
    # (the key, its kind, the words it is found glued to)
    (OPENAI_PROJECT_KEY, OPENAI, EVERYWHERE),  # its T3BlbkFJ infix cannot be chance
    (DEEPSEEK_KEY, OPENAI, set()),  # `task-` + hex would be taken
    (ANTHROPIC_KEY, ANTHROPIC, EVERYWHERE),  # sk-ant-api03-
    (AWS_KEY, AWS_KEY_ID, {"mykey", "x_"}),  # after a capital or digit: a window of a run
    (GITHUB_PAT, GITHUB, EVERYWHERE),
    (FINE_GRAINED_PAT, GITHUB, EVERYWHERE),
    (GITLAB_PAT, GITLAB, EVERYWHERE),
    (SLACK_BOT, SLACK, EVERYWHERE),
    (PYPI_TOKEN, PYPI, EVERYWHERE),
    (SHOPIFY_TOKEN, SHOPIFY, EVERYWHERE),
    (TELEGRAM_TOKEN, TELEGRAM, EVERYWHERE),  # a digit before it is the bot id's
    (STRIPE_KEY, STRIPE, set()),  # task_live_…
    (GOOGLE_KEY, GOOGLE, set()),  # base64 text holds AIza
    (JWT_TOKEN, JWT, set()),  # base64 text holds eyJ
    (HF_TOKEN, HUGGING_FACE, set()),
    (NPM_TOKEN, NPM, set()),
    (SENDGRID_KEY, SENDGRID, set()),
    (TWILIO_KEY, TWILIO, set()),
]


@pytest.mark.parametrize(
    ("key", "kind", "glued_to"),
    GLUED_KEYS,
    ids=[f"{k}-{i}" for i, (_, k, _) in enumerate(GLUED_KEYS)],
)
def test_a_key_glued_to_the_word_before_it_is_found_only_where_it_cannot_be_chance(
    key: str, kind: str, glued_to: set[str]
):
    for before in SEPARATED:
        assert redact(f"{before}{key} end") == f"{before}{marker(kind)} end", before
    for before in GLUED:
        text = f"{before}{key} end"
        if before not in glued_to:
            assert redact(text) == text, before
        elif kind == TELEGRAM and before == "7":  # the digit joins the bot's id
            assert redact(text) == f"{marker(kind)} end"
        else:
            assert redact(text) == f"{before}{marker(kind)} end", before


def test_bot_tokens_glued_one_after_another_are_each_found():
    """A bot's token ends where the next one's id begins (hypothesis found the first of two
    glued tokens kept, and found only on a second scan)."""
    found = scan(TELEGRAM_TOKEN + TELEGRAM_TOKEN)
    assert found.text == marker(TELEGRAM) * 2 and found.found == {TELEGRAM: 2}
    kept = TELEGRAM_TOKEN + "12345"  # digits after it that begin no other token
    assert redact(kept) == kept


def test_github_tokens_glued_one_after_another_are_each_found():
    """A token ends where the next one's prefix begins: `ghp_[A-Za-z0-9]{36,}` ran on through
    the second's `ghp` and kept its `_` and 36 characters."""
    fine_grained = "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59)
    for first, second in [
        (GITHUB_PAT, "ghp_" + rand(ALNUM, 36)),
        ("gho_" + rand(ALNUM, 36), "ghs_" + rand(ALNUM, 36)),
        (GITHUB_PAT, fine_grained),
        (fine_grained, GITHUB_PAT),
    ]:
        found = scan(f"token {first}{second}{first} end")
        assert found.text == f"token {marker(GITHUB) * 3} end", (first, second)
        assert found.found == {GITHUB: 3}
    kept = GITHUB_PAT + "ghp_short"  # no token after it: it is no part of the one before
    assert redact(kept) == marker(GITHUB) + "ghp_short"


def test_a_key_cut_in_the_middle_is_redacted_as_far_as_it_goes():
    """A text clipped in the middle of a private key: the head (a header and lines, no end)
    and the tail (lines and the end, no header) are each redacted; the cut stays readable."""
    key = pem(lines=10)
    head, tail = key[:300], key[-250:]
    clipped = f"read:\n{head}\n… [1,234 characters cut] …\n{tail}\ndone"
    assert redact(clipped) == (
        f"read:\n{marker(PRIVATE_KEY)}\n… [1,234 characters cut] …\n{marker(PRIVATE_KEY)}\ndone"
    )


CUT_KEYS = [
    (ANTHROPIC_KEY, ANTHROPIC, 7),
    (OPENAI_PROJECT_KEY, OPENAI, 3),
    (DEEPSEEK_KEY, OPENAI, 3),
    (AWS_KEY, AWS_KEY_ID, 4),
    (GITHUB_PAT, GITHUB, 4),
    (FINE_GRAINED_PAT, GITHUB, 11),
    (GITLAB_PAT, GITLAB, 6),
    (SLACK_BOT, SLACK, 30),
    (STRIPE_KEY, STRIPE, 8),
    (GOOGLE_KEY, GOOGLE, 4),
]
"""A key of a distinctive prefix, its kind, and how much of it is prefix."""


@pytest.mark.parametrize("secret, kind, prefix", CUT_KEYS, ids=[k for _, k, _ in CUT_KEYS])
def test_a_key_cut_by_a_clip_before_the_scan_is_redacted(secret: str, kind: str, prefix: int):
    """A run's last observation (`run_state.preview`: the head and `…`) and chat's
    observations (`sanitize.clip`) are clipped before they are scanned: a `ghp_` token cut
    there kept 35 of its 36 characters, too short for its format. Cut anywhere past 16 of its
    body's characters, no more than that much of it is left."""
    for cut in range(prefix + 16, len(secret)):
        for clipped in (secret[:cut] + "…", secret[:cut] + "\n… [1,234 characters cut] …\n"):
            text = f"read: {clipped}rest"
            redacted = redact(text)
            assert secret[: prefix + 16] not in redacted, (cut, redacted)
            # its kind, or (an Anthropic key cut short of its own format's length) OpenAI's
            assert redacted.startswith((f"read: {marker(kind)}", f"read: {marker(OPENAI)}"))


LONG_CUT_KEYS = [k for k in CUT_KEYS if has_digit(k[0][k[2] + 16 : -4])]
"""The keys long enough to leave a rest holding a digit after a head of 16 of their body's
characters."""


@pytest.mark.parametrize(
    "secret, kind, prefix", LONG_CUT_KEYS, ids=[k for _, k, _ in LONG_CUT_KEYS]
)
def test_the_rest_of_a_key_after_the_clip_that_cut_its_head_is_redacted_too(
    secret: str, kind: str, prefix: int
):
    """A clip that cut a few characters out of a key (`sanitize.clip`'s head and tail, or a
    text that goes on after `…`) left its head before the marker and its rest after it: the
    rest is the same key, and goes with its head."""
    tried = 0
    for cut in range(prefix + 16, len(secret) - 4):
        for gap in (0, 1, 7, 40):
            rest = secret[cut + gap :]
            if len(rest) < 4 or not has_digit(rest):
                continue  # a few letters: the judge leaves a word the text goes on with
            for clipped in (
                f"{secret[:cut]}…{rest}",
                f"{secret[:cut]}\n… [{gap:,} characters cut] …\n{rest}",
            ):
                redacted = redact(f"read: {clipped} done")
                assert rest not in redacted and secret[: prefix + 16] not in redacted, redacted
                assert redacted.endswith("] done"), redacted
                tried += 1
    assert tried >= 1


def test_a_key_clipped_by_sanitize_clip_leaves_no_piece_of_itself():
    for secret in (OPENAI_PROJECT_KEY, ANTHROPIC_KEY, FINE_GRAINED_PAT):
        text = f"{secret} done"
        for cut in (3, 10, 30, 60):
            redacted = redact(clip(text, len(text) - cut))
            pieces = {secret[i : i + 12] for i in range(len(secret) - 12)}
            assert not [p for p in pieces if p in redacted and has_digit(p)], redacted


def test_a_tail_that_says_whose_it_is_is_redacted_with_no_head():
    """OpenAI's infix and a JWT's payload and signature name a key's tail on their own."""
    at = OPENAI_PROJECT_KEY.index("T3BlbkFJ")
    for start in (at - 40, at - 1, at):
        tail = OPENAI_PROJECT_KEY[start:]
        for before in ("…", "\n… [9,999 characters cut] …\n"):
            assert redact(f"x{before}{tail} end") == f"x{before}{marker(OPENAI)} end"
    jwt_tail = JWT_TOKEN[JWT_TOKEN.index(".") - 5 :]
    assert redact(f"…{jwt_tail}") == f"…{marker(JWT)}"


CUT_TAIL_NEAR_MISSES = [
    # a random run after a clip, and nothing before it to say it is a key's: not guessed at
    "…" + OPENAI_PROJECT_KEY[-20:],
    "\n… [1,234 characters cut] …\n" + rand(URLSAFE, 40) + " end",
    "…iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",  # an image's base64
    "…3f786850e387550fdab836ed7e6dc881de23001b",  # a SHA's tail
    "the skills…Abc123xyz",
    # a key before a clip, and the text after it goes on with words
    GITHUB_PAT + "…Then we left",
    GITHUB_PAT[:30] + "…\nSummary of the run",
    # a clip of thousands of characters joins two places: what follows is not that key
    GITHUB_PAT[:30] + "\n… [4,820 characters cut] …\nRun2Finished at noon",
    # a marker some text wrote, of no kind this scan names
    "[redacted: made up]…abc123 and",
]


@pytest.mark.parametrize("text", CUT_TAIL_NEAR_MISSES, ids=range(len(CUT_TAIL_NEAR_MISSES)))
def test_what_follows_a_clip_is_left_unless_something_says_it_is_a_key(text: str):
    redacted = redact(text)
    head = redacted.partition("…")[0]  # a cut key's head is redacted, as before
    assert redacted.endswith(text.partition("…")[2]), redacted
    assert head.startswith("[redacted: ") or head == text.partition("…")[0]


def test_a_word_before_an_ellipsis_is_not_taken_for_a_cut_key():
    for text in ("the skills…", "sk-learn-release-notes…", "ASIA…", "see gh_pages…", "AIza…"):
        assert redact(text) == text


def test_several_credentials_in_one_text_each_named():
    env = (
        f"OPENAI_API_KEY={OPENAI_PROJECT_KEY}\nGITHUB_TOKEN={GITHUB_PAT}\n"
        f"DATABASE_URL=postgresql://app:Pa55word1@db/app\nDEBUG=true\n{pem()}\n"
    )
    found = scan(env)
    assert found.text == (
        f"OPENAI_API_KEY={marker(OPENAI)}\nGITHUB_TOKEN={marker(GITHUB)}\n"
        f"DATABASE_URL=postgresql://app:{marker(URL_PASSWORD)}@db/app\nDEBUG=true\n"
        f"{marker(PRIVATE_KEY)}\n"
    )
    assert found.found == {OPENAI: 1, GITHUB: 1, URL_PASSWORD: 1, PRIVATE_KEY: 1}


def test_redacting_twice_is_redacting_once():
    texts = [f"a {s} b" for s, _ in WHOLE] + [f"{b}{s}{a}" for b, s, a, _ in NAMED]
    for text in texts:
        once = redact(text)
        assert redact(once) == once
    for kind in KINDS:  # no marker is taken for a credential, bare or after a name
        for text in (marker(kind), f"api_key={marker(kind)}", f"Bearer {marker(kind)}"):
            assert redact(text) == text


def test_a_debrief_is_redacted_field_by_field_and_kept_when_clean():
    clean = AgentDebrief(
        outcome="success", summary="ok", tools_used=[ToolUsage(name="t", calls=1, success_rate=1)]
    )
    same, found = redact_value(clean)
    assert same is clean and not found
    dirty = clean.model_copy(
        update={
            "key_findings": [f"the .env holds {GITHUB_PAT}", "nothing else"],
            "lessons_learned": [f"use {OPENAI_PROJECT_KEY} for billing"],
            "markdown": f"- the .env holds {GITHUB_PAT}",
        }
    )
    redacted, found = redact_value(dirty)
    assert redacted.key_findings == [f"the .env holds {marker(GITHUB)}", "nothing else"]
    assert redacted.lessons_learned == [f"use {marker(OPENAI)} for billing"]
    assert redacted.markdown == f"- the .env holds {marker(GITHUB)}"
    assert redacted.tools_used is clean.tools_used and found == {GITHUB: 2, OPENAI: 1}
    assert dirty.key_findings[0].endswith(GITHUB_PAT)  # the original is not changed


HOSTILE = [
    "sk-" * 333_334,
    "ask-" * 250_000,
    "sk-ant-" + "a" * 1_000_000,
    "ghp_" * 250_000,
    "eyJaaaaaaaaaaa." * 66_667,
    "://a:" * 200_000,
    "://a:b@" * 142_858,
    "x@" * 500_000,
    "Authorization: Bearer " * 45_455,
    "token=" * 166_667,
    "password: " * 100_000,
    "aws_secret_access_key=" * 45_455,
    "-----BEGIN PRIVATE KEY-----" * 37_038,
    "-----BEGIN PRIVATE KEY-----\n" + "AAAAAAAAAAAAAAAA\n" * 58_824,
    "AAAAAAAAAAAAAAAA\n" * 58_824 + "-----END PRIVATE KEY-----",
    "AAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n" * 23_256,
    "-----BEGIN PRIVATE KEY-----\nComment: " + "x " * 500_000,
    "\\n" * 500_000 + "-----END PRIVATE KEY-----",
    "a" * 1_000_000,
    # glued forms: a bounded look-ahead at every prefix
    "ask-" + "a" * 90 + "T3Blbk" * 166_650,
    "sk-proj-" * 125_000,
    "sk-ant-api03-" * 76_924,
    "ghp_" + "a" * 36 + "b" * 999_960,
    "github_pat_" * 90_910,
    "glpat-" * 166_667,
    "xoxb-1-" * 142_858,
    "1" * 999_990 + ":A",
    "12345:" * 166_667,
    "hvs." + "a" * 999_996,
    "glc_" + "a" * 999_996,
    # names and their values
    'password: "' * 90_910,
    '"password": "' + "a" * 1_000_000,
    '\\"password\\": \\"' * 62_500,
    "**Password:** " * 71_429,
    "password=" + "a" * 1_000_000,
    "nextPageToken=" * 71_429,
    "x" * 999_990 + "Token=abcdefgh12",
    "--password " * 90_910,
    "password: str = " * 62_500,
    "password: Final[" + "a" * 1_000_000,
    "password: " + "**" * 500_000,
    "Password: _" + "a" * 1_000_000,
    "the password is " * 62_500,
    "password for a b c d " * 47_620,
    "password " + "." * 1_000_000,
    "pw to " * 166_667,
    "<password>" * 100_000,
    "<a" + "b" * 1_000_000 + "password>x</",
    'key="password" value=' * 50_000,
    "password=&quot;" * 66_667,
    "&quot;password&quot;:&quot;" + "a" * 1_000_000,
    "DB_PASS=" * 125_000,
    "name: password\n value: " * 45_455,
    '"name": "' + "a" * 1_000_000,
    "| password | " * 83_334,
    "|" + " password" * 111_111,
    "password → " * 90_910,
    # a cut key's tail
    "[redacted: GitHub token]…" * 40_000,
    "[redacted: GitHub token]\n… [1 characters cut] …\n" * 20_000,
    "…" + "a" * 90 + "T3BlbkFJ" * 125_000,
    "…a.eyJ" * 166_667,
    "--a-" * 250_000,
    "secret: " + "x" * 1_000_000,
    # commands
    "curl " * 200_000,
    "curl -u " * 125_000,
    "curl " + "-u a:" * 200_000,
    "curl \\\n" * 142_858,
    "curl\n" * 200_000,
    "mysql -p" * 125_000,
    "sshpass" + " -x" * 333_333,
    "redis-cli -a " * 76_924,
    "-passin pass:" * 76_924,
    "docker login " * 76_924,
    "docker login" + " -u" * 333_333,
    "echo a | " * 111_112 + "--password-stdin",
    "--password-stdin " * 58_824 + "<<",
    "npm config set " * 66_667,
    "npm config set " + "-x " * 333_333,
    "ENV DB_PASSWORD " * 62_500,
    "ENV " + "a" * 1_000_000,
    "password%3D" * 90_910,
    "%22password%22%3A%22" + "a" * 1_000_000,
    "://" + "a1" * 500_000 + "@x",
    "://a1b2c3d4e5f6g7h8i9@" * 45_455,
    "Cookie: " * 125_000,
    "Cookie: " + "sid=" * 250_000,
    "Set-Cookie: " + "a" * 1_000_000,
    "ghp_" * 250_000,
    ("a" * 80 + "\n") * 12_346,
    ("x" * 75 + " ghp_\n") * 12_346,
    ("ghp_" + "a1" * 38 + "\n") * 12_346,
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_a_megabyte_of_hostile_text_is_scanned_in_linear_time(text: str):
    """A guard against backtracking that grows faster than the text, not a timing: each takes
    about a second on a quiet machine; scanned quadratically, a megabyte would take hours."""
    started = time.perf_counter()
    found = scan(text)
    assert time.perf_counter() - started < 90
    assert redact(found.text) == found.text


PIECES = st.lists(
    hostile_text(max_repeat=200)
    | st.sampled_from(
        [
            "sk-",
            "sk-ant-",
            "ghp_",
            "AKIA",
            "eyJ",
            ".",
            "://",
            ":",
            "@",
            "=",
            "token",
            "api_key",
            "Bearer ",
            "Authorization: ",
            "password",
            "Password: ",
            "**",
            '\\"',
            "hunter2",
            "the password is ",
            " (changed)",
            ": str = ",
            "…",
            "\n… [12 characters cut] …\n",
            "[redacted: GitHub token]",
            "curl -u ",
            "mysql -p",
            "sshpass -p ",
            "--password ",
            "docker login -p ",
            " | docker login --password-stdin",
            "Cookie: sessionid=",
            "password%3D",
            "ENV DB_PASSWORD ",
            "x" * 60,
            "nextPage",
            "T3BlbkFJ",
            "pypi-AgEIcHlwaS5vcmc",
            "\\\n",
            "-----BEGIN PRIVATE KEY-----",
            "-----END PRIVATE KEY-----",
            "\\n",
            OPENAI_PROJECT_KEY,
            GITHUB_PAT,
            JWT_TOKEN,
            TELEGRAM_TOKEN,
            rand(B64, 64),
            "\n",
            " ",
            '"',
        ]
    ),
    max_size=16,
)


@settings(max_examples=300, deadline=None)
@given(PIECES.map("".join))
def test_any_text_is_scanned_without_error_and_once_is_enough(text: str):
    found = scan(text)
    assert isinstance(found.text, str)
    assert redact(found.text) == found.text


@settings(max_examples=300, deadline=None)
@given(PIECES, st.sampled_from([" ", "\n", "\\n", "=", ": ", '"', "'", "\t", "(", ", "]))
def test_a_key_apart_from_its_neighbours_is_never_kept(pieces: list[str], separator: str):
    found = scan(separator.join(["", *pieces, ""]))
    assert OPENAI_PROJECT_KEY not in found.text and GITHUB_PAT not in found.text
    assert JWT_TOKEN not in found.text


def scanned_both_ways(text: str) -> tuple[Redacted, Redacted]:
    """`text` scanned with the rules' needles (a rule skips a text holding none of its), and
    with every rule searched: the needles are a shortcut, never a different answer."""
    with_needles = scan(text)
    secret_rules.NEEDLES_ON = False
    try:
        without = scan(text)
    finally:
        secret_rules.NEEDLES_ON = True
    return with_needles, without


LABELLED = [
    "**Password:** hunter2",
    "paſſword: hunter2",  # ſ: a case-ignoring pattern reads it as s
    "PASSWORD: Hunter2-staging",
    "DB_PASSWORD=x",
    "client_secret = abc",
    "curl -u admin:s3cret https://example.com",
    "Authorization: Bearer abcdefgh12345678ijkl",
    "api_key=abcd1234efgh5678",
    "aws_secret_access_key = " + rand(B64, 40),
    "wget --password=hunter2 https://example.com",
    "see https://user:pa55word@example.com/x",
    "KEY read: " + GITHUB_PAT[:30] + "…",
    "KEY read: " + GITHUB_PAT[:30] + "\n… [4 characters cut] …\n" + GITHUB_PAT[34:],
    "…" + OPENAI_PROJECT_KEY[60:],
    "…" + JWT_TOKEN[30:],
    "Password: hunter2 (changed)",
    'password: str = "hunter2"',
    "api_key: Final = 'sk-abcdef1234567890'",
    "Password: **hunter**",
    "the password is hunter2",
    "PW is hunter2",
    "paſſphrase hunter2",
    "<password>hunter2</password>",
    '<add key="DbPassword" value="hunter2" />',
    "&QUOT;password&QUOT;: &QUOT;hunter2&QUOT;",
    "DB_PASS=hunter2 and bypass=1",
    "password = r'hunter2'",
    "- name: DB_PASSWORD\n  value: hunter2",
    '{"Name": "API_KEY", "Value": "a1b2c3d4e5f6g7h8"}',
    "| Password | hunter2 |",
    "Password → hunter2",
    "PASSWORD%3dhunter2&api_key%3Aa1b2c3d4e5f6g7h8",
    "%7B%22password%22%3A%22hunter2%22%7D",
    "git clone https://a1B2c3D4e5F6g7H8i9J0@github.com/o/r",
]


@pytest.mark.parametrize(
    "text",
    [f"x {s} y" for s, _ in WHOLE]
    + [b + s + a for b, s, a, _ in NAMED]
    + NEAR_MISSES
    + LABELLED
    + [t[:5_000] for t in HOSTILE],
)
def test_the_needles_never_change_what_is_found(text: str):
    with_needles, without = scanned_both_ways(text)
    assert with_needles == without


@settings(max_examples=300, deadline=None)
@given(PIECES.map("".join))
def test_the_needles_never_change_what_is_found_in_any_text(text: str):
    with_needles, without = scanned_both_ways(text)
    assert with_needles == without
