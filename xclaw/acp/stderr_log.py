"""[acp] Logging for a command whose stdout is a protocol stream (`xclaw acp`, `xclaw mcp`):
warnings and errors only, one line each on stderr, without a traceback (the editor or MCP host
shows stderr).

A module of its own, importing nothing but the standard library: `xclaw mcp` sets its logging
up with it, and took it from xclaw/acp/serve.py before, which loaded the ACP SDK (~1 s of CPU
a start of `xclaw mcp`, tests/test_startup_imports.py) for nothing.
"""

from __future__ import annotations

import logging
import sys


class OneLine(logging.Formatter):
    """A log record on one line of stderr, without a traceback (the editor shows stderr)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def format(self, record: logging.LogRecord) -> str:
        text = f"{self.name}: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        record.exc_info = None
        record.exc_text = None
        return " ".join(text.split())


def quiet_logging(name: str = "xclaw acp") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine(name))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
