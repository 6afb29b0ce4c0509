"""Fake LLM servers on loopback that speak the exact wire formats the real SDKs parse, and the
request validators they apply (reusable: crash tests prove rebuilt histories valid with them).

    with FakeOpenAIServer() as srv:            # or FakeAnthropicServer()
        srv.push(Reply(text="hi"), Reply.fail(429, "slow down"))
        model = OpenAIModel("m", api_key="k", base_url=srv.url)
        ...
        srv.requests      # every JSON body received, in order
        srv.rejections    # validation failures (answered with HTTP 400 like the real APIs)

Replies are served in order; when the queue is empty `srv.default` answers (None -> 500).
Plain stdlib http.server in a daemon thread: no event loop is shared with the test.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")


class InvalidRequest(ValueError):
    """The request would be rejected by the real API (HTTP 400)."""


def _need(cond: object, message: str) -> None:
    if not cond:
        raise InvalidRequest(message)


# --- validators -----------------------------------------------------------------------------


_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _check_image(part: dict[str, Any], where: str) -> None:
    """An Anthropic `image` block (base64 source) or an OpenAI `image_url` part (data URL)."""
    if part.get("type") == "image":
        src = part.get("source")
        _need(isinstance(src, dict) and src.get("type") == "base64", f"{where}.source: base64")
        _need(src.get("media_type") in _IMAGE_TYPES, f"{where}.source.media_type: unsupported")
        data = src.get("data")
    else:
        url = (part.get("image_url") or {}).get("url")
        _need(isinstance(url, str) and url.startswith("data:image/"), f"{where}: bad image_url")
        media, _, data = url[5:].partition(";base64,")
        _need(media in _IMAGE_TYPES, f"{where}: unsupported image type {media}")
    try:
        raw = base64.b64decode(data or "", validate=True)
    except ValueError as e:
        raise InvalidRequest(f"{where}: image data is not base64") from e
    _need(raw, f"{where}: empty image")


def _check_text_parts(content: Any, where: str, *, images: str = "") -> None:
    """Text blocks; `images` names the image part type also allowed ("image", "image_url")."""
    _need(isinstance(content, list) and content, f"{where}: expected a string or a non-empty list")
    for j, part in enumerate(content):
        if images and isinstance(part, dict) and part.get("type") == images:
            _check_image(part, f"{where}[{j}]")
            continue
        _need(
            isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str),
            f"{where}[{j}]: expected a text block",
        )


# --- the thinking rule and prompt caching, as the real Messages API applies them --------------

_SIGNING_KEY = b"fake-anthropic-thinking-key"


def thinking_signature(text: str) -> str:
    """What the fake signs a thinking block with (the real API's signature is opaque too)."""
    return base64.b64encode(hmac.new(_SIGNING_KEY, text.encode(), hashlib.sha256).digest()).decode()


def redacted_thinking_data() -> str:
    """Opaque, verifiable bytes for a redacted_thinking block."""
    nonce = base64.b64encode(os.urandom(12)).decode()
    return f"{nonce}.{thinking_signature(nonce)}"


def _check_cache_control(b: dict[str, Any], where: str) -> int:
    if "cache_control" not in b:
        return 0
    cc = b["cache_control"]
    _need(
        isinstance(cc, dict) and cc.get("type") == "ephemeral",
        f"{where}.cache_control: expected {{'type': 'ephemeral'}}",
    )
    return 1


def validate_thinking(body: dict[str, Any]) -> None:
    """With `thinking` enabled: budget_tokens >= 1024 and below max_tokens, no temperature,
    every thinking block sent back carries the signature the server issued for its exact
    text (redacted_thinking: its exact data), and the assistant message of a tool-use turn
    in progress (the last one, answered by tool results) starts with a thinking block."""
    cfg = body.get("thinking")
    for i, msg in enumerate(body.get("messages") or []):
        content = msg.get("content") if isinstance(msg, dict) else None
        for j, b in enumerate(content if isinstance(content, list) else []):
            where = f"messages.{i}.content.{j}"
            if b.get("type") == "thinking":
                _need(
                    isinstance(b.get("thinking"), str) and isinstance(b.get("signature"), str),
                    f"{where}: thinking blocks need `thinking` and `signature`",
                )
                _need(
                    hmac.compare_digest(b["signature"], thinking_signature(b["thinking"])),
                    f"{where}: Invalid `signature` in `thinking` block",
                )
            elif b.get("type") == "redacted_thinking":
                data = b.get("data")
                nonce, _, sig = data.partition(".") if isinstance(data, str) else ("", "", "")
                _need(
                    sig and hmac.compare_digest(sig, thinking_signature(nonce)),
                    f"{where}: Invalid `data` in `redacted_thinking` block",
                )
            if b.get("type") in ("thinking", "redacted_thinking"):
                _need(msg.get("role") == "assistant", f"{where}: thinking only in assistant turns")
                _need(
                    all(x.get("type") in ("thinking", "redacted_thinking") for x in content[:j]),
                    f"{where}: thinking blocks must come first in an assistant message",
                )
    if cfg is None:
        return
    _need(
        isinstance(cfg, dict) and cfg.get("type") in ("enabled", "disabled"),
        "thinking.type: expected 'enabled' or 'disabled'",
    )
    if cfg["type"] != "enabled":
        return
    budget = cfg.get("budget_tokens")
    _need(isinstance(budget, int) and budget >= 1024, "thinking.budget_tokens: must be >= 1024")
    _need(budget < body["max_tokens"], "`max_tokens` must be greater than `thinking.budget_tokens`")
    _need(
        body.get("temperature") in (None, 1),
        "`temperature` may only be set to 1 when thinking is enabled",
    )
    messages = body["messages"]
    last = messages[-1]
    in_tool_turn = isinstance(last.get("content"), list) and any(
        b.get("type") == "tool_result" for b in last["content"]
    )
    if in_tool_turn and len(messages) >= 2:
        first = (messages[-2].get("content") or [{}])[0]
        kind = first.get("type") if isinstance(first, dict) else "text"
        _need(
            kind in ("thinking", "redacted_thinking"),
            f"messages.{len(messages) - 2}.content.0.type: Expected `thinking` or "
            f"`redacted_thinking`, but found `{kind}`. When `thinking` is enabled, a final "
            "`assistant` message must start with a thinking block (preceeding the lastmost "
            "set of `tool_use` and `tool_result` blocks).",
        )


def validate_anthropic_request(body: Any) -> None:
    """Raise InvalidRequest unless `body` is a Messages API request the real API accepts:
    roles alternate starting with user; no empty content; every tool_use is answered by a
    tool_result (tool_result blocks first) in the very next user message, and no tool_result
    lacks its tool_use in the message just before."""
    _need(isinstance(body, dict), "body: expected a JSON object")
    _need(isinstance(body.get("model"), str) and body["model"], "model: field required")
    mt = body.get("max_tokens")
    _need(
        isinstance(mt, int) and not isinstance(mt, bool) and mt >= 1,
        "max_tokens: expected an integer >= 1",
    )
    breakpoints = 0
    if "system" in body:
        system = body["system"]
        if not isinstance(system, str):
            _check_text_parts(system, "system")
            for j, part in enumerate(system):
                breakpoints += _check_cache_control(part, f"system.{j}")
    if "temperature" in body:
        t = body["temperature"]
        _need(
            isinstance(t, (int, float)) and 0 <= t <= 1, "temperature: expected a number in [0, 1]"
        )
    names: set[str] = set()
    for i, tool in enumerate(body.get("tools") or []):
        where = f"tools.{i}"
        _need(isinstance(tool, dict), f"{where}: expected an object")
        name = tool.get("name")
        _need(
            isinstance(name, str) and _NAME.match(name), f"{where}.name: must match {_NAME.pattern}"
        )
        _need(name not in names, f"tools: tool names must be unique ({name})")
        names.add(name)
        schema = tool.get("input_schema")
        _need(
            isinstance(schema, dict) and schema.get("type") == "object",
            f"{where}.input_schema: expected a JSON schema with type 'object'",
        )
        _need(
            isinstance(tool.get("description", ""), str), f"{where}.description: expected a string"
        )
        breakpoints += _check_cache_control(tool, where)
    messages = body.get("messages")
    _need(isinstance(messages, list) and messages, "messages: at least one message is required")
    seen_ids: set[str] = set()
    pending: list[str] = []  # tool_use ids of the previous assistant message
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        _need(isinstance(msg, dict), f"{where}: expected an object")
        role = msg.get("role")
        _need(role in ("user", "assistant"), f"{where}.role: expected 'user' or 'assistant'")
        if i == 0:
            _need(role == "user", 'messages: first message must use the "user" role')
        else:
            _need(
                role != messages[i - 1].get("role"),
                'messages: roles must alternate between "user" and "assistant"',
            )
        content = msg.get("content")
        if isinstance(content, str):
            _need(content.strip(), f"{where}: all messages must have non-empty content")
            blocks: list[dict[str, Any]] = [{"type": "text", "text": content}]
        else:
            _need(
                isinstance(content, list) and content,
                f"{where}: all messages must have non-empty content",
            )
            blocks = content
        uses: list[str] = []
        results: list[str] = []
        text_seen = False
        for j, b in enumerate(blocks):
            bw = f"{where}.content.{j}"
            _need(isinstance(b, dict), f"{bw}: expected an object")
            kind = b.get("type")
            if kind in ("thinking", "redacted_thinking"):
                _need("cache_control" not in b, f"{bw}: thinking blocks cannot be cached directly")
            else:
                breakpoints += _check_cache_control(b, bw)
            if kind in ("thinking", "redacted_thinking"):
                _need(role == "assistant", f"{bw}: {kind} blocks only in assistant messages")
            elif kind == "text":
                _need(
                    isinstance(b.get("text"), str) and b["text"].strip(),
                    f"{bw}: text content blocks must contain non-whitespace text",
                )
                text_seen = True
            elif kind == "tool_use":
                _need(
                    role == "assistant",
                    f"{bw}: tool_use blocks are only allowed in assistant messages",
                )
                tid = b.get("id")
                _need(
                    isinstance(tid, str) and _TOOL_USE_ID.match(tid),
                    f"{bw}.id: must match {_TOOL_USE_ID.pattern}",
                )
                _need(tid not in seen_ids, f"{bw}: `tool_use` ids must be unique ({tid})")
                seen_ids.add(tid)
                _need(isinstance(b.get("name"), str) and b["name"], f"{bw}.name: field required")
                _need(isinstance(b.get("input"), dict), f"{bw}.input: expected an object")
                uses.append(tid)
            elif kind == "tool_result":
                _need(role == "user", f"{bw}: tool_result blocks are only allowed in user messages")
                _need(not text_seen, f"{where}: tool_result blocks must come before any text")
                _need(isinstance(b.get("tool_use_id"), str), f"{bw}.tool_use_id: field required")
                rc = b.get("content", "")
                if not isinstance(rc, str):
                    _check_text_parts(rc, f"{bw}.content", images="image")
                _need(
                    isinstance(b.get("is_error", False), bool), f"{bw}.is_error: expected a boolean"
                )
                results.append(b["tool_use_id"])
            else:
                raise InvalidRequest(f"{bw}.type: unsupported block type {kind!r}")
        if pending:
            missing = [t for t in pending if t not in results]
            _need(
                not missing,
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                f"`tool_result` block in the next message.",
            )
        extra = [t for t in results if t not in pending]
        _need(
            not extra,
            f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(extra)}. "
            "Each `tool_result` block must have a corresponding `tool_use` block in the "
            "previous message.",
        )
        _need(
            len(results) == len(set(results)),
            f"{where}: duplicate `tool_result` for one `tool_use`",
        )
        pending = uses
    _need(
        not pending,
        f"messages.{len(messages) - 1}: `tool_use` ids were found without `tool_result` blocks "
        f"immediately after: {', '.join(pending)}",
    )
    _need(
        breakpoints <= 4,
        f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}.",
    )
    validate_thinking(body)


