"""Credentials a provider's own format gives away, wherever they stand: the rules of the
credential scan (`reactive_temporal/secrets_scan.py`) that need no name next to the key.

Each follows the gitleaks rule named beside it (github.com/gitleaks/gitleaks
`config/gitleaks.toml`), loosened where a provider's keys are wider than the rule.

Where a key may begin. A prefix counts where a run of key characters begins (`START`), as
gitleaks' `\\b` does; glued to the word before it (`mykeysk-proj-…`, `tokenghp_…`, text
flattened from a table's cells) only where the key's own structure cannot be chance:
- OpenAI's `T3BlbkFJ` infix, Anthropic's versioned `sk-ant-api03-`, GitHub's `ghp_` and 36
  characters exactly, a fine-grained PAT's `github_pat_` + 22 + `_` + 59, GitLab's `glpat-`,
  Slack's `xoxb-` and a digit group, PyPI's `pypi-AgEIcHlwaS5vcmc`, Shopify's `shpat_`
  (gitleaks matches these last four anywhere too);
- an AWS key ID after a lower-case letter (`keyAKIA…`), not after a capital or a digit: there
  it may be any 20 characters of a longer upper-case run (base32 text, an identifier).
Not glued: an `sk-` key without the infix (`task-`, `ask-`, `desk-` + a hex id is a slug),
Stripe's `sk_live_` (`task_live_…`, `risk_test_…` are names), Google's `AIza` and a JWT's
`eyJ` (base64 text holds them anywhere), and the prefixes short enough to end a word
(`hf_`, `npm_`, `SG.`, `SK`, `dapi`, `pul-`).

Linear time: each pattern starts at a fixed prefix and its variable part is one greedy run
of a class the element after it cannot match, or is bounded (the glued forms' look-ahead).
"""

from __future__ import annotations

import re

from reactive_temporal.secret_rules import (
    ANTHROPIC,
    AWS_KEY_ID,
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
    MARKER_PREFIX,
    NPM,
    OPENAI,
    PLANETSCALE,
    POSTMAN,
    PULUMI,
    PYPI,
    SENDGRID,
    SENTRY,
    SHOPIFY,
    SLACK,
    SLACK_WEBHOOK,
    START,
    STRIPE,
    TELEGRAM,
    TWILIO,
    VAULT,
    Rule,
    both_cases,
    has_digit,
    keylike,
    mixed,
    rule,
    secret_of,
)

_END = r"(?![A-Za-z0-9])"
"""A key of a fixed length ends there: not a window of a longer run."""
_NEXT_GITHUB = r"(?:gh[pousr]_|github_pat_)"
"""A GitHub token's prefix: where one glued after another begins."""
_OPENAI_INFIX = r"sk-(?:(?:proj|svcacct|admin)-)?[A-Za-z0-9_-]{20,96}T3BlbkFJ"


def _telegram(token: str) -> bool:
    """Random characters after the bot's id: both cases (not `AAAA…`)."""
    return both_cases(token.partition(":")[2])


