"""[gateway] Running the gateway: store + runtime + app on uvicorn, a start-up banner people can act
on, structured key=value logs on stderr, and a graceful stop on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import re
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

import uvicorn

from xclaw.config.settings import Settings
from xclaw.errors import ConfigError
from xclaw.gateway.app import create_app
from xclaw.gateway.auth import load_or_create_token
from xclaw.gateway.heap import settle_heap
from xclaw.gateway.listen import bind_listeners, link_host
from xclaw.llm.base import Model
from xclaw.recorder.redact import Redactor
from xclaw.sandbox.isolation import sandbox_mode
from xclaw.security.credentials import drop_from_environ, make_undumpable
from xclaw.security.private_files import private_dir
from xclaw.terminal.invocation import xclaw_command

log = logging.getLogger("xclaw.gateway")

NO_MODEL_LINE = (
    "no model configured: set ANTHROPIC_API_KEY / OPENAI_API_KEY in .env or XCLAW_MODEL=script:path"
)
# WebSocket frames above this close the socket (1009); frames above the protocol's own limit
# (xclaw.wire.protocol.MAX_FRAME_BYTES) but below it get a `bad_frame` error and keep it open.
WS_MAX_SIZE = 8 * 1024 * 1024
GRACEFUL_TIMEOUT_S = 5

_KV_RE = re.compile(r"^[a-z_]+=")
_TOKEN_QUERY_RE = re.compile(r"(token=)[^&\s\"']+")


class KeyValueFormatter(logging.Formatter):
    """`ts=… level=… logger=… event=…` lines: grep-able and parseable, one event per line.
    Messages already written as key=value pairs pass through; others become msg="…"."""

    def format(self, record: logging.LogRecord) -> str:
        ts = (
            time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
            + f".{int(record.msecs):03d}"
        )
        message = record.getMessage()
        if not _KV_RE.match(message):
            message = "msg=" + _quote(message)
        line = f"ts={ts} level={record.levelname.lower()} logger={record.name} {message}"
        if record.exc_info:
            # exc_text when a filter has set it (redacted: see RedactToken).
            line += " exc=" + _quote(record.exc_text or self.formatException(record.exc_info))
        return line


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class RedactToken(logging.Filter):
    """The access token and every other known credential must never reach a log (uvicorn
    logs request paths with ?token=; a traceback may quote a key or a database URL)."""

    def __init__(self, token: str, redactor: Redactor | None = None) -> None:
        super().__init__()
        self.token = token
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and not record.exc_text:
            # Format the traceback now, so that it is redacted with the message.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        clean = _TOKEN_QUERY_RE.sub(r"\1***", text).replace(self.token, "***")
        if self.redactor is not None:
            clean = self.redactor.text(clean)
            if record.exc_text:
                record.exc_text = self.redactor.text(record.exc_text.replace(self.token, "***"))
        if clean != text:
            record.msg, record.args = clean, None
        return True


def configure_logging(
    token: str,
    level: str = "info",
    stream: TextIO | None = None,
    redactor: Redactor | None = None,
) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    handler.addFilter(RedactToken(token, redactor))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True


@dataclass(frozen=True)
class Banner:
    url: str
    database: str
    workspace: str
    model: str | None
    model_error: str | None
    sandbox: str = ""
    command: str = "xclaw"  # how to type xclaw in another terminal (xclaw.terminal.invocation)
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        out = [
            f"xclaw gateway listening on {self.url}",
            f"  database:  {self.database}",
            f"  workspace: {self.workspace}",
        ]
        if self.sandbox:
            out.append(f"  sandbox:   {self.sandbox}")
        if self.model:
            out.append(f"  model:     {self.model}")
        else:
            out.append(f"  {NO_MODEL_LINE}")
            if self.model_error and "no LLM provider is configured" not in self.model_error:
                out.append(f"  ({self.model_error})")
        out.extend(f"  {w}" for w in self.warnings)
        out.append(
            f"  open the URL in a browser, or run `{self.command} chat` in another terminal; "
            "Ctrl+C stops"
        )
        return out


def _model(settings: Settings) -> tuple[Model | None, str | None]:
    """(model or None, why not). The server starts without a model and says how to add one."""
    from xclaw.llm.factory import build_model

    try:
        return build_model(settings), None
    except ConfigError as e:
        return None, e.message


async def _serve(settings: Settings, log_level: str) -> int:
    # Bound first: a taken port is one error with nothing opened, registered or logged.
    sockets = bind_listeners(settings.host, settings.port)
    try:
        return await _serve_on(settings, log_level, sockets)
    finally:
        for sock in sockets:  # uvicorn closes them on a stop; not when startup failed
            sock.close()


async def _serve_on(settings: Settings, log_level: str, sockets: list[socket.socket]) -> int:
    from xclaw.runtime.agreement import disagreeing
    from xclaw.runtime.runtime import Runtime
    from xclaw.store import open_store

    port = int(sockets[0].getsockname()[1])  # the real one when --port 0 asked for any
    private_dir(settings.home)
    token = load_or_create_token(settings.home, settings.token)
    redactor = Redactor([token, *settings.secret_values()])
    configure_logging(token, log_level, redactor=redactor)
    model, model_error = _model(settings)
    private_dir(settings.workspace_root)
    store = open_store(
        settings.database, blob_store=settings.blob_store, blob_grace_s=settings.blob_grace_s
    )
    try:
        specs = [p.model for p in settings.providers]
        runtime = Runtime(store, settings, model=model, redactor=redactor, model_specs=specs)
        # Every credential is read by now (the providers hold their keys): nothing started
        # later inherits them, and same-user processes cannot read our /proc/PID/environ.
        drop_from_environ(settings.secret_env)
        make_undumpable()
        # Presence, failover and frames across the workers sharing this database.
        cluster = runtime.new_cluster(info={"port": port})
        await cluster.start()
        # Workers that run sessions with another model or approval mode: said at start.
        warnings = disagreeing(
            [(w.worker_id, w.alive, w.info) for w in await asyncio.to_thread(store.leases.workers)],
            runtime.worker_id,
            runtime.run_config,
        )
        for line in warnings:
            log.warning("event=config_disagreement worker=%s %s", runtime.worker_id, line)
        app = create_app(settings, store, runtime, token=token, fire_schedules=True)
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=port,
            log_config=None,
            access_log=False,  # our own logs never carry the ?token= query
            # The client address stays the socket's peer: uvicorn would take it from
            # X-Forwarded-For on any loopback connection, so any local process could pass for
            # a trusted proxy. The deployment says whose headers count (gateway/forwarded.py).
            proxy_headers=False,
            ws_max_size=WS_MAX_SIZE,
            # Frames are small JSON: compressing each one cost more CPU than the whole step
            # (measured with bench/gateway_bench.py), and loopback/LAN links do not need it.
            ws_per_message_deflate=False,
            timeout_graceful_shutdown=GRACEFUL_TIMEOUT_S,
            lifespan="on",
        )
        server = uvicorn.Server(config)
        banner_task = asyncio.create_task(
            _print_banner_when_up(
                server,
                settings,
                link_host(settings.host, sockets),
                port,
                store.url,
                token,
                model,
                model_error,
                tuple(warnings),
            )
        )
        try:
            await server.serve(sockets=sockets)
        finally:
            banner_task.cancel()
            await cluster.stop()  # already done by runtime.shutdown() unless startup failed
        if not server.started:
            return 1
        log.info("event=stopped")
        return 0
    finally:
        store.close()


async def _print_banner_when_up(
    server: uvicorn.Server,
    settings: Settings,
    host: str,  # of a link that works from this machine (listen.link_host)
    port: int,
    db: str,
    token: str,
    model: Model | None,
    model_error: str | None,
    warnings: tuple[str, ...] = (),
) -> None:
    while not server.started:  # noqa: ASYNC110 - uvicorn sets a plain flag, it has no event
        await asyncio.sleep(0.02)
    settle_heap()  # everything it serves with is imported by now
    url = f"http://{host}:{port}/?token={token}"
    banner = Banner(
        url=url,
        database=db,
        workspace=str(settings.workspace_root),
        model=model.name if model is not None else None,
        model_error=model_error,
        sandbox=sandbox_mode(settings.sandbox_setup()),
        command=xclaw_command(),
        warnings=warnings,
    )
    print("\n".join(banner.lines()), flush=True)
    log.info(
        "event=started host=%s port=%s db=%s model=%s",
        settings.host,
        port,
        db,
        banner.model or "none",
    )


def _loop_factory() -> Any:
    """uvloop when installed (uvicorn[standard] brings it): a faster event loop, same code."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def serve(settings: Settings, *, log_level: str = "info") -> int:
    """Run until SIGTERM/SIGINT; returns the exit code. uvicorn turns the first signal into a
    graceful shutdown (lifespan end → runtime.shutdown()) and re-raises it afterwards, so our
    own no-op handlers are installed underneath to make that re-raise a clean exit."""
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            return runner.run(_serve(settings, log_level))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