def validate_openai_request(body: Any) -> None:
    """Raise InvalidRequest unless `body` is a chat.completions request the real API accepts:
    every assistant `tool_calls` is followed by one `tool` message per call id before anything
    else, and every `tool` message answers a pending call. Stricter than OpenAI in one way:
    `arguments` must be a JSON object string, because servers that render chat templates
    (vLLM, llama.cpp, Ollama) parse it."""
    _need(isinstance(body, dict), "body: expected a JSON object")
    _need(isinstance(body.get("model"), str) and body["model"], "model: field required")
    for key in ("max_tokens", "max_completion_tokens"):
        if key in body and body[key] is not None:
            v = body[key]
            _need(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                f"{key}: expected an integer >= 1",
            )
    _need(
        not ("max_tokens" in body and "max_completion_tokens" in body),
        "max_tokens and max_completion_tokens cannot both be set",
    )
    if body.get("stream_options") is not None:
        _need(body.get("stream") is True, "stream_options: only allowed when 'stream' is true")
    names: set[str] = set()
    for i, tool in enumerate(body.get("tools") or []):
        where = f"tools[{i}]"
        _need(
            isinstance(tool, dict) and tool.get("type") == "function",
            f"{where}.type: expected 'function'",
        )
        fn = tool.get("function")
        _need(isinstance(fn, dict), f"{where}.function: field required")
        name = fn.get("name")
        _need(
            isinstance(name, str) and _NAME.match(name),
            f"{where}.function.name: must match {_NAME.pattern}",
        )
        _need(name not in names, f"tools: duplicate function name {name}")
        names.add(name)
        _need(
            isinstance(fn.get("parameters", {}), dict),
            f"{where}.function.parameters: expected an object",
        )
    messages = body.get("messages")
    _need(isinstance(messages, list) and messages, "messages: at least one message is required")
    pending: list[str] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        _need(isinstance(msg, dict), f"{where}: expected an object")
        role = msg.get("role")
        if role != "tool" and pending:
            raise InvalidRequest(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(pending)}"
            )
        content = msg.get("content")
        if role in ("system", "developer", "user"):
            if not isinstance(content, str):
                allowed = "image_url" if role == "user" else ""
                _check_text_parts(content, f"{where}.content", images=allowed)
        elif role == "assistant":
            calls = msg.get("tool_calls")
            if calls is None:
                _need(
                    isinstance(content, (str, list)),
                    f"{where}.content: expected a string, got {type(content).__name__}",
                )
            else:
                _need(
                    content is None or isinstance(content, (str, list)),
                    f"{where}.content: bad type",
                )
                _need(
                    isinstance(calls, list) and calls,
                    f"{where}.tool_calls: expected a non-empty list",
                )
                for j, c in enumerate(calls):
                    cw = f"{where}.tool_calls[{j}]"
                    _need(
                        isinstance(c, dict) and c.get("type") == "function",
                        f"{cw}.type: expected 'function'",
                    )
                    cid = c.get("id")
                    _need(isinstance(cid, str) and cid, f"{cw}.id: field required")
                    _need(
                        len(cid) <= 40,
                        f"{cw}.id: string too long. Expected a string with maximum length 40",
                    )
                    fn = c.get("function")
                    _need(
                        isinstance(fn, dict) and isinstance(fn.get("name"), str) and fn["name"],
                        f"{cw}.function.name: field required",
                    )
                    args = fn.get("arguments")
                    _need(isinstance(args, str), f"{cw}.function.arguments: expected a string")
                    try:
                        parsed = json.loads(args)
                    except ValueError:
                        parsed = None
                    _need(isinstance(parsed, dict), f"{cw}.function.arguments: not a JSON object")
                    _need(cid not in pending, f"{cw}.id: duplicate tool_call id {cid}")
                    pending.append(cid)
        elif role == "tool":
            tid = msg.get("tool_call_id")
            _need(
                isinstance(tid, str) and tid in pending,
                "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                "message with 'tool_calls'.",
            )
            pending.remove(tid)
            if not isinstance(content, str):
                _check_text_parts(content, f"{where}.content")
        else:
            raise InvalidRequest(f"{where}.role: unsupported role {role!r}")
    _need(
        not pending,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
    )


