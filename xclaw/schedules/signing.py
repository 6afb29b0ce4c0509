"""[schedules] A webhook's request checked and its message made (docs/schedules.md, "Webhooks").

The sender signs `<timestamp>.<body>` with HMAC-SHA256 under the hook's secret and sends:

    X-Xclaw-Timestamp: <unix seconds>
    X-Xclaw-Delivery:  <its id for this delivery: the same on every retry>
    X-Xclaw-Signature: sha256=<hex digest>

The digest is compared in constant time (`hmac.compare_digest`); a timestamp further than the
window from the server's clock is refused, so a request captured once cannot be replayed
later, and within the window the delivery id runs it once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from typing import Any

SIGNATURE_HEADER = "X-Xclaw-Signature"
TIMESTAMP_HEADER = "X-Xclaw-Timestamp"
DELIVERY_HEADER = "X-Xclaw-Delivery"
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_.-]+)\}")
_SIGNATURE_FORM = re.compile(r"^sha256=[0-9a-f]{64}$")
MAX_DELIVERY_ID = 200


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """The X-Xclaw-Signature value of a request (what a sender computes)."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def verify(
    secret: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    *,
    now_s: float,
    window_s: float,
) -> str | None:
    """None when the request is the secret holder's and fresh; else why not (for the log:
    the sender is answered 401 whatever the reason)."""
    if not timestamp or not signature:
        return "no signature or timestamp"
    if not timestamp.isdigit() or len(timestamp) > 12:
        return "the timestamp is not unix seconds"
    expected = sign(secret, timestamp, body)
    if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
        return "bad signature"
    if abs(now_s - int(timestamp)) > window_s:
        return "the timestamp is outside the window (a replay, or a clock off)"
    return None


def may_be_good(
    timestamp: str | None, signature: str | None, *, now_s: float, window_s: float
) -> bool:
    """Whether a request could pass `verify` at all, judged without the secret: a signature of
    the form (`sha256=` and 64 hex digits) and a timestamp inside the window. A client braked
    for its failures still has such requests checked (a good one is never locked out: no
    number of tries finds the secret); any other is refused unchecked."""
    if not timestamp or not signature or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    if abs(now_s - int(timestamp)) > window_s:
        return False
    return _SIGNATURE_FORM.match(signature.strip()) is not None


def render(template: str, body: bytes) -> str:
    """The message: `{body}` is the body as text, `{a.b}` the field b of the field a of its
    JSON (a list index is a number), a value not there is left as written. Nothing else is
    evaluated."""
    text = body.decode("utf-8", errors="replace")
    data: Any = None
    with contextlib.suppress(ValueError):
        data = json.loads(text)

    def value(m: re.Match[str]) -> str:
        path = m.group(1)
        if path == "body":
            return text
        node = data
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return m.group(0)
        return node if isinstance(node, str) else json.dumps(node, ensure_ascii=False)

    return _PLACEHOLDER.sub(value, template)