FORMATS: tuple[Rule, ...] = (
    # anthropic-api-key, anthropic-admin-api-key
    rule(
        ANTHROPIC,
        rf"(?:{START}|(?=sk-ant-(?:api|admin)[0-9]{{2}}-))sk-ant-[A-Za-z0-9_-]{{32,}}",
        keylike,
        needles=("sk-ant-",),
    ),
    # openai-api-key; any sk- + 32 (DeepSeek, Moonshot: sk- + 32 hex) at a word's start
    rule(
        OPENAI,
        rf"(?:{START}|(?={_OPENAI_INFIX}))sk-[A-Za-z0-9_-]{{32,}}",
        keylike,
        needles=("sk-",),
    ),
    # aws-access-token
    rule(
        AWS_KEY_ID,
        rf"(?<![A-Z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{{16}}{_END}",
        needles=("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    # github-pat, github-oauth, github-app-token, github-refresh-token, github-fine-grained-pat;
    # a next token glued after one ends it (`ghp_…ghp_…`: the greedy run took the second's
    # `ghp` and left its `_…` body), as a bot token's id ends the one before it
    rule(
        GITHUB,
        rf"(?:{START}|(?=gh[pousr]_[A-Za-z0-9]{{36}}(?:{_END}|{_NEXT_GITHUB})))"
        rf"gh[pousr]_(?:[A-Za-z0-9]{{36}}(?={_NEXT_GITHUB})|[A-Za-z0-9]{{36,}})"
        rf"|(?:{START}|(?=github_pat_[A-Za-z0-9]{{22}}_[A-Za-z0-9]{{59}}))"
        rf"github_pat_(?:[A-Za-z0-9]{{22}}_[A-Za-z0-9]{{59}}(?={_NEXT_GITHUB})|[A-Za-z0-9_]{{82,}})",
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    # gitlab-pat, gitlab-ptt, gitlab-rrt, gitlab-deploy-token (and the routable `.xx…` form)
    rule(
        GITLAB,
        r"gl(?:pat|ptt|rt|dt)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9]{2,16})?",
        needles=("glpat-", "glptt-", "glrt-", "gldt-"),
    ),
    # slack-*-token: a digit group after the prefix (`xoxb-123…-`), but for the legacy
    # workspace tokens `xoxa-`, `xoxr-`; not the `xoxo-` of a letter's end
    rule(
        SLACK,
        rf"(?:{START}|(?=(?:xox[abeoprs]|xapp)-[0-9]+-))"
        r"(?:xox[abeops]-(?=[0-9]+-)|xox[ar]-|xapp-(?=[0-9]+-))[A-Za-z0-9-]{10,}",
        has_digit,
        needles=("xox", "xapp-"),
    ),
    # slack-webhook-url
    rule(
        SLACK_WEBHOOK,
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,}",
        needles=("hooks.slack.com",),
    ),
    # stripe-access-token
    rule(
        STRIPE,
        rf"{START}(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{{10,}}",
        needles=("_live_", "_test_", "_prod_"),
    ),
    # gcp-api-key
    rule(GOOGLE, rf"{START}AIza[A-Za-z0-9_-]{{35}}(?![A-Za-z0-9_-])", needles=("AIza",)),
    # huggingface-access-token, huggingface-organization-api-token: 34 random letters
    rule(
        HUGGING_FACE,
        rf"{START}(?:hf_|api_org_)[A-Za-z]{{34}}{_END}",
        both_cases,
        needles=("hf_", "api_org_"),
    ),
    # npm-access-token
    rule(NPM, rf"{START}npm_[A-Za-z0-9]{{36}}{_END}", mixed, needles=("npm_",)),
    # pypi-upload-token: `pypi-` + a macaroon whose first bytes name pypi.org
    rule(PYPI, r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}", needles=("pypi-AgEIcHlwaS5vcmc",)),
    # sendgrid-api-token: SG. + 22 + . + 43
    rule(
        SENDGRID,
        rf"{START}SG\.[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}(?![A-Za-z0-9_-])",
        mixed,
        needles=("SG.",),
    ),
    # twilio-api-key: an API key's SID, SK + 32 hex
    rule(TWILIO, rf"{START}SK[0-9a-fA-F]{{32}}{_END}", mixed, needles=("SK",)),
    # telegram-bot-api-token: the bot's id, `:`, A + 34 (gitleaks wants `telegr` in a name
    # before it; the shape alone is unmistakable, and it is glued to `bot` in API URLs; a
    # next token glued after it ends it too: its own id's digits are no part of it)
    rule(
        TELEGRAM,
        r"(?<![0-9])[0-9]{5,16}:A[A-Za-z0-9_-]{34}(?:(?![A-Za-z0-9_-])|(?=[0-9]{5,16}:A))",
        _telegram,
        needles=(":A",),
    ),
    # digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token
    rule(DIGITALOCEAN, rf"{START}do[opr]_v1_[a-f0-9]{{64}}{_END}", needles=("_v1_",)),
    # shopify-access-token, -custom-access-token, -private-app-access-token, -shared-secret
    rule(SHOPIFY, rf"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}{_END}", needles=("shp",)),
    # vault-service-token, vault-batch-token (not the legacy `s.` + 24: too short to tell)
    rule(
        VAULT,
        rf"{START}(?:hvs\.[A-Za-z0-9_-]{{90,120}}|hvb\.[A-Za-z0-9_-]{{138,300}})(?![A-Za-z0-9_-])",
        needles=("hvs.", "hvb."),
    ),
    # databricks-api-token
    rule(DATABRICKS, rf"{START}dapi[a-f0-9]{{32}}(?:-[0-9])?{_END}", mixed, needles=("dapi",)),
    # grafana-service-account-token, grafana-cloud-api-token
    rule(
        GRAFANA,
        rf"{START}(?:glsa_[A-Za-z0-9]{{32}}_[A-Fa-f0-9]{{8}}{_END}"
        r"|glc_[A-Za-z0-9+/]{32,400}={0,3}(?![A-Za-z0-9+/=]))",
        needles=("glsa_", "glc_"),
    ),
    # sentry-user-token, sentry-org-token
    rule(
        SENTRY,
        rf"{START}(?:sntryu_[a-f0-9]{{64}}{_END}|sntrys_eyJpYXQiO[A-Za-z0-9+/=_]{{50,}})",
        needles=("sntry",),
    ),
    # postman-api-token
    rule(POSTMAN, rf"{START}PMAK-[a-fA-F0-9]{{24}}-[a-fA-F0-9]{{34}}{_END}", needles=("PMAK-",)),
    # pulumi-api-token
    rule(PULUMI, rf"{START}pul-[a-f0-9]{{40}}{_END}", mixed, needles=("pul-",)),
    # linear-api-key
    rule(LINEAR, rf"{START}lin_api_[A-Za-z0-9]{{40}}{_END}", needles=("lin_api_",)),
    # doppler-api-token
    rule(DOPPLER, rf"{START}dp\.pt\.[A-Za-z0-9]{{43}}{_END}", needles=("dp.pt.",)),
    # planetscale-api-token, planetscale-oauth-token, planetscale-password
    rule(
        PLANETSCALE,
        rf"{START}pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.-]{{32,64}}(?![A-Za-z0-9_=.-])",
        needles=("pscale_",),
    ),
    # jwt: three base64url parts, the first two beginning `eyJ` (`{"` encoded)
    rule(
        JWT,
        rf"{START}eyJ[A-Za-z0-9_-]{{10,}}\.eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]*",
        needles=("eyJ",),
    ),
)
"""In this order: Anthropic's `sk-ant-` before OpenAI's `sk-`."""


CUT = "…"
_CUT = rf"(?=\n?{CUT})"
"""Where the text was clipped: `run_state.preview`'s `…`, `sanitize.clip`'s `\n… [N characters
cut] …\n`. Clipping comes before the scan in places (a run's last observation, chat's
observations of earlier runs), and a key cut there is shorter than its format: `ghp_` with 35
of its 36 characters went through whole."""

CUT_FORMATS: tuple[Rule, ...] = (
    rule(ANTHROPIC, rf"{START}sk-ant-[A-Za-z0-9_-]{{8,}}{_CUT}", needles=("sk-ant-",)),
    rule(OPENAI, rf"{START}sk-[A-Za-z0-9_-]{{16,}}{_CUT}", mixed, needles=("sk-",)),
    rule(
        AWS_KEY_ID,
        rf"(?<![A-Z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{{4,15}}{_CUT}",
        needles=("A3T", "AKIA", "ASIA", "ABIA", "ACCA"),
    ),
    rule(
        GITHUB,
        rf"{START}(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{{8,}}{_CUT}",
        needles=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    rule(
        GITLAB,
        rf"{START}gl(?:pat|ptt|rt|dt)-[A-Za-z0-9_-]{{8,}}{_CUT}",
        needles=("glpat-", "glptt-", "glrt-", "gldt-"),
    ),
    rule(
        SLACK,
        rf"{START}(?:xox[abeops]-[0-9]+-|xox[ar]-)[A-Za-z0-9-]{{4,}}{_CUT}",
        needles=("xox",),
    ),
    rule(
        STRIPE,
        rf"{START}(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{{6,}}{_CUT}",
        needles=("_live_", "_test_", "_prod_"),
    ),
    rule(GOOGLE, rf"{START}AIza[A-Za-z0-9_-]{{8,34}}{_CUT}", needles=("AIza",)),
)
"""A key of a distinctive prefix cut by a clip: its prefix and at least the start of its body,
up to the ellipsis (the whole formats above have taken every whole key first)."""


_AFTER_CUT = r"(?:(?<=…)|(?<=…\n))"
"""Right after a clip: `…` (a text clipped and more written after it) or `sanitize.clip`'s
`… [N characters cut] …\n`, whose tail begins wherever the cut ended, inside a key too."""
_CLIP = r"(?:\n?…(?P<clip> \[(?P<count>[0-9][0-9,]{0,12}) [a-z]{1,20} cut\] …\n)?)"
_CASE_TURN = re.compile(r"[a-z][A-Z]")
_TAIL_REACH = 256
"""The most characters a clip may have cut for what follows it to be the rest of the key
before it: longer than every format whose cut head is known (an OpenAI project key, 164)."""


def _tail_of_key(m: re.Match[str]) -> str | None:
    """The rest of the key redacted just before the clip: the head's kind. Only where the
    clip cut less than a key (a `sanitize.clip` of thousands of characters joins two places
    in the text, and what follows is not that key), and the rest looks random (letters and
    digits, or eight letters turning case inside), not a word the text goes on with
    (`Then`, `Summary`)."""
    kind = m.group("kind")
    if kind not in KINDS:
        return None  # a marker some text wrote, not this scan's
    count = m.group("count")
    if count is not None and int(count.replace(",", "")) > _TAIL_REACH:
        return None
    rest = secret_of(m)
    return kind if mixed(rest) or (len(rest) >= 8 and _CASE_TURN.search(rest)) else None


CUT_TAILS: tuple[Rule, ...] = (
    # the rest of a key whose head a cut format (or a whole one) has just replaced
    Rule(
        re.compile(
            re.escape(MARKER_PREFIX)
            + r"(?P<kind>[A-Za-z .]{1,40})\]"
            + _CLIP
            + r"(?P<secret>[A-Za-z0-9_-]{4,})"
        ),
        _tail_of_key,
        needles=(MARKER_PREFIX,),
    ),
    # a tail that says whose it is with no head: OpenAI's infix, a JWT's payload and signature
    rule(
        OPENAI,
        rf"{_AFTER_CUT}[A-Za-z0-9_-]{{0,96}}T3BlbkFJ[A-Za-z0-9_-]{{16,}}",
        needles=("T3BlbkFJ",),
    ),
    rule(
        JWT,
        rf"{_AFTER_CUT}[A-Za-z0-9_-]*\.eyJ[A-Za-z0-9_-]{{10,}}\.[A-Za-z0-9_-]{{8,}}",
        needles=("eyJ",),
    ),
)
"""A key cut by a clip whose tail follows it (the cut formats above take the head): the
tail is replaced where something says it is a key's. After a cut head, when the clip cut
fewer characters than a key holds; with no head, where the tail holds its format's own
mark (OpenAI's `T3BlbkFJ`, a JWT's `.eyJ…` payload and signature). A run of random-looking
characters after a clip and nothing else (`…x9Y8z7W6x9Y8z7W6`, the last 20 characters of
an OpenAI key) is left: a key's tail alone opens nothing (providers show the last four
characters themselves), and the same shape is a base64 image's or a hash's tail, which the
scan does not guess at (`secrets_scan.py`: no entropy guessing)."""
