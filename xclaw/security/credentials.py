"""[security] Which values are credentials, wherever xclaw meets them, and how the process sheds
them.

The redactor scrubs every value found here from what is recorded, logged or sent; tool
processes get an environment without them. A credential is:
- the value of any variable whose name says so (…_API_KEY, …_TOKEN, …SECRET…, …PASSWORD…, …_PAT,
  …_DSN, …_PASS, …WEBHOOK…,
  …_KEY), in the environment or in `.env`, whether or not the provider chain uses it (a
  `script:` model uses none, yet a prompt-injected run could print them);
- a password inside any URL-valued variable (`postgresql://user:PW@host/db`, a proxy URL) and
  in the database URL itself (also `?password=`);
- every `secret_env` name's value, from the environment or `.env`;
- the gateway token (added by the server once it is generated or read);
- every token xclaw issues, known or not (a user's, another server's): each carries a prefix
  of `ISSUED_TOKEN_PREFIXES`, so it is found by its form (`ISSUED_TOKEN_RE`) wherever it is
  quoted, though the server holds only its hash.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping

# ctypes, secrets and urllib.parse are imported by the functions that use them: every `xclaw`
# process imports this module first (xclaw/cli/main.py), most need none of them.

# Whole words of a name (split on "_"): GITHUB_PAT, SENTRY_DSN (its key is the URL's user part),
# DB_PASS, GPG_PASSPHRASE, SLACK_WEBHOOK_URL (the URL is the secret), SESSION_COOKIE.
_SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "APIKEY",
        "CREDENTIALS",
        "CREDENTIAL",
        "PAT",
        "DSN",
        "WEBHOOK",
        "COOKIE",
    }
)
_SECRET_PARTS = ("API_KEY", "ACCESS_KEY", "PRIVATE_KEY", "SECRET", "PASSWORD", "AUTH_TOKEN")
# Named outright (the gateway's key); PGPASSWORD is libpq's.
SECRET_NAMES = frozenset({"XCLAW_TOKEN", "PGPASSWORD"})
# Not secret as a whole (a path is no credential) but never given to a tool: the database.
PRIVATE_NAMES = frozenset({"XCLAW_DB", "DATABASE_URL"})
# The tokens xclaw issues: a prefix saying what each is (a person, a log filter, a secret
# scanner can tell one) and 256 random bits, base64url (43 characters).
USER_TOKEN_PREFIX = "xcu_"  # a user's (`xclaw users add`, docs/teams.md)
SERVER_TOKEN_PREFIX = "xcs_"  # the server's own, when xclaw generates it ($XCLAW_HOME/token)
ISSUED_TOKEN_PREFIXES = (USER_TOKEN_PREFIX, SERVER_TOKEN_PREFIX)
_TOKEN_BYTES = 32
_TOKEN_CHARS = "[A-Za-z0-9_-]"
_PREFIXES = "(?:" + "|".join(map(re.escape, ISSUED_TOKEN_PREFIXES)) + ")"
# Masked wherever quoted, whole or cut: 20 characters after the prefix tell one (a piece
# shorter than that leaves over 130 bits unknown).
ISSUED_TOKEN_RE = re.compile(f"{_PREFIXES}{_TOKEN_CHARS}{{20,}}")
_ISSUED_FORM = re.compile(f"{_PREFIXES}{_TOKEN_CHARS}{{43}}")
_URL_CREDENTIALS = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s]*:([^/@\s]+)@")


def issue_token(prefix: str) -> str:
    """A new token of the form xclaw issues (256 random bits after `prefix`)."""
    assert prefix in ISSUED_TOKEN_PREFIXES, prefix
    from secrets import token_urlsafe

    return prefix + token_urlsafe(_TOKEN_BYTES)


def has_issued_form(token: str | None) -> bool:
    """Whether `token` has exactly the form of one xclaw issues: whoever sends such a token is
    not guessing anything a number of tries could find (256 bits)."""
    return token is not None and _ISSUED_FORM.fullmatch(token) is not None


def is_secret_name(name: str) -> bool:
    """True for a variable name that says it holds a credential."""
    upper = name.upper()
    if upper in SECRET_NAMES or upper.endswith("_KEY"):
        return True
    if _SECRET_WORDS.intersection(upper.split("_")):
        return True
    return any(part in upper for part in _SECRET_PARTS)


def url_passwords(text: str) -> list[str]:
    """Passwords inside URLs in `text`: `scheme://user:PW@host` and `?password=PW`."""
    written = _URL_CREDENTIALS.findall(text)
    in_query = "://" in text and "password=" in text
    if not written and not in_query:
        return []
    from urllib.parse import parse_qs, unquote, urlsplit

    found = [unquote(m) for m in written]
    found += written  # as written, percent-encoded too
    if in_query:
        try:
            query = parse_qs(urlsplit(text.strip()).query)
        except ValueError:
            query = {}
        found += query.get("password", [])
    return [p for p in found if p]


def known_secrets(
    env: Mapping[str, str], secret_env: Iterable[str] = (), database: str = ""
) -> list[str]:
    """Every credential value in `env` (environment merged with `.env`) and the database URL."""
    names = {n.upper() for n in secret_env}
    out: list[str] = []
    for name, value in env.items():
        if not value:
            continue
        if name.upper() in names or is_secret_name(name):
            out.append(value)
        if "://" in value:
            out += url_passwords(value)
    if database:
        out += url_passwords(database)
    # The password alone and the whole value: a URL is masked as a whole when it appears so.
    return sorted(set(out), key=len, reverse=True)


def child_env(
    base: Mapping[str, str],
    extra: Mapping[str, str],
    secret_names: Iterable[str] = (),
    secret_values: Iterable[str] = (),
) -> dict[str, str]:
    """The environment for a process xclaw starts (a shell command, a tool server): `base`
    without any credential — by name (see is_secret_name, `secret_names`, the database URL)
    or by value (any variable whose value holds a known secret, whatever its name) — then
    `extra` (the runtime's own additions) on top."""
    drop = {n.upper() for n in (*PRIVATE_NAMES, *secret_names)}
    values = [v for v in secret_values if v and len(v) >= 6]
    env = {
        k: v
        for k, v in base.items()
        if k.upper() not in drop and not is_secret_name(k) and not any(s in v for s in values)
    }
    env.update(extra)
    return env


def drop_from_environ(secret_env: Iterable[str] = ()) -> list[str]:
    """Remove credential variables from this process's environment once they are read, so
    nothing started later inherits them by accident; returns the names removed. (The kernel
    keeps the environment the process was started with in /proc/PID/environ: see
    `make_undumpable` and docs/security.md.)"""
    names = {n.upper() for n in secret_env}
    gone = [k for k in os.environ if k.upper() in names or is_secret_name(k)]
    for k in gone:
        os.environ.pop(k, None)
    return gone


def make_undumpable() -> bool:
    """PR_SET_DUMPABLE 0: other processes of the same user (a shell command run without the
    sandbox, say) can no longer read this process's /proc/PID/environ, mem or fds; no core
    dumps. Root (CAP_SYS_PTRACE) still can. False where prctl is unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(4, 0, 0, 0, 0) == 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        return False


def command_line_secrets(argv: Iterable[str]) -> list[str]:
    """Credentials written on a command line: passwords in URLs (`--db postgresql://u:PW@…`),
    the value of `--token`, and `?token=` in a URL (`xclaw chat --url …?token=T`)."""
    args = list(argv)
    out: list[str] = []
    for i, a in enumerate(args):
        out += url_passwords(a)
        if a == "--token" and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith("--token="):
            out.append(a.split("=", 1)[1])
        if "://" in a and "token=" in a:
            from urllib.parse import parse_qs, urlsplit

            with contextlib.suppress(ValueError):
                out += parse_qs(urlsplit(a.strip()).query).get("token", [])
    return [s for s in out if s]


def hide_in_cmdline(secrets: Iterable[str]) -> int:
    """Overwrite `secrets` with `*` in this process's own command line, which every local user
    can read (`ps`, /proc/PID/cmdline) whatever the file permissions: the kernel shows the
    argument memory as it is now, so rewriting it in place (through /proc/self/mem) hides the
    value from then on. Python's sys.argv is a copy and keeps it. Returns how many were found.
    What ran before (a shell's history, a parent process's own command line) is not changed."""
    wanted = [s.encode() for s in secrets if s]
    if not wanted:
        return 0
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48, 49)
        with open("/proc/self/mem", "r+b", buffering=0) as mem:
            mem.seek(start)
            args = mem.read(end - start)
            hidden = args
            for s in sorted(wanted, key=len, reverse=True):
                hidden = hidden.replace(s, b"*" * len(s))
            if hidden == args:
                return 0
            mem.seek(start)
            mem.write(hidden)
    except (OSError, IndexError, ValueError):
        return 0
    return sum(1 for s in wanted if s in args)
