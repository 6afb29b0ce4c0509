"""[cli] What the offline commands print is redacted as the server's frames are (docs/security.md):
the record holds no credential it knew of when it was written, but a database written by an
older version, a secret set since, an imported file, and workspace files (snapshots keep them
verbatim) may hold one. A redactor from the same sources as the server's, read when a command
asks for it."""

from __future__ import annotations

import logging
import sys

from xclaw.errors import ConfigError
from xclaw.recorder.redact import Redactor
from xclaw.security.credentials import command_line_secrets, known_secrets
from xclaw.wire.token import read_token


def output_redactor() -> Redactor:
    """Every credential the settings know of (environment, `.env`, `secret_env`, xclaw.yaml's
    providers and MCP servers, the database URL, also as `--db` gave it) and the gateway's
    token file. With an unreadable xclaw.yaml, the environment's credentials alone (a
    listing still works)."""
    from pathlib import Path

    from xclaw.config.settings import environment, load_settings

    given = command_line_secrets(sys.argv[1:])  # `--db postgresql://u:PW@…`
    try:
        settings = load_settings()
    except ConfigError:
        env = environment(Path.cwd())
        return Redactor([*known_secrets(env, database=env.get("XCLAW_DB", "")), *given])
    values = [*settings.secret_values(), *given]
    token = read_token(settings.home)
    return Redactor([*values, token] if token else values)


class RedactLogs(logging.Filter):
    """Log records redacted, traceback included (the server's own filter is
    xclaw.gateway.server.RedactToken, which also hides the token in request paths)."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.redactor.text(record.exc_text)
        clean = self.redactor.text(text)
        if clean != text:
            record.msg, record.args = clean, None
        return True


def redact_logs(redactor: Redactor) -> None:
    """What a command that runs the agent in this process logs (xclaw run, xclaw replay: a
    provider's error, an MCP server's stderr) reaches stderr redacted: warnings and above, as
    Python's default handler would print them."""
    root = logging.getLogger()
    if not root.handlers:
        stderr = logging.StreamHandler()
        stderr.setLevel(logging.WARNING)
        root.addHandler(stderr)
    for handler in root.handlers:
        if not any(isinstance(f, RedactLogs) for f in handler.filters):
            handler.addFilter(RedactLogs(redactor))
