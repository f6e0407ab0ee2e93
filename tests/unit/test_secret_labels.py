"""Credentials known by what stands before them (reactive_temporal/secret_labels.py) and
passwords given to commands (reactive_temporal/secret_commands.py): the value replaced, its
label and everything around it kept; prose, placeholders, code, cursors and nonces left."""

from __future__ import annotations

import random
import string

import pytest

from reactive_temporal.secrets_scan import (
    AUTHORIZATION,
    CREDENTIAL,
    KINDS,
    PASSWORD,
    TELEGRAM,
    URL_PASSWORD,
    marker,
    redact,
    scan,
)

RNG = random.Random(20260723)
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def rand(alphabet: str, n: int) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


TELEGRAM_TOKEN = "110201543:AA" + rand(ALNUM + "-_", 33)

NAMED = [
    # (before, the secret, after, its kind): only the secret is replaced
    # a password's or a secret's value, whatever it is, where it is plainly the value
    ("**Password:** ", "hunter2", "", PASSWORD),
    ("- **Password**: ", "hunter2", "", PASSWORD),
    ("Password: ", "hunter2", "", PASSWORD),
    ('password = "', "x", '"', PASSWORD),
    ("password = '", "correct horse battery staple", "'", PASSWORD),
    ('{"user": "app", "password": "', "s3cr3t", '", "host": "db"}', PASSWORD),
    ('{"password": "', 'pa\\"ss', '"}', PASSWORD),  # an escaped quote inside
    ('{\\"password\\": \\"', "hunter2", '\\"}', PASSWORD),  # JSON inside a JSON string
    ("db:\n  password: ", "hunter2", "\n  host: db", PASSWORD),  # YAML
    ("data:\n  password: ", "aHVudGVyMg==", "\n", PASSWORD),  # a Kubernetes secret's base64
    ("token: ", "a1b2c3d4e5f6g7h8=", "\n", CREDENTIAL),
    ("password: ", "hunter2", "  # rotated monthly", PASSWORD),
    ("DB_PASSWORD=", "hunter2", "\nDB_HOST=db", PASSWORD),  # .env
    ("export MYSQL_ROOT_PASSWORD=", "hunter2", "", PASSWORD),
    ("PGPASSWORD=", "hunter2", " psql -h db -U app", PASSWORD),
    ("SSHPASS=", "hunter2", " sshpass -e ssh me@host", PASSWORD),
    ("host=db user=app password=", "hunter2", " dbname=app", PASSWORD),  # libpq words
    ("connect(host=h, password=", "hunter2", ", port=5432)", PASSWORD),
    ("Server=db;User Id=sa;Password=", "hunter2", ";Database=app", PASSWORD),  # ADO.NET
    ("jdbc:mysql://db/app?user=app&password=", "hunter2", "&ssl=true", PASSWORD),
    ("spring.datasource.password=", "hunter2", "", PASSWORD),
    ("secret_key: ", "abcdefgh", "", CREDENTIAL),
    ("client_secret = '", "abc", "'", CREDENTIAL),
    ('"client_secret": "', rand(HEX, 64), '"', CREDENTIAL),
    ("private_key: ", "notapemjustletters", "", CREDENTIAL),  # not a PEM block
    ("SECRET_KEY = '", "django-insecure-" + rand(ALNUM, 40), "'", CREDENTIAL),
    # a note or words after the value
    ("Password: ", "hunter2", " (changed)", PASSWORD),
    ("Password: ", "swordfish", " (rotated monthly)", PASSWORD),  # a note: any chosen value
    ("password: ", "hunter2", " but rotate it soon", PASSWORD),
    ("Password: ", "Tr0ub4dor!3", " — see the vault", PASSWORD),
    # a type annotation between the name and `=`
    ('password: str = "', "hunter2", '"', PASSWORD),
    ("DB_PASSWORD: Final[str] = '", "hunter2", "'", PASSWORD),
    ('const password: string = "', "x", '";', PASSWORD),
    ("private readonly apiKey?: string | undefined = '", "a1b2c3d4e5f6g7h8", "';", CREDENTIAL),
    ('val password: String = "', "hunter2", '"', PASSWORD),  # Kotlin
    ("const PASSWORD: &'static str = \"", "hunter2", '";', PASSWORD),  # Rust
    ("api_key: Final = '", "sk-abcdef1234567890", "'", CREDENTIAL),
    ('secret_key: Optional[str] = "', "abc", '"', CREDENTIAL),
    # a Python string's prefix before the quote
    ("password = r'", "hunter2", "'", PASSWORD),
    ('password = rb"', "hunter2", '"', PASSWORD),
    ("api_key = u'", "a1b2c3d4e5f6g7h8", "'", CREDENTIAL),
    # a service's `pass`
    ("DB_PASS=", "hunter2", "\nDB_HOST=db", PASSWORD),
    ("smtp_pass: '", "x", "'", PASSWORD),
    ("MAIL_PASS=", "hunter2", "", PASSWORD),
    ("smtpPass: ", "hunter2", "", PASSWORD),
    # markup: XML elements, a name and a value as attributes, HTML-escaped quotes
    ("<server><id>repo</id><password>", "hunter2", "</password></server>", PASSWORD),
    ("<Password>", "Hunter 2", "</Password>", PASSWORD),
    ("<db.password>", "hunter2", "</db.password>", PASSWORD),
    ("<apiKey>", "a1b2c3d4e5f6g7h8", "</apiKey>", CREDENTIAL),
    ('<add key="DbPassword" value="', "hunter2", '" />', PASSWORD),
    ("<property name='password' value='", "hunter2", "'/>", PASSWORD),
    ("&quot;password&quot;: &quot;", "hunter2", "&quot;", PASSWORD),
    ("password=&quot;", "hunter2", "&quot;", PASSWORD),
    ("&#34;client_secret&#34;:&#34;", "abc", "&#34;", CREDENTIAL),
    ("&quot;token&quot;: &quot;", "a1b2c3d4e5f6g7h8", "&quot;", CREDENTIAL),
    # a name and a value as two fields, and a markdown table's row
    ('[{"name": "DB_PASSWORD", "value": "', "hunter2", '"}]', PASSWORD),  # ECS
    ("env:\n  - name: DB_PASSWORD\n    value: ", "hunter2", "\n  - name: HOST", PASSWORD),
    ('env:\n- name: API_KEY\n  value: "', "a1b2c3d4e5f6g7h8", '"', CREDENTIAL),
    ('{"ParameterKey": "DbPassword", "ParameterValue": "', "hunter2", '"}', PASSWORD),
    ("| Password | ", "hunter2", " |", PASSWORD),
    ("| **DB password** | `", "s3cret", "` |", PASSWORD),
    ("| Name | Value |\n|---|---|\n| api_key | ", "a1b2c3d4e5f6g7h8", " |", CREDENTIAL),
    # markdown's emphasis around the value stays
    ("Password: **", "hunter", "**", PASSWORD),
    ("Password: *", "pw", "*", PASSWORD),
    ("Password: _", "hunter2", "_", PASSWORD),
    ("Password: __", "hunter2", "__ (staging)", PASSWORD),
    ("**Password:** `", "pw", "`", PASSWORD),
    # command-line options
    ("wget --password=", "hunter2", " https://x/f", PASSWORD),
    ("wget --user=me --password ", "hunter2", " https://x/f", PASSWORD),
    ("docker login --password ", "hunter2", " -u me registry", PASSWORD),
    ("gh-release --github-token ", "a1b2c3d4e5f6a7b8", " v1.0", CREDENTIAL),
    ("curl -u admin:", "hunter2", " https://x", PASSWORD),
    ("curl --user deploy:", "hunter2", " https://x", PASSWORD),
    ("curl --user=deploy:", "hunter2", " https://x", PASSWORD),
    ("curl -s -X POST -udeploy:", "hunter2", " https://x", PASSWORD),
    ("curl -u 'deploy:", "two words", "' https://x", PASSWORD),
    ("curl https://api.mailgun.net/v3 -u ", "a1b2c3d4e5f6a7b8c9", ": -F to=me", CREDENTIAL),
    ("curl https://x \\\n  -u admin:", "hunter2", " \\\n  -d a=1", PASSWORD),  # continued
    ("/usr/bin/curl -u admin:", "hunter2", " https://x", PASSWORD),
    ('curl -H "X-Api-Key: ', rand(ALNUM, 32), '" https://x', CREDENTIAL),
    ("curl --header 'Authorization: Token ", "abcd1234efgh", "' https://x", AUTHORIZATION),
    ('curl -H "PRIVATE-TOKEN: ', "a1b2c3d4e5f6g7h8", '" https://x', CREDENTIAL),
    ("mysql -h db -u root -p", "hunter2", " app", PASSWORD),
    ("mysqldump -uroot -p'", "hunter 2", "' app > app.sql", PASSWORD),
    ("sshpass -p ", "hunter2", " ssh -p 2222 me@host", PASSWORD),
    ("sshpass -v -p", "hunter2", " ssh me@host", PASSWORD),
    ("redis-cli -h cache -a ", "hunter2", " ping", PASSWORD),
    # a registry's or a cloud's login: `-p`, stdin, npm's config
    ("docker login -p ", "hunter2", " registry.io", PASSWORD),
    ("docker login -u me -p ", "S3cr3t!x", " registry.io", PASSWORD),
    ("podman login \\\n  -u me \\\n  -p ", "hunter2", " quay.io", PASSWORD),  # continued
    ("helm registry login r.io -u me -p ", "hunter2", "", PASSWORD),
    ("az login --service-principal -u id -p ", "S3cret~val", " --tenant t", PASSWORD),
    ("echo ", "hunter2", " | docker login --password-stdin -u me r.io", PASSWORD),
    ("echo -n '", "hunter 2", "' | podman login --password-stdin q.io", PASSWORD),
    ("docker login -u me --password-stdin <<< ", "hunter2", "", PASSWORD),
    ("echo ", "a1b2c3d4e5f6a7b8c9d0", " | gh auth login --with-token", CREDENTIAL),
    ("npm config set //registry.npmjs.org/:_authToken ", "a1b2c3d4-e5f6-7890", "", CREDENTIAL),
    ("yarn config set npmAuthToken ", "a1b2c3d4e5f6a7b8", "", CREDENTIAL),
    ("npm config set //r.io/:_password ", "aHVudGVyMg==", "", PASSWORD),
    # a Dockerfile's ENV without `=`, and its ARG
    ("FROM python:3.12\nENV DB_PASSWORD ", "hunter2", "\nRUN make", PASSWORD),
    ("ENV API_KEY ", "a1b2c3d4e5f6g7h8", "", CREDENTIAL),
    ('ENV SECRET_KEY "', "two words", '"', CREDENTIAL),
    ("ARG DB_PASSWORD=", "hunter2", "", PASSWORD),
    # an `&` inside a value is the value's, but in a query or before a next field
    ("Password: ", "Tr0ub4dor&3", "", PASSWORD),
    ("DB_PASSWORD=", "Tr0ub4dor&3", "\nDB_HOST=db", PASSWORD),
    ("https://x.io/login?password=", "hunter2", "&next=/home", PASSWORD),
    ("https://x.io/login?password=", "Tr0ub", "&3", PASSWORD),  # a query's own `&` is %26
    ("user=x&password=", "hunter2", "&remember=1", PASSWORD),  # a form's body
    ("password=", "hunter2", "&&psql", PASSWORD),
    ("Password: &quot;", "hunter2", "&quot;", PASSWORD),
    ("<a href='?password=", "hunter2", "&amp;page=1'>", PASSWORD),  # an entity ends it
    ("openssl pkcs12 -export -passout pass:", "hunter2", " -out k.p12", PASSWORD),
    # connection strings
    ("mongodb+srv://app:", "pa55w0rd", "@cluster0.ab1cd.mongodb.net/db", URL_PASSWORD),
    ("redis://default:", "hunter2", "@cache:6379/0", URL_PASSWORD),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=",
        rand(B64, 86) + "==",
        ";EndpointSuffix=core.windows.net",
        CREDENTIAL,
    ),
    (
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=",
        rand(B64, 43) + "=",
        "",
        CREDENTIAL,
    ),
    # a key's value after its name
    ("DD_APP_KEY=", rand(HEX, 40), "", CREDENTIAL),  # Datadog: no format of its own
    (
        "DISCORD_BOT_TOKEN=",
        rand(ALNUM, 24) + "." + rand(ALNUM, 6) + "." + rand(ALNUM, 38),
        "",
        CREDENTIAL,
    ),
    ("token=", rand(HEX, 40), "", CREDENTIAL),  # bare: how many APIs take a key
    ("https://api.example.com/v1/items?token=", rand(HEX, 32), "&page=2", CREDENTIAL),
    ("https://api.telegram.org/bot", TELEGRAM_TOKEN, "/getMe", TELEGRAM),
]

