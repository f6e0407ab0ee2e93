"""Passwords told in a sentence (reactive_temporal/secret_prose.py): a value shaped like a
chosen secret is replaced; a sentence saying what the password is (wrong, required, stored in
Vault, base64-encoded, 12 characters long) is left as it is."""

from __future__ import annotations

import pytest

from reactive_temporal.secrets_scan import PASSWORD, marker, redact, scan

TOLD = [
    # (before, the password, after)
    ("the password is ", "hunter2", ""),
    ("my password was ", "hunter2", "."),
    ("pw is ", "hunter2", ""),
    ("passphrase ", "hunter2", ""),
    ("The password is ", "P@ssw0rd!", " Use it."),
    ("reset the root password to ", "Hunter2!", ""),
    ("changed my password to ", "hunter2", " yesterday"),
    ("the password for admin is ", "s3cret99", ", as before"),
    ("the password to the database is ", "Tr0ub4dor!3", ""),
    ("the password is now ", "hunter22", "; tell nobody"),
    ("the password is `", "hunter2", "`"),
    ("the password is '", "hunter2", "'."),
    ("the password is: ", "hunter2", ""),
    ("password was ", "123456", " (the default)"),
    ("PASSWORD IS ", "hUnt3r", ""),
    ("the passcode is ", "482913", ""),
    ("the wifi password is ", "correct-horse-42", ""),
    ("the pwd is ", "Summer2024", "?"),
    ("Password - ", "hunter2", ""),
    ("password → ", "hunter2", " (staging)"),
    ("WiFi passphrase — ", "c0ffee-sh0p", ""),
]

LEFT = [
    "the password is wrong",
    "the password is required",
    "password is stored in Vault",
    "the password is base64-encoded",
    "the password is SHA256-hashed",
    "password is 8 characters",
    "the password is at least 12 characters long",
    "password was rotated on 2024-05-01",
    "the password is 2024-05-01",
    "the password is v1.2.3",
    "password is 16+ chars",
    "password is 2048-bit",
    "password is k8s-managed",
    "password is user-defined",
    "the password is OpenAI-managed",
    "the password is GitHub's",
    "pw is iCloud",
    "uses password SHA256 hashing",
    "password PBKDF2 with 600000 iterations",
    "password 2FA",
    "the password is $PGPASSWORD",
    "the password is ${DB_PASSWORD}",
    "the password is <redacted>",
    "the password is ********",
    "the password is None",
    "the password is settings.DB_PASSWORD",
    "password is DB_PASSWORD",
    "the password is 'wrong'",
    "the password is in ~/.pgpass",
    "the password is 100%",
    "the password is 10:30",
    "the password is the same as the username",
    "the password for this account is required",
    "password of user1 is unknown",
    "password was reset 3 times",
    "the passcode is 1234",  # four digits: a year, a count, a PIN; not told apart
    "password-protected zip; password protected; password hashing with bcrypt",
    "Password reset link sent. password hash: abc",
    "pwd is /home/me",
    "PW is 42",
    "the secret is out; the token is 2048 long; the key is ssh-ed25519",  # not a password's name
    "the password is swordfish",  # a word: nothing tells it from `correct`
    "Password - required; password — stored in Vault; password -> see 1Password",
    "password – 8 characters at least",
]


@pytest.mark.parametrize(("before", "secret", "after"), TOLD, ids=range(len(TOLD)))
def test_a_password_told_in_a_sentence_is_replaced(before: str, secret: str, after: str):
    text = f"Note: {before}{secret}{after}\nnext line"
    found = scan(text)
    assert found.text == f"Note: {before}{marker(PASSWORD)}{after}\nnext line"
    assert dict(found.found) == {PASSWORD: 1}


@pytest.mark.parametrize("text", LEFT, ids=range(len(LEFT)))
def test_a_sentence_about_a_password_is_left(text: str):
    found = scan(text)
    assert found.text == text and not found.found, found.found


def test_a_told_password_redacted_twice_is_redacted_once():
    for before, secret, after in TOLD:
        once = redact(f"{before}{secret}{after}")
        assert redact(once) == once
