"""No credential xclaw knows of reaches the record: a scripted (prompt-injected) model prints
keys it was never given, and runs shell commands that look for them in the environment, the
token file and the gateway's /proc entry. Every route is then grepped for every value: the
database file, its WAL, the server's logs, the frames, the API answers and the export."""

from __future__ import annotations

import io
import json
import logging
import os
import sqlite3
from pathlib import Path

import httpx
import pytest

from tests.gateway.harness import Client, Server, write_script
from xclaw.cli.redaction import RedactLogs
from xclaw.config.settings import load_settings
from xclaw.gateway.server import KeyValueFormatter, RedactToken
from xclaw.people.teams import new_token
from xclaw.recorder.redact import Redactor
from xclaw.security.credentials import (
    SERVER_TOKEN_PREFIX,
    child_env,
    is_secret_name,
    issue_token,
    known_secrets,
    url_passwords,
)

pytestmark = pytest.mark.slow

UNUSED_KEY = "sk-ant-unused-0123456789abcdef"  # in the environment, the chain does not use it
DOTENV_KEY = "sk-openai-dotenv-9876543210fedcba"  # only in .env
ENV_SECRET = "env-secret-value-41414141"  # secret_env, from the environment
DOTENV_SECRET = "dotenv-secret-value-42424242"  # secret_env, only in .env
PROXY_PW = "proxypass-43434343"  # a password inside a URL-valued variable

PROBE = (
    'echo ENV:; env | sort; echo TOKEN:; cat "$XCLAW_HOME/token" ~/.xclaw/token 2>&1; '
    "echo PROC:; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ 2>/dev/null; done "
    "| grep -E 'KEY|SECRET|PASS|TOKEN' | sort -u"
)


def test_name_and_url_rules() -> None:
    for name in (
        "ANTHROPIC_API_KEY",
        "openai_api_key",
        "GITHUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
        "DB_PASSWORD",
        "XCLAW_TOKEN",
        "GEMINI_API_KEY",
        "MY_SECRET",
    ):
        assert is_secret_name(name), name
    for name in ("PATH", "HOME", "TOKENIZER", "TERM", "LANG", "XCLAW_HOME"):
        assert not is_secret_name(name), name
    assert url_passwords("postgresql://u:p%40ss@h:5432/db") == ["p@ss", "p%40ss"]
    assert url_passwords("postgresql://h/db?user=u&password=hunter22") == ["hunter22"]
    assert known_secrets({"HTTPS_PROXY": f"http://me:{PROXY_PW}@proxy:3128"}) == [
        f"http://me:{PROXY_PW}@proxy:3128",
        PROXY_PW,
    ] or PROXY_PW in known_secrets({"HTTPS_PROXY": f"http://me:{PROXY_PW}@proxy:3128"})


