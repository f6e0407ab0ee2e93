"""Credentials in a web request's own encodings (reactive_temporal/secret_web.py): a name and
its value URL-encoded, and a session's cookies; the names, the nonces, the placeholders and
the cookies that hold no session left."""

from __future__ import annotations

import pytest

from reactive_temporal.secrets_scan import CREDENTIAL, PASSWORD, marker, redact, scan

ENCODED = [
    # (before, the secret, after, its kind)
    ("POST /login body=user%3Dme%26password%3D", "hunter2", "%26next%3D%252F", PASSWORD),
    ("GET /cb?state=password%3D", "hunter2", "", PASSWORD),
    ("?q=password%3A", "hunter2", "&x=1", PASSWORD),
    ("?q=PASSWORD%3d", "p%40ss%21w0rd", "", PASSWORD),  # escapes inside the value
    ("data=%7B%22password%22%3A%22", "hunter2", "%22%7D", PASSWORD),  # JSON, encoded
    ("data=%7B%22password%22%3A%20%22", "Tr0ub%264dor%203", "%22%7D", PASSWORD),
    ("?cfg=api_key%3D", "a1b2c3d4e5f6g7h8", "%26page%3D2", CREDENTIAL),
    # a token as a URL's whole userinfo
    (
        "git clone https://",
        "0123456789abcdef0123456789abcdef01234567",
        "@github.com/o/r",
        CREDENTIAL,
    ),
    ("remote: https://", "a1B2c3D4e5F6g7H8i9J0", "@gitlab.example.com", CREDENTIAL),
    ('url = "https://', "a1B2c3D4e5F6g7H8i9J0", '@github.com"', CREDENTIAL),
]

COOKIES = [
    ("Cookie: ", "sessionid", "abc123def456ghi789", "; csrftoken=zzz111yyy222333"),
    ("Cookie: theme=dark; ", "PHPSESSID", "9f8e7d6c5b4a3f2e1d", "; lang=en"),
    ("Set-Cookie: ", "connect.sid", "s%3AabcDEF123.xyz", "; Path=/; HttpOnly"),
    ("set-cookie: ", "__Host-sid", "AbCdEfGhIjKlMnOpQr", "; Secure"),
    ("Cookie: XSRF-TOKEN=abc123def456ghi789; ", "laravel_session", "eyJpdiI6Ik1x", ""),
    ('{"Cookie": "', "auth_token", "a1b2c3d4e5f6g7h8", '", "Host": "x"}'),
    ("curl --cookie '", "SAPISID", "AbCdEf123456/GhIjK", "' https://x"),
    ("Cookie: ", "jwt", "a1b2c3d4e5f6g7h8i9", ""),
]


@pytest.mark.parametrize(("before", "secret", "after", "kind"), ENCODED, ids=range(len(ENCODED)))
def test_an_encoded_value_after_its_encoded_name_is_replaced(before, secret, after, kind):
    found = scan(f"{before}{secret}{after}")
    assert found.text == f"{before}{marker(kind)}{after}"
    assert dict(found.found) == {kind: 1}


@pytest.mark.parametrize(("before", "name", "value", "after"), COOKIES, ids=range(len(COOKIES)))
def test_a_session_cookie_s_value_is_replaced_and_its_name_and_the_others_kept(
    before, name, value, after
):
    found = scan(f"{before}{name}={value}{after}")
    assert found.text == f"{before}{name}={marker(CREDENTIAL)}{after}"
    assert dict(found.found) == {CREDENTIAL: 1}


def test_a_session_token_cookie_is_replaced_once():
    text = "Set-Cookie: __Secure-next-auth.session-token=a1b2c3d4e5f6g7h8i9; Path=/"
    assert (
        redact(text) == f"Set-Cookie: __Secure-next-auth.session-token={marker(CREDENTIAL)}; Path=/"
    )


@pytest.mark.parametrize(
    "text",
    [
        # placeholders, words and nonces, encoded
        "password%3D%24%7BPW%7D and password%3Drequired and password%3D",
        "%22password%22%3A%22This%20field%20is%20required.%22",
        "api_key%3Dabc and csrf_token%3Dabc123def456ghi and nextPageToken%3Dabc123def456",
        "percent%3D50 and a%3Db%26c%3Dd",
        # cookies that hold no session, a nonce, a cleared session, attributes
        "Cookie: theme=dark; lang=en; sidebar=abc123def456ghi; author=abc123def456",
        "Cookie: csrftoken=abc123def456ghi789; XSRF-TOKEN=abc123def456ghi789",
        "Set-Cookie: sessionid=deleted; expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=0",
        "Set-Cookie: session=; Path=/; Domain=example.com; SameSite=Lax",
        "the session cookie sessionid=abc123def456ghi789 is set on login",  # no header
        # a user's name as a URL's userinfo
        "https://git@github.com/o/r ssh://deploy-user-account@host https://john.doe@x.io/",
        "https://svc_account_for_ci_builds@host.io/ and mailto://abcdefghijklmnop@x.io",
    ],
)
def test_placeholders_nonces_and_cookies_without_a_session_are_left(text: str):
    found = scan(text)
    assert found.text == text and not found.found, found.found
