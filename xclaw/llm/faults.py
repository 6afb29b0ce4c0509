"""[llm] When is a streamed reply finished, and what kind of failure is it when it is not.

Both providers stream over a 200 response whose end only the stream itself announces:
Anthropic with `message_stop`, OpenAI-compatible servers with a `finish_reason` (and
`data: [DONE]`). A body that ends cleanly without it — a dropped proxy, a server that died
mid-reply, a zero-byte 200 — must never be taken for a whole reply: its tool calls may be cut
in half and its text is not the model's last word. So a reply is complete only with its end
marker; anything else is a ProviderError, retryable (the call is simply made again) as long
as nothing reached the client, which RetryingModel decides.

Errors sent *inside* a 200 stream (Anthropic `event: error`, OpenAI `{"error": {...}}`
chunks) are classified here for both providers alike, by their type and code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from xclaw.llm.base import ProviderError, retryable_status

if TYPE_CHECKING:
    # The OpenAI SDK's own event-stream types (DoneMarkerSpy wraps its decoder).
    from openai._streaming import ServerSentEvent, SSEBytesDecoder

# Error types that say "try again": Anthropic's, OpenAI's, and the spellings of servers that
# imitate them (vLLM, llama.cpp, LiteLLM...). Compared lower-cased, without "_" and "-".
_TRANSIENT_TYPES = {
    "overloadederror",
    "apierror",
    "ratelimiterror",
    "ratelimitexceeded",
    "timeouterror",
    "timeout",
    "servererror",
    "internalservererror",
    "internalerror",
    "serviceunavailable",
    "serviceunavailableerror",
    "apiconnectionerror",
}
# The headers providers name a request by: Anthropic `request-id`, OpenAI `x-request-id`.
REQUEST_ID_HEADERS = ("request-id", "x-request-id")


def request_id_of(headers: Mapping[str, str] | None) -> str:
    """The provider's id for this HTTP request ("" when it sent none): what its support asks
    for, so it is recorded on the llm_call step."""
    if headers is None:
        return ""
    for name in REQUEST_ID_HEADERS:
        value = headers.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()[:200]
    return ""


def with_request_id(message: str, request_id: str) -> str:
    return f"{message} [request id {request_id}]" if request_id else message


def cut_off(
    provider: str,
    missing: str,
    *,
    request_id: str = "",
    got: str = "",
    headers: Mapping[str, str] | None = None,
) -> ProviderError:
    """The stream ended cleanly but without its end marker (`missing`). Retryable: the reply
    was never whole, so asking again is the only way to get one. `headers` (the response's)
    tell a body that was no event stream at all (a server ignoring `stream: true`)."""
    detail = f"; received {got}" if got else ""
    content_type = str(headers.get("content-type") or "") if headers is not None else ""
    if content_type and "text/event-stream" not in content_type:
        detail += f" (the body was {content_type.split(';')[0]}, not an event stream)"
    return ProviderError(
        with_request_id(
            f"{provider}: the reply was cut off: the stream ended without {missing}{detail}",
            request_id,
        ),
        retryable=True,
        provider=provider,
        request_id=request_id,
    )


def malformed_stream(provider: str, error: BaseException, *, request_id: str = "") -> ProviderError:
    """An event whose JSON does not parse (a body cut in the middle of a line). Retryable
    like a cut-off: nothing of that event can be trusted."""
    return ProviderError(
        with_request_id(
            f"{provider}: the reply was cut off: a stream event was not valid JSON ({error})",
            request_id,
        ),
        retryable=True,
        provider=provider,
        request_id=request_id,
    )


def _error_fields(body: object) -> tuple[str, str, object]:
    """(type, message, code) of an error body in either wire format."""
    err: Any = body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
    if not isinstance(err, dict):
        return "", str(body) if body else "", None
    kind = err.get("type")
    message = err.get("message")
    return (
        kind if isinstance(kind, str) else "",
        message if isinstance(message, str) else "",
        err.get("code"),
    )


def transient_error_type(kind: str) -> bool:
    return kind.lower().replace("_", "").replace("-", "") in _TRANSIENT_TYPES


def in_stream_error(provider: str, body: object, *, request_id: str = "") -> ProviderError:
    """An error event inside a 200 stream, either provider's shape. Retryable when its type
    says so (overloaded, server_error, rate limit...) or when it carries an HTTP-like code
    that is (429, 5xx); otherwise final (e.g. invalid_request_error)."""
    kind, message, code = _error_fields(body)
    status: int | None = None
    if isinstance(code, int) and not isinstance(code, bool):
        status = code
    elif isinstance(code, str) and code.isdigit():
        status = int(code)
    retryable = transient_error_type(kind) or (
        status is not None and status >= 400 and retryable_status(status)
    )
    shown = message or kind or "error event in the stream"
    if kind and message:
        shown = f"{message} ({kind})"
    return ProviderError(
        with_request_id(f"{provider}: error inside the stream: {shown}", request_id),
        retryable=retryable,
        provider=provider,
        request_id=request_id,
    )


def stamp_request_id(err: ProviderError, request_id: str) -> ProviderError:
    """Name the request on an error raised while reading its stream (in place)."""
    if request_id and not err.request_id:
        err.request_id = request_id
        err.message = with_request_id(err.message, request_id)
        err.args = (err.message,)
    return err


class DoneMarkerSpy:
    """Wraps an SDK's SSE decoder and notes whether `data: [DONE]` went by: the OpenAI SDK
    stops at it without telling, and a compatible server may send it without any
    `finish_reason`, so it counts as an end marker too."""

    def __init__(self, inner: SSEBytesDecoder) -> None:
        self.inner = inner
        self.done = False

    def _see(self, sse: ServerSentEvent) -> None:
        if sse.data.startswith("[DONE]"):
            self.done = True

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        for sse in self.inner.iter_bytes(iterator):
            self._see(sse)
            yield sse

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        async for sse in self.inner.aiter_bytes(iterator):
            self._see(sse)
            yield sse