NEAR_MISSES = [
    # prose, placeholders, words that say there is none
    "the password is required",
    "Password: required",
    "Password: (required)",
    "Password: ********",
    "Password: Enter your password below",
    "password: null\nsecret: ~\npassphrase: ''",
    "password: <your password>",
    "password: ${DB_PASSWORD}",
    "password: str\nsecret_key: Optional[str] = None",
    "max_password_length: 12\nshow_password: false\nrequire_password: yes",
    "--password PASSWORD  the account's password",
    # words after a label's value that is itself a word, a number or a name
    "Password: Enter your password below",
    "Password: 8 characters minimum",
    "password: SHA256 hashed and salted",
    "Password: v1.2 policy applies",
    "Password: user-defined at first login",
    # code after a name: a call, or a name and more code (found in httpx, pip, openai's SDK)
    'password = quote(kwargs.pop("password", "") or "", safe=PASSWORD_SAFE)',
    "username, password = get_auth_from_url(proxy)",
    '"client_secret": client_secret,\n"webhook_secret": webhook_secret if webhook_secret else x',
    "password: _PasswordType | None = None,",
    "self.rotate_secret = to_streamed_response_wrapper(",
    "private_key: SSHPrivateKeyTypes,\nprivate_key: PrivateKeyTypes = load_pem_private_key(",
    'userpass = b":".join((to_bytes(username), to_bytes(password)))\nuserpass = username',
    # annotations without a value, or with code as the value
    "def login(user: str, password: str = None) -> None:",
    'password: str = Field(..., description="The password")',
    'password: str = os.environ["DB_PASSWORD"]',
    'password: str = "changeme"\napi_key: str = "your-api-key"',
    'password: Optional[str] = ""',
    "api_key: str = get_key()",
    'password: str = "Password for the database"',
    # an f-string's value is code; a `pass` that is no service's password
    'password = f"{prefix}-{suffix}"',
    "bypass=1\nfirst_pass=1\ncompass: north\npass: 12 fail: 0\nSECOND_PASS=done",
    # markup whose value is a placeholder, a sentence or no secret's
    "<password>${env.PW}</password><password>required</password>",
    "<secret>The secret of the book</secret>",
    '<property name="password" value="${db.pw}"/>',
    "<apiKey>abc</apiKey><nextPageToken>" + rand(HEX, 24) + "</nextPageToken>",
    '<passwordPolicy>strict</passwordPolicy><add key="PasswordLength" value="12"/>',
    '<token_count>12345678a</token_count><input type="password" name="pw">',
    "&quot;password&quot;: &quot;This field may not be blank.&quot;",
    "&quot;password&quot;: &quot;&quot;, &quot;nextPageToken&quot;: &quot;abc123def456&quot;",
    # fields and table rows that hold no password
    '{"name": "DB_PASSWORD", "value": ""}\n{"name": "DB_PASSWORD", "valueFrom": {}}',
    "- name: POSTGRES_PASSWORD\n  valueFrom:\n    secretKeyRef:\n      name: db",
    "- name: PASSWORD_LENGTH\n  value: 12",
    '{"name": "password", "value": "This field is required."}',
    "| password | string | The user's password |\n| Password | 8 | min length |",
    "| password | required |\n| token | nextPageToken |",
    # emphasis around a word that says there is none
    "Password: **required**",
    "Password: *(optional)*",
    "**Password:** *see the vault*",
    "Password: `None`",
    '{"password": "This field may not be blank."}',
    '{"password": ["This field is required."]}',
    'PRIVATE_KEY = "private key"\nURL_PASSWORD = "password in URL"',  # constants naming kinds
    "the password: chosen, and not code naming where it is",
    "passwords look like `DB_PASSWORD=…` or `--password …`",
    "existingSecret: billing-db-credentials",
    "PWD=/home/runner/work\nOLDPWD=-",
    "deploy ALL=(ALL) NOPASSWD: ALL",  # sudoers
    # code naming where the password is
    "password = None",
    "password=os.environ['DB_PASSWORD']",
    'password = getpass.getpass("DB password: ")',
    "db = connect(user=u, password=pw)",
    "password=self.password\npassword: DB_PASSWORD",
    # cursors, nonces and short ids are not credentials
    "token=a1b2c3",
    "https://x/list?page_token=" + rand(HEX, 24) + "&limit=50",
    '{"nextPageToken": "CiAKGjBpNDd2Nmp2Zml2cXRwYjBpOXA1", "items": []}',
    '"NextToken": "eyJNYXJrZXIiOiBudWxsLCAiYm90b190cnVuY2F0ZV9hbW91bnQiOiAxfQ=="',
    "csrf_token=" + rand(HEX, 32) + "&csrfmiddlewaretoken=" + rand(ALNUM, 64),
    "authenticity_token=Mj2qykJO5rELyHgezQ69nzUX0i3OH67V7",
    "ContinuationToken: 1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b; request 123e4567-e89b-12d3-a456-426614174000",
    # options that are not passwords
    "docker run -u 1000:1000 -p 8080:80 app",
    "ssh -p 2222 me@host",
    "mysql -u root -p app",  # asks for the password
    "curl -u deploy https://x",  # asks for the password
    "curl -u user:password https://x; curl -u $USER:$TOKEN https://x; curl -u '<user>:<pass>' x",
    "curl -s https://x && docker run -u 1000:1000 app",
    "curl --user-agent 'me:1.0' https://x",
    # a login's `-p` only in the login's own command; a password read from a file or a variable
    "docker login -u me r.io && docker run -p 8080:80 app\ndocker login r.io; docker run -p 80:80",
    'docker login -u me -p $PW r.io; docker login -p "$(cat pw)" r.io',
    "az login -u id -p ~/cert.pem -t t; az login -p cert.pem; az login -p /tmp/c.pem",
    "ssh login -p 2222 host; the login -p flag",
    'echo "$PW" | docker login --password-stdin; cat pw | docker login --password-stdin',
    "echo hello | grep h; docker login --password-stdin <<< $PW",
    "gh auth login --with-token < token.txt",
    "npm config set //r.io/:_authToken ${NPM_TOKEN}; npm config set registry https://r.io",
    "ENV PATH /usr/local/bin:$PATH\nENV DB_PASSWORD ${DB_PASSWORD}\nENV API_KEY changeme",
    "ENV DB_PASSWORD_FILE /run/secrets/db\nENV PASSWORD_LENGTH 12\nARG NPM_TOKEN",
    "password: &quot;&quot; and password=&amp;",
]