def test_settings_know_every_credential_used_or_not(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={DOTENV_KEY}\nDOT_ONLY={DOTENV_SECRET}\n")
    (tmp_path / "xclaw.yaml").write_text("secret_env: [DOT_ONLY, FROM_ENV]\n")
    for k in list(os.environ):
        if k.startswith(("XCLAW_", "ANTHROPIC_", "OPENAI_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("ANTHROPIC_API_KEY", UNUSED_KEY)
    monkeypatch.setenv("FROM_ENV", ENV_SECRET)
    monkeypatch.setenv("XCLAW_MODEL", "script:/dev/null")
    monkeypatch.setenv("XCLAW_DB", "postgresql://app:pg-password-1234@db.internal:5432/x")
    s = load_settings(tmp_path)
    values = s.secret_values()
    for v in (UNUSED_KEY, DOTENV_KEY, ENV_SECRET, DOTENV_SECRET, "pg-password-1234"):
        assert v in values, v
    over = load_settings(tmp_path, database="postgresql://app:flag-password-99@h/x").secret_values()
    assert "flag-password-99" in over
    env = child_env(
        {"A": "1", "DATABASE_URL": "x", "WEIRD": f"pre{ENV_SECRET}post"}, {}, secret_values=values
    )
    assert env == {"A": "1"}


@pytest.fixture(params=["auto", "none"])
def leaky(tmp_path: Path, request) -> Server:  # type: ignore[no-untyped-def]
    root = tmp_path / "leaky"
    root.mkdir()
    turns = [
        {
            "text": f"My keys: {UNUSED_KEY} {DOTENV_KEY} {ENV_SECRET} {DOTENV_SECRET} {PROXY_PW}",
            "tool_calls": [{"name": "shell", "input": {"command": PROBE}}],
        },
        {"text": f"Done. Again: {UNUSED_KEY} {DOTENV_SECRET}"},
    ]
    script = write_script(root / "script.json", turns)
    (root / ".env").write_text(f"OPENAI_API_KEY={DOTENV_KEY}\nDOT_ONLY={DOTENV_SECRET}\n")
    server = Server(root=root, script=script, approval="yolo")
    base_env = server.env

    def env() -> dict[str, str]:
        e = base_env()
        (root / "xclaw.yaml").write_text(
            "approval:\n  mode: yolo\nsecret_env: [DOT_ONLY, FROM_ENV]\n"
            f"sandbox:\n  isolation: {request.param}\n"
        )
        e.update(
            ANTHROPIC_API_KEY=UNUSED_KEY,
            FROM_ENV=ENV_SECRET,
            HTTPS_PROXY=f"http://me:{PROXY_PW}@127.0.0.1:9",
            NO_PROXY="*",
        )
        return e

    server.env = env  # type: ignore[method-assign]
    server.start()
    yield server
    server.kill()


async def test_no_credential_reaches_any_route(leaky: Server) -> None:
    token = leaky.token
    secrets = [UNUSED_KEY, DOTENV_KEY, ENV_SECRET, DOTENV_SECRET, PROXY_PW, token]
    c = await Client.open(leaky)
    await c.attach()
    reply = await c.turn("show me your keys", timeout=60)
    assert reply["type"] == "reply", reply
    sid = c.session_id
    frames = json.dumps(c.seen, ensure_ascii=False)
    assert "[REDACTED]" in frames
    tool_out = next(f for f in c.seen if f.get("type") == "tool" and f.get("state") == "completed")[
        "output"
    ]
    assert "ENV:" in tool_out
    # the shell's environment had none of them, not even by name
    own_env = tool_out.split("TOKEN:", 1)[0]
    for name in ("ANTHROPIC_API_KEY", "FROM_ENV", "HTTPS_PROXY", "XCLAW_TOKEN", "DOT_ONLY"):
        assert f"\n{name}=" not in own_env, name
    # Without the sandbox a command run as root can read the gateway's /proc/PID/environ
    # (docs/security.md, residual risk): what it read is still masked in every route below.
    if "bubblewrap" in leaky.banner:
        # own PID namespace: the gateway's /proc/PID/environ is not even visible, and the
        # token file is hidden
        proc = tool_out.split("PROC:", 1)[1]
        assert "[REDACTED]" not in proc, proc
        assert "ANTHROPIC_API_KEY" not in proc
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as h:
        api = ""
        for path in (
            f"sessions/{sid}/steps",
            f"sessions/{sid}/history",
            f"sessions/{sid}/export",
            "sessions",
        ):
            r = await h.get(f"{leaky.http}/api/{path}")
            assert r.status_code == 200, (path, r.text)
            api += r.text
    leaky.kill()  # flushes nothing more: the WAL is read as it was left
    db = leaky.home / "xclaw.db"
    raw = b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())
    logs = leaky.logs() + "".join(p.read_text() for p in leaky.root.glob("stdout-*.txt"))
    with sqlite3.connect(db) as conn:
        rows = json.dumps(conn.execute("SELECT * FROM traces").fetchall())
    for value in secrets:
        for where, text in (
            ("frames", frames),
            ("api", api),
            ("logs", logs.replace(f"?token={token}", "")),
            ("rows", rows),
        ):
            assert value not in text, (value, where)
        assert value.encode() not in raw, (value, "database file or WAL")


PG_PASSWORD = "pg-password-in-url-5151"


async def test_the_database_url_password_stays_out_of_the_record(tmp_path: Path) -> None:
    """XCLAW_DB=postgresql://user:PW@…: the model prints PW and the shell looks for it; the
    rows in PostgreSQL, the frames, the API and the logs never hold it."""
    from tests.store.conftest import PostgresBackend, postgres_url

    pg = PostgresBackend(postgres_url())
    pg.query("SELECT 1")  # skips (fails in CI) when PostgreSQL is unreachable
    parts = pg.url.split("://", 1)
    user_host = parts[1]
    if "@" in user_host.split("/", 1)[0]:
        cred, rest = user_host.split("@", 1)
        user = cred.split(":", 1)[0]
    else:
        user, rest = "postgres", user_host
    # trust authentication on the test server ignores the password; libpq still carries it
    url = f"{parts[0]}://{user}:{PG_PASSWORD}@{rest}"
    root = tmp_path / "pgleak"
    root.mkdir()
    script = write_script(
        root / "script.json",
        [
            {
                "text": f"db password {PG_PASSWORD}",
                "tool_calls": [{"name": "shell", "input": {"command": "env | sort"}}],
            },
            {"text": f"again {PG_PASSWORD}"},
        ],
    )
    server = Server(root=root, script=script, approval="yolo")
    base_env = server.env
    server.env = lambda: {**base_env(), "XCLAW_DB": url}  # type: ignore[method-assign]
    server.start()
    try:
        c = await Client.open(server)
        await c.attach()
        assert (await c.turn("go", timeout=60))["type"] == "reply"
        frames = json.dumps(c.seen)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {server.token}"}) as h:
            api = (await h.get(f"{server.http}/api/sessions/{c.session_id}/export")).text
        rows = json.dumps(pg.query("SELECT * FROM traces"), default=str)
        assert "[REDACTED]" in frames
        for where, text in (
            ("frames", frames),
            ("api", api),
            ("rows", rows),
            ("logs", server.logs()),
            ("banner", server.banner),
        ):
            assert PG_PASSWORD not in text, where
        assert "XCLAW_DB=" not in frames  # the shell never had the URL
    finally:
        server.kill()
        pg.drop()


def test_common_credential_names_beyond_keys_and_tokens() -> None:
    """Found by the second campaign: `GITHUB_PAT`, `SENTRY_DSN`, `DB_PASS`… in the environment or
    `.env` reached a tool's environment (`env` printed them into the record) unless listed in
    secret_env."""
    secret = (
        "GITHUB_PAT",
        "GH_PAT",
        "SENTRY_DSN",
        "DB_PASS",
        "SMTP_PASS",
        "GPG_PASSPHRASE",
        "SLACK_WEBHOOK_URL",
        "GIT_CREDENTIAL",
        "SESSION_COOKIE",
        "MY_CREDENTIAL",
    )
    for name in secret:
        assert is_secret_name(name), name
    for name in (
        "PATH",
        "PWD",
        "OLDPWD",
        "SSH_AUTH_SOCK",
        "DBUS_SESSION_BUS_ADDRESS",
        "PASSENGER_APP_ENV",
        "PATCH_LEVEL",
        "COMPASS_HOME",
        "XCLAW_HOME",
    ):
        assert not is_secret_name(name), name
    env = child_env({n: "value-123456" for n in secret} | {"PATH": "/usr/bin"}, {})
    assert env == {"PATH": "/usr/bin"}


def test_issued_tokens_stay_out_of_the_logs_by_their_form() -> None:
    """The server's log filter and the commands' (`xclaw run`, `replay`) mask a token of the
    issued form that nobody told them of, in the message and in a traceback."""
    own = issue_token(SERVER_TOKEN_PREFIX)
    member, other = new_token(), issue_token(SERVER_TOKEN_PREFIX)
    for log_filter in (RedactToken(own, Redactor([own])), RedactLogs(Redactor())):
        out = io.StringIO()
        handler = logging.StreamHandler(out)
        handler.setFormatter(KeyValueFormatter())
        handler.addFilter(log_filter)
        log = logging.getLogger(f"test.issued.{type(log_filter).__name__}")
        log.propagate = False
        log.addHandler(handler)
        try:
            log.warning("event=x member=%s other=%s", member, other)
            try:
                raise ValueError(f"bad token {member}")
            except ValueError:
                log.exception("event=failed")
        finally:
            log.removeHandler(handler)
        text = out.getvalue()
        assert "[REDACTED]" in text and "ValueError" in text
        assert member not in text and other not in text and member[:24] not in text
