"""[terminal] Text from the model, tools or the server must not drive the user's terminal.

A reply or a tool's output can hold ESC sequences (recolour, move the cursor, rewrite the
title, forge an approval prompt, OSC 52 clipboard writes), C1 controls (0x9B is a one-byte
CSI), carriage returns and backspaces (overwrite a line) and bidi overrides (make text read
differently from what it is). Every such character is shown as a visible stand-in of the same
length, so styles laid over the text stay aligned: C0 controls and DEL as their Unicode
"control pictures" (ESC shows as ␛), C1 and bidi controls as U+FFFD. Newlines and tabs stay.

Only xclaw's own styling (rich styles, never text) reaches the terminal as escape codes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.text import Text

_C0 = "".join(chr(c) for c in range(0x20) if chr(c) not in "\n\t")
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[{re.escape(_C0)}\x7f\x80-\x9f{_BIDI}]")
_PICTURES = {chr(c): chr(0x2400 + c) for c in range(0x20)} | {"\x7f": "\u2421"}


def _stand_in(m: re.Match[str]) -> str:
    return _PICTURES.get(m.group(0), "\ufffd")


def printable(text: str) -> str:
    """`text` with every terminal control character replaced by a visible stand-in."""
    if text.isascii() and text.isprintable():
        return text  # the common case, and fast
    return _UNSAFE.sub(_stand_in, text)


def json_for_terminal(data: Any, indent: int | None = None) -> str:
    """JSON text safe to print: json.dumps escapes C0 controls but, with ensure_ascii=False,
    lets C1 controls and bidi overrides through; those are \\u-escaped here (same JSON)."""
    return json_text_for_terminal(json.dumps(data, ensure_ascii=False, indent=indent))


def json_text_for_terminal(text: str) -> str:
    """JSON text (made elsewhere, e.g. export's JSON Lines) with C1 controls and bidi
    overrides \\u-escaped: the same JSON, inert on a terminal."""
    return re.sub(f"[\x7f\x80-\x9f{_BIDI}]", lambda m: f"\\u{ord(m.group(0)):04x}", text)


class SafeConsole(Console):
    """A rich Console whose printed strings and Texts pass through `printable` first."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(_safe(o) for o in objects), **kwargs)


def _safe(obj: Any) -> Any:
    if isinstance(obj, str):
        return printable(obj)
    if isinstance(obj, Text):
        clean = printable(obj.plain)
        if clean != obj.plain:
            obj = obj.copy()
            obj.plain = clean  # same length: the spans (styles) still fit
        return obj
    return obj