@pytest.mark.parametrize(("before", "secret", "after", "kind"), NAMED, ids=range(len(NAMED)))
def test_a_value_next_to_its_label_is_replaced_and_the_label_kept(before, secret, after, kind):
    text = f"line one\n{before}{secret}{after}\nline two"
    found = scan(text)
    assert found.text == f"line one\n{before}{marker(kind)}{after}\nline two"
    assert dict(found.found) == {kind: 1}
    assert secret not in found.text


@pytest.mark.parametrize("text", NEAR_MISSES, ids=range(len(NEAR_MISSES)))
def test_prose_placeholders_code_cursors_and_other_options_are_left(text: str):
    found = scan(text)
    assert found.text == text and not found.found, found.found


def test_a_label_whose_value_is_already_a_marker_is_left():
    for kind in KINDS:
        for text in (
            f"Password: {marker(kind)}",
            f'"password": "{marker(kind)}"',
            f"DB_PASSWORD={marker(kind)} psql",
            f"curl -u admin:{marker(kind)} https://x",
            f"mysql -p{marker(kind)} app",
            f"sshpass -p {marker(kind)} ssh host",
            f"--password {marker(kind)}",
        ):
            assert redact(text) == text, text


def test_each_label_redacted_twice_is_redacted_once():
    for before, secret, after, _ in NAMED:
        once = redact(f"{before}{secret}{after}")
        assert redact(once) == once
