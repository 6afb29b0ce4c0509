"""[llm] What the two HTTP providers share: reading tool arguments the model wrote, making ids every
provider accepts, and turning SDK exceptions into ProviderError with the retry facts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import ssl
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2

from xclaw.llm.base import ProviderError, retry_after_seconds, retryable_status
from xclaw.llm.faults import in_stream_error, malformed_stream, request_id_of, with_request_id

MALFORMED_ARGUMENTS = "arguments were not valid JSON"
NOT_AN_OBJECT = "arguments were not a JSON object"

_ID_OK = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def parse_tool_arguments(text: str) -> dict[str, Any]:
    """The model's argument text as a dict. Malformed JSON never raises: the agent loop sees
    `_error` and answers the call with a tool error, so the model can try again. Python's
    parser also takes NaN and Infinity, which JSON does not: those are malformed too. Raw
    control characters inside strings (a newline in a file's content, as local models served
    through llama.cpp's JSON grammar write it) are read as written: the intent is plain."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_not_json, strict=False)
    except ValueError:
        return {"_raw_arguments": text, "_error": MALFORMED_ARGUMENTS}
    if not isinstance(value, dict):
        return {"_raw_arguments": text, "_error": NOT_AN_OBJECT}
    return value


def portable_id(raw: str) -> str:
    """A tool-call id both APIs accept (Anthropic: [A-Za-z0-9_-]+; OpenAI: at most 40 chars).
    Deterministic, so a call and its result map to the same id, and a history written with
    one provider replays on the other after a fallback."""
    if _ID_OK.match(raw):
        return raw
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", raw)[:27] or "call"
    return f"{cleaned}_{hashlib.sha1(raw.encode()).hexdigest()[:12]}"


_tls: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """One TLS context for the process, as httpx would build it (the CA bundle, SSL_CERT_FILE
    and SSL_CERT_DIR). Each model call opens its own SDK client, and building a context for
    each (loading the CA bundle) cost 20-50 ms a call: more than the rest of xclaw's work in
    a step against a local model (bench/local_model_bench.py)."""
    global _tls
    if _tls is None:
        _tls = httpx2.create_ssl_context()
    return _tls


def public_endpoint(base_url: str | None) -> str:
    """The configured base URL as it may be recorded and shown: scheme, host, port and path,
    without user, password, query or fragment (where keys hide); "" for the SDK's default."""
    if not base_url:
        return ""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _body_message(body: object) -> str | None:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            said = err.get("message")
            if isinstance(said, str):
                return said
        said = body.get("message")
        if isinstance(said, str):
            return said
    return None


def _refused(exc: BaseException) -> bool:
    """Nothing listens on the server's port (yet): a ConnectionRefusedError somewhere in the
    exception's chain (the SDKs wrap httpx's ConnectError, which wraps the OSError)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or "Connection refused" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def provider_error(exc: BaseException, provider: str, *, request_id: str = "") -> ProviderError:
    """Map any exception from an SDK call (the two SDKs' own exception types, which share one
    shape) to a ProviderError whose message is the provider's own words. `request_id` is the
    stream's, when the failure came after the response headers (in-stream errors, cut-offs)."""
    import anthropic
    import openai

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, (anthropic.APIStatusError, openai.APIStatusError)):
        status = exc.status_code
        headers = exc.response.headers
        rid = request_id_of(headers) or request_id
        if status < 400:
            # An error event inside a successful stream (Anthropic's `event: error`).
            return in_stream_error(provider, exc.body, request_id=rid)
        message = _body_message(exc.body) or exc.message or str(exc)
        return ProviderError(
            with_request_id(f"{provider}: HTTP {status}: {message}", rid),
            retryable=retryable_status(status),
            provider=provider,
            status=status,
            retry_after=retry_after_seconds(headers),
            request_id=rid,
            starting=status == 503 and "loading" in message.lower(),
        )
    bare = (anthropic.APIError, openai.APIError)
    if isinstance(exc, bare) and type(exc) in bare and exc.body is not None:
        # OpenAI's SDK raises a bare APIError for an `{"error": {...}}` chunk in the stream.
        return in_stream_error(provider, {"error": exc.body}, request_id=request_id)
    if isinstance(exc, json.JSONDecodeError):
        return malformed_stream(provider, exc, request_id=request_id)
    name = type(exc).__name__
    timeouts = (anthropic.APITimeoutError, openai.APITimeoutError, httpx2.TimeoutException)
    if isinstance(exc, (*timeouts, asyncio.TimeoutError, TimeoutError)):
        return ProviderError(
            with_request_id(f"{provider}: request timed out", request_id),
            retryable=True,
            provider=provider,
            request_id=request_id,
        )
    connections = (anthropic.APIConnectionError, openai.APIConnectionError, httpx2.TransportError)
    if isinstance(exc, (*connections, ConnectionError)):
        said = exc.message if isinstance(exc, (anthropic.APIError, openai.APIError)) else ""
        detail = said or str(exc) or name
        cause = exc.__cause__
        if cause is not None and str(cause):
            detail = f"{detail} ({cause})"
        return ProviderError(
            with_request_id(f"{provider}: connection failed: {detail}", request_id),
            retryable=True,
            provider=provider,
            request_id=request_id,
            starting=_refused(exc),
        )
    return ProviderError(
        with_request_id(f"{provider}: {name}: {exc}", request_id),
        retryable=False,
        provider=provider,
        request_id=request_id,
    )