class PromptCache:
    """Anthropic's prompt cache, as documented: the prompt is the sequence tools -> system ->
    messages, cut into blocks; a block with `cache_control` is a breakpoint. At each
    breakpoint the cache is looked up for the longest prefix ending on a block boundary at
    most 20 blocks before it; the prefix up to each breakpoint is then written. Tokens are
    estimated at four characters of a block's JSON (cache_control left out) per token."""

    LOOKBACK = 20

    def __init__(self) -> None:
        self.entries: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def blocks(body: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
        out: list[tuple[dict[str, Any], bool]] = []

        def add(block: Any, role: str = "") -> None:
            b = dict(block) if isinstance(block, dict) else {"type": "text", "text": str(block)}
            marked = "cache_control" in b
            b.pop("cache_control", None)
            if role:
                b["_role"] = role
            out.append((b, marked))

        for tool in body.get("tools") or []:
            add(tool)
        system = body.get("system")
        if isinstance(system, str):
            add({"type": "text", "text": system})
        for part in system or [] if not isinstance(system, str) else []:
            add(part)
        for msg in body.get("messages") or []:
            content = msg.get("content")
            for b in content if isinstance(content, list) else [content]:
                add(b, msg.get("role", ""))
        return out

    def account(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(uncached input tokens, cache-read tokens, cache-write tokens) of one request."""
        blocks = self.blocks(body)
        sizes = [max(1, len(json.dumps(b, sort_keys=True)) // 4) for b, _ in blocks]
        digests: list[str] = []
        h = hashlib.sha256()
        for b, _ in blocks:
            h.update(json.dumps(b, sort_keys=True).encode())
            digests.append(h.copy().hexdigest())
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        total = sum(sizes)
        with self._lock:
            hit = -1  # index of the last block of the longest cached prefix
            for m in marks:
                for j in range(m, max(-1, m - self.LOOKBACK - 1), -1):
                    if digests[j] in self.entries:
                        hit = max(hit, j)
                        break
            for m in marks:
                self.entries.add(digests[m])
        read = sum(sizes[: hit + 1])
        last = marks[-1] if marks else -1
        write = sum(sizes[hit + 1 : last + 1]) if last > hit else 0
        return total - read - write, read, write


# --- scripted replies -----------------------------------------------------------------------


@dataclass
class FakeCall:
    """A tool call to stream. `arguments` is sent verbatim (so it may be malformed JSON), in
    `fragments` pieces when given, else in slices of 7 characters."""

    name: str
    arguments: str = "{}"
    id: str | None = None
    fragments: list[str] | None = None

    @classmethod
    def of(cls, name: str, input: dict[str, Any], id: str | None = None) -> FakeCall:
        return cls(name=name, arguments=json.dumps(input), id=id)

    def pieces(self) -> list[str]:
        if self.fragments is not None:
            return self.fragments
        return [self.arguments[i : i + 7] for i in range(0, len(self.arguments), 7)]


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[FakeCall] = field(default_factory=list)
    # (input/prompt tokens, output/completion tokens); None (OpenAI wire only): no usage
    # chunk even when asked, as llama-cpp-python's server streams.
    usage: tuple[int, int] | None = (11, 7)
    words_per_chunk: int = 1
    status: int = 200
    error: str = ""  # the provider's error message for a non-200 status
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before the response starts (timeouts)
    stall_after_first_chunk: float = 0.0  # seconds of silence mid-stream
    # An error event inside the 200 stream, after the first event: Anthropic `event: error`,
    # OpenAI `data: {"error": {...}}` (type, message).
    stream_error: tuple[str, str] | None = None
    cache_read_tokens: int = 0  # Anthropic cache_read_input_tokens; OpenAI cached_tokens
    cache_write_tokens: int = 0  # Anthropic cache_creation_input_tokens
    # Reasoning before the answer: Anthropic thinking blocks (signed by the server), or the
    # OpenAI-compatible `reasoning_content` (DeepSeek, vLLM), joined.
    thinking: list[str] = field(default_factory=list)
    redacted_thinking: int = 0  # Anthropic redacted_thinking blocks before the thinking ones
    reasoning_tokens: int = 0  # OpenAI completion_tokens_details.reasoning_tokens
    # Faults of a 200 reply: send only the first `cut_after` stream events, then end the body
    # cleanly (no end marker); or send `raw_body` as the whole body (b"": zero bytes).
    cut_after: int | None = None
    cut_before_end: bool = False  # everything but the end marker(s)
    raw_body: bytes | None = None
    raw_content_type: str = "text/event-stream"

    @classmethod
    def fail(
        cls,
        status: int,
        message: str,
        *,
        retry_after: float | None = None,
        retry_after_ms: float | None = None,
    ) -> Reply:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        if retry_after_ms is not None:
            headers["retry-after-ms"] = f"{retry_after_ms:g}"
        return cls(status=status, error=message, headers=headers)

    @classmethod
    def cut(cls, after: int, **kw: Any) -> Reply:
        """A reply whose stream stops cleanly after `after` events, without its end marker."""
        return cls(cut_after=after, **kw)

    def text_chunks(self) -> list[str]:
        pieces = re.findall(r"\s*\S+\s*", self.text) or ([self.text] if self.text else [])
        n = max(1, self.words_per_chunk)
        return ["".join(pieces[i : i + n]) for i in range(0, len(pieces), n)]


# --- servers --------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out hang up mid-reply; that is the point of those tests


class _FakeServer:
    path = ""
    request_id_header = "x-request-id"

    def __init__(
        self,
        *,
        validate: bool = True,
        default: Reply | None = None,
        cache_accounting: bool = False,
        port: int = 0,
    ) -> None:
        self._bind_port = port  # 0: any free port; a chosen one, to start a server late
        # Anthropic only: input tokens and cache reads/writes computed from the request
        # itself (PromptCache) instead of the scripted Reply.usage.
        self.cache = PromptCache() if cache_accounting else None
        # Answers a request itself when it returns a Reply (e.g. a compaction summary, whose
        # place in the sequence a test cannot know); None: the queue answers.
        self.responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self.validate = validate
        self.default = default
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.rejections: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> _FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._httpd = _Server(("127.0.0.1", self._bind_port), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    # request handling
    def _next(self) -> Reply | None:
        with self._lock:
            return self.replies.pop(0) if self.replies else self.default

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        if h.path.rstrip("/") != self.path:
            self._send_error(h, 404, "not_found_error", f"no route {h.path}")
            return
        raw = h.rfile.read(int(h.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            self._send_error(h, 400, "invalid_request_error", "body is not JSON")
            return
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
        problem = self._check_headers(h)
        if problem:
            self._send_error(h, 401, "authentication_error", problem)
            return
        if self.validate:
            try:
                self.validator(body)
            except InvalidRequest as e:
                with self._lock:
                    self.rejections.append(str(e))
                self._send_error(h, 400, "invalid_request_error", str(e))
                return
        reply = self.responder(body) if self.responder is not None else None
        reply = reply or self._next()
        if reply is None:
            self._send_error(h, 500, "api_error", "fake server: no reply scripted")
            return
        if reply.delay and self._stop.wait(reply.delay):
            return
        request_id = {self.request_id_header: f"req_fake_{len(self.requests)}"}
        if reply.status != 200:
            self._send_error(
                h,
                reply.status,
                _error_type(reply.status),
                reply.error,
                {**request_id, **reply.headers},
            )
            return
        h.send_response(200)
        h.send_header("content-type", reply.raw_content_type)
        h.send_header("cache-control", "no-cache")
        for k, v in {**request_id, **reply.headers}.items():
            h.send_header(k, v)
        h.end_headers()
        if reply.raw_body is not None:
            try:
                h.wfile.write(reply.raw_body)
                h.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            return  # HTTP/1.0: closing the connection ends the body cleanly
        events = self._events(body, reply)
        if reply.cut_after is not None:
            events = events[: reply.cut_after]
        if reply.cut_before_end:
            events = self._without_end(events)
        stalled = False
        try:
            for event, data in events:
                if event:
                    h.wfile.write(f"event: {event}\n".encode())
                h.wfile.write(f"data: {data}\n\n".encode())
                h.wfile.flush()
                if reply.stall_after_first_chunk and not stalled and _carries_text(data):
                    stalled = True
                    if self._stop.wait(reply.stall_after_first_chunk):
                        return
        except (BrokenPipeError, ConnectionResetError):
            return

    def _send_error(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        kind: str,
        message: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        payload = json.dumps(self._error_body(kind, message)).encode()
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(payload)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass

    # per-API parts
    def validator(self, body: Any) -> None:
        raise NotImplementedError

    def _check_headers(self, h: BaseHTTPRequestHandler) -> str | None:
        raise NotImplementedError

    def _error_body(self, kind: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def _events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str | None, str]]:
        raise NotImplementedError

    def _without_end(self, events: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
        raise NotImplementedError


def _carries_text(data: str) -> bool:
    """Whether an SSE data line streams some assistant text (either wire format)."""
    try:
        obj = json.loads(data)
    except ValueError:
        return False
    if not isinstance(obj, dict):
        return False
    if obj.get("type") == "content_block_delta":
        return bool((obj.get("delta") or {}).get("text"))
    return any((c.get("delta") or {}).get("content") for c in obj.get("choices") or ())


def _error_type(status: int) -> str:
    return {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        408: "timeout_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }.get(status, "api_error")


class FakeOpenAIServer(_FakeServer):
    """POST /v1/chat/completions with `stream: true`; `url` is the SDK's base_url."""

    path = "/v1/chat/completions"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def validator(self, body: Any) -> None:
        validate_openai_request(body)

    def _check_headers(self, h: BaseHTTPRequestHandler) -> str | None:
        auth = h.headers.get("authorization", "")
        return None if auth.startswith("Bearer ") and len(auth) > 7 else "missing bearer token"

    def _error_body(self, kind: str, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}

    def _without_end(self, events: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
        """Up to (not including) the chunk with a finish_reason: no usage, no [DONE]."""
        for i, (_, data) in enumerate(events):
            if '"finish_reason": "' in data:
                return events[:i]
        return events

    def _events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str | None, str]]:
        model = body.get("model", "fake")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, str]:
            return None, json.dumps(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": 1700000000,
                    "model": model,
                    "choices": [
                        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                    ],
                }
            )

        out = [chunk({"role": "assistant", "content": ""})]
        if reply.stream_error is not None:
            kind, message = reply.stream_error
            error = {"message": message, "type": kind, "param": None, "code": None}
            return [*out, (None, json.dumps({"error": error}))]
        for thought in reply.thinking:
            out += [
                chunk({"reasoning_content": piece})
                for piece in (re.findall(r"\s*\S+\s*", thought) or [thought])
            ]
        out += [chunk({"content": piece}) for piece in reply.text_chunks()]
        for i, call in enumerate(reply.tool_calls):
            out.append(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call.id or f"call_fake_{len(self.requests)}_{i}",
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                )
            )
            out += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]})
                for frag in call.pieces()
            ]
        out.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
        if (body.get("stream_options") or {}).get("include_usage") and reply.usage is not None:
            p, c = reply.usage
            out.append(
                (
                    None,
                    json.dumps(
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion.chunk",
                            "created": 1700000000,
                            "model": model,
                            "choices": [],
                            "usage": {
                                "prompt_tokens": p,
                                "completion_tokens": c,
                                "total_tokens": p + c,
                                "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
                                "completion_tokens_details": {
                                    "reasoning_tokens": reply.reasoning_tokens
                                },
                            },
                        }
                    ),
                )
            )
        out.append((None, "[DONE]"))
        return out


class FakeAnthropicServer(_FakeServer):
    """POST /v1/messages with `stream: true`; `url` is the SDK's base_url."""

    path = "/v1/messages"
    request_id_header = "request-id"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def validator(self, body: Any) -> None:
        validate_anthropic_request(body)

    def _check_headers(self, h: BaseHTTPRequestHandler) -> str | None:
        # This SDK generation sends the key as a bearer token; older ones as x-api-key.
        bearer = h.headers.get("authorization", "")
        if not h.headers.get("x-api-key") and not (
            bearer.startswith("Bearer ") and len(bearer) > 7
        ):
            return "x-api-key header is required"
        if not h.headers.get("anthropic-version"):
            return "anthropic-version header is required"
        return None

    def _error_body(self, kind: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}

    def _without_end(self, events: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
        """Everything but `message_stop` (the message_delta with its stop_reason stays)."""
        return [(e, d) for e, d in events if e != "message_stop"]

    def _events(self, body: dict[str, Any], reply: Reply) -> list[tuple[str | None, str]]:
        def ev(data: dict[str, Any]) -> tuple[str, str]:
            return data["type"], json.dumps(data)

        p, c = reply.usage or (0, 0)  # Anthropic always sends usage
        read, write = reply.cache_read_tokens, reply.cache_write_tokens
        if self.cache is not None:
            p, read, write = self.cache.account(body)
        out = [
            ev(
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_fake",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": body.get("model", "fake"),
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {
                            "input_tokens": p,
                            "output_tokens": 1,
                            "cache_creation_input_tokens": write,
                            "cache_read_input_tokens": read,
                        },
                    },
                }
            )
        ]
        out.append(("ping", json.dumps({"type": "ping"})))
        if reply.stream_error is not None:
            kind, message = reply.stream_error
            out.append(
                (
                    "error",
                    json.dumps({"type": "error", "error": {"type": kind, "message": message}}),
                )
            )
            return out
        index = 0
        thinking_on = (body.get("thinking") or {}).get("type") == "enabled"
        for _ in range(reply.redacted_thinking if thinking_on else 0):
            block = {"type": "redacted_thinking", "data": redacted_thinking_data()}
            out.append(ev({"type": "content_block_start", "index": index, "content_block": block}))
            out.append(ev({"type": "content_block_stop", "index": index}))
            index += 1
        for thought in reply.thinking if thinking_on else ():
            start = {"type": "thinking", "thinking": "", "signature": ""}
            out.append(ev({"type": "content_block_start", "index": index, "content_block": start}))
            pieces = re.findall(r"\s*\S+\s*", thought) or [thought]
            out += [
                ev(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "thinking_delta", "thinking": piece},
                    }
                )
                for piece in pieces
            ]
            sig = thinking_signature(thought)
            out.append(
                ev(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": sig},
                    }
                )
            )
            out.append(ev({"type": "content_block_stop", "index": index}))
            index += 1
        if reply.text:
            out.append(
                ev(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    }
                )
            )
            out += [
                ev(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    }
                )
                for piece in reply.text_chunks()
            ]
            out.append(ev({"type": "content_block_stop", "index": index}))
            index += 1
        for i, call in enumerate(reply.tool_calls):
            out.append(
                ev(
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": call.id or f"toolu_fake_{len(self.requests)}_{i}",
                            "name": call.name,
                            "input": {},
                        },
                    }
                )
            )
            out += [
                ev(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": frag},
                    }
                )
                for frag in call.pieces()
            ]
            out.append(ev({"type": "content_block_stop", "index": index}))
            index += 1
        out.append(
            ev(
                {
                    "type": "message_delta",
                    "delta": {
                        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
                        "stop_sequence": None,
                    },
                    "usage": {"output_tokens": c},
                }
            )
        )
        out.append(ev({"type": "message_stop"}))
        return out
